//! Shared helpers of fly-norm's tests: Sim streams per target, random inputs, reference
//! comparisons and shape selection per kernel path.

#![allow(dead_code)]

pub mod bwd_case;
pub mod fwd_case;

use fly_norm::{DType, Element, Norm, Path};
use flydsl_rt::{Device, DeviceBuffer, Stream, Target};
use flydsl_testutil::compare::{max_abs_err, widen, Storage};
use flydsl_testutil::rng::Rng;

/// A stream on the process-wide Sim device emulating `t` (no environment variables, so
/// parallel tests do not race).
pub fn sim(t: Target) -> Stream {
    Device::sim(t).stream().expect("sim stream")
}

/// A stream on the sm_90 CUDA device, or `None` after reporting why there is none (no CUDA
/// backend or device, or a build without the sm90 code objects) through
/// `flydsl_testutil::gpu::skip`, which fails where `FLYDSL_REQUIRE_GPU` is set.
pub fn cuda_stream() -> Option<Stream> {
    let devs = match Device::enumerate(flydsl_rt::Backend::Cuda) {
        Ok(d) => d,
        Err(e) => {
            flydsl_testutil::gpu::skip(&format!("no CUDA backend: {e}"));
            return None;
        }
    };
    let Some(dev) = devs.into_iter().find(|d| d.target() == Target::Sm90) else {
        flydsl_testutil::gpu::skip("no sm_90 CUDA device");
        return None;
    };
    if let Some(k) = fly_norm::kernels::ALL_KERNELS
        .iter()
        .find(|k| k.for_target(Target::Sm90).and_then(|v| v.code).is_none())
    {
        flydsl_testutil::gpu::skip(&format!(
            "kernel {} has no sm90 code object; build with --features sm90",
            k.name
        ));
        return None;
    }
    Some(dev.stream().expect("CUDA stream"))
}

/// `n` values of `T` from `randn` (f32, then cast), and their exact f64 values.
pub fn randn<T: Element + Storage>(rng: &mut Rng, n: usize) -> (Vec<T>, Vec<f64>) {
    let v: Vec<T> = rng
        .randn(n)
        .into_iter()
        .map(<T as Element>::from_f32)
        .collect();
    let w = widen(&v);
    (v, w)
}

/// `n` values of `T` from `rand` (uniform [0, 1)), shifted to [0.5, 1.5).
pub fn rand<T: Element + Storage>(rng: &mut Rng, n: usize) -> (Vec<T>, Vec<f64>) {
    let v: Vec<T> = rng
        .rand(n)
        .into_iter()
        .map(|x| <T as Element>::from_f32(x + 0.5))
        .collect();
    let w = widen(&v);
    (v, w)
}

/// Upload.
pub fn up<T: flydsl_rt::DeviceRepr>(s: &Stream, v: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_slice(s.device(), v).expect("upload")
}

/// A zeroed device buffer.
pub fn zeros<T: flydsl_rt::DeviceRepr>(s: &Stream, n: usize) -> DeviceBuffer<T> {
    DeviceBuffer::zeroed(s.device(), n).expect("alloc")
}

/// Download as f64.
pub fn down<T: Element + Storage>(b: &DeviceBuffer<T>) -> Vec<f64> {
    widen(&b.to_vec().expect("download"))
}

/// Download f32 as f64.
pub fn down_f32(b: &DeviceBuffer<f32>) -> Vec<f64> {
    b.to_vec()
        .expect("download")
        .into_iter()
        .map(f64::from)
        .collect()
}

/// Assert `|got - want| <= atol + rtol * |want|` everywhere (NaN must match NaN).
pub fn check(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= atol + rtol * w.abs();
        if !ok {
            let worst = max_abs_err(got, want);
            panic!(
                "{what}: element {i}: got {g}, want {w} (atol {atol}, rtol {rtol}); worst at {}: got {}, want {}",
                worst.index, worst.got, worst.want
            );
        }
    }
}

/// Assert int8 outputs within `tol` of the reference.
pub fn check_q(what: &str, got: &[i8], want: &[i8], tol: i32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as i32 - w as i32).abs() <= tol,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// A row length that the forward dispatcher sends to `path` for dtype `dt` on waves of `ws`
/// (odd counts of vectors, so masked tails and partial groups are exercised).
pub fn n_for_fwd(path: Path, dt: DType, ws: usize) -> usize {
    let vec = dt.vec() as usize;
    match path {
        Path::Rows(1) => vec * (ws / 2 - 1),
        Path::Rows(_) => vec * (3 * ws + 1),
        Path::Fast(2) => vec * (4 * ws + 3),
        Path::Fast(4) => vec * 600,
        Path::Fast(_) => vec * 1100,
        // Past the plain (f32: 512 threads x 8 tiles x 4) and quant fast paths' rows.
        Path::Generic => 8 * 512 * vec + 3,
        // One element short of the aligned row: one more vector (`ragged_slots`), within the
        // same path.
        Path::FastRagged(t) => n_for_fwd(Path::Fast(t), dt, ws) - 1,
        Path::RowsRagged(t) => n_for_fwd(Path::Rows(t), dt, ws) - 1,
    }
}

/// A row length that the backward dispatcher sends to `path`.
pub fn n_for_bwd(norm: Norm, path: Path, dt: DType) -> usize {
    let vec = dt.vec() as usize;
    match path {
        Path::Fast(1) => vec * 37,
        Path::Fast(2) => vec * 300,
        Path::Fast(4) => vec * 1100,
        Path::Fast(_) => vec * 2100,
        // One element past the longest fast-path row of the family.
        _ if norm == Norm::Rms && dt.bytes() == 2 => 32769,
        _ => 16385,
    }
}

/// The backward paths built for `norm` (every dtype), fast ones first (see `Family::paths`).
pub fn bwd_paths(norm: Norm) -> Vec<Path> {
    let mut v: Vec<Path> = [1, 2, 4].into_iter().map(Path::Fast).collect();
    // LayerNorm has no 8-tile backward (`bwd_fast_spill_free`); RMSNorm's 2-byte and f32.
    if norm == Norm::Rms {
        v.push(Path::Fast(8));
    }
    v.push(Path::Generic);
    v
}

/// Every target.
pub const TARGETS: [Target; 5] = Target::ALL;
