//! Variant lookup: which of a kernel's variants runs on a device, and its code object.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::decode::decoded;
use crate::types::Backend;
use crate::variant::{KernelResources, KernelVariant, KernelVariants};

/// `kernel`'s variant for `device`'s target and its code object (`None` on the Sim, which
/// runs the IR), or the error naming the cargo feature that builds it.
pub(crate) fn variant_for(
    device: &Device,
    kernel: &'static KernelVariants,
) -> Result<(&'static KernelVariant, Option<&'static [u8]>)> {
    let target = device.target();
    let missing = || Error::MissingVariant {
        kernel: kernel.name.to_string(),
        crate_name: kernel.crate_name.to_string(),
        target,
        built: kernel.built_targets().collect(),
    };
    let variant = kernel.for_target(target).ok_or_else(missing)?;
    let code = match device.backend() {
        Backend::Sim => None,
        _ => Some(variant.code.ok_or_else(missing)?),
    };
    Ok((variant, code))
}

/// The key of a variant in a device's module cache: the address of its static entry.
pub(crate) fn module_key(variant: &'static KernelVariant) -> usize {
    variant as *const KernelVariant as usize
}

// The method lives here, with the lookup it runs, so that `device` does not depend on it.
impl Device {
    /// What the device's compiler gave `kernel`'s variant for this device (loading it if
    /// needed): registers, private (spill) memory, static LDS, the thread limit. `None` where
    /// the backend does not report them: the Sim, and HIP, whose code objects are final at
    /// build time (their resources are in the code object's metadata, see
    /// `flydsl_ir::codeobj` and `cargo xtask build-all`). On CUDA the driver compiles the PTX
    /// at load, so this is where sm_90 spills show.
    ///
    /// ```
    /// use flydsl_rt::{Device, KernelVariants};
    /// static K: KernelVariants = KernelVariants { name: "k", crate_name: "demo", variants: &[] };
    /// let dev = Device::sim(flydsl_rt::Target::Sm90);
    /// // No variant for the target: an error naming the missing cargo feature.
    /// assert!(dev.kernel_resources(&K).is_err());
    /// ```
    pub fn kernel_resources(
        &self,
        kernel: &'static KernelVariants,
    ) -> Result<Option<KernelResources>> {
        let (variant, code) = variant_for(self, kernel)?;
        if code.is_none() {
            return Ok(None);
        }
        let d = decoded(kernel, variant.ir)?;
        self.module(module_key(variant), code, d)?.resources()
    }
}
