//! The embedded kernels: every variant's static table ([`flydsl_rt::KernelVariants`]: IR for
//! the Sim on every target, code objects for the targets this build enabled), the generated
//! typed launchers, and the dispatch table that maps a kernel family and path to its launcher.
//!
//! ```
//! // Every kernel carries IR for all five targets.
//! for k in fly_norm::kernels::ALL {
//!     assert_eq!(k.variants.len(), 5, "{}", k.name);
//! }
//! ```

#![allow(missing_docs, clippy::too_many_arguments)]

use crate::config::{Dtype, Family, Kind, Norm, Path};
use flydsl_rt::{DeviceBuffer, DeviceRepr, LaunchConfig, Result, Stream};

/// Launcher of a forward kernel: `x, residual, residual_out, gamma, beta, y, mean, rstd, m,
/// n, eps, lanes`.
pub(crate) type FwdFn<T, W> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    &DeviceBuffer<W>,
    &DeviceBuffer<W>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    f32,
    i32,
    i32,
) -> Result<()>;

/// Launcher of a forward-quant kernel: `x, residual, residual_out, gamma, beta, q, yscale,
/// xscale, mean, rstd, m, n, eps, lanes, keep_l2`.
pub(crate) type FwdQuantFn<T, W> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    &DeviceBuffer<W>,
    &DeviceBuffer<W>,
    &mut DeviceBuffer<i8>,
    &mut DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    f32,
    i32,
    i32,
) -> Result<()>;

/// Launcher of a backward kernel: `x, gamma, dy, mean, rstd, dresidual, dx, dgamma_part,
/// dbeta_part, m, n, mode`.
pub(crate) type BwdFn<T, W> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<W>,
    &DeviceBuffer<T>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    i32,
) -> Result<()>;

/// Launcher of a column-sum kernel: `part, out, g, n`.
pub(crate) type ColsumFn<W> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<f32>,
    &mut DeviceBuffer<W>,
    i32,
    i32,
) -> Result<()>;

include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));
include!(concat!(env!("OUT_DIR"), "/fly_norm_table.rs"));

/// The launcher of `fam` on `path`, typed for activations `T` and weights `W`; `None` when the
/// family or path was not built or the types do not match the family's dtypes.
pub(crate) fn fwd_launcher<T: DeviceRepr, W: DeviceRepr>(
    fam: Family,
    path: Path,
) -> Option<FwdFn<T, W>> {
    lookup::<FwdFn<T, W>>(fam, path)
}

/// As [`fwd_launcher`] for quant families.
pub(crate) fn fwd_quant_launcher<T: DeviceRepr, W: DeviceRepr>(
    fam: Family,
    path: Path,
) -> Option<FwdQuantFn<T, W>> {
    lookup::<FwdQuantFn<T, W>>(fam, path)
}

/// As [`fwd_launcher`] for backward families.
pub(crate) fn bwd_launcher<T: DeviceRepr, W: DeviceRepr>(
    fam: Family,
    path: Path,
) -> Option<BwdFn<T, W>> {
    lookup::<BwdFn<T, W>>(fam, path)
}

/// The column-sum launcher writing `W`.
pub(crate) fn colsum_launcher<W: DeviceRepr>(out: Dtype) -> Option<ColsumFn<W>> {
    colsum_fn(out).downcast_ref::<ColsumFn<W>>().copied()
}

fn lookup<F: Copy + 'static>(fam: Family, path: Path) -> Option<F> {
    let table = family_table(fam)?.downcast_ref::<&'static [(Path, F)]>()?;
    table.iter().find(|(p, _)| *p == path).map(|(_, f)| *f)
}
