//! The embedded kernels: every variant's static table ([`flydsl_rt::KernelVariants`]: IR for
//! the Sim on every target, code objects for the targets this build enabled), the generated
//! typed launchers, and the generated dispatch tables that map a dtype pair, norm and path to
//! a launcher typed by the launcher types below.
//!
//! ```
//! // Every kernel carries IR for all five targets.
//! for k in fly_norm::kernels::ALL_KERNELS {
//!     assert_eq!(k.variants.len(), 5, "{}", k.name);
//! }
//! ```

#![allow(missing_docs, clippy::too_many_arguments)]

use crate::config::{Norm, Path};
use flydsl_rt::{
    DeviceBuffer, Element, ElementMap, ElementMap2, LaunchConfig, Launcher, Launchers, Result,
    Stream,
};

/// Launcher of a forward kernel: `x, residual, residual_out, gamma, beta, y, mean, rstd, m,
/// n, eps, lanes`.
pub(crate) type NormForwardFn<T, W> = unsafe fn(
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
pub(crate) type NormForwardQuantFn<T, W> = unsafe fn(
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
pub(crate) type NormBackwardFn<T, W> = unsafe fn(
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

/// The dispatcher's key of a kernel: its norm and path.
pub(crate) type Key = (Norm, Path);

/// Forward launchers of activations `T` and weights `W` (table `FORWARD`).
pub(crate) struct ForwardLaunchers;
impl ElementMap2 for ForwardLaunchers {
    type Of<T: Element, W: Element> = Launchers<Key, NormForwardFn<T, W>>;
}

/// Forward-quant launchers (table `FORWARD_QUANT`).
pub(crate) struct ForwardQuantLaunchers;
impl ElementMap2 for ForwardQuantLaunchers {
    type Of<T: Element, W: Element> = Launchers<Key, NormForwardQuantFn<T, W>>;
}

/// Backward launchers (tables `BACKWARD` and `BACKWARD_RAGGED`).
pub(crate) struct BackwardLaunchers;
impl ElementMap2 for BackwardLaunchers {
    type Of<T: Element, W: Element> = Launchers<Key, NormBackwardFn<T, W>>;
}

/// The column-sum launcher writing weights `W` (table `COLSUM`, one entry per dtype).
pub(crate) struct ColsumLaunchers;
impl ElementMap for ColsumLaunchers {
    type Of<W: Element> = Launchers<(), ColsumFn<W>>;
}

include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));

/// The forward kernel of `norm` on `path` for activations `T` and weights `W`; `None` when it
/// was not built (a weight dtype the norm does not allow, a path the family lacks).
pub(crate) fn forward<T: Element, W: Element>(
    norm: Norm,
    path: Path,
) -> Option<&'static Launcher<Key, NormForwardFn<T, W>>> {
    flydsl_rt::launcher(FORWARD.get2::<T, W>(), &(norm, path))
}

/// As [`forward`] for the quant forward.
pub(crate) fn forward_quant<T: Element, W: Element>(
    norm: Norm,
    path: Path,
) -> Option<&'static Launcher<Key, NormForwardQuantFn<T, W>>> {
    flydsl_rt::launcher(FORWARD_QUANT.get2::<T, W>(), &(norm, path))
}

/// As [`forward`] for the backward.
pub(crate) fn backward<T: Element, W: Element>(
    norm: Norm,
    path: Path,
) -> Option<&'static Launcher<Key, NormBackwardFn<T, W>>> {
    flydsl_rt::launcher(BACKWARD.get2::<T, W>(), &(norm, path))
}

/// As [`backward`] for the fast path's kernels for rows that are not a multiple of the vector
/// width (`None` off the fast path: the generic path takes any row).
pub(crate) fn backward_ragged<T: Element, W: Element>(
    norm: Norm,
    path: Path,
) -> Option<&'static Launcher<Key, NormBackwardFn<T, W>>> {
    flydsl_rt::launcher(BACKWARD_RAGGED.get2::<T, W>(), &(norm, path))
}

/// The column-sum kernel writing `W`.
pub(crate) fn colsum<W: Element>() -> Option<&'static Launcher<(), ColsumFn<W>>> {
    COLSUM.get::<W>().first()
}
