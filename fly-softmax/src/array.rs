//! `ndarray` conveniences: copy in, compute on the stream's device, copy out.

use crate::api::{backward, forward, SoftmaxArgs};
use crate::select::Dispatch;
use flydsl_rt::tune::Tuner;
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, Element, Result, Stream};
use ndarray::{Array2, ArrayView2};

/// Softmax over the rows of a 2-D array (any layout; a copy is made on the host if it is not
/// row-major contiguous).
///
/// ```
/// use flydsl_rt::{Device, Target};
/// let s = Device::sim(Target::Gfx942).stream()?;
/// let x = ndarray::arr2(&[[0.0f32, 0.0], [1.0, 1.0]]);
/// let y = fly_softmax::softmax_array(&s, x.view())?;
/// assert_eq!(y, ndarray::arr2(&[[0.5f32, 0.5], [0.5, 0.5]]));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn softmax_array<T: Element>(stream: &Stream, x: ArrayView2<'_, T>) -> Result<Array2<T>> {
    let (m, n) = x.dim();
    let dev = stream.device();
    let xd = DeviceBuffer::from_array(dev, x)?;
    let mut yd = DeviceBuffer::<T>::alloc(dev, m * n)?;
    forward(
        Call::new("fly_softmax::softmax_array"),
        stream,
        &xd,
        &mut yd,
        SoftmaxArgs { m, n },
        Dispatch::Tuned(Tuner::global()),
    )?;
    yd.to_array((m, n))
}

/// Softmax backward over the rows of 2-D arrays `y` and `dy` of one shape.
///
/// ```
/// use flydsl_rt::{Device, Target};
/// let s = Device::sim(Target::Gfx942).stream()?;
/// let y = ndarray::arr2(&[[0.5f32, 0.5]]);
/// let dy = ndarray::arr2(&[[1.0f32, -1.0]]);
/// let dx = fly_softmax::softmax_backward_array(&s, y.view(), dy.view())?;
/// assert_eq!(dx, ndarray::arr2(&[[0.5f32, -0.5]]));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn softmax_backward_array<T: Element>(
    stream: &Stream,
    y: ArrayView2<'_, T>,
    dy: ArrayView2<'_, T>,
) -> Result<Array2<T>> {
    let call = Call::new("fly_softmax::softmax_backward_array");
    if y.dim() != dy.dim() {
        return Err(call.error(
            "dy",
            format_args!("an array of shape {:?}", dy.dim()),
            format_args!("`y` has shape {:?}; they must have one shape", y.dim()),
            "pass arrays of one shape",
        ));
    }
    let (m, n) = y.dim();
    let dev = stream.device();
    let yd = DeviceBuffer::from_array(dev, y)?;
    let dyd = DeviceBuffer::from_array(dev, dy)?;
    let mut dxd = DeviceBuffer::<T>::alloc(dev, m * n)?;
    backward(
        call,
        stream,
        &yd,
        &dyd,
        &mut dxd,
        SoftmaxArgs { m, n },
        Dispatch::Tuned(Tuner::global()),
    )?;
    dxd.to_array((m, n))
}
