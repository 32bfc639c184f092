//! The general forward entry point of both norms: validation, dispatch and launch.

use crate::config::{weight_dtypes, Family, Kind, Norm};
use crate::dispatch::{check_forward_plan, plan_forward, Plan};
use crate::error::{self, invalid};
use crate::kernels::{fwd_launcher, fwd_quant_launcher};
use crate::Element;
use flydsl_rt::{DeviceBuffer, Result, Stream};

/// Shape and epsilon of a forward call (default eps 1e-5).
///
/// ```
/// let a = fly_norm::NormArgs { m: 4, n: 1024, ..Default::default() };
/// assert_eq!(a.eps, 1e-5);
/// assert_eq!(fly_norm::NormArgs::new(4, 1024), a);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NormArgs {
    /// Rows (any, 0 is a no-op).
    pub m: usize,
    /// Elements per row (>= 1).
    pub n: usize,
    /// Added to the variance (LayerNorm) or mean square (RMSNorm); finite and > 0.
    pub eps: f32,
}

impl Default for NormArgs {
    fn default() -> Self {
        NormArgs {
            m: 0,
            n: 0,
            eps: 1e-5,
        }
    }
}

impl NormArgs {
    /// `m` rows of `n` with eps 1e-5.
    ///
    /// ```
    /// let a = fly_norm::NormArgs::new(2, 64);
    /// assert_eq!((a.m, a.n, a.eps), (2, 64, 1e-5));
    /// ```
    pub fn new(m: usize, n: usize) -> NormArgs {
        NormArgs {
            m,
            n,
            ..Default::default()
        }
    }
}

/// What a forward call writes: the normalised rows, or their dynamic / smooth int8 quant.
///
/// ```
/// use fly_norm::FwdOut;
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Sm90);
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, 8).unwrap();
/// let plain = FwdOut::Y(&mut y);
/// assert!(matches!(plain, FwdOut::Y(_)));
/// let (mut q, mut ys) = (DeviceBuffer::<i8>::zeroed(&dev, 8).unwrap(), DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap());
/// let dynamic: FwdOut<'_, f32> = FwdOut::Quant { q: &mut q, yscale: &mut ys, xscale: None };
/// assert!(matches!(dynamic, FwdOut::Quant { xscale: None, .. }));
/// ```
#[derive(Debug)]
pub enum FwdOut<'a, T: Element> {
    /// `y` `[m, n]` in the activation dtype.
    Y(&'a mut DeviceBuffer<T>),
    /// `q` `[m, n]` int8 and `yscale` `[m]` f32; `xscale` `[n]` f32 (smooth quant) multiplies y
    /// before the per-row scale is taken.
    Quant {
        /// int8 output.
        q: &'a mut DeviceBuffer<i8>,
        /// Per-row scales: `q * yscale ~ y`.
        yscale: &'a mut DeviceBuffer<f32>,
        /// Per-column smoothing scales, or `None` for dynamic quant.
        xscale: Option<&'a DeviceBuffer<f32>>,
    },
}

/// The buffers of a forward call (see [`norm_fwd`]).
///
/// ```
/// use fly_norm::{norm_fwd, FwdBuffers, FwdOut, Norm, NormArgs};
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Sm90);
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 3.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let mut mean = DeviceBuffer::<f32>::zeroed(&dev, 1).unwrap();
/// // LayerNorm without bias, writing the row mean.
/// let b = FwdBuffers { x: &x, residual: None, gamma: &g, beta: None, out: FwdOut::Y(&mut y), mean: Some(&mut mean), rstd: None };
/// norm_fwd(&s, Norm::Layer, b, NormArgs::new(1, 2)).unwrap();
/// assert_eq!(mean.to_vec().unwrap(), vec![2.0]);
/// ```
#[derive(Debug)]
pub struct FwdBuffers<'a, T: Element, W: Element> {
    /// Input `[m, n]`.
    pub x: &'a DeviceBuffer<T>,
    /// Fused add: `(residual `[m, n]`, residual_out `[m, n]`)`; the kernel normalises
    /// `r = x + residual` (rounded to `T`) and writes `r` to `residual_out`.
    pub residual: Option<(&'a DeviceBuffer<T>, &'a mut DeviceBuffer<T>)>,
    /// Scale `[n]`.
    pub gamma: &'a DeviceBuffer<W>,
    /// LayerNorm bias `[n]` (`None`: no bias; RMSNorm must pass `None`).
    pub beta: Option<&'a DeviceBuffer<W>>,
    /// Output.
    pub out: FwdOut<'a, T>,
    /// Per-row mean `[m]` f32 (LayerNorm only).
    pub mean: Option<&'a mut DeviceBuffer<f32>>,
    /// Per-row rstd `[m]` f32.
    pub rstd: Option<&'a mut DeviceBuffer<f32>>,
}

fn op(norm: Norm) -> &'static str {
    match norm {
        Norm::Layer => "layer_norm",
        Norm::Rms => "rms_norm",
    }
}

/// Validate a forward call; `Ok(false)` means there is nothing to do (`m == 0`).
fn validate<T: Element, W: Element>(
    norm: Norm,
    b: &FwdBuffers<'_, T, W>,
    a: &NormArgs,
) -> Result<bool> {
    let op = op(norm);
    let mn = error::shape(op, a.m, a.n)?;
    error::eps(op, a.eps)?;
    if !weight_dtypes(norm, T::DTYPE).contains(&W::DTYPE) {
        return Err(invalid(
            op,
            format!(
                "weights of {:?} with activations of {:?} are not supported; use {:?} weights{}",
                W::DTYPE,
                T::DTYPE,
                T::DTYPE,
                if norm == Norm::Rms && T::DTYPE != crate::Dtype::F32 {
                    " or f32 weights"
                } else {
                    ""
                }
            ),
        ));
    }
    error::len(op, "x", b.x, mn, "m * n")?;
    error::len(op, "gamma", b.gamma, a.n, "n")?;
    if let Some(beta) = b.beta {
        if norm == Norm::Rms {
            return Err(invalid(op, "RMSNorm has no bias: pass beta = None".into()));
        }
        error::len(op, "beta", beta, a.n, "n")?;
    }
    if let Some((r, ro)) = &b.residual {
        error::len(op, "residual", r, mn, "m * n")?;
        error::len(op, "residual_out", ro, mn, "m * n")?;
    }
    match &b.out {
        FwdOut::Y(y) => error::len(op, "y", y, mn, "m * n")?,
        FwdOut::Quant { q, yscale, xscale } => {
            error::len(op, "q", q, mn, "m * n")?;
            error::len(op, "yscale", yscale, a.m, "m")?;
            if let Some(xs) = xscale {
                error::len(op, "xscale", xs, a.n, "n")?;
            }
        }
    }
    if let Some(mean) = &b.mean {
        if norm == Norm::Rms {
            return Err(invalid(
                op,
                "RMSNorm has no mean output: pass mean = None".into(),
            ));
        }
        error::len(op, "mean", mean, a.m, "m")?;
    }
    if let Some(rstd) = &b.rstd {
        error::len(op, "rstd", rstd, a.m, "m")?;
    }
    Ok(a.m > 0)
}

/// Forward LayerNorm or RMSNorm with every option: validates the buffers (lengths, weight
/// dtype, eps, n >= 1), picks the kernel path for the shape and device, and launches it.
/// `m == 0` is a no-op.
///
/// ```
/// use fly_norm::{norm_fwd, FwdBuffers, FwdOut, Norm, NormArgs};
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
/// let mut rstd = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let bufs = FwdBuffers { x: &x, residual: None, gamma: &g, beta: None, out: FwdOut::Y(&mut y), mean: None, rstd: Some(&mut rstd) };
/// norm_fwd(&s, Norm::Rms, bufs, NormArgs::new(2, 2)).unwrap();
/// let r = rstd.to_vec().unwrap();
/// assert!((r[0] - 1.0 / 2.5f32.sqrt()).abs() < 1e-5);
/// ```
pub fn norm_fwd<T: Element, W: Element>(
    stream: &Stream,
    norm: Norm,
    bufs: FwdBuffers<'_, T, W>,
    args: NormArgs,
) -> Result<()> {
    if !validate(norm, &bufs, &args)? {
        return Ok(());
    }
    // SAFETY: every buffer length was checked against (m, n) above, which is what the kernels
    // index with; the buffers outlive the call (launches are ordered before later copies).
    unsafe { norm_fwd_unchecked(stream, norm, bufs, args) }
}

/// [`norm_fwd`] without validation.
///
/// # Safety
/// The buffer lengths must match `args` as [`norm_fwd`] checks (x, y, q, residuals: m * n;
/// gamma, beta, xscale: n; mean, rstd, yscale: m), `n >= 1`, `m <= `[`crate::MAX_ROWS`],
/// `n <= `[`crate::MAX_COLS`], and the weight dtype must be allowed for the norm; otherwise
/// the kernel reads or writes out of bounds.
///
/// ```
/// use fly_norm::{norm_fwd_unchecked, FwdBuffers, FwdOut, Norm, NormArgs};
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[3.0f32, -3.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let bufs = FwdBuffers { x: &x, residual: None, gamma: &g, beta: None, out: FwdOut::Y(&mut y), mean: None, rstd: None };
/// // SAFETY: x and y hold m * n = 2 elements, gamma n = 2.
/// unsafe { norm_fwd_unchecked(&s, Norm::Layer, bufs, NormArgs::new(1, 2)) }.unwrap();
/// let y = y.to_vec().unwrap();
/// assert!((y[0] - 1.0).abs() < 1e-3 && (y[1] + 1.0).abs() < 1e-3);
/// ```
pub unsafe fn norm_fwd_unchecked<T: Element, W: Element>(
    stream: &Stream,
    norm: Norm,
    bufs: FwdBuffers<'_, T, W>,
    args: NormArgs,
) -> Result<()> {
    if args.m == 0 {
        return Ok(());
    }
    let dev = stream.device();
    let quant = matches!(bufs.out, FwdOut::Quant { .. });
    let plan = plan_forward(
        args.m,
        args.n,
        T::DTYPE,
        quant,
        dev.wave_size(),
        dev.compute_units(),
    );
    // SAFETY: forwarded from this function's contract; the dispatcher's plan fits the shape.
    unsafe { launch(stream, norm, bufs, args, plan) }
}

/// [`norm_fwd`] on an explicit [`Plan`] instead of the dispatcher's, for benchmarks and tuning
/// (`examples/fwd_sweep.rs` times every plan of [`forward_plans`](crate::forward_plans)); not
/// a stable API. Validates the buffers as [`norm_fwd`] does, and the plan against the shape,
/// dtype and the device's wave size: the path must exist for the family, the 1-D block be a
/// multiple of the wave size within the path's launch bound and cover a row (fast path) or
/// hold a row in its lane groups (multi-row path), the grid have 1..=2^20 blocks (fewer blocks
/// than rows loop over the rows). An invalid plan is an error naming the fix, never a launch.
///
/// ```
/// use fly_norm::{forward_plans, norm_fwd_with_plan, FwdBuffers, FwdOut, Norm, NormArgs, Path};
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let (m, n) = (3, 256);
/// let x = DeviceBuffer::from_slice(&dev, &vec![1.0f32; m * n]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &vec![1.0f32; n]).unwrap();
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, m * n).unwrap();
/// let plan = forward_plans(m, n, fly_norm::Dtype::F32, false, dev.wave_size())
///     .into_iter()
///     .find(|p| p.path == Path::Fast(8))
///     .unwrap();
/// let bufs = FwdBuffers { x: &x, residual: None, gamma: &g, beta: None, out: FwdOut::Y(&mut y), mean: None, rstd: None };
/// norm_fwd_with_plan(&s, Norm::Rms, bufs, NormArgs::new(m, n), plan).unwrap();
/// assert!(y.to_vec().unwrap().iter().all(|&v| (v - 1.0).abs() < 1e-3));
/// // A block that is not a whole number of waves is refused.
/// let mut bad = plan;
/// bad.cfg.block[0] = dev.wave_size() + 1;
/// let bufs = FwdBuffers { x: &x, residual: None, gamma: &g, beta: None, out: FwdOut::Y(&mut y), mean: None, rstd: None };
/// assert!(norm_fwd_with_plan(&s, Norm::Rms, bufs, NormArgs::new(m, n), bad).is_err());
/// ```
#[doc(hidden)]
pub fn norm_fwd_with_plan<T: Element, W: Element>(
    stream: &Stream,
    norm: Norm,
    bufs: FwdBuffers<'_, T, W>,
    args: NormArgs,
    plan: Plan,
) -> Result<()> {
    if !validate(norm, &bufs, &args)? {
        return Ok(());
    }
    let quant = matches!(bufs.out, FwdOut::Quant { .. });
    let wave = stream.device().wave_size();
    if let Some(why) = check_forward_plan(&plan, args.n, T::DTYPE, quant, wave) {
        return Err(invalid(op(norm), format!("plan {plan:?}: {why}")));
    }
    // SAFETY: the buffers were validated against (m, n) and the plan against the shape.
    unsafe { launch(stream, norm, bufs, args, plan) }
}

/// Launch the forward on `plan`.
///
/// # Safety
/// As [`norm_fwd_unchecked`], and `plan` must fit the shape (see `check_forward_plan`).
unsafe fn launch<T: Element, W: Element>(
    stream: &Stream,
    norm: Norm,
    bufs: FwdBuffers<'_, T, W>,
    args: NormArgs,
    plan: Plan,
) -> Result<()> {
    let dev = stream.device();
    let empty_t = || DeviceBuffer::<T>::alloc(dev, 0);
    let empty_f = || DeviceBuffer::<f32>::alloc(dev, 0);
    let (no_res, mut no_res_out) = (empty_t()?, empty_t()?);
    let no_beta = DeviceBuffer::<W>::alloc(dev, 0)?;
    let (mut no_mean, mut no_rstd) = (empty_f()?, empty_f()?);
    let FwdBuffers {
        x,
        residual,
        gamma,
        beta,
        out,
        mean,
        rstd,
    } = bufs;
    let (res, res_out) = match residual {
        Some((r, ro)) => (r, ro),
        None => (&no_res, &mut no_res_out),
    };
    let beta = beta.unwrap_or(&no_beta);
    let mean = mean.unwrap_or(&mut no_mean);
    let rstd = rstd.unwrap_or(&mut no_rstd);
    let (m, n, eps, lanes) = (args.m as i32, args.n as i32, args.eps, plan.lanes as i32);
    let keep_l2 = flydsl_rt::hints::keep_l2_override().unwrap_or(plan.keep_l2) as i32;
    let kind = match out {
        FwdOut::Y(_) => Kind::Fwd,
        FwdOut::Quant { .. } => Kind::FwdQuant,
    };
    let fam = Family {
        norm,
        kind,
        dt: T::DTYPE,
        wdt: W::DTYPE,
    };
    let missing = || {
        invalid(
            op(norm),
            format!(
                "no kernel for {fam:?} on path {:?}; this is a fly-norm bug",
                plan.path
            ),
        )
    };
    match out {
        FwdOut::Y(y) => {
            let f = fwd_launcher::<T, W>(fam, plan.path).ok_or_else(missing)?;
            // SAFETY: forwarded from this function's contract.
            unsafe {
                f(
                    stream, plan.cfg, x, res, res_out, gamma, beta, y, mean, rstd, m, n, eps,
                    lanes, keep_l2,
                )
            }
        }
        FwdOut::Quant { q, yscale, xscale } => {
            let no_xs = empty_f()?;
            let xs = xscale.unwrap_or(&no_xs);
            let f = fwd_quant_launcher::<T, W>(fam, plan.path).ok_or_else(missing)?;
            // SAFETY: forwarded from this function's contract.
            unsafe {
                f(
                    stream, plan.cfg, x, res, res_out, gamma, beta, q, yscale, xs, mean, rstd, m,
                    n, eps, lanes, keep_l2,
                )
            }
        }
    }
}
