//! flydsl-rt: the runtime of flydsl kernels.
//!
//! Devices, streams, events, typed device buffers and kernel launches over three backends:
//!
//! - **HIP** (AMD GPUs): `libamdhip64` loaded at run time (no ROCm needed to build);
//! - **CUDA** (NVIDIA GPUs): the driver API through `cudarc`, loaded at run time;
//! - **Sim**: [`flydsl_sim`], a CPU executor of the kernel IR with exact wave semantics and
//!   out-of-bounds / LDS-race detection.
//!
//! Each backend has three layers, like cudarc: raw FFI loaded at run time, thin `Result`
//! wrappers, and the safe API of this crate. Generated kernel launchers use [`KernelArgs`],
//! [`LaunchConfig`] and [`Stream::launch`] with the static [`KernelVariants`] tables that
//! `flydsl-build` emits.
//!
//! ```
//! use flydsl_rt::{Backend, Device, Target};
//! let dev = Device::sim(Target::Gfx942);
//! assert_eq!(dev.backend(), Backend::Sim);
//! assert_eq!((dev.wave_size(), dev.max_lds_bytes()), (64, 65536));
//! ```
//!
//! # Cargo features
//!
//! `cuda`, `hip`, `sim` (the backends) and `ndarray` (the `DeviceBuffer` conveniences over
//! `ndarray` views), all on by default. A backend left out drops its dependency and
//! enumerates no device (`Error::BackendUnavailable` names the feature).
//!
//! # Memory
//!
//! Device memory is stream-ordered: see [`DeviceBuffer`] (drops never wait for unrelated
//! work), [`PinnedHostBuffer`] with the copies a [`Stream`] enqueues, [`DeviceSlice`] views,
//! and [`DeviceBuffer::from_raw_parts`] / [`Stream::from_raw_cuda`] for memory and streams of
//! other code.
//!
//! # Environment
//!
//! - `FLYDSL_BACKEND=hip|cuda|sim`: the backend [`Device::best`] uses.
//! - `FLYDSL_SIM_TARGET=gfx942|gfx950|gfx1201|gfx1250|sm90`: the Sim's emulated target.
//! - `FLYDSL_HIP_LIB=/path/libamdhip64.so`: the HIP library to load (else `ROCM_PATH`, else
//!   the loader path).

mod backend;
mod buffer;
#[cfg(feature = "ndarray")]
mod buffer_nd;
mod copy;
mod device;
pub mod diag;
mod dtype;
mod error;
mod foreign;
mod graph;
pub mod hints;
mod launch;
mod launch_table;
mod peer;
mod pinned;
mod repr;
mod residency;
mod slice;
mod stream;
mod tensor_map;
pub mod timing;
pub mod tune;
mod types;
pub mod validate;
mod variant;

pub use buffer::{DeviceBuffer, RawBuffer};
pub use device::Device;
pub use dtype::{
    DType, Element, ElementMap, ElementMap2, InnerElement, OuterElement, PerElement, PerElement2,
};
pub use error::{Error, Result};
pub use flydsl_ir::{ScalarType, Target};
#[cfg(feature = "sim")]
pub use flydsl_sim as sim;
pub use graph::Graph;
pub use half;
pub use launch::{KernelArgs, LaunchConfig};
pub use launch_table::{launcher, Launcher, Launchers};
pub use peer::{IpcHandle, SharedMemory};
pub use pinned::PinnedHostBuffer;
pub use repr::{DeviceRepr, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ};
pub use slice::DeviceSlice;
pub use stream::{Event, Stream};
pub use tensor_map::{TensorMap, TmaSwizzle};
pub use types::{Backend, DeviceId, DeviceLabel, StreamId};
pub use variant::{KernelResources, KernelVariant, KernelVariants};
