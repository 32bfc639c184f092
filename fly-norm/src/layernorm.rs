//! LayerNorm: `y = (x - mean) * rstd * gamma + beta` per row, `rstd = rsqrt(var + eps)` with
//! the biased variance `E[x^2] - mean^2` (clamped at 0), accumulated in f32.

use crate::{BwdBuffers, FwdBuffers, FwdOut, Norm, NormArgs, NormBwdArgs};
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, Element, Result, Stream};

/// LayerNorm forward: `y = layer_norm(x) * gamma (+ beta)`.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 3.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[2.0f32, 2.0]).unwrap();
/// let b = DeviceBuffer::from_slice(&dev, &[0.5f32, 0.5]).unwrap();
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// fly_norm::layer_norm(&s, &x, &g, Some(&b), &mut y, fly_norm::NormArgs::new(1, 2)).unwrap();
/// let y = y.to_vec().unwrap();
/// assert!((y[0] + 1.5).abs() < 1e-3 && (y[1] - 2.5).abs() < 1e-3);
/// ```
pub fn layer_norm<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    beta: Option<&DeviceBuffer<W>>,
    y: &mut DeviceBuffer<T>,
    args: NormArgs,
) -> Result<()> {
    let b = FwdBuffers {
        x,
        residual: None,
        gamma,
        beta,
        out: FwdOut::Y(y),
        mean: None,
        rstd: None,
    };
    crate::fwd::forward(
        Call::new("fly_norm::layer_norm"),
        stream,
        Norm::Layer,
        b,
        args,
    )
}

/// LayerNorm forward that also writes the per-row `mean` and `rstd` (f32 `[m]`) for backward.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 3.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let (mut y, mut mean, mut rstd) = (DeviceBuffer::zeroed(&dev, 2).unwrap(), DeviceBuffer::zeroed(&dev, 1).unwrap(), DeviceBuffer::zeroed(&dev, 1).unwrap());
/// fly_norm::layer_norm_stats(&s, &x, &g, None, &mut y, &mut mean, &mut rstd, fly_norm::NormArgs::new(1, 2)).unwrap();
/// assert_eq!(mean.to_vec().unwrap(), vec![2.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_stats<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    beta: Option<&DeviceBuffer<W>>,
    y: &mut DeviceBuffer<T>,
    mean: &mut DeviceBuffer<f32>,
    rstd: &mut DeviceBuffer<f32>,
    args: NormArgs,
) -> Result<()> {
    let b = FwdBuffers {
        x,
        residual: None,
        gamma,
        beta,
        out: FwdOut::Y(y),
        mean: Some(mean),
        rstd: Some(rstd),
    };
    crate::fwd::forward(
        Call::new("fly_norm::layer_norm_stats"),
        stream,
        Norm::Layer,
        b,
        args,
    )
}

/// Fused add + LayerNorm: `r = x + residual` (rounded to `T`) is written to `residual_out`
/// and normalised into `y`.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0]).unwrap();
/// let r = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let (mut y, mut ro) = (DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap());
/// fly_norm::layer_norm_add(&s, &x, &r, &g, None, &mut y, &mut ro, fly_norm::NormArgs::new(1, 2)).unwrap();
/// assert_eq!(ro.to_vec().unwrap(), vec![2.0, 4.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_add<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    residual: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    beta: Option<&DeviceBuffer<W>>,
    y: &mut DeviceBuffer<T>,
    residual_out: &mut DeviceBuffer<T>,
    args: NormArgs,
) -> Result<()> {
    let b = FwdBuffers {
        x,
        residual: Some((residual, residual_out)),
        gamma,
        beta,
        out: FwdOut::Y(y),
        mean: None,
        rstd: None,
    };
    crate::fwd::forward(
        Call::new("fly_norm::layer_norm_add"),
        stream,
        Norm::Layer,
        b,
        args,
    )
}

/// LayerNorm + int8 quant: `yscale[m] = rowmax|y'| / 127` (0 -> 1),
/// `q = trunc(y' / yscale)` clamped to [-127, 127], where `y' = y * xscale` (smooth quant) or
/// `y` (dynamic quant, `xscale = None`).
///
/// Non-finite rows: the `yscale` of a row whose `y'` holds a NaN or an infinity (from a NaN or
/// infinity in `x`, `residual`, the weights or `xscale`) is non-finite (NaN or inf), and that
/// row's `q` is unspecified; a finite `yscale` means the row was finite. Check `yscale` to find
/// such rows (a real all-zero row has `yscale` 1 and `q` 0).
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 3.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let (mut q, mut ys) = (DeviceBuffer::<i8>::zeroed(&dev, 2).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 1).unwrap());
/// fly_norm::layer_norm_quant(&s, &x, &g, None, None, &mut q, &mut ys, fly_norm::NormArgs::new(1, 2)).unwrap();
/// let q = q.to_vec().unwrap();
/// assert!(q[0] <= -126 && q[1] >= 126);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_quant<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    beta: Option<&DeviceBuffer<W>>,
    xscale: Option<&DeviceBuffer<f32>>,
    q: &mut DeviceBuffer<i8>,
    yscale: &mut DeviceBuffer<f32>,
    args: NormArgs,
) -> Result<()> {
    let out = FwdOut::Quant { q, yscale, xscale };
    let b = FwdBuffers {
        x,
        residual: None,
        gamma,
        beta,
        out,
        mean: None,
        rstd: None,
    };
    crate::fwd::forward(
        Call::new("fly_norm::layer_norm_quant"),
        stream,
        Norm::Layer,
        b,
        args,
    )
}

/// Fused add + LayerNorm + int8 quant (see [`layer_norm_add`] and [`layer_norm_quant`]).
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 3.0]).unwrap();
/// let r = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let mut ro = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let (mut q, mut ys) = (DeviceBuffer::<i8>::zeroed(&dev, 2).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 1).unwrap());
/// fly_norm::layer_norm_add_quant(&s, &x, &r, &g, None, None, &mut q, &mut ys, &mut ro, fly_norm::NormArgs::new(1, 2)).unwrap();
/// assert_eq!(ro.to_vec().unwrap(), vec![1.0, 3.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_add_quant<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    residual: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    beta: Option<&DeviceBuffer<W>>,
    xscale: Option<&DeviceBuffer<f32>>,
    q: &mut DeviceBuffer<i8>,
    yscale: &mut DeviceBuffer<f32>,
    residual_out: &mut DeviceBuffer<T>,
    args: NormArgs,
) -> Result<()> {
    let out = FwdOut::Quant { q, yscale, xscale };
    let b = FwdBuffers {
        x,
        residual: Some((residual, residual_out)),
        gamma,
        beta,
        out,
        mean: None,
        rstd: None,
    };
    crate::fwd::forward(
        Call::new("fly_norm::layer_norm_add_quant"),
        stream,
        Norm::Layer,
        b,
        args,
    )
}

/// LayerNorm backward: `dx`, `dgamma` and `dbeta` from `x`, `gamma`, `dy` and the forward's
/// `mean` / `rstd` (see [`layer_norm_stats`]).
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 3.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let dy = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let (mean, rstd) = (DeviceBuffer::from_slice(&dev, &[2.0f32]).unwrap(), DeviceBuffer::from_slice(&dev, &[1.0f32]).unwrap());
/// let mut dx = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let (mut dg, mut db) = (DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap());
/// fly_norm::layer_norm_bwd(&s, &x, &g, &dy, &mean, &rstd, &mut dx, &mut dg, &mut db, fly_norm::NormBwdArgs::new(1, 2)).unwrap();
/// assert_eq!(dg.to_vec().unwrap(), vec![-1.0, 1.0]);
/// assert_eq!(db.to_vec().unwrap(), vec![1.0, 1.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    dy: &DeviceBuffer<T>,
    mean: &DeviceBuffer<f32>,
    rstd: &DeviceBuffer<f32>,
    dx: &mut DeviceBuffer<T>,
    dgamma: &mut DeviceBuffer<W>,
    dbeta: &mut DeviceBuffer<W>,
    args: NormBwdArgs,
) -> Result<()> {
    let b = BwdBuffers {
        x,
        gamma,
        dy,
        mean: Some(mean),
        rstd,
        dresidual: None,
        dx,
        dgamma,
        dbeta: Some(dbeta),
    };
    crate::bwd::backward(
        Call::new("fly_norm::layer_norm_bwd"),
        stream,
        Norm::Layer,
        b,
        args,
    )
}
