//! The kernels this crate's build script generated: variant tables, typed launchers and the
//! typed dispatch tables `WGMMA` (per dtype, keyed by `table::key16`) and
//! `WGMMA_SCALED` (per output dtype, keyed by `table::scaled_key`).

use flydsl_rt::{DeviceBuffer, Element, ElementMap, LaunchConfig, Launchers, Result, Stream};

/// Generated variant tables (`GEMM_WGMMA_...`), launchers and the dispatch table.
#[allow(missing_docs, dead_code, clippy::all)]
pub(crate) mod generated {
    use super::{
        PartialLaunchers, Portable8Launchers, PortableLaunchers, ReduceLaunchers, ScaledLaunchers,
        WgmmaLaunchers,
    };
    include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));
}

/// A Hopper launcher: `(stream, cfg, a_map, b_map, bias, c, m, n, k)`.
pub(crate) type WgmmaFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<i8>,
    &DeviceBuffer<i8>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
) -> Result<()>;

/// Hopper launchers of elements `T`, keyed by `table::key16` (epilogue and tile).
pub(crate) struct WgmmaLaunchers;
impl ElementMap for WgmmaLaunchers {
    type Of<T: Element> = Launchers<usize, WgmmaFn<T>>;
}

/// The Hopper launcher of `key` (`table::key16`) for `T`, if this dtype has one.
pub(crate) fn wgmma<T: Element>(
    key: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, WgmmaFn<T>>> {
    let t = generated::WGMMA.get::<T>();
    flydsl_rt::launcher(t, &key)
}

/// A scaled Hopper launcher:
/// `(stream, cfg, a_map, b_map, scale_a, scale_b, bias, c, m, n, k)`.
pub(crate) type ScaledFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<i8>,
    &DeviceBuffer<i8>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
) -> Result<()>;

/// Scaled Hopper launchers of output elements `T`, keyed by `table::scaled_key`.
pub(crate) struct ScaledLaunchers;
impl ElementMap for ScaledLaunchers {
    type Of<T: Element> = Launchers<usize, ScaledFn<T>>;
}

/// The scaled Hopper launcher of `key` (`table::scaled_key`) for output `T`, if any.
pub(crate) fn wgmma_scaled<T: Element>(
    key: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, ScaledFn<T>>> {
    let t = generated::WGMMA_SCALED.get::<T>();
    flydsl_rt::launcher(t, &key)
}

/// A split-K partial-sum launcher: `(stream, cfg, a_map, b_map, ws, m, n, k, kps)`.
pub(crate) type PartialFn = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<i8>,
    &DeviceBuffer<i8>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// Partial-sum launchers (16-bit: per input dtype, keyed by tile index; 8-bit: under f32,
/// keyed by `table::scaled_partial_key`).
pub(crate) struct PartialLaunchers;
impl ElementMap for PartialLaunchers {
    type Of<T: Element> = Launchers<usize, PartialFn>;
}

/// The 16-bit partial-sum launcher of `tile` (index in `table::TILES`) for inputs `T`.
pub(crate) fn partial16<T: Element>(
    tile: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, PartialFn>> {
    flydsl_rt::launcher(generated::WGMMA_PARTIAL.get::<T>(), &tile)
}

/// The 8-bit partial-sum launcher of `key` (`table::scaled_partial_key`).
pub(crate) fn partial8(key: usize) -> Option<&'static flydsl_rt::Launcher<usize, PartialFn>> {
    flydsl_rt::launcher(generated::WGMMA_SCALED_PARTIAL.get::<f32>(), &key)
}

/// A split-K reduce launcher:
/// `(stream, cfg, ws, scale_a, scale_b, bias, c, m, n, splits, scaled)`.
pub(crate) type ReduceFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// Split-K reduce launchers of output elements `T`, keyed by the epilogue's index.
pub(crate) struct ReduceLaunchers;
impl ElementMap for ReduceLaunchers {
    type Of<T: Element> = Launchers<usize, ReduceFn<T>>;
}

/// The split-K reduce launcher of `epi` (its index) for output `T`, if any.
pub(crate) fn reduce<T: Element>(
    epi: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, ReduceFn<T>>> {
    flydsl_rt::launcher(generated::SPLITK_REDUCE.get::<T>(), &epi)
}

// ---- portable GEMM (gemmport) ----

/// A portable-kernel launcher: `(stream, cfg, a, b, bias, c, m, n, k, epi)`.
pub(crate) type PortableFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// Portable launchers of elements `T`, keyed by `table::portable_key`.
pub(crate) struct PortableLaunchers;
impl ElementMap for PortableLaunchers {
    type Of<T: Element> = Launchers<usize, PortableFn<T>>;
}

/// The portable launcher of `key` for `T`, if this dtype has one.
pub(crate) fn portable<T: Element>(
    key: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, PortableFn<T>>> {
    let t = generated::PORTABLE.get::<T>();
    flydsl_rt::launcher(t, &key)
}
// ---- end portable GEMM ----

/// An 8-bit portable-kernel launcher:
/// `(stream, cfg, a, b, scale_a, scale_b, bias, c, m, n, k, epi)` with inputs `Q`, output `T`.
pub type Portable8Fn<Q, T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<Q>,
    &DeviceBuffer<Q>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// 8-bit portable launchers of inputs `Q` and output elements `T`, keyed by
/// `table::portable_key`; one table per input type (`PORTABLE8_*`), reached through
/// `crate::QuantElement`'s sealed supertrait.
pub struct Portable8Launchers<Q>(std::marker::PhantomData<Q>);
impl<Q: flydsl_rt::DeviceRepr + 'static> ElementMap for Portable8Launchers<Q> {
    type Of<T: Element> = Launchers<usize, Portable8Fn<Q, T>>;
}
