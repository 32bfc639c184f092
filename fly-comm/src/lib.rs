//! fly-comm: a custom intra-node all-reduce for tensor-parallel inference.
//!
//! A group of 2, 4 or 8 ranks (one GPU each) shares memory (peer access in one process, IPC
//! handles across processes); each rank's kernels read the peers' buffers directly and meet
//! them in cross-GPU barriers built on system-scope release/acquire flags with bounded
//! waits. Two algorithms ([`Algorithm`]): one-stage (every rank reduces the whole message
//! from all peers: least latency) and two-stage (reduce-scatter + all-gather: for larger
//! messages), chosen by size ([`two_stage_min_bytes`]); plus a fused all-reduce + residual
//! add + RMSNorm. Sums are f32 in rank order, rounded once: every rank gets the same bits.
//! The vendor library (NCCL on CUDA, RCCL on HIP) is loaded at run time for what the custom
//! path does not take ([`AllReduce`], [`Path`]).
//!
//! Set-up:
//! - one process driving every device: [`CustomAllReduce::new_group`] or [`AllReduceGroup`];
//! - one process per GPU: [`CustomAllReduce::prepare`], exchange
//!   [`PendingRank::handle`] bytes, [`PendingRank::connect`].
//!
//! Targets: gfx942, gfx950 (system-scope LLVM atomics, which the AMDGPU memory model lowers
//! to `buffer_wbl2 sc0 sc1` / `sc0 sc1` accesses / `buffer_inv sc0 sc1`: the XGMI visibility
//! the reference writes by hand), sm90 (`st.release.sys` / `ld.acquire.sys`) and their Sims.
//! gfx1201 and gfx1250 have no kernels: [`CommError::UnsupportedTarget`].
//!
//! ```
//! use flydsl_rt::{Device, DeviceBuffer, Target};
//! use fly_comm::{AllReduceGroup, Config};
//! let devs = [Device::new_sim(Target::Sm90), Device::new_sim(Target::Sm90)];
//! let g = AllReduceGroup::new(&devs, &Config::default()).unwrap();
//! let streams: Vec<_> = devs.iter().map(|d| d.stream().unwrap()).collect();
//! let xs: Vec<_> = devs.iter().map(|d| DeviceBuffer::from_slice(d, &[0.5f32; 64]).unwrap()).collect();
//! let mut ys: Vec<_> = devs.iter().map(|d| DeviceBuffer::<f32>::zeroed(d, 64).unwrap()).collect();
//! g.all_reduce(&streams, &xs.iter().collect::<Vec<_>>(), &mut ys.iter_mut().collect::<Vec<_>>()).unwrap();
//! assert_eq!(ys[0].to_vec().unwrap(), vec![1.0; 64]);
//! ```

mod auto;
mod collective;
/// The kernel configuration shared with the build script.
#[path = "../kernels/config.rs"]
#[allow(dead_code)]
mod config;
mod error;
mod group;
mod kernels;
mod launch;
mod rank;
mod select;
mod vendor;

pub use auto::{AllReduce, Path};
pub use error::{CommError, Result};
/// The element types (`f32`, `f16`, `bf16`), shared with the build script's config.
pub use flydsl_rt::DType;
pub use group::AllReduceGroup;
pub use rank::{Config, CustomAllReduce, PendingRank, MAX_REGISTERED_BYTES, WORLD_SIZES};
pub use select::{two_stage_min_bytes, Algorithm, TWO_STAGE_ENV, TWO_STAGE_MIN_BYTES};
pub use vendor::{VendorAllReduce, VendorId};

/// Every kernel's variant table (code-object checks and benches).
#[doc(hidden)]
pub fn kernel_variants() -> impl Iterator<Item = &'static flydsl_rt::KernelVariants> {
    kernels::TABLE.iter().map(|(_, k)| *k)
}
