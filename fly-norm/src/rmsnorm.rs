//! RMSNorm: `y = x * rsqrt(mean(x^2) + eps) * gamma` per row, accumulated in f32. Weights are
//! of the activation dtype, or f32 with f16 / bf16 activations.

use crate::{BwdBuffers, FwdBuffers, FwdOut, Norm, NormArgs, NormBwdArgs};
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, Element, Result, Stream};

/// Arguments of the RMSNorm forward functions (the same as LayerNorm's: `m`, `n`, `eps`).
///
/// ```
/// let a = fly_norm::RmsNormArgs { m: 4, n: 128, eps: 1e-6 };
/// assert_eq!(a, fly_norm::RmsNormArgs { eps: 1e-6, ..fly_norm::RmsNormArgs::new(4, 128) });
/// ```
pub type RmsNormArgs = NormArgs;

/// RMSNorm forward.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// use half::bf16;
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[bf16::from_f32(3.0), bf16::from_f32(4.0)]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap(); // f32 weights
/// let mut y = DeviceBuffer::<bf16>::zeroed(&dev, 2).unwrap();
/// fly_norm::rms_norm(&s, &x, &g, &mut y, fly_norm::RmsNormArgs { m: 1, n: 2, eps: 1e-6 }).unwrap();
/// let y = y.to_vec().unwrap();
/// assert!((y[1].to_f32() - 4.0 / 12.5f32.sqrt()).abs() < 1e-2);
/// ```
pub fn rms_norm<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    y: &mut DeviceBuffer<T>,
    args: RmsNormArgs,
) -> Result<()> {
    let b = FwdBuffers {
        x,
        residual: None,
        gamma,
        beta: None,
        out: FwdOut::Y(y),
        mean: None,
        rstd: None,
    };
    crate::fwd::forward(Call::new("fly_norm::rms_norm"), stream, Norm::Rms, b, args)
}

/// RMSNorm forward that also writes the per-row `rstd` (f32 `[m]`) for backward.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[2.0f32, 2.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let (mut y, mut rstd) = (DeviceBuffer::zeroed(&dev, 2).unwrap(), DeviceBuffer::zeroed(&dev, 1).unwrap());
/// fly_norm::rms_norm_rstd(&s, &x, &g, &mut y, &mut rstd, fly_norm::RmsNormArgs::new(1, 2)).unwrap();
/// assert!((rstd.to_vec().unwrap()[0] - 0.5).abs() < 1e-5);
/// ```
pub fn rms_norm_rstd<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    y: &mut DeviceBuffer<T>,
    rstd: &mut DeviceBuffer<f32>,
    args: RmsNormArgs,
) -> Result<()> {
    let b = FwdBuffers {
        x,
        residual: None,
        gamma,
        beta: None,
        out: FwdOut::Y(y),
        mean: None,
        rstd: Some(rstd),
    };
    crate::fwd::forward(
        Call::new("fly_norm::rms_norm_rstd"),
        stream,
        Norm::Rms,
        b,
        args,
    )
}

/// Fused add + RMSNorm (prenorm): `r = x + residual` (rounded to `T`) is written to
/// `residual_out` and normalised into `y`.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let r = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let (mut y, mut ro) = (DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap());
/// fly_norm::rms_norm_add(&s, &x, &r, &g, &mut y, &mut ro, fly_norm::RmsNormArgs::new(1, 2)).unwrap();
/// assert_eq!(ro.to_vec().unwrap(), vec![2.0, 2.0]);
/// ```
pub fn rms_norm_add<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    residual: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    y: &mut DeviceBuffer<T>,
    residual_out: &mut DeviceBuffer<T>,
    args: RmsNormArgs,
) -> Result<()> {
    let b = FwdBuffers {
        x,
        residual: Some((residual, residual_out)),
        gamma,
        beta: None,
        out: FwdOut::Y(y),
        mean: None,
        rstd: None,
    };
    crate::fwd::forward(
        Call::new("fly_norm::rms_norm_add"),
        stream,
        Norm::Rms,
        b,
        args,
    )
}

/// RMSNorm + int8 quant (dynamic, or smooth with `xscale`; see
/// [`layer_norm_quant`](crate::layer_norm_quant)).
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, -2.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let (mut q, mut ys) = (DeviceBuffer::<i8>::zeroed(&dev, 2).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 1).unwrap());
/// fly_norm::rms_norm_quant(&s, &x, &g, None, &mut q, &mut ys, fly_norm::RmsNormArgs::new(1, 2)).unwrap();
/// assert!(q.to_vec().unwrap()[1] <= -126); // -127 up to the rounding of y / yscale
/// ```
pub fn rms_norm_quant<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    xscale: Option<&DeviceBuffer<f32>>,
    q: &mut DeviceBuffer<i8>,
    yscale: &mut DeviceBuffer<f32>,
    args: RmsNormArgs,
) -> Result<()> {
    let out = FwdOut::Quant { q, yscale, xscale };
    let b = FwdBuffers {
        x,
        residual: None,
        gamma,
        beta: None,
        out,
        mean: None,
        rstd: None,
    };
    crate::fwd::forward(
        Call::new("fly_norm::rms_norm_quant"),
        stream,
        Norm::Rms,
        b,
        args,
    )
}

/// Fused add + RMSNorm + int8 quant.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, -2.0]).unwrap();
/// let r = DeviceBuffer::from_slice(&dev, &[1.0f32, 0.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let mut ro = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let (mut q, mut ys) = (DeviceBuffer::<i8>::zeroed(&dev, 2).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 1).unwrap());
/// fly_norm::rms_norm_add_quant(&s, &x, &r, &g, None, &mut q, &mut ys, &mut ro, fly_norm::RmsNormArgs::new(1, 2)).unwrap();
/// let q = q.to_vec().unwrap();
/// assert!(q[0] >= 126 && q[1] <= -126);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_add_quant<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    residual: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    xscale: Option<&DeviceBuffer<f32>>,
    q: &mut DeviceBuffer<i8>,
    yscale: &mut DeviceBuffer<f32>,
    residual_out: &mut DeviceBuffer<T>,
    args: RmsNormArgs,
) -> Result<()> {
    let out = FwdOut::Quant { q, yscale, xscale };
    let b = FwdBuffers {
        x,
        residual: Some((residual, residual_out)),
        gamma,
        beta: None,
        out,
        mean: None,
        rstd: None,
    };
    crate::fwd::forward(
        Call::new("fly_norm::rms_norm_add_quant"),
        stream,
        Norm::Rms,
        b,
        args,
    )
}

/// RMSNorm backward: `dx` and `dgamma` from `x`, `gamma`, `dy` and the forward's `rstd`;
/// `dresidual` (fused-add backward) is added to `dx`. The strategy (f32 atomics or the
/// deterministic two-stage sum) follows `args.strategy`.
///
/// After a fused-add (prenorm) forward `r = x + residual`, `y = rmsnorm(r)`: pass `r` (the
/// forward's `residual_out`) as `x`, the forward's `rstd` (from [`norm_fwd`](crate::norm_fwd) with both
/// `residual` and `rstd` set), and as `dresidual` the gradient reaching `residual_out` from
/// its other uses; `dx` is then the gradient of both the forward's `x` and its `residual`.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, -1.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let dy = DeviceBuffer::from_slice(&dev, &[0.0f32, 0.0]).unwrap();
/// let rstd = DeviceBuffer::from_slice(&dev, &[1.0f32]).unwrap();
/// let dres = DeviceBuffer::from_slice(&dev, &[5.0f32, 6.0]).unwrap();
/// let (mut dx, mut dg) = (DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap());
/// fly_norm::rms_norm_bwd(&s, &x, &g, &dy, &rstd, Some(&dres), &mut dx, &mut dg, fly_norm::NormBwdArgs::new(1, 2)).unwrap();
/// assert_eq!(dx.to_vec().unwrap(), vec![5.0, 6.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_bwd<T: Element, W: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    gamma: &DeviceBuffer<W>,
    dy: &DeviceBuffer<T>,
    rstd: &DeviceBuffer<f32>,
    dresidual: Option<&DeviceBuffer<T>>,
    dx: &mut DeviceBuffer<T>,
    dgamma: &mut DeviceBuffer<W>,
    args: NormBwdArgs,
) -> Result<()> {
    let b = BwdBuffers {
        x,
        gamma,
        dy,
        mean: None,
        rstd,
        dresidual,
        dx,
        dgamma,
        dbeta: None,
    };
    crate::bwd::backward(
        Call::new("fly_norm::rms_norm_bwd"),
        stream,
        Norm::Rms,
        b,
        args,
    )
}
