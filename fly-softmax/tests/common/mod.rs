//! Helpers shared by the integration tests: run a kernel on a device and compare with the
//! CPU reference of `flydsl_testutil::softmax`.

#![allow(dead_code)]

use fly_softmax::{softmax_backward_with, softmax_with, Dispatch, Element, SoftmaxArgs};
use flydsl_rt::{Device, DeviceBuffer, Result};
use flydsl_testutil::compare::{cast_vec, widen, Storage};
use flydsl_testutil::rng::Rng;
use flydsl_testutil::softmax as reference;

/// A dtype usable both by the kernels and by the reference helpers.
pub trait Dt: Element + Storage {}
impl<T: Element + Storage> Dt for T {}

/// Random `randn * scale` inputs, rounded to `T`.
pub fn inputs<T: Dt>(seed: u64, len: usize, scale: f32) -> Vec<T> {
    let v: Vec<f32> = Rng::new(seed)
        .randn(len)
        .into_iter()
        .map(|x| x * scale)
        .collect();
    cast_vec(&v)
}

/// Run the forward kernel chosen by `dispatch` and return y in f64.
pub fn forward<T: Dt>(
    dev: &Device,
    x: &[T],
    m: usize,
    n: usize,
    dispatch: Dispatch<'_>,
) -> Result<Vec<f64>> {
    let s = dev.stream()?;
    let xd = DeviceBuffer::from_slice(dev, x)?;
    let mut yd = DeviceBuffer::<T>::zeroed(dev, x.len())?;
    softmax_with(&s, &xd, &mut yd, SoftmaxArgs { m, n }, dispatch)?;
    Ok(widen(&yd.to_vec()?))
}

/// Run the backward kernel chosen by `dispatch` and return dx (raw elements).
pub fn backward_raw<T: Dt>(
    dev: &Device,
    y: &[T],
    dy: &[T],
    m: usize,
    n: usize,
    dispatch: Dispatch<'_>,
) -> Result<Vec<T>> {
    let s = dev.stream()?;
    let yd = DeviceBuffer::from_slice(dev, y)?;
    let dyd = DeviceBuffer::from_slice(dev, dy)?;
    let mut dxd = DeviceBuffer::<T>::zeroed(dev, y.len())?;
    softmax_backward_with(&s, &yd, &dyd, &mut dxd, SoftmaxArgs { m, n }, dispatch)?;
    dxd.to_vec()
}

/// The sm_90 CUDA device, or `None` after reporting why it cannot be used (no CUDA backend or
/// device, or a build without the sm90 code objects) through `flydsl_testutil::gpu::skip`,
/// which fails where `FLYDSL_REQUIRE_GPU` is set.
pub fn cuda_sm90_device() -> Option<Device> {
    use fly_softmax::plan::all;
    use fly_softmax::table::Kind;
    use flydsl_rt::{Backend, Target};
    use flydsl_testutil::gpu;
    let dev = match Device::enumerate(Backend::Cuda) {
        Ok(list) => list.into_iter().find(|d| d.target() == Target::Sm90),
        Err(e) => {
            gpu::skip(&format!("no CUDA device ({e})"));
            return None;
        }
    };
    let Some(dev) = dev else {
        gpu::skip("no sm90 CUDA device");
        return None;
    };
    let v = all(Kind::Forward)[0];
    if !v.kernel::<f32>().built_targets().any(|t| t == Target::Sm90) {
        gpu::skip("this build has no sm90 code objects (build with --features sm90)");
        return None;
    }
    Some(dev)
}

/// Forward on random inputs, checked against the reference; panics naming `what` on mismatch.
pub fn check_fwd<T: Dt>(what: &str, dev: &Device, m: usize, n: usize, dispatch: Dispatch<'_>) {
    let x: Vec<T> = inputs(m as u64 * 7919 + n as u64, m * n, 2.0);
    let got = forward(dev, &x, m, n, dispatch).unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = reference::forward(&widen(&x), m, n);
    let tol = reference::tolerance(T::DTYPE.name());
    if let Err(e) = reference::check_forward(what, &got, &want, m, n, &tol) {
        panic!("{e}");
    }
}

/// Backward on random inputs (y a softmax output), checked against the reference.
pub fn check_bwd<T: Dt>(what: &str, dev: &Device, m: usize, n: usize, dispatch: Dispatch<'_>) {
    let logits: Vec<f64> = widen(&inputs::<f32>(n as u64 * 31 + m as u64, m * n, 1.0));
    let y64 = reference::forward(&logits, m, n);
    let y: Vec<T> = y64
        .iter()
        .map(|&v| <T as Element>::from_f32(v as f32))
        .collect();
    let dy: Vec<T> = inputs(m as u64 + 5 * n as u64 + 1, m * n, 1.0);
    let got = backward_raw(dev, &y, &dy, m, n, dispatch).unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = reference::backward(&widen(&y), &widen(&dy), m, n);
    let tol = reference::tolerance(T::DTYPE.name());
    if let Err(e) = reference::check_backward(what, &widen(&got), &want, &tol) {
        panic!("{e}");
    }
}
