//! The static variant tables that kernel crates' generated glue emits.

use flydsl_ir::Target;

/// One compiled form of one kernel for one target.
#[derive(Debug)]
pub struct KernelVariant {
    /// The target it was built for.
    pub target: Target,
    /// The code object (HSACO for AMD targets, PTX text for sm90), or `None` when the target's
    /// cargo feature was not enabled for this build (the IR is always present for Sim).
    pub code: Option<&'static [u8]>,
    /// The serialized kernel IR for this target (`flydsl_ir::to_bytes`), executed by Sim.
    pub ir: &'static [u8],
}

/// The resources a device's compiler gave a loaded kernel ([`Device::kernel_resources`](crate::Device::kernel_resources)).
///
/// ```
/// let r = flydsl_rt::KernelResources { registers: 32, private_bytes: 0, static_lds_bytes: 64, max_threads: 1024 };
/// assert!(!r.spills());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: u32,
    /// Private (thread-local) memory per thread, bytes: register spills and stack.
    pub private_bytes: u32,
    /// Static LDS (shared memory) per block, bytes.
    pub static_lds_bytes: u32,
    /// Most threads per block a launch may use with these resources.
    pub max_threads: u32,
}

impl KernelResources {
    /// Whether the kernel uses private memory (on sm_90: spilled registers).
    ///
    /// ```
    /// let r = flydsl_rt::KernelResources { registers: 128, private_bytes: 200, static_lds_bytes: 0, max_threads: 512 };
    /// assert!(r.spills());
    /// ```
    pub fn spills(&self) -> bool {
        self.private_bytes > 0
    }
}

/// All variants of one kernel: one entry per target, in `Target::ALL` order.
///
/// ```
/// use flydsl_rt::{KernelVariants, KernelVariant};
/// static K: KernelVariants = KernelVariants { name: "k", crate_name: "demo", variants: &[] };
/// assert_eq!(K.built_targets().count(), 0);
/// ```
#[derive(Debug)]
pub struct KernelVariants {
    /// Kernel symbol name (same for every target).
    pub name: &'static str,
    /// The kernel crate that built it (for error messages naming the cargo feature).
    pub crate_name: &'static str,
    /// The per-target forms.
    pub variants: &'static [KernelVariant],
}

impl KernelVariants {
    /// The variant for `target`, if its IR was embedded.
    pub fn for_target(&self, target: Target) -> Option<&KernelVariant> {
        self.variants.iter().find(|v| v.target == target)
    }
    /// Targets whose code object was built.
    pub fn built_targets(&self) -> impl Iterator<Item = Target> + '_ {
        self.variants
            .iter()
            .filter(|v| v.code.is_some())
            .map(|v| v.target)
    }
}
