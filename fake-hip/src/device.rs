//! The one fake device: its architecture, properties, and memory.

use flydsl_ir::Target;
use flydsl_sim::SimMemory;
use std::sync::OnceLock;

/// Byte offsets in ROCm 6's `hipDeviceProp_tR0600` (1472 bytes) that the fake fills; they
/// follow the header's field order at natural alignment (`gcnArchName` at 1160).
pub mod prop {
    /// `char name[256]`.
    pub const NAME: usize = 0;
    /// `size_t sharedMemPerBlock`.
    pub const SHARED_MEM_PER_BLOCK: usize = 296;
    /// `int warpSize`.
    pub const WARP_SIZE: usize = 308;
    /// `int multiProcessorCount`.
    pub const MULTIPROCESSOR_COUNT: usize = 388;
    /// `char gcnArchName[256]`.
    pub const GCN_ARCH_NAME: usize = 1160;
    /// Size of the struct.
    pub const SIZE: usize = 1472;
}

/// `hipDeviceAttribute_t` values the fake answers (ROCm 6 numbering).
pub mod attr {
    /// `hipDeviceAttributeMultiprocessorCount`.
    pub const MULTIPROCESSOR_COUNT: i32 = 63;
    /// `hipDeviceAttributeMaxSharedMemoryPerBlock`.
    pub const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 74;
    /// `hipDeviceAttributeWarpSize`.
    pub const WARP_SIZE: i32 = 87;
}

/// The device name the fake reports.
pub const NAME: &str = "flydsl fake HIP device";

/// The base architecture: `$FLYDSL_FAKE_HIP_ARCH` or `gfx942`.
///
/// ```
/// assert!(amdhip64::device::base_arch().starts_with("gfx"));
/// ```
pub fn base_arch() -> String {
    match std::env::var("FLYDSL_FAKE_HIP_ARCH") {
        Ok(a) if !a.trim().is_empty() => a.trim().split(':').next().unwrap_or("").to_string(),
        _ => String::from("gfx942"),
    }
}

/// The full `gcnArchName`, e.g. `gfx942:sramecc+:xnack-`.
pub fn arch_name() -> String {
    format!("{}:sramecc+:xnack-", base_arch())
}

/// The emulated target (gfx942 when the arch is not a flydsl target).
pub fn target() -> Option<Target> {
    base_arch().parse::<Target>().ok().filter(|t| t.is_amd())
}

/// (warp size, LDS bytes per block, CU count) of the emulated device.
pub fn properties() -> (i32, i32, i32) {
    match target() {
        Some(t) => (t.wave_size() as i32, t.max_lds_bytes() as i32, 304),
        None => (64, 65536, 304),
    }
}

/// The device memory (one per process).
pub fn memory() -> &'static SimMemory {
    static MEM: OnceLock<SimMemory> = OnceLock::new();
    MEM.get_or_init(SimMemory::new)
}
