//! The general forward entry point of both norms: validation, dispatch and launch.

use crate::config::{weight_dtypes, Norm};
use crate::dispatch::{check_forward_plan, plan_forward, Plan};
use crate::kernels;
use crate::validate;
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, Element, Result, Stream};

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
    /// Added to the variance (LayerNorm) or mean square (RMSNorm): finite and at least
    /// [`MIN_EPS`](crate::MIN_EPS), the smallest normal f32 (GPUs flush subnormals to zero, so
    /// a smaller eps would act as 0).
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
        /// Per-row scales: `q * yscale ~ y`. The `yscale` of a row holding a NaN or an
        /// infinity is non-finite, and that row's `q` is unspecified (see
        /// [`layer_norm_quant`](crate::layer_norm_quant)).
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

/// The weight dtype rule of `norm` with activations `T`.
pub(crate) fn check_weights<T: Element, W: Element>(call: Call<'_>, norm: Norm) -> Result<()> {
    let allowed = weight_dtypes(norm, T::DTYPE);
    if allowed.contains(&W::DTYPE) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(call.error(
        "gamma",
        format_args!("weights of {}", W::DTYPE),
        format_args!(
            "with {} activations the weights must be {} (not supported: {} weights with {} activations)",
            T::DTYPE,
            names.join(" or "),
            W::DTYPE,
            T::DTYPE
        ),
        format_args!("pass weights of {}", names.join(" or ")),
    ))
}

/// Validate a forward call: shape, eps, weight dtype, and every buffer's device and length.
/// `Ok(false)` means there is nothing to do (`m == 0`).
fn validate<T: Element, W: Element>(
    call: Call<'_>,
    stream: &Stream,
    norm: Norm,
    b: &FwdBuffers<'_, T, W>,
    a: &NormArgs,
) -> Result<bool> {
    let mn = validate::shape(call, a.m, a.n)?;
    validate::eps(call, a.eps)?;
    check_weights::<T, W>(call, norm)?;
    call.buffer("x", b.x, stream, mn, "m * n")?;
    call.buffer("gamma", b.gamma, stream, a.n, "n")?;
    if let Some(beta) = b.beta {
        if norm == Norm::Rms {
            return Err(call.error(
                "beta",
                "a buffer",
                "RMSNorm has no bias",
                "pass beta = None",
            ));
        }
        call.buffer("beta", beta, stream, a.n, "n")?;
    }
    if let Some((r, ro)) = &b.residual {
        call.buffer("residual", r, stream, mn, "m * n")?;
        call.buffer("residual_out", ro, stream, mn, "m * n")?;
    }
    match &b.out {
        FwdOut::Y(y) => call.buffer("y", y, stream, mn, "m * n")?,
        FwdOut::Quant { q, yscale, xscale } => {
            call.buffer("q", q, stream, mn, "m * n")?;
            call.buffer("yscale", yscale, stream, a.m, "m")?;
            if let Some(xs) = xscale {
                call.buffer("xscale", xs, stream, a.n, "n")?;
            }
        }
    }
    if let Some(mean) = &b.mean {
        if norm == Norm::Rms {
            return Err(call.error(
                "mean",
                "a buffer",
                "RMSNorm has no mean output",
                "pass mean = None",
            ));
        }
        call.buffer("mean", mean, stream, a.m, "m")?;
    }
    if let Some(rstd) = &b.rstd {
        call.buffer("rstd", rstd, stream, a.m, "m")?;
    }
    Ok(a.m > 0)
}

/// Forward LayerNorm or RMSNorm with every option: validates the arguments (every buffer on
/// the stream's device with its length, the weight dtype, eps, `n >= 1`), picks the kernel
/// path for the shape and device, and launches it. `m == 0` is a no-op. A call that fails
/// leaves every output unchanged.
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
    forward(Call::new("fly_norm::norm_fwd"), stream, norm, bufs, args)
}

/// [`norm_fwd`] for the public function `call` names.
pub(crate) fn forward<T: Element, W: Element>(
    call: Call<'_>,
    stream: &Stream,
    norm: Norm,
    bufs: FwdBuffers<'_, T, W>,
    args: NormArgs,
) -> Result<()> {
    if !validate(call, stream, norm, &bufs, &args)? {
        return Ok(());
    }
    let plan = dispatch(stream, norm, &bufs, &args);
    // SAFETY: every buffer length was checked against (m, n) above, which is what the kernels
    // index with, and the dispatcher's plan fits the shape; the buffers outlive the call
    // (launches are ordered before later copies).
    unsafe { launch(call, stream, norm, bufs, args, plan) }
}

/// The dispatcher's plan of a forward call.
fn dispatch<T: Element, W: Element>(
    stream: &Stream,
    norm: Norm,
    bufs: &FwdBuffers<'_, T, W>,
    args: &NormArgs,
) -> Plan {
    let dev = stream.device();
    let quant = matches!(bufs.out, FwdOut::Quant { .. });
    plan_forward(
        norm,
        args.m,
        args.n,
        T::DTYPE,
        quant,
        dev.wave_size(),
        dev.compute_units(),
    )
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
    let plan = dispatch(stream, norm, &bufs, &args);
    let call = Call::new("fly_norm::norm_fwd_unchecked");
    // SAFETY: forwarded from this function's contract; the dispatcher's plan fits the shape.
    unsafe { launch(call, stream, norm, bufs, args, plan) }
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
/// let plan = forward_plans(m, n, fly_norm::DType::F32, false, dev.wave_size())
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
    let call = Call::new("fly_norm::norm_fwd_with_plan");
    if !validate(call, stream, norm, &bufs, &args)? {
        return Ok(());
    }
    let quant = matches!(bufs.out, FwdOut::Quant { .. });
    let wave = stream.device().wave_size();
    if let Some(why) = check_forward_plan(&plan, args.n, T::DTYPE, quant, wave) {
        return Err(call.error(
            "plan",
            format_args!("{plan:?}"),
            why,
            "pass a plan of fly_norm::forward_plans for this shape, dtype and device",
        ));
    }
    // SAFETY: the buffers were validated against (m, n) and the plan against the shape.
    unsafe { launch(call, stream, norm, bufs, args, plan) }
}

/// Launch the forward on `plan` (after checking that the device can run its kernel).
///
/// # Safety
/// As [`norm_fwd_unchecked`], and `plan` must fit the shape (see `check_forward_plan`).
unsafe fn launch<T: Element, W: Element>(
    call: Call<'_>,
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
    let missing = || {
        call.fail(format!(
            "no {} kernel for {} activations and {} weights on path {:?}; this is a fly-norm bug",
            norm.name(),
            T::DTYPE,
            W::DTYPE,
            plan.path
        ))
    };
    match out {
        FwdOut::Y(y) => {
            let l = kernels::forward::<T, W>(norm, plan.path).ok_or_else(missing)?;
            call.kernel(stream, l.kernel)?;
            // SAFETY: forwarded from this function's contract.
            unsafe {
                (l.launch)(
                    stream, plan.cfg, x, res, res_out, gamma, beta, y, mean, rstd, m, n, eps,
                    lanes, keep_l2,
                )
            }
        }
        FwdOut::Quant { q, yscale, xscale } => {
            let no_xs = empty_f()?;
            let xs = xscale.unwrap_or(&no_xs);
            let l = kernels::forward_quant::<T, W>(norm, plan.path).ok_or_else(missing)?;
            call.kernel(stream, l.kernel)?;
            // SAFETY: forwarded from this function's contract.
            unsafe {
                (l.launch)(
                    stream, plan.cfg, x, res, res_out, gamma, beta, q, yscale, xs, mean, rstd, m,
                    n, eps, lanes, keep_l2,
                )
            }
        }
    }
}
