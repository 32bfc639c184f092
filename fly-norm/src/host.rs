//! Convenience forms over host arrays: copy to the stream's device, run, copy back.

use crate::{FwdBuffers, FwdOut, Norm, NormArgs};
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, Element, Result, Stream};
use ndarray::{Array2, ArrayView1, ArrayView2};

/// RMSNorm of the rows of a host matrix.
///
/// ```
/// use ndarray::array;
/// let s = flydsl_rt::Device::sim(flydsl_rt::Target::Gfx942).stream().unwrap();
/// let y = fly_norm::host::rms_norm(&s, array![[3.0f32, 4.0]].view(), array![1.0f32, 1.0].view(), 1e-6).unwrap();
/// assert!((y[[0, 0]] - 3.0 / 12.5f32.sqrt()).abs() < 1e-4);
/// ```
pub fn rms_norm<T: Element, W: Element>(
    stream: &Stream,
    x: ArrayView2<'_, T>,
    gamma: ArrayView1<'_, W>,
    eps: f32,
) -> Result<Array2<T>> {
    let dev = stream.device();
    let (m, n) = x.dim();
    let xd = DeviceBuffer::from_array(dev, x)?;
    let gd = DeviceBuffer::from_array(dev, gamma)?;
    let mut y = DeviceBuffer::<T>::alloc(dev, m * n)?;
    let b = FwdBuffers {
        x: &xd,
        residual: None,
        gamma: &gd,
        beta: None,
        out: FwdOut::Y(&mut y),
        mean: None,
        rstd: None,
    };
    let call = Call::new("fly_norm::host::rms_norm");
    crate::fwd::forward(call, stream, Norm::Rms, b, NormArgs { m, n, eps })?;
    y.to_array((m, n))
}

/// LayerNorm of the rows of a host matrix.
///
/// ```
/// use ndarray::array;
/// let s = flydsl_rt::Device::sim(flydsl_rt::Target::Gfx942).stream().unwrap();
/// let y = fly_norm::host::layer_norm(&s, array![[1.0f32, 3.0]].view(), array![1.0f32, 1.0].view(), None, 1e-5).unwrap();
/// assert!((y[[0, 1]] - 1.0).abs() < 1e-3);
/// ```
pub fn layer_norm<T: Element, W: Element>(
    stream: &Stream,
    x: ArrayView2<'_, T>,
    gamma: ArrayView1<'_, W>,
    beta: Option<ArrayView1<'_, W>>,
    eps: f32,
) -> Result<Array2<T>> {
    let dev = stream.device();
    let (m, n) = x.dim();
    let xd = DeviceBuffer::from_array(dev, x)?;
    let gd = DeviceBuffer::from_array(dev, gamma)?;
    let bd = beta.map(|b| DeviceBuffer::from_array(dev, b)).transpose()?;
    let mut y = DeviceBuffer::<T>::alloc(dev, m * n)?;
    let b = FwdBuffers {
        x: &xd,
        residual: None,
        gamma: &gd,
        beta: bd.as_ref(),
        out: FwdOut::Y(&mut y),
        mean: None,
        rstd: None,
    };
    let call = Call::new("fly_norm::host::layer_norm");
    crate::fwd::forward(call, stream, Norm::Layer, b, NormArgs { m, n, eps })?;
    y.to_array((m, n))
}
