//! The kernels this crate's build script generated: variant tables, typed launchers and the
//! typed dispatch tables `FORWARD` (per dtype, keyed by head tile), `FORWARD_FP8` (fp8
//! e4m3fn inputs, per output dtype (bf16), keyed by head tile), `COMBINE` (per
//! dtype, one entry keyed 0), `HOPPER` (per dtype, keyed by `table::hopper_key`; sm90
//! only) and `DECODE` (per dtype, keyed by `table::decode_key`).

use flydsl_rt::{
    DeviceBuffer, Element, ElementMap, LaunchConfig, Launchers, Result, Stream, F8E4M3FN,
};

/// Generated variant tables, launchers and dispatch tables.
#[allow(missing_docs, dead_code, clippy::all)]
pub(crate) mod generated {
    use super::{
        CombineLaunchers, DecodeLaunchers, ForwardLaunchers, Fp8ForwardLaunchers, HopperLaunchers,
    };
    include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));
}

/// A forward launcher: `(stream, cfg, q, k, v, out, lse, ws_o, ws_lse, cu_q, cu_kv,
/// seqlen_q, seqlen_kv, heads_q, heads_kv, head_dim, total_q, varlen, causal, write_lse,
/// splits, scale_log2)` (see `kernels/fwd.rs`).
pub(crate) type ForwardFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    &DeviceBuffer<i32>,
    &DeviceBuffer<i32>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    f32,
) -> Result<()>;

/// An fp8 forward launcher: [`ForwardFn`] with e4m3fn q, k, v followed by the three f32
/// descale tensors (`q_descale`, `k_descale`, `v_descale`, one value each), out of `T`.
pub(crate) type Fp8ForwardFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<F8E4M3FN>,
    &DeviceBuffer<F8E4M3FN>,
    &DeviceBuffer<F8E4M3FN>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    &DeviceBuffer<i32>,
    &DeviceBuffer<i32>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    f32,
) -> Result<()>;

/// A combine launcher: `(stream, cfg, ws_o, ws_lse, out, lse, seqlen_q, heads_q, head_dim,
/// total_q, varlen, write_lse, splits)`.
pub(crate) type CombineFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
) -> Result<()>;

/// A Hopper launcher: `(stream, cfg, q_map, k_map, v_map, out, lse, seqlen_q, seqlen_kv,
/// heads_q, heads_kv, scale_log2, write_lse)` (see `kernels/wgmma.rs`).
pub(crate) type HopperFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<i8>,
    &DeviceBuffer<i8>,
    &DeviceBuffer<i8>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    i32,
    i32,
    f32,
    i32,
) -> Result<()>;

/// Forward launchers of elements `T`, keyed by head tile.
pub(crate) struct ForwardLaunchers;
impl ElementMap for ForwardLaunchers {
    type Of<T: Element> = Launchers<usize, ForwardFn<T>>;
}

/// fp8-input forward launchers with output `T`, keyed by head tile.
pub(crate) struct Fp8ForwardLaunchers;
impl ElementMap for Fp8ForwardLaunchers {
    type Of<T: Element> = Launchers<usize, Fp8ForwardFn<T>>;
}

/// The fp8-input forward launcher of head tile `dp` with output `T` (bf16 only).
pub(crate) fn forward_fp8<T: Element>(
    dp: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, Fp8ForwardFn<T>>> {
    let t = generated::FORWARD_FP8.get::<T>();
    t.binary_search_by_key(&dp, |l| l.key).ok().map(|i| &t[i])
}

/// Combine launchers of elements `T` (one, keyed 0).
pub(crate) struct CombineLaunchers;
impl ElementMap for CombineLaunchers {
    type Of<T: Element> = Launchers<usize, CombineFn<T>>;
}

/// The forward launcher of head tile `dp` for `T`.
pub(crate) fn forward<T: Element>(
    dp: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, ForwardFn<T>>> {
    let t = generated::FORWARD.get::<T>();
    t.binary_search_by_key(&dp, |l| l.key).ok().map(|i| &t[i])
}

/// The combine launcher for `T`.
pub(crate) fn combine<T: Element>() -> Option<&'static flydsl_rt::Launcher<usize, CombineFn<T>>> {
    generated::COMBINE.get::<T>().first()
}

/// Hopper launchers of elements `T`, keyed by `table::hopper_key`.
pub(crate) struct HopperLaunchers;
impl ElementMap for HopperLaunchers {
    type Of<T: Element> = Launchers<usize, HopperFn<T>>;
}

/// The Hopper launcher of head dim `d` and the mask for `T`, if this dtype has one.
pub(crate) fn hopper<T: Element>(
    d: usize,
    causal: bool,
) -> Option<&'static flydsl_rt::Launcher<usize, HopperFn<T>>> {
    flydsl_rt::launcher(
        generated::HOPPER.get::<T>(),
        &crate::table::hopper_key(d, causal),
    )
}

/// A decode launcher: `(stream, cfg, q, k, v, out, lse, ws_o, ws_lse, cu_q, cu_kv,
/// seqlen_q, seqlen_kv, heads_q, heads_kv, head_dim, total_q, varlen, causal, write_lse,
/// splits, max_seqlen_q, scale_log2)` (see `kernels/decode.rs`).
pub(crate) type DecodeFn<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    &mut DeviceBuffer<f32>,
    &DeviceBuffer<i32>,
    &DeviceBuffer<i32>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    f32,
) -> Result<()>;

/// Decode launchers of elements `T`, keyed by `table::decode_key`.
pub(crate) struct DecodeLaunchers;
impl ElementMap for DecodeLaunchers {
    type Of<T: Element> = Launchers<usize, DecodeFn<T>>;
}

/// The decode launcher of head tile `dp` and row block `rb` for `T`, if this dtype has one.
pub(crate) fn decode<T: Element>(
    dp: usize,
    rb: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, DecodeFn<T>>> {
    flydsl_rt::launcher(
        generated::DECODE.get::<T>(),
        &crate::table::decode_key(dp, rb),
    )
}
