//! [`LowerError`]: why a kernel cannot be lowered.

use flydsl_ir::{SrcLoc, VerifyError};

/// A kernel that cannot be lowered, naming the kernel, the op, where the op was written in
/// the kernel's source (when the kernel records it: built with the DSL) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}cannot lower kernel `{kernel}` (target {target}): op #{op} `{op_name}`: {reason}",
    flydsl_ir::loc_prefix(.loc)
)]
pub struct LowerError {
    /// Kernel name.
    pub kernel: String,
    /// Target name.
    pub target: String,
    /// Position of the op in a pre-order walk of the body (`0` for kernel-level problems),
    /// counted like the verifier counts.
    pub op: usize,
    /// The op's short name (`Mma`, `Load`, ...) or the kernel-level item (`params`, ...).
    pub op_name: String,
    /// What is wrong.
    pub reason: String,
    /// Where the op was written in the kernel's source, if recorded.
    pub loc: Option<SrcLoc>,
}

impl From<VerifyError> for LowerError {
    fn from(e: VerifyError) -> Self {
        LowerError {
            kernel: e.kernel,
            target: e.target,
            op: e.op,
            op_name: e.op_name,
            reason: format!("IR verification failed: {}", e.reason),
            loc: e.loc,
        }
    }
}
