//! Plain shared types that the other modules build on: which backend, which device, what a
//! backend reports about a device, and how errors name a device. This module depends on no
//! other module of the crate.

use flydsl_ir::Target;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The backends.
///
/// ```
/// use flydsl_rt::Backend;
/// assert_eq!("sim".parse::<Backend>().unwrap(), Backend::Sim);
/// assert_eq!(Backend::Hip.to_string(), "HIP");
/// assert!("opencl".parse::<Backend>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// AMD GPUs through `libamdhip64`.
    Hip,
    /// NVIDIA GPUs through the CUDA driver.
    Cuda,
    /// The CPU simulator of the kernel IR.
    Sim,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Hip => "HIP",
            Backend::Cuda => "CUDA",
            Backend::Sim => "Sim",
        })
    }
}

/// A process-unique device identity (two Sim devices of the same target differ).
///
/// ```
/// use flydsl_rt::{Device, Target};
/// let a = Device::new_sim(Target::Gfx942);
/// let b = Device::new_sim(Target::Gfx942);
/// assert_ne!(a.id(), b.id());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId(u32);

impl DeviceId {
    /// The next unused id.
    pub(crate) fn next() -> DeviceId {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        DeviceId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device #{}", self.0)
    }
}

/// How errors name a device: its backend and ordinal, the driver's name for it, and its
/// process-unique id (which tells apart two Sim devices of one target).
///
/// ```
/// use flydsl_rt::{Backend, Device, Target};
/// let dev = Device::new_sim(Target::Gfx942);
/// let label = dev.label();
/// assert_eq!((label.backend, label.ordinal, label.id), (Backend::Sim, 0, dev.id()));
/// assert!(label.to_string().starts_with("Sim device 0 `flydsl Sim (gfx942, wave64)` (device #"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceLabel {
    /// The process-unique id.
    pub id: DeviceId,
    /// The backend that drives the device.
    pub backend: Backend,
    /// Ordinal within its backend.
    pub ordinal: usize,
    /// Name as the driver reports it (shared with the device: labels are cheap to make).
    pub name: Arc<str>,
}

impl fmt::Display for DeviceLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} device {} `{}` ({})",
            self.backend, self.ordinal, self.name, self.id
        )
    }
}

/// What a backend reports about a device.
#[derive(Clone, Debug)]
pub(crate) struct DeviceInfo {
    pub name: Arc<str>,
    /// Driver architecture string (`gfx942:sramecc+:xnack-`, `sm_90`, `gfx942`).
    pub arch: String,
    pub target: Target,
    pub wave_size: u32,
    pub max_lds_bytes: u64,
    pub compute_units: u32,
}

/// A process-unique identity of a [`Stream`](crate::Stream) (never reused, also after the stream is dropped):
/// lets libraries that share per-device state between calls notice a change of stream.
///
/// ```
/// use flydsl_rt::{Device, Target};
/// let dev = Device::sim(Target::Gfx942);
/// let (a, b) = (dev.stream().unwrap(), dev.stream().unwrap());
/// assert_ne!(a.id(), b.id());
/// assert_eq!(a.id(), a.id());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(u64);

impl StreamId {
    /// The next unused id.
    pub(crate) fn next() -> StreamId {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        StreamId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}
