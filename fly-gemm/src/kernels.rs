//! The kernels this crate's build script generated: variant tables, typed launchers and the
//! typed dispatch table `WGMMA` (per dtype, one entry per epilogue, keyed by its index).

use flydsl_rt::{DeviceBuffer, Element, ElementMap, LaunchConfig, Launchers, Result, Stream};

/// Generated variant tables (`GEMM_WGMMA_...`), launchers and the dispatch table.
#[allow(missing_docs, dead_code, clippy::all)]
pub(crate) mod generated {
    use super::PortableLaunchers;
    use super::WgmmaLaunchers;
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

/// Hopper launchers of elements `T`, keyed by epilogue index.
pub(crate) struct WgmmaLaunchers;
impl ElementMap for WgmmaLaunchers {
    type Of<T: Element> = Launchers<usize, WgmmaFn<T>>;
}

/// The Hopper launcher of `epilogue` for `T`, if this dtype has one.
pub(crate) fn wgmma<T: Element>(
    epilogue: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, WgmmaFn<T>>> {
    let t = generated::WGMMA.get::<T>();
    t.binary_search_by_key(&epilogue, |l| l.key)
        .ok()
        .map(|i| &t[i])
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
    t.binary_search_by_key(&key, |l| l.key).ok().map(|i| &t[i])
}
// ---- end portable GEMM ----
