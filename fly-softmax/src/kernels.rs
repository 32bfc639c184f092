//! The kernels this crate's build script generated: variant tables, typed launchers, and the
//! per-dtype dispatch table that maps each configuration of [`crate::table::CONFIGS`] to them.

use flydsl_rt::{DeviceBuffer, DeviceRepr, KernelVariants, LaunchConfig, Result, Stream};

/// Generated variant tables (`SOFTMAX_FWD_...`) and launchers (`softmax_fwd_...`).
#[allow(missing_docs, dead_code, clippy::all)]
pub(crate) mod generated {
    include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));
}

/// A forward launcher: `(stream, cfg, x, y, m, n, nblocks, keep_l2)`.
pub type FwdFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// A backward launcher: `(stream, cfg, y, dy, dx, m, n, nblocks)`.
pub type BwdFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
) -> Result<()>;

/// One configuration's kernel for one dtype.
pub enum Launcher<T: DeviceRepr> {
    /// A forward kernel.
    Fwd(&'static KernelVariants, FwdFn<T>),
    /// A backward kernel.
    Bwd(&'static KernelVariants, BwdFn<T>),
}

impl<T: DeviceRepr> Launcher<T> {
    /// The kernel's variant table.
    pub fn variants(&self) -> &'static KernelVariants {
        match self {
            Launcher::Fwd(v, _) | Launcher::Bwd(v, _) => v,
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/softmax_dispatch.rs"));
