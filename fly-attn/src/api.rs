//! The public entry points: validation, dispatch, workspace and launches.

use crate::dispatch::{self, AttnKernel, Family, Problem};
use crate::kernels;
use crate::table::{BM, COMBINE_THREADS, MAX_SPLITS, WAVES};
use flydsl_rt::validate::Call;
use flydsl_rt::F8E4M3FN;
use flydsl_rt::{half::bf16, DeviceBuffer, DeviceRepr, Element, LaunchConfig, Result, Stream};

/// The shape and options of one dense [`flash_attn_fwd`] call (layouts in the crate docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnArgs {
    /// Sequences (0 is a no-op).
    pub batch: usize,
    /// Queries per sequence (0 is a no-op).
    pub seqlen_q: usize,
    /// Keys per sequence (>= 1).
    pub seqlen_kv: usize,
    /// Query heads (a multiple of `heads_kv`).
    pub heads_q: usize,
    /// Key/value heads (>= 1).
    pub heads_kv: usize,
    /// Head dimension: a multiple of 32, at most 256.
    pub head_dim: usize,
    /// Bottom-right aligned causal mask: key `j` is visible to query `i` iff
    /// `j <= i + seqlen_kv - seqlen_q`.
    pub causal: bool,
    /// Softmax scale; `None` is `1 / sqrt(head_dim)`.
    pub softmax_scale: Option<f32>,
    /// Splits of the key sequence (1 ..= 64); `None` picks one from the device's size
    /// ([`crate::dispatch::auto_splits`]).
    pub num_kv_splits: Option<usize>,
}

impl AttnArgs {
    /// Non-causal MHA of `batch x seqlen x heads x head_dim` with defaults.
    ///
    /// ```
    /// let a = fly_attn::AttnArgs::new(2, 128, 8, 64);
    /// assert_eq!((a.seqlen_q, a.seqlen_kv, a.heads_kv, a.causal), (128, 128, 8, false));
    /// ```
    pub fn new(batch: usize, seqlen: usize, heads: usize, head_dim: usize) -> AttnArgs {
        AttnArgs {
            batch,
            seqlen_q: seqlen,
            seqlen_kv: seqlen,
            heads_q: heads,
            heads_kv: heads,
            head_dim,
            causal: false,
            softmax_scale: None,
            num_kv_splits: None,
        }
    }
}

/// The shape and options of one [`flash_attn_varlen_fwd`] call; the batch is
/// `cu_seqlens_q.len() - 1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VarlenArgs {
    /// The longest query sequence (bounds the grid; every sequence must fit in it).
    pub max_seqlen_q: usize,
    /// The longest key sequence.
    pub max_seqlen_kv: usize,
    /// Query heads (a multiple of `heads_kv`).
    pub heads_q: usize,
    /// Key/value heads.
    pub heads_kv: usize,
    /// Head dimension: a multiple of 32, at most 256.
    pub head_dim: usize,
    /// Bottom-right aligned causal mask, per sequence.
    pub causal: bool,
    /// Softmax scale; `None` is `1 / sqrt(head_dim)`.
    pub softmax_scale: Option<f32>,
    /// Splits of the key sequence; `None` picks one.
    pub num_kv_splits: Option<usize>,
}

/// Cumulative sequence offsets (`batch + 1` non-decreasing i32 values starting at 0):
/// host data is validated completely; a device buffer is read back and validated by the
/// safe functions (a synchronizing copy) and trusted by the `_unchecked` ones.
#[derive(Clone, Copy, Debug)]
pub enum CuSeqlens<'a> {
    /// Offsets in host memory (copied to the device per call).
    Host(&'a [i32]),
    /// Offsets already on the stream's device.
    Device(&'a DeviceBuffer<i32>),
}

impl CuSeqlens<'_> {
    fn len(&self) -> usize {
        match self {
            CuSeqlens::Host(s) => s.len(),
            CuSeqlens::Device(b) => b.len(),
        }
    }
}

/// Largest sequence length, head count product and total rows: the kernel's index
/// arithmetic is i32 inside one tile's rows (`64 * heads * head_dim`) and for sequence
/// positions; sequence and head bases are i64.
pub const MAX_ROWS: usize = i32::MAX as usize - 2 * BM;

/// The per-tensor descales of fp8 q, k and v ([`flash_attn_fp8_fwd`]): the real value of
/// an element is its e4m3fn value times its tensor's descale. Each is a 1-element f32
/// buffer on the stream's device (device data: the kernel reads it, the host never does).
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// use fly_attn::Fp8Descales;
/// let dev = Device::sim(Target::Gfx950);
/// let (q, k, v) = (
///     DeviceBuffer::from_slice(&dev, &[0.5f32])?,
///     DeviceBuffer::from_slice(&dev, &[0.25f32])?,
///     DeviceBuffer::from_slice(&dev, &[2.0f32])?,
/// );
/// let d = Fp8Descales { q: &q, k: &k, v: &v };
/// assert_eq!(d.v.to_vec()?, vec![2.0]);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Fp8Descales<'a> {
    /// q's descale (one f32).
    pub q: &'a DeviceBuffer<f32>,
    /// k's descale (one f32).
    pub k: &'a DeviceBuffer<f32>,
    /// v's descale (one f32).
    pub v: &'a DeviceBuffer<f32>,
}

/// The q, k and v of one call: 16-bit of the output's type, or fp8 e4m3fn with descales
/// (output bf16).
enum Qkv<'a, T: DeviceRepr> {
    Half(
        &'a DeviceBuffer<T>,
        &'a DeviceBuffer<T>,
        &'a DeviceBuffer<T>,
    ),
    Fp8(
        &'a DeviceBuffer<F8E4M3FN>,
        &'a DeviceBuffer<F8E4M3FN>,
        &'a DeviceBuffer<F8E4M3FN>,
        Fp8Descales<'a>,
    ),
}

impl<T: DeviceRepr> Qkv<'_, T> {
    fn fp8(&self) -> bool {
        matches!(self, Qkv::Fp8(..))
    }
    /// Elements of q and of k.
    fn lens(&self) -> (usize, usize) {
        match self {
            Qkv::Half(q, k, _) => (q.len(), k.len()),
            Qkv::Fp8(q, k, _, _) => (q.len(), k.len()),
        }
    }
    /// Whether q, k and v start at 16-byte aligned device addresses (what TMA needs).
    fn tma_aligned(&self) -> bool {
        let a = |p: u64| p.is_multiple_of(16);
        match self {
            Qkv::Half(q, k, v) => [q, k, v].iter().all(|b| a(b.as_device_ptr())),
            Qkv::Fp8(q, k, v, _) => [q, k, v].iter().all(|b| a(b.as_device_ptr())),
        }
    }
    /// q holds `nq`, k and v `nkv` elements on the stream's device; the descales one each.
    fn check(
        &self,
        call: Call<'_>,
        stream: &Stream,
        nq: usize,
        nkv: usize,
        what: [&str; 2],
    ) -> Result<()> {
        match self {
            Qkv::Half(q, k, v) => {
                call.buffer("q", *q, stream, nq, what[0])?;
                call.buffer("k", *k, stream, nkv, what[1])?;
                call.buffer("v", *v, stream, nkv, what[1])?;
                check_vector_bases(call, [("q", *q), ("k", *k), ("v", *v)])
            }
            Qkv::Fp8(q, k, v, d) => {
                call.buffer("q", *q, stream, nq, what[0])?;
                call.buffer("k", *k, stream, nkv, what[1])?;
                call.buffer("v", *v, stream, nkv, what[1])?;
                check_vector_bases(call, [("q", *q), ("k", *k), ("v", *v)])?;
                check_descales(call, stream, d)
            }
        }
    }
}

/// Every kernel reads q, k and v (and writes out) in 16-byte vectors (TMA on Hopper), whose
/// addresses must be 16-byte aligned: a slice starting mid-vector is an error (a misaligned
/// vector access faults on NVIDIA GPUs).
fn check_vector_bases<T: DeviceRepr, const N: usize>(
    call: Call<'_>,
    bufs: [(&str, &DeviceBuffer<T>); N],
) -> Result<()> {
    for (arg, b) in bufs {
        call.aligned(arg, b, VECTOR_BYTES)?;
    }
    Ok(())
}

/// The vector width of every kernel's q, k, v and out accesses.
const VECTOR_BYTES: u64 = 16;

/// Each descale is one f32 on the stream's device.
fn check_descales(call: Call<'_>, stream: &Stream, d: &Fp8Descales<'_>) -> Result<()> {
    for (arg, b) in [
        ("descales.q", d.q),
        ("descales.k", d.k),
        ("descales.v", d.v),
    ] {
        call.buffer(
            arg,
            b,
            stream,
            1,
            "one f32 per tensor (real value = fp8 * descale)",
        )?;
    }
    Ok(())
}

/// The resolved launch of one call (after validation).
struct Plan {
    batch: usize,
    max_sq: usize,
    seqlen_q: usize,
    seqlen_kv: usize,
    heads_q: usize,
    heads_kv: usize,
    head_dim: usize,
    family: Family,
    /// fp8 e4m3fn inputs (the `FORWARD_FP8` kernels).
    fp8: bool,
    total_q: usize,
    varlen: bool,
    causal: bool,
    splits: usize,
    scale: f32,
}

/// Dense FlashAttention forward on `stream`: q `[batch, seqlen_q, heads_q, head_dim]`,
/// k and v `[batch, seqlen_kv, heads_kv, head_dim]`, out like q, optional LSE (f32
/// `[batch, heads_q, seqlen_q]`, natural log, scale folded in, `-inf` for fully masked
/// rows, whose output is zeros). Any `seqlen_q` and `seqlen_kv`; MHA, GQA and MQA.
///
/// Errors (before anything is written): buffer lengths other than the shapes say, head
/// counts that do not divide, a head dim that is not a multiple of 32 in 32 ..= 256, a
/// non-finite or non-positive scale, splits outside 1 ..= 64, shapes past [`MAX_ROWS`] or
/// the i32 tile bound, buffers on another device, q, k, v or out not starting at a 16-byte
/// boundary (a slice must start at a multiple of 8 bf16/f16 or 16 fp8 elements), a device
/// without a kernel.
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target};
/// use fly_attn::{flash_attn_fwd, AttnArgs};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream()?;
/// let a = AttnArgs::new(1, 3, 1, 32);
/// let q = DeviceBuffer::from_slice(&dev, &vec![bf16::ZERO; 3 * 32])?;
/// let v: Vec<bf16> = (0..3 * 32).map(|i| bf16::from_f32((i / 32) as f32)).collect();
/// let v = DeviceBuffer::from_slice(&dev, &v)?;
/// let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 3 * 32)?;
/// // q = 0: uniform attention over the 3 keys, so every output is mean(0, 1, 2) = 1.
/// flash_attn_fwd(&s, &q, &q, &v, &mut out, None, &a)?;
/// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 1.0));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn flash_attn_fwd<T: Element>(
    stream: &Stream,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    args: &AttnArgs,
) -> Result<()> {
    flash_attn_fwd_as(
        Call::new("fly_attn::flash_attn_fwd"),
        stream,
        q,
        k,
        v,
        out,
        lse,
        args,
        AttnKernel::Auto,
    )
}

/// [`flash_attn_fwd`] on the kernel family `kernel` names: [`AttnKernel::Auto`] is
/// [`flash_attn_fwd`] itself, [`AttnKernel::Portable`] pins the portable tile-layer kernel
/// (every target), [`AttnKernel::Hopper`] the sm90 wgmma + TMA kernel (one pass over the
/// keys: `num_kv_splits` `None` or `Some(1)`). The results are the documented ones of
/// [`flash_attn_fwd`] whichever kernel runs (they differ by rounding only).
///
/// Errors (before anything is written): those of [`flash_attn_fwd`], and a pinned
/// `Hopper` where it does not apply ([`crate::dispatch::hopper_mismatch`]: a device other
/// than sm90, a head dim other than 64, 128 or 256, more than one key split, shapes past
/// its bounds), naming the argument, its value, the rule and the fix.
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target};
/// use fly_attn::{flash_attn_fwd_with, AttnArgs, AttnKernel};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let a = AttnArgs::new(1, 3, 1, 64);
/// let q = DeviceBuffer::from_slice(&dev, &vec![bf16::ZERO; 3 * 64])?;
/// let v: Vec<bf16> = (0..3 * 64).map(|i| bf16::from_f32((i / 64) as f32)).collect();
/// let v = DeviceBuffer::from_slice(&dev, &v)?;
/// let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 3 * 64)?;
/// // q = 0: uniform attention over the 3 keys, on the Hopper kernel (sm90 Sim).
/// flash_attn_fwd_with(&s, &q, &q, &v, &mut out, None, &a, AttnKernel::Hopper)?;
/// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 1.0));
/// // D = 96 has no Hopper variant: an error, and out is untouched.
/// let a = AttnArgs::new(1, 2, 1, 96);
/// let x = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; 2 * 96])?;
/// let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 2 * 96)?;
/// let e = flash_attn_fwd_with(&s, &x, &x, &x, &mut out, None, &a, AttnKernel::Hopper);
/// assert!(e.unwrap_err().to_string().contains("`head_dim` = 96"));
/// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 0.0));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_fwd_with<T: Element>(
    stream: &Stream,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    args: &AttnArgs,
    kernel: AttnKernel,
) -> Result<()> {
    flash_attn_fwd_as(
        Call::new("fly_attn::flash_attn_fwd_with"),
        stream,
        q,
        k,
        v,
        out,
        lse,
        args,
        kernel,
    )
}

/// [`flash_attn_fwd`] for the public function `call` names, on `kernel`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn flash_attn_fwd_as<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    args: &AttnArgs,
    kernel: AttnKernel,
) -> Result<()> {
    dense_call(call, stream, Qkv::Half(q, k, v), out, lse, args, kernel)
}

/// The checked dense call of any operands.
fn dense_call<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    qkv: Qkv<'_, T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    args: &AttnArgs,
    kernel: AttnKernel,
) -> Result<()> {
    let plan = dense_plan::<T>(call, stream, args, kernel, qkv.fp8(), qkv.tma_aligned())?;
    let nq = call.product(plan.total_q, plan.heads_q * plan.head_dim)?;
    let nkv = call.product(args.batch * args.seqlen_kv, plan.heads_kv * plan.head_dim)?;
    qkv.check(
        call,
        stream,
        nq,
        nkv,
        [
            "batch * seqlen_q * heads_q * head_dim",
            "batch * seqlen_kv * heads_kv * head_dim",
        ],
    )?;
    call.buffer(
        "out",
        out,
        stream,
        nq,
        "batch * seqlen_q * heads_q * head_dim",
    )?;
    call.aligned("out", out, VECTOR_BYTES)?;
    if let Some(l) = lse.as_deref() {
        call.buffer(
            "lse",
            l,
            stream,
            plan.total_q * plan.heads_q,
            "batch * heads_q * seqlen_q",
        )?;
    }
    // SAFETY: every buffer holds exactly the elements its shape says (checked above).
    unsafe { launch(call, stream, &qkv, out, lse, None, &plan) }
}

/// [`flash_attn_fwd`] without the buffer-length checks (shapes and options are still
/// checked).
///
/// # Safety
/// q, k, v, out and the LSE must hold at least the elements of their shapes; otherwise the
/// kernel reads or writes out of bounds on GPUs (the Sim reports it).
pub unsafe fn flash_attn_fwd_unchecked<T: Element>(
    stream: &Stream,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    args: &AttnArgs,
) -> Result<()> {
    let call = Call::new("fly_attn::flash_attn_fwd_unchecked");
    let qkv = Qkv::Half(q, k, v);
    let plan = dense_plan::<T>(
        call,
        stream,
        args,
        AttnKernel::Auto,
        false,
        qkv.tma_aligned(),
    )?;
    // SAFETY: forwarded from this function's contract.
    unsafe { launch(call, stream, &qkv, out, lse, None, &plan) }
}

/// Packed varlen FlashAttention forward: q `[total_q, heads_q, head_dim]`, k and v
/// `[total_kv, heads_kv, head_dim]`, out like q, optional LSE f32 `[heads_q, total_q]`;
/// sequence `b` is q rows `cu_seqlens_q[b] .. cu_seqlens_q[b + 1]` and kv rows
/// `cu_seqlens_kv[b] .. cu_seqlens_kv[b + 1]` (zero-length sequences allowed: a query with
/// no keys gives zeros and LSE `-inf`). `total_q = cu_seqlens_q[batch]`.
///
/// Errors (before anything is written): everything [`flash_attn_fwd`] checks, offsets that
/// do not start at 0, decrease, or end elsewhere than at the tensors' row counts, a
/// sequence longer than `max_seqlen_*`, the two offset arrays of different lengths.
///
/// ```
/// use flydsl_rt::{half::f16, Device, DeviceBuffer, Target};
/// use fly_attn::{flash_attn_varlen_fwd, CuSeqlens, VarlenArgs};
/// let dev = Device::sim(Target::Gfx1201);
/// let s = dev.stream()?;
/// let a = VarlenArgs { max_seqlen_q: 2, max_seqlen_kv: 2, heads_q: 1, heads_kv: 1,
///     head_dim: 32, causal: false, softmax_scale: None, num_kv_splits: None };
/// let x = DeviceBuffer::from_slice(&dev, &vec![f16::ONE; 2 * 32])?;
/// let mut out = DeviceBuffer::<f16>::zeroed(&dev, 2 * 32)?;
/// // Two sequences: 2 queries on 0 keys (zeros), then 0 queries on 2 keys.
/// let (cq, ck) = ([0, 2, 2], [0, 0, 2]);
/// flash_attn_varlen_fwd(&s, &x, &x, &x, &mut out, None, CuSeqlens::Host(&cq), CuSeqlens::Host(&ck), &a)?;
/// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 0.0));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_varlen_fwd<T: Element>(
    stream: &Stream,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    cu_seqlens_q: CuSeqlens<'_>,
    cu_seqlens_kv: CuSeqlens<'_>,
    args: &VarlenArgs,
) -> Result<()> {
    flash_attn_varlen_fwd_as(
        Call::new("fly_attn::flash_attn_varlen_fwd"),
        stream,
        Qkv::Half(q, k, v),
        out,
        lse,
        cu_seqlens_q,
        cu_seqlens_kv,
        args,
        AttnKernel::Auto,
    )
}

/// [`flash_attn_varlen_fwd`] on the kernel family `kernel` names. Only
/// [`AttnKernel::Auto`] and [`AttnKernel::Portable`] take packed varlen tensors (the
/// Hopper kernel is dense only: pinning it is an error that writes nothing).
///
/// ```
/// use flydsl_rt::{half::f16, Device, DeviceBuffer, Target};
/// use fly_attn::{flash_attn_varlen_fwd_with, AttnKernel, CuSeqlens, VarlenArgs};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let a = VarlenArgs { max_seqlen_q: 2, max_seqlen_kv: 2, heads_q: 1, heads_kv: 1,
///     head_dim: 64, causal: false, softmax_scale: None, num_kv_splits: None };
/// let x = DeviceBuffer::from_slice(&dev, &vec![f16::ONE; 2 * 64])?;
/// let mut out = DeviceBuffer::<f16>::zeroed(&dev, 2 * 64)?;
/// let cu = [0, 2];
/// let run = |k, out: &mut DeviceBuffer<f16>| flash_attn_varlen_fwd_with(
///     &s, &x, &x, &x, out, None, CuSeqlens::Host(&cu), CuSeqlens::Host(&cu), &a, k);
/// run(AttnKernel::Portable, &mut out)?;
/// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 1.0));
/// assert!(run(AttnKernel::Hopper, &mut out).unwrap_err().to_string().contains("dense BSHD"));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_varlen_fwd_with<T: Element>(
    stream: &Stream,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    cu_seqlens_q: CuSeqlens<'_>,
    cu_seqlens_kv: CuSeqlens<'_>,
    args: &VarlenArgs,
    kernel: AttnKernel,
) -> Result<()> {
    flash_attn_varlen_fwd_as(
        Call::new("fly_attn::flash_attn_varlen_fwd_with"),
        stream,
        Qkv::Half(q, k, v),
        out,
        lse,
        cu_seqlens_q,
        cu_seqlens_kv,
        args,
        kernel,
    )
}

/// [`flash_attn_varlen_fwd`] for the public function `call` names, on `kernel`.
#[allow(clippy::too_many_arguments)]
fn flash_attn_varlen_fwd_as<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    qkv: Qkv<'_, T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    cu_seqlens_q: CuSeqlens<'_>,
    cu_seqlens_kv: CuSeqlens<'_>,
    args: &VarlenArgs,
    kernel: AttnKernel,
) -> Result<()> {
    let row_q = args.heads_q.saturating_mul(args.head_dim).max(1);
    let row_kv = args.heads_kv.saturating_mul(args.head_dim).max(1);
    let host = |c: CuSeqlens<'_>| -> Result<Vec<i32>> {
        match c {
            CuSeqlens::Host(s) => Ok(s.to_vec()),
            CuSeqlens::Device(b) => {
                call.device("cu_seqlens", b, stream)?;
                b.to_vec()
            }
        }
    };
    let (cq, ck) = (host(cu_seqlens_q)?, host(cu_seqlens_kv)?);
    let (q_len, k_len) = qkv.lens();
    check_cu(call, "cu_seqlens_q", &cq, q_len / row_q, args.max_seqlen_q)?;
    check_cu(
        call,
        "cu_seqlens_kv",
        &ck,
        k_len / row_kv,
        args.max_seqlen_kv,
    )?;
    let plan = varlen_plan::<T>(
        call,
        stream,
        args,
        &cu_seqlens_q,
        &cu_seqlens_kv,
        &cq,
        kernel,
        qkv.fp8(),
    )?;
    let total_kv = *ck.last().unwrap_or(&0) as usize;
    let nq = call.product(plan.total_q, row_q)?;
    let nkv = call.product(total_kv, row_kv)?;
    qkv.check(
        call,
        stream,
        nq,
        nkv,
        [
            "cu_seqlens_q[batch] * heads_q * head_dim",
            "cu_seqlens_kv[batch] * heads_kv * head_dim",
        ],
    )?;
    call.buffer(
        "out",
        out,
        stream,
        nq,
        "cu_seqlens_q[batch] * heads_q * head_dim",
    )?;
    call.aligned("out", out, VECTOR_BYTES)?;
    if let Some(l) = lse.as_deref() {
        call.buffer(
            "lse",
            l,
            stream,
            plan.total_q * plan.heads_q,
            "heads_q * total_q",
        )?;
    }
    let cu = (
        DeviceBuffer::from_slice(stream.device(), &cq)?,
        DeviceBuffer::from_slice(stream.device(), &ck)?,
    );
    // SAFETY: the offsets were validated against the tensors' row counts and the maximum
    // lengths; every buffer holds exactly its shape's elements.
    unsafe { launch(call, stream, &qkv, out, lse, Some((&cu.0, &cu.1)), &plan) }
}

/// [`flash_attn_varlen_fwd`] trusting device offsets and buffer lengths (host offsets are
/// still validated; shapes and options are checked).
///
/// # Safety
/// Device offsets must satisfy what [`flash_attn_varlen_fwd`] checks, and the buffers must
/// hold their shapes' elements with `total_q` = `cu_seqlens_q[batch]`, which a device
/// buffer `cu_seqlens_q` cannot tell the host: pass host offsets for q, or q's row count
/// is taken as `q.len() / (heads_q * head_dim)`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn flash_attn_varlen_fwd_unchecked<T: Element>(
    stream: &Stream,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    cu_seqlens_q: CuSeqlens<'_>,
    cu_seqlens_kv: CuSeqlens<'_>,
    args: &VarlenArgs,
) -> Result<()> {
    let call = Call::new("fly_attn::flash_attn_varlen_fwd_unchecked");
    let row_q = args.heads_q.saturating_mul(args.head_dim).max(1);
    let cq = match cu_seqlens_q {
        CuSeqlens::Host(s) => {
            check_cu(call, "cu_seqlens_q", s, usize::MAX, args.max_seqlen_q)?;
            s.to_vec()
        }
        CuSeqlens::Device(_) => vec![0, (q.len() / row_q) as i32],
    };
    if let CuSeqlens::Host(s) = cu_seqlens_kv {
        check_cu(call, "cu_seqlens_kv", s, usize::MAX, args.max_seqlen_kv)?;
    }
    let plan = varlen_plan::<T>(
        call,
        stream,
        args,
        &cu_seqlens_q,
        &cu_seqlens_kv,
        &cq,
        AttnKernel::Auto,
        false,
    )?;
    let dev_cu = |c: CuSeqlens<'_>| -> Result<Option<DeviceBuffer<i32>>> {
        match c {
            CuSeqlens::Host(s) => Ok(Some(DeviceBuffer::from_slice(stream.device(), s)?)),
            CuSeqlens::Device(b) => {
                call.device("cu_seqlens", b, stream)?;
                Ok(None)
            }
        }
    };
    let (oq, ok) = (dev_cu(cu_seqlens_q)?, dev_cu(cu_seqlens_kv)?);
    let bq = match (&oq, cu_seqlens_q) {
        (Some(b), _) => b,
        (None, CuSeqlens::Device(b)) => b,
        (None, CuSeqlens::Host(_)) => unreachable!("host offsets are copied"),
    };
    let bk = match (&ok, cu_seqlens_kv) {
        (Some(b), _) => b,
        (None, CuSeqlens::Device(b)) => b,
        (None, CuSeqlens::Host(_)) => unreachable!("host offsets are copied"),
    };
    // SAFETY: forwarded from this function's contract.
    unsafe {
        launch(
            call,
            stream,
            &Qkv::Half(q, k, v),
            out,
            lse,
            Some((bq, bk)),
            &plan,
        )
    }
}

/// Dense FlashAttention forward of pre-quantized OCP fp8 e4m3fn q, k and v with per-tensor
/// descales (real value = fp8 value * descale): logits `softmax_scale * q_descale *
/// k_descale * (q . k)`, `P V` on the dequantized V, f32 softmax and accumulation, output
/// bf16. Layouts, masking, GQA/MQA, LSE and split-K are those of [`flash_attn_fwd`]; the
/// LSE includes the descaled scale.
///
/// Runs on the portable kernel on every target: q, k and v are converted exactly to bf16
/// as they are staged into LDS, so the MMAs run at the bf16 rate (native fp8 MMAs are
/// future work) and the global reads are half those of bf16.
///
/// Errors (before anything is written): those of [`flash_attn_fwd`], and a descale that is
/// not one f32 on the stream's device (naming `descales.q`, `descales.k` or `descales.v`).
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target, F8E4M3FN};
/// use fly_attn::{flash_attn_fp8_fwd, AttnArgs, Fp8Descales};
/// let dev = Device::sim(Target::Gfx950);
/// let s = dev.stream()?;
/// let a = AttnArgs::new(1, 3, 1, 64);
/// let q = DeviceBuffer::from_slice(&dev, &vec![F8E4M3FN::from_bits(0); 3 * 64])?;
/// // v = key index (e4m3fn 0, 1, 2: codes 0x00, 0x38, 0x40) times v_descale 0.5.
/// let codes = [0x00, 0x38, 0x40];
/// let v: Vec<F8E4M3FN> = (0..3 * 64).map(|i| F8E4M3FN::from_bits(codes[i / 64])).collect();
/// let v = DeviceBuffer::from_slice(&dev, &v)?;
/// let one = DeviceBuffer::from_slice(&dev, &[1.0f32])?;
/// let half = DeviceBuffer::from_slice(&dev, &[0.5f32])?;
/// let d = Fp8Descales { q: &one, k: &one, v: &half };
/// let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 3 * 64)?;
/// // q = 0: uniform attention, every output is 0.5 * mean(0, 1, 2) = 0.5.
/// flash_attn_fp8_fwd(&s, &q, &q, &v, d, &mut out, None, &a)?;
/// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 0.5));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_fp8_fwd(
    stream: &Stream,
    q: &DeviceBuffer<F8E4M3FN>,
    k: &DeviceBuffer<F8E4M3FN>,
    v: &DeviceBuffer<F8E4M3FN>,
    descales: Fp8Descales<'_>,
    out: &mut DeviceBuffer<bf16>,
    lse: Option<&mut DeviceBuffer<f32>>,
    args: &AttnArgs,
) -> Result<()> {
    let call = Call::new("fly_attn::flash_attn_fp8_fwd");
    let qkv = Qkv::Fp8(q, k, v, descales);
    dense_call(call, stream, qkv, out, lse, args, AttnKernel::Auto)
}

/// [`flash_attn_fp8_fwd`] on the kernel family `kernel` names: `Auto` and `Portable` run
/// the portable kernel; `Hopper` is an error (the Hopper kernel is 16-bit only) that
/// writes nothing.
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target, F8E4M3FN};
/// use fly_attn::{flash_attn_fp8_fwd_with, AttnArgs, AttnKernel, Fp8Descales};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let a = AttnArgs::new(1, 2, 1, 64);
/// let x = DeviceBuffer::from_slice(&dev, &vec![F8E4M3FN::from_bits(0x38); 2 * 64])?; // 1.0
/// let one = DeviceBuffer::from_slice(&dev, &[1.0f32])?;
/// let d = Fp8Descales { q: &one, k: &one, v: &one };
/// let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 2 * 64)?;
/// flash_attn_fp8_fwd_with(&s, &x, &x, &x, d, &mut out, None, &a, AttnKernel::Portable)?;
/// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 1.0));
/// let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 2 * 64)?;
/// let e = flash_attn_fp8_fwd_with(&s, &x, &x, &x, d, &mut out, None, &a, AttnKernel::Hopper);
/// assert!(e.unwrap_err().to_string().contains("16-bit only"));
/// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 0.0));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_fp8_fwd_with(
    stream: &Stream,
    q: &DeviceBuffer<F8E4M3FN>,
    k: &DeviceBuffer<F8E4M3FN>,
    v: &DeviceBuffer<F8E4M3FN>,
    descales: Fp8Descales<'_>,
    out: &mut DeviceBuffer<bf16>,
    lse: Option<&mut DeviceBuffer<f32>>,
    args: &AttnArgs,
    kernel: AttnKernel,
) -> Result<()> {
    let call = Call::new("fly_attn::flash_attn_fp8_fwd_with");
    let qkv = Qkv::Fp8(q, k, v, descales);
    dense_call(call, stream, qkv, out, lse, args, kernel)
}

/// Packed varlen [`flash_attn_fp8_fwd`]: the layouts and offsets of
/// [`flash_attn_varlen_fwd`] with e4m3fn q, k, v, their descales and bf16 out.
///
/// Errors (before anything is written): those of [`flash_attn_varlen_fwd`] and of the
/// descales ([`flash_attn_fp8_fwd`]).
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target, F8E4M3FN};
/// use fly_attn::{flash_attn_varlen_fp8_fwd, CuSeqlens, Fp8Descales, VarlenArgs};
/// let dev = Device::sim(Target::Gfx1201);
/// let s = dev.stream()?;
/// let a = VarlenArgs { max_seqlen_q: 2, max_seqlen_kv: 2, heads_q: 1, heads_kv: 1,
///     head_dim: 32, causal: false, softmax_scale: None, num_kv_splits: None };
/// let x = DeviceBuffer::from_slice(&dev, &vec![F8E4M3FN::from_bits(0x38); 4 * 32])?; // 1.0
/// let kv = DeviceBuffer::from_slice(&dev, &vec![F8E4M3FN::from_bits(0x38); 2 * 32])?;
/// let (one, d3) = (DeviceBuffer::from_slice(&dev, &[1.0f32])?, DeviceBuffer::from_slice(&dev, &[3.0f32])?);
/// let d = Fp8Descales { q: &one, k: &one, v: &d3 };
/// let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 4 * 32)?;
/// // Two sequences of 2 queries: on 2 keys (v = 1.0 * 3), then on 0 keys (zeros).
/// let (cq, ck) = ([0, 2, 4], [0, 2, 2]);
/// flash_attn_varlen_fp8_fwd(&s, &x, &kv, &kv, d, &mut out, None, CuSeqlens::Host(&cq), CuSeqlens::Host(&ck), &a)?;
/// let out = out.to_vec()?;
/// assert!(out[..64].iter().all(|x| x.to_f32() == 3.0));
/// assert!(out[64..].iter().all(|x| x.to_f32() == 0.0));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_varlen_fp8_fwd(
    stream: &Stream,
    q: &DeviceBuffer<F8E4M3FN>,
    k: &DeviceBuffer<F8E4M3FN>,
    v: &DeviceBuffer<F8E4M3FN>,
    descales: Fp8Descales<'_>,
    out: &mut DeviceBuffer<bf16>,
    lse: Option<&mut DeviceBuffer<f32>>,
    cu_seqlens_q: CuSeqlens<'_>,
    cu_seqlens_kv: CuSeqlens<'_>,
    args: &VarlenArgs,
) -> Result<()> {
    flash_attn_varlen_fwd_as(
        Call::new("fly_attn::flash_attn_varlen_fp8_fwd"),
        stream,
        Qkv::Fp8(q, k, v, descales),
        out,
        lse,
        cu_seqlens_q,
        cu_seqlens_kv,
        args,
        AttnKernel::Auto,
    )
}

/// [`flash_attn_varlen_fp8_fwd`] on the kernel family `kernel` names (`Hopper` is an
/// error: it is dense and 16-bit only).
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target, F8E4M3FN};
/// use fly_attn::{flash_attn_varlen_fp8_fwd_with, AttnKernel, CuSeqlens, Fp8Descales, VarlenArgs};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream()?;
/// let a = VarlenArgs { max_seqlen_q: 1, max_seqlen_kv: 1, heads_q: 1, heads_kv: 1,
///     head_dim: 64, causal: false, softmax_scale: None, num_kv_splits: None };
/// let x = DeviceBuffer::from_slice(&dev, &vec![F8E4M3FN::from_bits(0x38); 64])?;
/// let one = DeviceBuffer::from_slice(&dev, &[1.0f32])?;
/// let d = Fp8Descales { q: &one, k: &one, v: &one };
/// let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 64)?;
/// let cu = [0, 1];
/// let mut run = |k| flash_attn_varlen_fp8_fwd_with(&s, &x, &x, &x, d, &mut out, None,
///     CuSeqlens::Host(&cu), CuSeqlens::Host(&cu), &a, k);
/// run(AttnKernel::Portable)?;
/// assert!(run(AttnKernel::Hopper).is_err());
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_varlen_fp8_fwd_with(
    stream: &Stream,
    q: &DeviceBuffer<F8E4M3FN>,
    k: &DeviceBuffer<F8E4M3FN>,
    v: &DeviceBuffer<F8E4M3FN>,
    descales: Fp8Descales<'_>,
    out: &mut DeviceBuffer<bf16>,
    lse: Option<&mut DeviceBuffer<f32>>,
    cu_seqlens_q: CuSeqlens<'_>,
    cu_seqlens_kv: CuSeqlens<'_>,
    args: &VarlenArgs,
    kernel: AttnKernel,
) -> Result<()> {
    flash_attn_varlen_fwd_as(
        Call::new("fly_attn::flash_attn_varlen_fp8_fwd_with"),
        stream,
        Qkv::Fp8(q, k, v, descales),
        out,
        lse,
        cu_seqlens_q,
        cu_seqlens_kv,
        args,
        kernel,
    )
}

/// Offsets start at 0, never decrease, end at `rows` (unless `rows` is `usize::MAX`) and
/// no sequence is longer than `max_len`.
fn check_cu(call: Call<'_>, arg: &str, cu: &[i32], rows: usize, max_len: usize) -> Result<()> {
    if cu.len() < 2 {
        return Err(call.error(
            arg,
            format_args!("{cu:?}"),
            "needs batch + 1 >= 2 offsets",
            "pass [0, len_0, len_0 + len_1, ...]",
        ));
    }
    if cu[0] != 0 {
        return Err(call.error(
            arg,
            format_args!("[{}, ..]", cu[0]),
            "the first offset must be 0",
            "start the cumulative lengths at 0",
        ));
    }
    for (b, w) in cu.windows(2).enumerate() {
        if w[1] < w[0] {
            return Err(call.error(
                arg,
                format_args!("[{b}] = {}, [{}] = {}", w[0], b + 1, w[1]),
                "offsets must not decrease (lengths are differences of neighbours)",
                "pass cumulative sums of non-negative lengths",
            ));
        }
        let len = (w[1] - w[0]) as usize;
        if len > max_len {
            return Err(call.error(
                arg,
                format_args!("sequence {b} of length {len}"),
                format_args!("longer than the max length {max_len}"),
                "pass max_seqlen_* >= every sequence length",
            ));
        }
    }
    let last = cu[cu.len() - 1] as usize;
    if rows != usize::MAX && last != rows {
        return Err(call.error(
            arg,
            format_args!("[.., {last}]"),
            format_args!("the last offset must equal the tensor's {rows} rows"),
            "pass offsets ending at the packed row count (or tensors of that many rows)",
        ));
    }
    Ok(())
}

/// Checks shared by both layouts; returns (family, splits, scale).
#[allow(clippy::too_many_arguments)]
fn common<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    kernel: AttnKernel,
    varlen: bool,
    fp8: bool,
    tma_aligned: bool,
    heads_q: usize,
    heads_kv: usize,
    head_dim: usize,
    scale: Option<f32>,
    splits: Option<usize>,
    batch: usize,
    max_sq: usize,
    max_skv: usize,
) -> Result<(Family, usize, f32)> {
    if heads_kv == 0 || heads_q == 0 || !heads_q.is_multiple_of(heads_kv) {
        return Err(call.error(
            "heads_q, heads_kv",
            format_args!("{heads_q}, {heads_kv}"),
            "heads_q must be a positive multiple of heads_kv >= 1 (MHA, GQA, MQA)",
            "pass head counts with heads_q % heads_kv == 0",
        ));
    }
    let dev = stream.device();
    dispatch::portable_tile(head_dim).map_err(|m| call.error(m.arg, m.value, m.rule, m.fix))?;
    call.at_most(
        "heads_q * head_dim",
        heads_q.saturating_mul(head_dim),
        (i32::MAX as usize) / BM,
        "use fewer heads per call",
    )?;
    for (n, v) in [
        ("batch", batch),
        ("seqlen_q", max_sq),
        ("seqlen_kv", max_skv),
    ] {
        call.at_most(n, v, MAX_ROWS, "split the call")?;
    }
    let scale = match scale {
        None => 1.0 / (head_dim as f32).sqrt(),
        Some(s) if s.is_finite() && s > 0.0 => s,
        Some(s) => {
            return Err(call.error(
                "softmax_scale",
                s,
                "the scale must be finite and > 0",
                "pass None for 1 / sqrt(head_dim), or a positive scale",
            ))
        }
    };
    if let Some(n) = splits.filter(|n| !(1..=MAX_SPLITS).contains(n)) {
        return Err(call.error(
            "num_kv_splits",
            n,
            format_args!("splits must be in 1 ..= {MAX_SPLITS}"),
            "pass None for the automatic choice, or 1 ..= 64",
        ));
    }
    let problem = Problem {
        target: dev.target(),
        dtype: T::DTYPE,
        fp8,
        batch,
        seqlen_q: max_sq,
        seqlen_kv: max_skv,
        heads_q,
        heads_kv,
        head_dim,
        varlen,
        splits,
        auto_splits: dispatch::auto_splits_on(dev, batch, heads_q, max_sq, max_skv),
        decode_splits: dispatch::decode_splits_on(dev, batch, heads_q, heads_kv, max_sq, max_skv),
        tma_aligned,
    };
    let (family, splits) = dispatch::family(&problem, kernel)
        .map_err(|m| call.error(m.arg, m.value, m.rule, m.fix))?;
    Ok((family, splits, scale))
}

/// The kernels `p` launches exist for the stream's device (else the error naming the
/// build feature, or the dtype without kernels).
fn check_kernels<T: Element>(call: Call<'_>, stream: &Stream, p: &Plan) -> Result<()> {
    match p.family {
        Family::Portable { head_tile } => {
            let fwd = if p.fp8 {
                kernels::forward_fp8::<T>(head_tile).map(|l| l.kernel)
            } else {
                kernels::forward::<T>(head_tile).map(|l| l.kernel)
            };
            let fwd = fwd.ok_or_else(|| no_kernel::<T>(call, stream))?;
            call.kernel(stream, fwd)?;
            if p.splits > 1 {
                let c = kernels::combine::<T>().ok_or_else(|| no_kernel::<T>(call, stream))?;
                call.kernel(stream, c.kernel)?;
            }
        }
        Family::Hopper { head_dim } => {
            let h = kernels::hopper::<T>(head_dim, p.causal)
                .ok_or_else(|| no_kernel::<T>(call, stream))?;
            call.kernel(stream, h.kernel)?;
        }
        Family::Decode {
            head_tile, rows, ..
        } => {
            let d = kernels::decode::<T>(head_tile, rows)
                .ok_or_else(|| no_kernel::<T>(call, stream))?;
            call.kernel(stream, d.kernel)?;
            if p.splits > 1 {
                let c = kernels::combine::<T>().ok_or_else(|| no_kernel::<T>(call, stream))?;
                call.kernel(stream, c.kernel)?;
            }
        }
    }
    Ok(())
}

fn no_kernel<T: Element>(call: Call<'_>, stream: &Stream) -> flydsl_rt::Error {
    call.error(
        "q",
        format_args!("{} data on {}", T::DTYPE, stream.device().target()),
        "fly-attn has kernels for bf16 and f16 q, k, v, out (and fp8 e4m3fn q, k, v with \
         bf16 out: flash_attn_fp8_fwd)",
        "convert q, k and v to bf16 or f16",
    )
}

/// The kernel family and key split count a dense call with `args` on `stream` runs
/// ([`flash_attn_fwd_with`] with `kernel`), for q, k and v at 16-byte aligned addresses
/// (what every fresh [`DeviceBuffer`] is); the call's argument errors otherwise. Benches
/// and logs use it to name what [`AttnKernel::Auto`] picked.
///
/// ```
/// use flydsl_rt::{half::bf16, Device, Target};
/// use fly_attn::{dense_family, dispatch::Family, AttnArgs, AttnKernel};
/// let s = Device::sim(Target::Gfx942).stream()?;
/// let a = AttnArgs { seqlen_q: 1, heads_kv: 2, ..AttnArgs::new(1, 4096, 8, 128) };
/// let (f, _) = dense_family::<bf16>(&s, &a, AttnKernel::Auto)?;
/// assert_eq!(f, Family::Decode { head_tile: 128, rows: 4, row_groups: 1 });
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn dense_family<T: Element>(
    stream: &Stream,
    args: &AttnArgs,
    kernel: AttnKernel,
) -> Result<(Family, usize)> {
    let call = Call::new("fly_attn::dense_family");
    let p = dense_plan::<T>(call, stream, args, kernel, false, true)?;
    Ok((p.family, p.splits))
}

fn dense_plan<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    a: &AttnArgs,
    kernel: AttnKernel,
    fp8: bool,
    tma_aligned: bool,
) -> Result<Plan> {
    if a.seqlen_kv == 0 && a.batch > 0 && a.seqlen_q > 0 {
        return Err(call.error(
            "seqlen_kv",
            0,
            "every query needs keys in the dense layout",
            "pass seqlen_kv >= 1 (varlen allows empty sequences)",
        ));
    }
    let (family, splits, scale) = common::<T>(
        call,
        stream,
        kernel,
        false,
        fp8,
        tma_aligned,
        a.heads_q,
        a.heads_kv,
        a.head_dim,
        a.softmax_scale,
        a.num_kv_splits,
        a.batch,
        a.seqlen_q,
        a.seqlen_kv,
    )?;
    let total_q = call.product(a.batch, a.seqlen_q)?;
    call.at_most(
        "batch * seqlen_q * heads_q",
        total_q.saturating_mul(a.heads_q),
        i32::MAX as usize,
        "split the batch",
    )?;
    let plan = Plan {
        batch: a.batch,
        max_sq: a.seqlen_q,
        seqlen_q: a.seqlen_q,
        seqlen_kv: a.seqlen_kv,
        heads_q: a.heads_q,
        heads_kv: a.heads_kv,
        head_dim: a.head_dim,
        family,
        fp8,
        total_q,
        varlen: false,
        causal: a.causal,
        splits,
        scale,
    };
    check_kernels::<T>(call, stream, &plan)?;
    Ok(plan)
}

fn varlen_plan<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    a: &VarlenArgs,
    cq: &CuSeqlens<'_>,
    ck: &CuSeqlens<'_>,
    host_q: &[i32],
    kernel: AttnKernel,
    fp8: bool,
) -> Result<Plan> {
    if cq.len() != ck.len() || cq.len() < 2 {
        return Err(call.error(
            "cu_seqlens_q, cu_seqlens_kv",
            format_args!("{} and {} offsets", cq.len(), ck.len()),
            "both need batch + 1 >= 2 offsets",
            "pass one offset per sequence boundary for q and for kv",
        ));
    }
    let batch = cq.len() - 1;
    let (family, splits, scale) = common::<T>(
        call,
        stream,
        kernel,
        true,
        fp8,
        true,
        a.heads_q,
        a.heads_kv,
        a.head_dim,
        a.softmax_scale,
        a.num_kv_splits,
        batch,
        a.max_seqlen_q,
        a.max_seqlen_kv,
    )?;
    let total_q = *host_q.last().unwrap_or(&0) as usize;
    call.at_most(
        "total_q * heads_q",
        total_q.saturating_mul(a.heads_q),
        i32::MAX as usize,
        "split the batch",
    )?;
    let plan = Plan {
        batch,
        max_sq: a.max_seqlen_q,
        seqlen_q: 0,
        seqlen_kv: 0,
        heads_q: a.heads_q,
        heads_kv: a.heads_kv,
        head_dim: a.head_dim,
        family,
        fp8,
        total_q,
        varlen: true,
        causal: a.causal,
        splits,
        scale,
    };
    check_kernels::<T>(call, stream, &plan)?;
    Ok(plan)
}

/// Launch the forward (and the combine with several splits).
///
/// # Safety
/// The buffers hold their shapes' elements; `cu` (varlen) holds valid offsets.
#[allow(clippy::too_many_arguments)]
unsafe fn launch<T: Element>(
    call: Call<'_>,
    stream: &Stream,
    qkv: &Qkv<'_, T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    cu: Option<(&DeviceBuffer<i32>, &DeviceBuffer<i32>)>,
    p: &Plan,
) -> Result<()> {
    if p.batch == 0 || p.max_sq == 0 || p.total_q == 0 {
        return Ok(());
    }
    let head_tile = match p.family {
        Family::Hopper { head_dim } => {
            let launcher = kernels::hopper::<T>(head_dim, p.causal);
            let tile = crate::table::HopperTile::of(head_dim);
            let (Some(launcher), Some(tile), Qkv::Half(q, k, v)) = (launcher, tile, qkv) else {
                return Err(no_kernel::<T>(call, stream));
            };
            let shape = crate::hopper::Shape {
                batch: p.batch,
                seqlen_q: p.seqlen_q,
                seqlen_kv: p.seqlen_kv,
                heads_q: p.heads_q,
                heads_kv: p.heads_kv,
                tile,
                scale: p.scale,
            };
            // SAFETY: forwarded from this function's contract (dense: `cu` is None).
            return unsafe { crate::hopper::launch(stream, launcher, q, k, v, out, lse, &shape) };
        }
        Family::Decode {
            head_tile,
            rows,
            row_groups,
        } => {
            let launcher = kernels::decode::<T>(head_tile, rows);
            let (Some(launcher), Qkv::Half(..)) = (launcher, qkv) else {
                return Err(no_kernel::<T>(call, stream));
            };
            let threads = crate::table::DECODE_WAVES * stream.device().wave_size();
            let grid = decode_grid(call, p, row_groups)?;
            (
                Some(launcher),
                0,
                LaunchConfig {
                    grid,
                    ..LaunchConfig::linear(1, threads)
                },
            )
        }
        Family::Portable { head_tile } => {
            (None, head_tile, portable_cfg(call, stream, p, head_tile)?)
        }
    };
    let (decode, head_tile, cfg) = head_tile;
    let dev = stream.device();
    let i = |x: usize| x as i32;
    let dummy_i = DeviceBuffer::<i32>::zeroed(dev, 2)?;
    let (cu_q, cu_kv) = cu.unwrap_or((&dummy_i, &dummy_i));
    let mut dummy_lse = DeviceBuffer::<f32>::zeroed(dev, 1)?;
    let write_lse = lse.is_some();
    let lse = match lse {
        Some(l) => l,
        None => &mut dummy_lse,
    };
    let scale_log2 = p.scale * std::f32::consts::LOG2_E;
    let rows = p.total_q * p.heads_q;
    let (mut ws_o, mut ws_lse) = if p.splits > 1 {
        (
            DeviceBuffer::<f32>::zeroed(dev, p.splits * rows * p.head_dim)?,
            DeviceBuffer::<f32>::zeroed(dev, p.splits * rows)?,
        )
    } else {
        (
            DeviceBuffer::<f32>::zeroed(dev, 1)?,
            DeviceBuffer::<f32>::zeroed(dev, 1)?,
        )
    };
    // SAFETY: the caller guarantees the buffer sizes and offsets; the workspace holds
    // splits * total_q * heads_q * (head_dim + 1) values; the kernels guard rows past each
    // sequence, columns past head_dim and heads past heads_q (portable: grid y is heads_q;
    // decode: grid y is heads_kv and the rows of a kv head are its heads_q / heads_kv query
    // heads times max_seqlen_q, guarded per row).
    unsafe {
        match *qkv {
            Qkv::Half(q, k, v) if decode.is_some() => {
                let dec = decode.ok_or_else(|| no_kernel::<T>(call, stream))?;
                (dec.launch)(
                    stream,
                    cfg,
                    q,
                    k,
                    v,
                    out,
                    lse,
                    &mut ws_o,
                    &mut ws_lse,
                    cu_q,
                    cu_kv,
                    i(p.seqlen_q),
                    i(p.seqlen_kv),
                    i(p.heads_q),
                    i(p.heads_kv),
                    i(p.head_dim),
                    i(p.total_q),
                    i32::from(p.varlen),
                    i32::from(p.causal),
                    i32::from(write_lse),
                    i(p.splits),
                    i(p.max_sq),
                    scale_log2,
                )
            }
            Qkv::Half(q, k, v) => {
                let fwd =
                    kernels::forward::<T>(head_tile).ok_or_else(|| no_kernel::<T>(call, stream))?;
                (fwd.launch)(
                    stream,
                    cfg,
                    q,
                    k,
                    v,
                    out,
                    lse,
                    &mut ws_o,
                    &mut ws_lse,
                    cu_q,
                    cu_kv,
                    i(p.seqlen_q),
                    i(p.seqlen_kv),
                    i(p.heads_q),
                    i(p.heads_kv),
                    i(p.head_dim),
                    i(p.total_q),
                    i32::from(p.varlen),
                    i32::from(p.causal),
                    i32::from(write_lse),
                    i(p.splits),
                    scale_log2,
                )
            }
            Qkv::Fp8(q, k, v, d) => {
                let fwd = kernels::forward_fp8::<T>(head_tile)
                    .ok_or_else(|| no_kernel::<T>(call, stream))?;
                (fwd.launch)(
                    stream,
                    cfg,
                    q,
                    k,
                    v,
                    d.q,
                    d.k,
                    d.v,
                    out,
                    lse,
                    &mut ws_o,
                    &mut ws_lse,
                    cu_q,
                    cu_kv,
                    i(p.seqlen_q),
                    i(p.seqlen_kv),
                    i(p.heads_q),
                    i(p.heads_kv),
                    i(p.head_dim),
                    i(p.total_q),
                    i32::from(p.varlen),
                    i32::from(p.causal),
                    i32::from(write_lse),
                    i(p.splits),
                    scale_log2,
                )
            }
        }
    }?;
    if p.splits > 1 {
        let c = kernels::combine::<T>().ok_or_else(|| no_kernel::<T>(call, stream))?;
        let cfg = LaunchConfig {
            grid: [p.total_q as u32, p.heads_q as u32, 1],
            ..LaunchConfig::linear(1, COMBINE_THREADS)
        };
        // SAFETY: the workspace was written for every (split, row, head) by the forward
        // launch above on the same stream; out and lse hold total_q * heads_q rows.
        unsafe {
            (c.launch)(
                stream,
                cfg,
                &ws_o,
                &ws_lse,
                out,
                lse,
                i(p.seqlen_q),
                i(p.heads_q),
                i(p.head_dim),
                i(p.total_q),
                i32::from(p.varlen),
                i32::from(write_lse),
                i(p.splits),
            )
        }?;
    }
    Ok(())
}

/// The portable kernel's launch: grid `(q tiles * passes, heads_q, batch * splits)`.
fn portable_cfg(
    call: Call<'_>,
    stream: &Stream,
    p: &Plan,
    head_tile: usize,
) -> Result<LaunchConfig> {
    let dev = stream.device();
    let threads = WAVES * dev.wave_size();
    let q_tiles = p.max_sq.div_ceil(BM) * crate::table::o_passes(dev.target(), head_tile) as usize;
    let z = p.batch * p.splits;
    if p.heads_q > 65535 {
        return Err(call.error(
            "heads_q",
            p.heads_q,
            "the grid's y extent (one workgroup row per query head) must be at most 65535",
            "split the heads over several calls",
        ));
    }
    let (gx, gy, gz) = (
        u32::try_from(q_tiles),
        p.heads_q as u32,
        u32::try_from(z).ok().filter(|&z| z <= 65535),
    );
    let (Ok(gx), Some(gz)) = (gx, gz) else {
        return Err(call.error(
            "batch * num_kv_splits",
            z,
            "the grid's z extent (batch x splits) must be at most 65535",
            "split the batch or use fewer splits",
        ));
    };
    let cfg = LaunchConfig {
        grid: [gx, gy, gz],
        ..LaunchConfig::linear(1, threads)
    };
    Ok(cfg)
}

/// The decode kernel's grid `(splits * row_groups, heads_kv, batch)` (bounds checked by
/// `dispatch::decode_mismatch`; checked again here for the error's sake).
fn decode_grid(call: Call<'_>, p: &Plan, row_groups: usize) -> Result<[u32; 3]> {
    let x = p.splits.saturating_mul(row_groups);
    match (
        u32::try_from(x).ok().filter(|&x| x <= i32::MAX as u32),
        u32::try_from(p.heads_kv).ok().filter(|&y| y <= 65535),
        u32::try_from(p.batch).ok().filter(|&z| z <= 65535),
    ) {
        (Some(x), Some(y), Some(z)) => Ok([x, y, z]),
        _ => Err(call.error(
            "batch, heads_kv, num_kv_splits",
            format_args!("{}, {}, {}", p.batch, p.heads_kv, p.splits),
            "the decode grid is (splits * row groups < 2^31, heads_kv <= 65535, batch <= 65535)",
            "split the call",
        )),
    }
}
