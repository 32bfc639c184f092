//! What a tuned winner is keyed by: [`TuneKey`].

use crate::device::Device;
use flydsl_ir::Target;

/// What a winner is keyed by.
///
/// ```
/// use flydsl_rt::tune::TuneKey;
/// use flydsl_rt::Target;
/// let k = TuneKey::new("GPU\tA", Target::Sm90, "softmax_fwd", "f32", "n1024");
/// assert_eq!(k.device, "GPU A"); // tabs and line breaks cannot reach the file
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TuneKey {
    /// Device name as the driver reports it.
    pub device: String,
    /// The device's flydsl target.
    pub target: Target,
    /// Kernel kind (`softmax_fwd`).
    pub kernel: String,
    /// Element dtype name (`bf16`).
    pub dtype: String,
    /// Shape class (family-defined, e.g. `v8192/n8192/m2^14`).
    pub shape: String,
}

/// `s` with control characters as spaces, trimmed; `-` when nothing is left.
pub(crate) fn clean(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if t.trim().is_empty() {
        "-".to_string()
    } else {
        t.trim().to_string()
    }
}

impl TuneKey {
    /// A key from its parts (control characters become spaces, empty parts `-`).
    pub fn new(device: &str, target: Target, kernel: &str, dtype: &str, shape: &str) -> TuneKey {
        TuneKey {
            device: clean(device),
            target,
            kernel: clean(kernel),
            dtype: clean(dtype),
            shape: clean(shape),
        }
    }

    /// A key for `device`.
    ///
    /// ```
    /// use flydsl_rt::{tune::TuneKey, Device, Target};
    /// let k = TuneKey::for_device(&Device::sim(Target::Gfx950), "softmax_bwd", "f16", "n512");
    /// assert_eq!(k.target, Target::Gfx950);
    /// ```
    pub fn for_device(device: &Device, kernel: &str, dtype: &str, shape: &str) -> TuneKey {
        TuneKey::new(device.name(), device.target(), kernel, dtype, shape)
    }

    /// The key's fields in file order.
    pub(crate) fn fields(&self) -> [&str; 5] {
        [
            &self.device,
            self.target.name(),
            &self.kernel,
            &self.dtype,
            &self.shape,
        ]
    }
}
