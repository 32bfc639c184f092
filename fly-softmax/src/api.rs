//! The safe and raw entry points on device buffers.

use crate::kernels;
use crate::plan::{Variant, MAX_GRID};
use crate::select::{resolve, tuned, Dispatch, Resolved};
use crate::split::SplitPlan;
use crate::table::{Kind, Path};
use crate::validate;
use flydsl_rt::hints::KEEP_L2_MIN_BYTES;
use flydsl_rt::tune::Tuner;
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, Element, LaunchConfig, Result, Stream};
use std::cell::RefCell;

/// The shape of a row-major `[m, n]` softmax: `m` rows (any, 0 is a no-op) of `n >= 1`
/// elements.
///
/// ```
/// let a = fly_softmax::SoftmaxArgs { m: 4, n: 1024 };
/// assert_eq!(a.len(), 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SoftmaxArgs {
    /// Rows.
    pub m: usize,
    /// Elements per row.
    pub n: usize,
}

impl SoftmaxArgs {
    /// `m * n` (saturating).
    pub fn len(&self) -> usize {
        self.m.saturating_mul(self.n)
    }
    /// True when a call has nothing to compute: `m == 0` (a call with `n == 0` is an error,
    /// not an empty call).
    ///
    /// ```
    /// use fly_softmax::SoftmaxArgs;
    /// assert!(SoftmaxArgs { m: 0, n: 8 }.is_empty());
    /// assert!(!SoftmaxArgs { m: 4, n: 0 }.is_empty()); // rejected by the calls: n >= 1
    /// ```
    pub fn is_empty(&self) -> bool {
        self.m == 0
    }
}

/// Row-wise softmax `y = exp(x - max) / sum(exp(x - max))` of a row-major `[m, n]` tensor, in
/// f32 arithmetic, output in the input dtype. `x` and `y` are distinct buffers (the borrow
/// checker rules out in-place use) of exactly `m * n` elements on the stream's device.
/// The configuration is the tuner's cached winner or the default (see [`Dispatch::Tuned`]
/// with [`Tuner::global`]: `FLYDSL_AUTOTUNE=1` searches once per shape class).
///
/// Non-finite rows: a row of all -inf comes back as NaN in every element, as `torch.softmax`
/// gives (the row max is -inf, and -inf - (-inf) is NaN). Other
/// rows are unaffected.
///
/// Errors: `n == 0`, a buffer length other than `m * n`, `m`/`n` beyond
/// [`validate::MAX_M`]/[`validate::MAX_N`], buffers on another device, a device whose target
/// this build has no code object for. `m == 0` is a no-op. Every argument is checked before
/// the first launch, so a call that fails leaves `y` unchanged.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// use fly_softmax::{softmax, SoftmaxArgs};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream()?;
/// let x = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0])?;
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, 6)?;
/// softmax(&s, &x, &mut y, SoftmaxArgs { m: 2, n: 3 })?;
/// let y = y.to_vec()?;
/// assert!((y[2] - 0.66524096).abs() < 1e-5 && (y[3] - 1.0 / 3.0).abs() < 1e-6);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn softmax<T: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
) -> Result<()> {
    forward(
        Call::new("fly_softmax::softmax"),
        stream,
        x,
        y,
        args,
        Dispatch::Tuned(Tuner::global()),
    )
}

/// [`softmax`] with an explicit [`Dispatch`].
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// use fly_softmax::{softmax_with, Dispatch, SoftmaxArgs};
/// let dev = Device::sim(Target::Gfx1201);
/// let s = dev.stream()?;
/// let x = DeviceBuffer::from_slice(&dev, &[0.0f32; 8])?;
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, 8)?;
/// softmax_with(&s, &x, &mut y, SoftmaxArgs { m: 1, n: 8 }, Dispatch::Default)?;
/// assert_eq!(y.to_vec()?, vec![0.125; 8]);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn softmax_with<T: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
    dispatch: Dispatch<'_>,
) -> Result<()> {
    forward(
        Call::new("fly_softmax::softmax_with"),
        stream,
        x,
        y,
        args,
        dispatch,
    )
}

/// [`softmax_with`] for the public function `call` names.
pub(crate) fn forward<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
    dispatch: Dispatch<'_>,
) -> Result<()> {
    let len = validate::shape::<T>(call, args.m, args.n)?;
    let what = "m * n";
    call.buffer("x", x, stream, len, what)?;
    call.buffer("y", y, stream, len, what)?;
    // SAFETY: both buffers hold exactly m * n elements, so every row the kernel touches lies
    // inside them.
    unsafe { forward_unchecked(call, stream, x, y, args, dispatch) }
}

/// [`softmax_with`] without the buffer-length checks (shape limits are still checked).
///
/// # Safety
/// `x` and `y` must hold at least `args.m * args.n` elements each; otherwise the kernel
/// reads or writes out of bounds on GPUs (the Sim reports it).
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// use fly_softmax::{softmax_unchecked, Dispatch, SoftmaxArgs};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let x = DeviceBuffer::from_slice(&dev, &[5.0f32; 3])?;
/// let mut y = DeviceBuffer::<f32>::zeroed(&dev, 3)?;
/// // SAFETY: both buffers hold m * n = 3 elements.
/// unsafe { softmax_unchecked(&s, &x, &mut y, SoftmaxArgs { m: 1, n: 3 }, Dispatch::Default)? };
/// assert!((y.to_vec()?[0] - 1.0 / 3.0).abs() < 1e-6);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub unsafe fn softmax_unchecked<T: Element>(
    stream: &Stream,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
    dispatch: Dispatch<'_>,
) -> Result<()> {
    let call = Call::new("fly_softmax::softmax_unchecked");
    // SAFETY: forwarded from this function's contract.
    unsafe { forward_unchecked(call, stream, x, y, args, dispatch) }
}

/// [`softmax_unchecked`] for the public function `call` names: checks the shape, the
/// dispatch and the kernels' availability before the first launch.
///
/// # Safety
/// As [`softmax_unchecked`].
unsafe fn forward_unchecked<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
    dispatch: Dispatch<'_>,
) -> Result<()> {
    validate::shape::<T>(call, args.m, args.n)?;
    if args.m == 0 {
        return Ok(());
    }
    let (m, n) = (args.m, args.n);
    let v = match resolve::<T>(call, Kind::Forward, stream, m, n, &dispatch)? {
        Resolved::Fixed(v) => v,
        Resolved::Tune(cands) => {
            let Dispatch::Tuned(tuner) = dispatch else {
                return Err(no_tuner(call));
            };
            let y_cell = RefCell::new(&mut *y);
            tuned::<T>(
                Kind::Forward,
                tuner,
                stream,
                &cands,
                m,
                n,
                // SAFETY: forwarded from this function's contract.
                |v| unsafe { launch_fwd(call, v, stream, x, &mut y_cell.borrow_mut(), m, n) },
                || y_cell.borrow().to_vec(),
            )?
        }
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { launch_fwd(call, &v, stream, x, y, m, n) }
}

/// Softmax backward `dx = y * (dy - sum(dy * y))` per row (dot in f32, deterministic run to
/// run), for row-major `[m, n]` tensors of one dtype. `dx` is distinct from `y` and `dy`
/// (the borrow checker rules out in-place use). Errors as [`softmax`]; a call that fails
/// leaves `dx` unchanged.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// use fly_softmax::{softmax_backward, SoftmaxArgs};
/// let dev = Device::sim(Target::Gfx950);
/// let s = dev.stream()?;
/// let y = DeviceBuffer::from_slice(&dev, &[0.25f32, 0.75])?;
/// let dy = DeviceBuffer::from_slice(&dev, &[1.0f32, 0.0])?;
/// let mut dx = DeviceBuffer::<f32>::zeroed(&dev, 2)?;
/// softmax_backward(&s, &y, &dy, &mut dx, SoftmaxArgs { m: 1, n: 2 })?;
/// let dx = dx.to_vec()?; // dot = 0.25: dx = [0.25 * 0.75, 0.75 * -0.25]
/// assert!((dx[0] - 0.1875).abs() < 1e-6 && (dx[1] + 0.1875).abs() < 1e-6);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn softmax_backward<T: Element>(
    stream: &Stream,
    y: &DeviceBuffer<T>,
    dy: &DeviceBuffer<T>,
    dx: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
) -> Result<()> {
    backward(
        Call::new("fly_softmax::softmax_backward"),
        stream,
        y,
        dy,
        dx,
        args,
        Dispatch::Tuned(Tuner::global()),
    )
}

/// [`softmax_backward`] with an explicit [`Dispatch`].
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// use fly_softmax::{softmax_backward_with, Dispatch, SoftmaxArgs};
/// let dev = Device::sim(Target::Gfx1250);
/// let s = dev.stream()?;
/// let y = DeviceBuffer::from_slice(&dev, &[0.5f32, 0.5])?;
/// let dy = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0])?;
/// let mut dx = DeviceBuffer::<f32>::zeroed(&dev, 2)?;
/// softmax_backward_with(&s, &y, &dy, &mut dx, SoftmaxArgs { m: 1, n: 2 }, Dispatch::Default)?;
/// assert_eq!(dx.to_vec()?, vec![0.0, 0.0]);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn softmax_backward_with<T: Element>(
    stream: &Stream,
    y: &DeviceBuffer<T>,
    dy: &DeviceBuffer<T>,
    dx: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
    dispatch: Dispatch<'_>,
) -> Result<()> {
    backward(
        Call::new("fly_softmax::softmax_backward_with"),
        stream,
        y,
        dy,
        dx,
        args,
        dispatch,
    )
}

/// [`softmax_backward_with`] for the public function `call` names.
pub(crate) fn backward<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    y: &DeviceBuffer<T>,
    dy: &DeviceBuffer<T>,
    dx: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
    dispatch: Dispatch<'_>,
) -> Result<()> {
    let len = validate::shape::<T>(call, args.m, args.n)?;
    let what = "m * n";
    call.buffer("y", y, stream, len, what)?;
    call.buffer("dy", dy, stream, len, what)?;
    call.buffer("dx", dx, stream, len, what)?;
    // SAFETY: all three buffers hold exactly m * n elements.
    unsafe { backward_unchecked(call, stream, y, dy, dx, args, dispatch) }
}

/// [`softmax_backward_with`] without the buffer-length checks.
///
/// # Safety
/// `y`, `dy` and `dx` must hold at least `args.m * args.n` elements each.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// use fly_softmax::{softmax_backward_unchecked, Dispatch, SoftmaxArgs};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream()?;
/// let y = DeviceBuffer::from_slice(&dev, &[1.0f32])?;
/// let dy = DeviceBuffer::from_slice(&dev, &[3.0f32])?;
/// let mut dx = DeviceBuffer::<f32>::zeroed(&dev, 1)?;
/// // SAFETY: every buffer holds m * n = 1 element.
/// unsafe { softmax_backward_unchecked(&s, &y, &dy, &mut dx, SoftmaxArgs { m: 1, n: 1 }, Dispatch::Default)? };
/// assert_eq!(dx.to_vec()?, vec![0.0]);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub unsafe fn softmax_backward_unchecked<T: Element>(
    stream: &Stream,
    y: &DeviceBuffer<T>,
    dy: &DeviceBuffer<T>,
    dx: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
    dispatch: Dispatch<'_>,
) -> Result<()> {
    let call = Call::new("fly_softmax::softmax_backward_unchecked");
    // SAFETY: forwarded from this function's contract.
    unsafe { backward_unchecked(call, stream, y, dy, dx, args, dispatch) }
}

/// [`softmax_backward_unchecked`] for the public function `call` names.
///
/// # Safety
/// As [`softmax_backward_unchecked`].
unsafe fn backward_unchecked<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    y: &DeviceBuffer<T>,
    dy: &DeviceBuffer<T>,
    dx: &mut DeviceBuffer<T>,
    args: SoftmaxArgs,
    dispatch: Dispatch<'_>,
) -> Result<()> {
    validate::shape::<T>(call, args.m, args.n)?;
    if args.m == 0 {
        return Ok(());
    }
    let (m, n) = (args.m, args.n);
    let v = match resolve::<T>(call, Kind::Backward, stream, m, n, &dispatch)? {
        Resolved::Fixed(v) => v,
        Resolved::Tune(cands) => {
            let Dispatch::Tuned(tuner) = dispatch else {
                return Err(no_tuner(call));
            };
            let dx_cell = RefCell::new(&mut *dx);
            tuned::<T>(
                Kind::Backward,
                tuner,
                stream,
                &cands,
                m,
                n,
                // SAFETY: forwarded from this function's contract.
                |v| unsafe { launch_bwd(call, v, stream, y, dy, &mut dx_cell.borrow_mut(), m, n) },
                || dx_cell.borrow().to_vec(),
            )?
        }
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { launch_bwd(call, &v, stream, y, dy, dx, m, n) }
}

fn no_tuner(call: Call<'_>) -> flydsl_rt::Error {
    call.fail("internal: tuning requested without a tuner; this is a fly-softmax bug")
}

/// Launch forward variant `v`, after checking that the device can run it.
///
/// # Safety
/// `x` and `y` hold at least `m * n` elements; `m >= 1`, `m`, `n` within the limits.
unsafe fn launch_fwd<T: Element>(
    call: Call<'_>,
    v: &Variant,
    stream: &Stream,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    m: usize,
    n: usize,
) -> Result<()> {
    let keep = flydsl_rt::hints::keep_l2(m * n * std::mem::size_of::<T>(), KEEP_L2_MIN_BYTES);
    if v.config.path == Path::Split {
        // SAFETY: forwarded from this function's contract.
        return unsafe { launch_split_fwd(call, v, stream, x, y, m, n, keep) };
    }
    let (cfg, nblocks) = v.launch_config(m);
    let l = kernels::forward::<T>(v.index)
        .ok_or_else(|| call.fail(format!("`{}` is not a forward kernel", v.name::<T>())))?;
    call.kernel(stream, l.kernel)?;
    // SAFETY: the kernel touches rows 0..m of n elements, inside both buffers (caller).
    unsafe { (l.launch)(stream, cfg, x, y, m as i32, n as i32, nblocks, keep as i32) }
}

/// Launch backward variant `v`, after checking that the device can run it.
///
/// # Safety
/// `y`, `dy` and `dx` hold at least `m * n` elements; `m >= 1`, `m`, `n` within the limits.
#[allow(clippy::too_many_arguments)]
unsafe fn launch_bwd<T: Element>(
    call: Call<'_>,
    v: &Variant,
    stream: &Stream,
    y: &DeviceBuffer<T>,
    dy: &DeviceBuffer<T>,
    dx: &mut DeviceBuffer<T>,
    m: usize,
    n: usize,
) -> Result<()> {
    if v.config.path == Path::Split {
        // SAFETY: forwarded from this function's contract.
        return unsafe { launch_split_bwd(call, v, stream, y, dy, dx, m, n) };
    }
    let (cfg, nblocks) = v.launch_config(m);
    let l = kernels::backward::<T>(v.index)
        .ok_or_else(|| call.fail(format!("`{}` is not a backward kernel", v.name::<T>())))?;
    call.kernel(stream, l.kernel)?;
    // SAFETY: the kernel touches rows 0..m of n elements, inside all buffers (caller).
    unsafe { (l.launch)(stream, cfg, y, dy, dx, m as i32, n as i32, nblocks) }
}

/// The plan, launch geometry and i32 kernel arguments `(m, n, chunks, clen, nblocks)` of a
/// split launch of `v` for `m` rows of `n`.
fn split_geometry<T: Element>(
    v: &Variant,
    stream: &Stream,
    m: usize,
    n: usize,
) -> (SplitPlan, LaunchConfig, [i32; 5]) {
    let p = SplitPlan::new::<T>(v, stream.device().compute_units(), m, n);
    let blocks = p.pairs(m).min(MAX_GRID as usize) as u32;
    let cfg = LaunchConfig::linear(blocks, v.config.threads);
    let i = |x: usize| x as i32;
    (p, cfg, [i(m), i(n), i(p.chunks), i(p.clen), blocks as i32])
}

/// Launch split forward variant `v` (stats, then finish) with a workspace of its own.
///
/// # Safety
/// As [`launch_fwd`].
#[allow(clippy::too_many_arguments)]
unsafe fn launch_split_fwd<T: Element>(
    call: Call<'_>,
    v: &Variant,
    stream: &Stream,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    m: usize,
    n: usize,
    keep: bool,
) -> Result<()> {
    let kernels::SplitPair { stats, finish: fin } = kernels::forward_split::<T>(v.index)
        .ok_or_else(|| call.fail(format!("`{}` is not a split forward kernel", v.name::<T>())))?;
    call.kernel(stream, stats.kernel)?;
    call.kernel(stream, fin.kernel)?;
    let (p, cfg, [mi, ni, chunks, clen, nb]) = split_geometry::<T>(v, stream, m, n);
    let mut ws = stream.alloc::<f32>(2 * p.pairs(m))?;
    // SAFETY: the kernels touch rows 0..m of n elements of x and y (caller) and the
    // 2 * m * chunks values of ws; the plan keeps m * chunks and the chunk bounds in i32.
    unsafe {
        (stats.launch)(
            stream,
            cfg,
            x,
            &mut ws,
            mi,
            ni,
            chunks,
            clen,
            nb,
            keep as i32,
        )?;
        (fin.launch)(stream, cfg, x, &ws, y, mi, ni, chunks, clen, nb)
    }
}

/// Launch split backward variant `v` (stats, then finish) with a workspace of its own.
///
/// # Safety
/// As [`launch_bwd`].
#[allow(clippy::too_many_arguments)]
unsafe fn launch_split_bwd<T: Element>(
    call: Call<'_>,
    v: &Variant,
    stream: &Stream,
    y: &DeviceBuffer<T>,
    dy: &DeviceBuffer<T>,
    dx: &mut DeviceBuffer<T>,
    m: usize,
    n: usize,
) -> Result<()> {
    let kernels::SplitPair { stats, finish: fin } = kernels::backward_split::<T>(v.index)
        .ok_or_else(|| {
            call.fail(format!(
                "`{}` is not a split backward kernel",
                v.name::<T>()
            ))
        })?;
    call.kernel(stream, stats.kernel)?;
    call.kernel(stream, fin.kernel)?;
    let (p, cfg, [mi, ni, chunks, clen, nb]) = split_geometry::<T>(v, stream, m, n);
    let mut ws = stream.alloc::<f32>(p.pairs(m))?;
    // SAFETY: the kernels touch rows 0..m of n elements of y, dy and dx (caller) and the
    // m * chunks values of ws; the plan keeps m * chunks and the chunk bounds in i32.
    unsafe {
        (stats.launch)(stream, cfg, y, dy, &mut ws, mi, ni, chunks, clen, nb)?;
        (fin.launch)(stream, cfg, y, dy, &ws, dx, mi, ni, chunks, clen, nb)
    }
}
