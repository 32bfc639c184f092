//! The kernels this crate's build script generated: variant tables, typed launchers, and the
//! typed dispatch tables (`FORWARD`, `BACKWARD`: per dtype, one entry per configuration of
//! [`crate::table::CONFIGS`] of that kind, keyed by its index).

use flydsl_rt::{DeviceBuffer, Element, ElementMap, LaunchConfig, Launchers, Result, Stream};

/// Generated variant tables (`SOFTMAX_FWD_...`), launchers (`softmax_fwd_...`) and dispatch
/// tables.
#[allow(missing_docs, dead_code, clippy::all)]
pub(crate) mod generated {
    use super::{BackwardLaunchers, ForwardLaunchers};
    include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));
}

/// A forward launcher: `(stream, cfg, x, y, m, n, nblocks, keep_l2)`.
pub(crate) type SoftmaxForwardFn<T> = unsafe fn(
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
pub(crate) type SoftmaxBackwardFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
) -> Result<()>;

/// Forward launchers of elements `T`, keyed by configuration index.
pub(crate) struct ForwardLaunchers;
impl ElementMap for ForwardLaunchers {
    type Of<T: Element> = Launchers<usize, SoftmaxForwardFn<T>>;
}

/// Backward launchers of elements `T`, keyed by configuration index.
pub(crate) struct BackwardLaunchers;
impl ElementMap for BackwardLaunchers {
    type Of<T: Element> = Launchers<usize, SoftmaxBackwardFn<T>>;
}

/// The launcher of configuration `index` (forward), if it is a forward configuration.
pub(crate) fn forward<T: Element>(
    index: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, SoftmaxForwardFn<T>>> {
    let t = generated::FORWARD.get::<T>();
    t.binary_search_by_key(&index, |l| l.key)
        .ok()
        .map(|i| &t[i])
}

/// The launcher of configuration `index` (backward), if it is a backward configuration.
pub(crate) fn backward<T: Element>(
    index: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, SoftmaxBackwardFn<T>>> {
    let t = generated::BACKWARD.get::<T>();
    t.binary_search_by_key(&index, |l| l.key)
        .ok()
        .map(|i| &t[i])
}

/// The variant table of configuration `index` for `T`.
pub(crate) fn variants<T: Element>(index: usize) -> &'static flydsl_rt::KernelVariants {
    match (forward::<T>(index), backward::<T>(index)) {
        (Some(l), _) => l.kernel,
        (None, Some(l)) => l.kernel,
        (None, None) => unreachable!("build.rs builds every configuration for every dtype"),
    }
}
