//! The kernels this crate's build script generated: variant tables, typed launchers, and the
//! typed dispatch tables (`FORWARD`, `BACKWARD`: per dtype, one entry per configuration of
//! [`crate::table::CONFIGS`] of that kind, keyed by its index).

use flydsl_rt::{DeviceBuffer, Element, ElementMap, LaunchConfig, Launchers, Result, Stream};

/// Generated variant tables (`SOFTMAX_FWD_...`), launchers (`softmax_fwd_...`) and dispatch
/// tables.
#[allow(missing_docs, dead_code, clippy::all)]
pub(crate) mod generated {
    use super::{
        BackwardFinishLaunchers, BackwardLaunchers, BackwardStatsLaunchers, ForwardFinishLaunchers,
        ForwardLaunchers, ForwardStatsLaunchers,
    };
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

/// A split forward stats launcher: `(stream, cfg, x, ws, m, n, chunks, clen, nblocks,
/// keep_l2)`.
pub(crate) type ForwardStatsFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// A split forward finish launcher: `(stream, cfg, x, ws, y, m, n, chunks, clen, nblocks)`.
pub(crate) type ForwardFinishFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<f32>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// A split backward stats launcher: `(stream, cfg, y, dy, ws, m, n, chunks, clen, nblocks)`.
pub(crate) type BackwardStatsFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// A split backward finish launcher: `(stream, cfg, y, dy, ws, dx, m, n, chunks, clen,
/// nblocks)`.
pub(crate) type BackwardFinishFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &DeviceBuffer<f32>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// Declares an [`ElementMap`] of launchers keyed by configuration index.
macro_rules! launcher_map {
    ($(#[$doc:meta])* $name:ident, $f:ident) => {
        $(#[$doc])*
        pub(crate) struct $name;
        impl ElementMap for $name {
            type Of<T: Element> = Launchers<usize, $f<T>>;
        }
    };
}

launcher_map!(
    /// Split forward stats launchers of elements `T`, keyed by configuration index.
    ForwardStatsLaunchers,
    ForwardStatsFn
);
launcher_map!(
    /// Split forward finish launchers of elements `T`, keyed by configuration index.
    ForwardFinishLaunchers,
    ForwardFinishFn
);
launcher_map!(
    /// Split backward stats launchers of elements `T`, keyed by configuration index.
    BackwardStatsLaunchers,
    BackwardStatsFn
);
launcher_map!(
    /// Split backward finish launchers of elements `T`, keyed by configuration index.
    BackwardFinishLaunchers,
    BackwardFinishFn
);

/// The launcher under `index` in `table`.
fn find<F>(t: &'static Launchers<usize, F>, index: usize) -> Option<Entry<F>> {
    t.binary_search_by_key(&index, |l| l.key)
        .ok()
        .map(|i| &t[i])
}

/// A generated launcher of function type `F`, keyed by configuration index.
type Entry<F> = &'static flydsl_rt::Launcher<usize, F>;

/// The two launchers of a split configuration.
pub(crate) struct SplitPair<S: 'static, F: 'static> {
    /// The stats kernel's.
    pub stats: Entry<S>,
    /// The finish kernel's.
    pub finish: Entry<F>,
}

/// The two launchers of split forward configuration `index` (stats, finish).
pub(crate) fn forward_split<T: Element>(
    index: usize,
) -> Option<SplitPair<ForwardStatsFn<T>, ForwardFinishFn<T>>> {
    let stats = find(generated::FORWARD_SPLIT_STATS.get::<T>(), index)?;
    let finish = find(generated::FORWARD_SPLIT_FINISH.get::<T>(), index)?;
    Some(SplitPair { stats, finish })
}

/// The two launchers of split backward configuration `index` (stats, finish).
pub(crate) fn backward_split<T: Element>(
    index: usize,
) -> Option<SplitPair<BackwardStatsFn<T>, BackwardFinishFn<T>>> {
    let stats = find(generated::BACKWARD_SPLIT_STATS.get::<T>(), index)?;
    let finish = find(generated::BACKWARD_SPLIT_FINISH.get::<T>(), index)?;
    Some(SplitPair { stats, finish })
}

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
pub(crate) fn forward<T: Element>(index: usize) -> Option<Entry<SoftmaxForwardFn<T>>> {
    find(generated::FORWARD.get::<T>(), index)
}

/// The launcher of configuration `index` (backward), if it is a backward configuration.
pub(crate) fn backward<T: Element>(index: usize) -> Option<Entry<SoftmaxBackwardFn<T>>> {
    find(generated::BACKWARD.get::<T>(), index)
}

/// The variant tables of configuration `index` for `T`: its kernel, or a split
/// configuration's two (stats first).
pub(crate) fn variants<T: Element>(index: usize) -> Vec<&'static flydsl_rt::KernelVariants> {
    if let Some(l) = forward::<T>(index) {
        vec![l.kernel]
    } else if let Some(l) = backward::<T>(index) {
        vec![l.kernel]
    } else if let Some(p) = forward_split::<T>(index) {
        vec![p.stats.kernel, p.finish.kernel]
    } else if let Some(p) = backward_split::<T>(index) {
        vec![p.stats.kernel, p.finish.kernel]
    } else {
        unreachable!("build.rs builds every configuration for every dtype")
    }
}
