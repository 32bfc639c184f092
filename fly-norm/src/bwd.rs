//! The general backward entry point of both norms: validation, strategy choice, the
//! per-row kernel and the deterministic column sum.

use crate::bwd_plans::check_backward_plan;
use crate::config::{Norm, Path};
use crate::dispatch::{plan_backward, ragged_rows, Plan};
use crate::fwd::check_weights;
use crate::kernels;
use crate::validate;
use flydsl_rt::validate::Call;
use flydsl_rt::{Device, DeviceBuffer, DeviceId, Element, LaunchConfig, Result, Stream, StreamId};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// How the weight gradients are summed over rows.
///
/// ```
/// use fly_norm::{BwdStrategy, Path};
/// assert_eq!(BwdStrategy::default(), BwdStrategy::Auto);
/// assert!(BwdStrategy::Auto.two_stage(1, 16384, Path::Fast(4)));
/// assert!(BwdStrategy::Auto.two_stage(512, 8192, Path::Generic));
/// assert!(!BwdStrategy::Auto.two_stage(511, 8192, Path::Generic));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BwdStrategy {
    /// Two-stage on the fast path (always); on the generic path two-stage when
    /// `m >= 512 && n <= 8192` (the reference library's rule), else atomic.
    #[default]
    Auto,
    /// Each block adds its column sums into one f32 row with f32 atomics (the summation
    /// order, and so the last bits, can vary between runs).
    Atomic,
    /// Each block writes its f32 partial row; a second kernel sums them in a fixed order
    /// (bitwise reproducible).
    TwoStage,
}

impl BwdStrategy {
    /// Whether this strategy uses the two-stage reduction for `m` rows of `n` on `path`.
    ///
    /// `Auto` takes it wherever it wins by construction: on the fast path a block's partials
    /// are its registers, written once as a row of 128-bit stores (the column sum then reads
    /// `grid * n` f32, coalesced along the row, a few percent of the backward's traffic at
    /// most), while the atomics are `vec` scalar atomics a thread whose lanes are a vector
    /// apart (they do not coalesce). On the generic path every row updates the partials
    /// element by element, where coalesced atomics win when there are few rows or long ones.
    ///
    /// ```
    /// use fly_norm::{BwdStrategy, Path};
    /// assert!(BwdStrategy::Auto.two_stage(4096, 8192, Path::Fast(2)));
    /// assert!(!BwdStrategy::Auto.two_stage(64, 8192, Path::Generic)); // few rows: atomics
    /// assert!(!BwdStrategy::Auto.two_stage(4096, 65536, Path::Generic)); // long rows: atomics
    /// assert!(BwdStrategy::TwoStage.two_stage(1, 1, Path::Generic));
    /// assert!(!BwdStrategy::Atomic.two_stage(4096, 8192, Path::Fast(2)));
    /// ```
    pub fn two_stage(self, m: usize, n: usize, path: Path) -> bool {
        match self {
            BwdStrategy::Auto => path != Path::Generic || (m >= 512 && n <= 8192),
            BwdStrategy::Atomic => false,
            BwdStrategy::TwoStage => true,
        }
    }
}

/// Shape and strategy of a backward call.
///
/// ```
/// let a = fly_norm::NormBwdArgs { m: 8, n: 64, ..Default::default() };
/// assert_eq!(a.strategy, fly_norm::BwdStrategy::Auto);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NormBwdArgs {
    /// Rows (0: the weight gradients are zero).
    pub m: usize,
    /// Elements per row (>= 1).
    pub n: usize,
    /// Reduction strategy of the weight gradients.
    pub strategy: BwdStrategy,
}

impl NormBwdArgs {
    /// `m` rows of `n`, automatic strategy.
    ///
    /// ```
    /// let a = fly_norm::NormBwdArgs::new(8, 1024);
    /// assert_eq!((a.m, a.n, a.strategy), (8, 1024, fly_norm::BwdStrategy::Auto));
    /// ```
    pub fn new(m: usize, n: usize) -> NormBwdArgs {
        NormBwdArgs {
            m,
            n,
            strategy: BwdStrategy::Auto,
        }
    }
}

/// The buffers of a backward call (see [`norm_bwd`]).
///
/// ```
/// use fly_norm::BwdBuffers;
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Sm90);
/// let one = |v: f32| DeviceBuffer::from_slice(&dev, &[v]).unwrap();
/// let (x, g, dy, rstd) = (one(2.0), one(1.0), one(1.0), one(0.5));
/// let (mut dx, mut dg) = (one(0.0), one(0.0));
/// // RMSNorm: no mean, no dbeta; dresidual only for the fused-add backward.
/// let b = BwdBuffers { x: &x, gamma: &g, dy: &dy, mean: None, rstd: &rstd, dresidual: None, dx: &mut dx, dgamma: &mut dg, dbeta: None };
/// assert!(b.mean.is_none());
/// ```
#[derive(Debug)]
pub struct BwdBuffers<'a, T: Element, W: Element> {
    /// The forward's input `[m, n]` (for fused add: its `residual_out`).
    pub x: &'a DeviceBuffer<T>,
    /// Scale `[n]`.
    pub gamma: &'a DeviceBuffer<W>,
    /// Gradient of the output `[m, n]`.
    pub dy: &'a DeviceBuffer<T>,
    /// Per-row mean `[m]` f32 from the forward (LayerNorm; RMSNorm passes `None`).
    pub mean: Option<&'a DeviceBuffer<f32>>,
    /// Per-row rstd `[m]` f32 from the forward.
    pub rstd: &'a DeviceBuffer<f32>,
    /// Fused add: gradient arriving at `residual_out` `[m, n]`, added to `dx`.
    pub dresidual: Option<&'a DeviceBuffer<T>>,
    /// Gradient of the input `[m, n]`.
    pub dx: &'a mut DeviceBuffer<T>,
    /// Gradient of gamma `[n]`.
    pub dgamma: &'a mut DeviceBuffer<W>,
    /// Gradient of beta `[n]` (LayerNorm; `None` skips it; RMSNorm passes `None`).
    pub dbeta: Option<&'a mut DeviceBuffer<W>>,
}

/// Validate a backward call: shape, weight dtype, the norm's operands, and every buffer's
/// device and length.
fn validate<T: Element, W: Element>(
    call: Call<'_>,
    stream: &Stream,
    norm: Norm,
    b: &BwdBuffers<'_, T, W>,
    a: &NormBwdArgs,
) -> Result<()> {
    let mn = validate::shape(call, a.m, a.n)?;
    check_weights::<T, W>(call, norm)?;
    call.buffer("x", b.x, stream, mn, "m * n")?;
    call.buffer("gamma", b.gamma, stream, a.n, "n")?;
    call.buffer("dy", b.dy, stream, mn, "m * n")?;
    call.buffer("rstd", b.rstd, stream, a.m, "m")?;
    call.buffer("dx", b.dx, stream, mn, "m * n")?;
    call.buffer("dgamma", b.dgamma, stream, a.n, "n")?;
    match (norm, b.mean) {
        (Norm::Layer, Some(mean)) => call.buffer("mean", mean, stream, a.m, "m")?,
        (Norm::Layer, None) => {
            return Err(call.error(
                "mean",
                "None",
                "the LayerNorm backward needs the forward's per-row mean",
                "pass the mean written by layer_norm_stats",
            ))
        }
        (Norm::Rms, Some(_)) => {
            return Err(call.error(
                "mean",
                "a buffer",
                "RMSNorm has no mean",
                "pass mean = None",
            ))
        }
        (Norm::Rms, None) => {}
    }
    if let Some(db) = &b.dbeta {
        if norm == Norm::Rms {
            return Err(call.error(
                "dbeta",
                "a buffer",
                "RMSNorm has no bias",
                "pass dbeta = None",
            ));
        }
        call.buffer("dbeta", db, stream, a.n, "n")?;
    }
    if let Some(dr) = b.dresidual {
        call.buffer("dresidual", dr, stream, mn, "m * n")?;
    }
    Ok(())
}

/// Backward LayerNorm or RMSNorm: `dx`, `dgamma` (and LayerNorm's `dbeta`) from `x`, `gamma`,
/// `dy` and the forward's per-row statistics. Weight gradients are summed in f32 and written
/// in the weight dtype. Uses a cached f32 workspace per device (allocated or grown on the
/// first calls) and does not wait for the kernels, except that a call on another stream than
/// the device's previous backward call first waits for the device (the streams share the
/// workspace). A call that fails leaves every output unchanged: all arguments (devices,
/// lengths, operands) and the kernels' availability are checked before the first write.
///
/// ```
/// use fly_norm::{norm_bwd, BwdBuffers, Norm, NormBwdArgs};
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, -1.0]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
/// let dy = DeviceBuffer::from_slice(&dev, &[1.0f32, 0.0]).unwrap();
/// let rstd = DeviceBuffer::from_slice(&dev, &[1.0f32]).unwrap();
/// let mut dx = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let mut dg = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
/// let bufs = BwdBuffers { x: &x, gamma: &g, dy: &dy, mean: None, rstd: &rstd, dresidual: None, dx: &mut dx, dgamma: &mut dg, dbeta: None };
/// norm_bwd(&s, Norm::Rms, bufs, NormBwdArgs::new(1, 2)).unwrap();
/// assert_eq!(dg.to_vec().unwrap(), vec![1.0, 0.0]); // sum over rows of dy * x * rstd
/// ```
pub fn norm_bwd<T: Element, W: Element>(
    stream: &Stream,
    norm: Norm,
    bufs: BwdBuffers<'_, T, W>,
    args: NormBwdArgs,
) -> Result<()> {
    backward(Call::new("fly_norm::norm_bwd"), stream, norm, bufs, args)
}

/// [`norm_bwd`] for the public function `call` names.
pub(crate) fn backward<T: Element, W: Element>(
    call: Call<'_>,
    stream: &Stream,
    norm: Norm,
    bufs: BwdBuffers<'_, T, W>,
    args: NormBwdArgs,
) -> Result<()> {
    validate(call, stream, norm, &bufs, &args)?;
    // SAFETY: every buffer's device and length was checked against (m, n) above.
    unsafe { run(call, stream, norm, bufs, args, None) }
}

/// [`norm_bwd`] without validation.
///
/// # Safety
/// Buffer lengths must match `args` as [`norm_bwd`] checks, `n >= 1`,
/// `m <= `[`crate::MAX_ROWS`], `n <= `[`crate::MAX_COLS`], and LayerNorm needs `mean`;
/// otherwise the kernels access memory out of bounds.
///
/// ```
/// use fly_norm::{norm_bwd_unchecked, BwdBuffers, Norm, NormBwdArgs};
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::from_slice(&dev, &[2.0f32]).unwrap();
/// let g = DeviceBuffer::from_slice(&dev, &[1.0f32]).unwrap();
/// let dy = DeviceBuffer::from_slice(&dev, &[1.0f32]).unwrap();
/// let rstd = DeviceBuffer::from_slice(&dev, &[0.5f32]).unwrap();
/// let mut dx = DeviceBuffer::<f32>::zeroed(&dev, 1).unwrap();
/// let mut dg = DeviceBuffer::<f32>::zeroed(&dev, 1).unwrap();
/// let bufs = BwdBuffers { x: &x, gamma: &g, dy: &dy, mean: None, rstd: &rstd, dresidual: None, dx: &mut dx, dgamma: &mut dg, dbeta: None };
/// // SAFETY: all lengths match m = n = 1.
/// unsafe { norm_bwd_unchecked(&s, Norm::Rms, bufs, NormBwdArgs::new(1, 1)) }.unwrap();
/// assert_eq!(dg.to_vec().unwrap(), vec![1.0]);
/// ```
pub unsafe fn norm_bwd_unchecked<T: Element, W: Element>(
    stream: &Stream,
    norm: Norm,
    bufs: BwdBuffers<'_, T, W>,
    args: NormBwdArgs,
) -> Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        run(
            Call::new("fly_norm::norm_bwd_unchecked"),
            stream,
            norm,
            bufs,
            args,
            None,
        )
    }
}

/// [`norm_bwd`] on an explicit [`Plan`] instead of the dispatcher's, for benchmarks and tuning
/// (`examples/bwd_sweep.rs` times every plan of [`backward_plans`](crate::backward_plans));
/// not a stable API. Validates the buffers as [`norm_bwd`] does, and the plan against the
/// shape, dtype and the device's wave size (see `check_backward_plan`: the path must be built
/// for the family, the 1-D block a multiple of the wave size within the path's launch bound
/// that covers a row, the grid 1..=2^20 blocks). An invalid plan is an error naming the fix,
/// never a launch.
///
/// ```
/// use fly_norm::{backward_plans, norm_bwd_with_plan, BwdBuffers, DType, Norm, NormBwdArgs, Path};
/// use flydsl_rt::{Device, DeviceBuffer};
/// let dev = Device::sim(flydsl_rt::Target::Gfx942); // or Device::best()?
/// let s = dev.stream().unwrap();
/// let (m, n) = (3, 256);
/// let buf = |v: f32, len: usize| DeviceBuffer::from_slice(&dev, &vec![v; len]).unwrap();
/// let (x, g, dy, rstd) = (buf(2.0, m * n), buf(1.0, n), buf(1.0, m * n), buf(0.5, m));
/// let (mut dx, mut dg) = (buf(0.0, m * n), buf(0.0, n));
/// let plan = backward_plans(Norm::Rms, m, n, DType::F32, dev.wave_size(), 4)
///     .into_iter()
///     .find(|p| p.path == Path::Fast(2))
///     .unwrap();
/// let bufs = BwdBuffers { x: &x, gamma: &g, dy: &dy, mean: None, rstd: &rstd, dresidual: None, dx: &mut dx, dgamma: &mut dg, dbeta: None };
/// norm_bwd_with_plan(&s, Norm::Rms, bufs, NormBwdArgs::new(m, n), plan).unwrap();
/// assert!(dg.to_vec().unwrap().iter().all(|&v| v == 3.0)); // 3 rows of dy * x * rstd = 1
/// // A block that is not a whole number of waves is refused.
/// let mut bad = plan;
/// bad.cfg.block[0] = dev.wave_size() + 1;
/// let bufs = BwdBuffers { x: &x, gamma: &g, dy: &dy, mean: None, rstd: &rstd, dresidual: None, dx: &mut dx, dgamma: &mut dg, dbeta: None };
/// assert!(norm_bwd_with_plan(&s, Norm::Rms, bufs, NormBwdArgs::new(m, n), bad).is_err());
/// ```
#[doc(hidden)]
pub fn norm_bwd_with_plan<T: Element, W: Element>(
    stream: &Stream,
    norm: Norm,
    bufs: BwdBuffers<'_, T, W>,
    args: NormBwdArgs,
    plan: Plan,
) -> Result<()> {
    let call = Call::new("fly_norm::norm_bwd_with_plan");
    validate(call, stream, norm, &bufs, &args)?;
    let wave = stream.device().wave_size();
    if let Some(why) = check_backward_plan(&plan, norm, args.n, T::DTYPE, wave) {
        return Err(call.error(
            "plan",
            format_args!("{plan:?}"),
            why,
            "pass a plan of fly_norm::backward_plans for this shape, dtype and device",
        ));
    }
    // SAFETY: the buffers were validated against (m, n) and the plan against the shape.
    unsafe { run(call, stream, norm, bufs, args, Some(plan)) }
}

/// The backward of validated arguments: checks that the device can run both kernels, then
/// zeroes or launches, on `plan` or the dispatcher's.
///
/// # Safety
/// As [`norm_bwd_unchecked`], and `plan` must fit the shape (see `check_backward_plan`).
unsafe fn run<T: Element, W: Element>(
    call: Call<'_>,
    stream: &Stream,
    norm: Norm,
    bufs: BwdBuffers<'_, T, W>,
    args: NormBwdArgs,
    plan: Option<Plan>,
) -> Result<()> {
    let dev = stream.device();
    let BwdBuffers {
        x,
        gamma,
        dy,
        mean,
        rstd,
        dresidual,
        dx,
        dgamma,
        dbeta,
    } = bufs;
    let plan = plan.unwrap_or_else(|| {
        plan_backward(
            norm,
            args.m.max(1),
            args.n,
            T::DTYPE,
            dev.wave_size(),
            dev.compute_units(),
        )
    });
    let missing = || {
        call.fail(format!(
            "no {} backward kernel for {} activations and {} weights on {:?}; this is a \
             fly-norm bug",
            norm.name(),
            T::DTYPE,
            W::DTYPE,
            plan.path
        ))
    };
    let ragged = ragged_rows(args.n, T::DTYPE) && plan.path != Path::Generic;
    let f = if ragged {
        kernels::backward_ragged::<T, W>(norm, plan.path)
    } else {
        kernels::backward::<T, W>(norm, plan.path)
    };
    let f = f.ok_or_else(missing)?;
    let sum = kernels::colsum::<W>().ok_or_else(missing)?;
    if args.m == 0 {
        dgamma.memset_zero()?;
        if let Some(db) = dbeta {
            db.memset_zero()?;
        }
        return Ok(());
    }
    // Both kernels must run on this device before anything is written.
    call.kernel(stream, f.kernel)?;
    call.kernel(stream, sum.kernel)?;
    let two = args.strategy.two_stage(args.m, args.n, plan.path);
    let rows = if two { plan.cfg.grid[0] as usize } else { 1 };
    let part_len = rows * args.n;
    let layer = norm == Norm::Layer;
    // The f32 partial rows live in the device's cached workspace; the lock is held until
    // every kernel using it is enqueued.
    let mut cache = workspaces();
    let ws = cache
        .get_or_insert_with(HashMap::new)
        .entry(dev.id())
        .or_default();
    if ws.last_stream.is_some_and(|s| s != stream.id()) {
        // The previous call's kernels, on another stream, may still use the workspace.
        dev.synchronize()?;
    }
    ws.last_stream = Some(stream.id());
    let (dg_part, db_part) = ws.get(dev, two, part_len, if layer { part_len } else { 0 })?;
    if !two {
        // Atomic mode adds into one row: it starts at zero (ordered before the launch: the
        // streams synchronise with the null stream the memset runs on).
        dg_part.memset_zero()?;
        db_part.memset_zero()?;
    }
    let no_t = DeviceBuffer::<T>::alloc(dev, 0)?;
    let no_f = DeviceBuffer::<f32>::alloc(dev, 0)?;
    let (m, n, mode) = (args.m as i32, args.n as i32, if two { 0 } else { 1 });
    let mean = mean.unwrap_or(&no_f);
    let dres = dresidual.unwrap_or(&no_t);
    // SAFETY: forwarded from this function's contract; the partial rows hold `grid` (two-stage)
    // or 1 (atomic) rows of n.
    unsafe {
        (f.launch)(
            stream, plan.cfg, x, gamma, dy, mean, rstd, dres, dx, dg_part, db_part, m, n, mode,
        )?
    };
    let cfg = LaunchConfig::linear(
        args.n.div_ceil(crate::config::REDUCE_COLS as usize) as u32,
        crate::config::GENERIC_THREADS,
    );
    // SAFETY: `part` holds `rows * n` f32 and the output n elements.
    unsafe { (sum.launch)(stream, cfg, dg_part, dgamma, rows as i32, n)? };
    if let Some(db) = dbeta {
        // SAFETY: as above.
        unsafe { (sum.launch)(stream, cfg, db_part, db, rows as i32, n)? };
    }
    Ok(())
}

/// The f32 partial-row buffers of one device's backward calls, grown on demand and kept for
/// later calls, so that a call neither allocates nor synchronises: `[dgamma, dbeta]` for the
/// two-stage strategy (`rows * n` each) and for the atomic one (`n` each, zeroed per call).
#[derive(Debug, Default)]
struct Workspace {
    two: [Option<DeviceBuffer<f32>>; 2],
    atomic: [Option<DeviceBuffer<f32>>; 2],
    /// The stream of the latest call that enqueued kernels using the buffers.
    last_stream: Option<StreamId>,
}

impl Workspace {
    /// Buffers of at least `dg` and `db` elements for the two-stage (`two`) or atomic
    /// strategy. Growing drops the old buffers only after the device is idle (earlier calls'
    /// kernels may still be using them).
    fn get(
        &mut self,
        dev: &Device,
        two: bool,
        dg: usize,
        db: usize,
    ) -> Result<(&mut DeviceBuffer<f32>, &mut DeviceBuffer<f32>)> {
        let set = if two { &mut self.two } else { &mut self.atomic };
        let small = |b: &Option<DeviceBuffer<f32>>, len: usize| match b {
            Some(b) => b.len() < len,
            None => true,
        };
        if small(&set[0], dg) || small(&set[1], db) {
            if set.iter().any(Option::is_some) {
                dev.synchronize()?;
            }
            // Two-stage buffers grow with some headroom, so that a sequence of slightly
            // larger shapes does not reallocate every time.
            let extra = |len: usize| if two { len / 4 } else { 0 };
            for (b, len) in set.iter_mut().zip([dg, db]) {
                if small(b, len) {
                    *b = None;
                    *b = Some(DeviceBuffer::alloc(dev, len + extra(len))?);
                }
            }
        }
        match set {
            [Some(a), Some(b)] => Ok((a, b)),
            _ => unreachable!("both workspace buffers were just allocated"),
        }
    }
}

/// The cached workspaces, one per device.
///
/// One workspace serves every stream of a device: calls on one stream are ordered by the
/// stream, the lock (held until a call's kernels are enqueued) orders calls from several
/// threads, and a call on a different stream than the previous one first synchronises the
/// device, so kernels of two streams never use the buffers at the same time.
fn workspaces() -> MutexGuard<'static, Option<HashMap<DeviceId, Workspace>>> {
    static CACHE: Mutex<Option<HashMap<DeviceId, Workspace>>> = Mutex::new(None);
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}
