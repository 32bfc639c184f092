//! SSA value ids (a leaf module: the op modules and the kernel both name them).

use serde::{Deserialize, Serialize};

/// An SSA value id, an index into [`Kernel::values`](crate::Kernel::values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ValueId(pub u32);
