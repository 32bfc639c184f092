//! FlashAttention forward (fly-attn) on foreign tensors: dense BSHD or packed varlen, 16-bit
//! or fp8 e4m3fn with per-tensor descales.

use crate::call::{Alloc, Call, Ctx, View};
use crate::desc::{Dtype, Env, Tensor};
use crate::error::Result;
use fly_attn::{AttnArgs, AttnKernel, CuSeqlens, Fp8Descales, VarlenArgs};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{DeviceBuffer, Element, F8E4M3FN};

/// Cumulative sequence offsets of a varlen call: host values, or an int32 tensor on the
/// call's device (read back and validated by fly-attn: a synchronizing copy).
#[derive(Clone, Debug)]
pub enum Seqlens<'t> {
    /// Host values.
    Host(Vec<i64>),
    /// A device tensor of `batch + 1` int32.
    Device(&'t Tensor),
}

/// The packed varlen layout: q `[total_q, heads_q, head_dim]`, k and v `[total_kv,
/// heads_kv, head_dim]`, `batch + 1` offsets each.
#[derive(Clone, Debug)]
pub struct Varlen<'t> {
    /// Query offsets.
    pub cu_seqlens_q: Seqlens<'t>,
    /// Key offsets.
    pub cu_seqlens_kv: Seqlens<'t>,
    /// Longest query sequence.
    pub max_seqlen_q: i64,
    /// Longest key sequence.
    pub max_seqlen_kv: i64,
}

/// An attention call. Dense: q `[batch, seqlen_q, heads_q, head_dim]`, k and v `[batch,
/// seqlen_kv, heads_kv, head_dim]`, LSE `[batch, heads_q, seqlen_q]` f32; varlen: see
/// [`Varlen`], LSE `[heads_q, total_q]`. 16-bit q, k, v (bf16 or f16; out of their dtype) or,
/// with `descales`, float8_e4m3fn q, k, v with three 1-element float32 descales (out
/// bf16). Output slots: 0 `out` (like q), 1 `lse` (with `return_lse`).
#[derive(Clone, Debug)]
pub struct Attn<'t> {
    /// The Python function's name.
    pub name: &'t str,
    /// Queries.
    pub q: &'t Tensor,
    /// Keys.
    pub k: &'t Tensor,
    /// Values.
    pub v: &'t Tensor,
    /// `(q_descale, k_descale, v_descale)` of fp8 inputs.
    pub descales: Option<[&'t Tensor; 3]>,
    /// Varlen offsets (`None`: dense).
    pub varlen: Option<Varlen<'t>>,
    /// Bottom-right aligned causal mask.
    pub causal: bool,
    /// Softmax scale (`None`: `1 / sqrt(head_dim)`).
    pub softmax_scale: Option<f64>,
    /// Key splits (`None`: automatic).
    pub num_kv_splits: Option<i64>,
    /// Kernel family: `auto`, `portable` or `hopper`.
    pub kernel: &'t str,
    /// Write the LSE.
    pub return_lse: bool,
    /// The caller's outputs by slot.
    pub outs: [Option<&'t Tensor>; 2],
}

/// Run an [`Attn`]; the outputs by slot.
///
/// # Safety
/// Every tensor describes live memory of its device as the crate docs require.
pub unsafe fn attention(
    env: Env,
    alloc: &mut dyn Alloc,
    a: &Attn<'_>,
) -> Result<[Option<View>; 2]> {
    let mut c = Call::new(a.name, env, alloc);
    let kernel = match a.kernel {
        "auto" => AttnKernel::Auto,
        "portable" => AttnKernel::Portable,
        "hopper" => AttnKernel::Hopper,
        other => {
            return Err(c.value_error(
                "kernel",
                format_args!("{other:?}"),
                "the kernel family is \"auto\", \"portable\" or \"hopper\"",
                "pass one of them",
            ))
        }
    };
    let splits = match a.num_kv_splits {
        None => None,
        Some(s) => Some(usize::try_from(s).map_err(|_| {
            c.value_error(
                "num_kv_splits",
                s,
                "splits are positive",
                "pass None or 1 ..= 64",
            )
        })?),
    };
    let fp8 = a.descales.is_some();
    let qkv_dtypes: &[Dtype] = if fp8 {
        &[Dtype::F8E4M3FN]
    } else {
        &[Dtype::BF16, Dtype::F16]
    };
    let q = c.input("q", a.q, qkv_dtypes)?;
    let k = c.input("k", a.k, &[q.dtype])?;
    let v = c.input("v", a.v, &[q.dtype])?;
    let (dense, lay) = match &a.varlen {
        None => (true, "[batch, seqlen, heads, head_dim]"),
        Some(_) => (false, "[total, heads, head_dim]"),
    };
    let rank = if dense { 4 } else { 3 };
    c.expect_ndim(&q, rank, lay)?;
    c.expect_ndim(&k, rank, lay)?;
    c.expect_shape(&v, &k.shape, "the shape of k")?;
    let d = q.last();
    let hq = q.shape[rank - 2];
    let hkv = k.shape[rank - 2];
    if k.last() != d {
        return Err(c.value_error(
            "k",
            format_args!("a tensor of shape {}", crate::call::shape_str(&k.shape)),
            format_args!("k's head_dim (last dimension) must equal q's ({d})"),
            "pass q, k and v of one head_dim",
        ));
    }
    if dense && k.shape[0] != q.shape[0] {
        return Err(c.value_error(
            "k",
            format_args!("a tensor of shape {}", crate::call::shape_str(&k.shape)),
            format_args!(
                "k's batch (first dimension) must equal q's ({})",
                q.shape[0]
            ),
            "pass q, k and v of one batch",
        ));
    }
    let descales = match a.descales {
        Some([dq, dk, dv]) => {
            let mut one = |arg, t| -> Result<View> {
                let view = c.input(arg, t, &[Dtype::F32])?;
                c.expect_numel(&view, 1, "a per-tensor descale")?;
                Ok(view)
            };
            Some([
                one("q_descale", dq)?,
                one("k_descale", dk)?,
                one("v_descale", dv)?,
            ])
        }
        None => None,
    };
    let seqlens = match &a.varlen {
        None => None,
        Some(vl) => {
            let mut one = |arg, s: &Seqlens<'_>| -> Result<Offsets> {
                match s {
                    Seqlens::Host(v) => {
                        let mut out = Vec::with_capacity(v.len());
                        for &x in v {
                            out.push(i32::try_from(x).map_err(|_| {
                                c.value_error(
                                    arg,
                                    x,
                                    "offsets are int32 values",
                                    "pass offsets below 2**31",
                                )
                            })?);
                        }
                        Ok(Offsets::Host(out))
                    }
                    Seqlens::Device(t) => Ok(Offsets::Device(c.input(arg, t, &[Dtype::I32])?)),
                }
            };
            let cq = one("cu_seqlens_q", &vl.cu_seqlens_q)?;
            let ck = one("cu_seqlens_kv", &vl.cu_seqlens_kv)?;
            let max = |arg, x: i64| {
                usize::try_from(x).map_err(|_| {
                    c.value_error(
                        arg,
                        x,
                        "lengths are non-negative",
                        "pass the longest sequence's length",
                    )
                })
            };
            Some((
                cq,
                ck,
                max("max_seqlen_q", vl.max_seqlen_q)?,
                max("max_seqlen_kv", vl.max_seqlen_kv)?,
            ))
        }
    };
    let out_dtype = if fp8 { Dtype::BF16 } else { q.dtype };
    let out = c.output("out", 0, a.outs[0], &q.shape, out_dtype)?;
    let lse = if a.return_lse {
        let shape = if dense {
            vec![q.shape[0], hq, q.shape[1]]
        } else {
            vec![hq, q.shape[0]]
        };
        Some(c.output("lse", 1, a.outs[1], &shape, Dtype::F32)?)
    } else {
        None
    };
    let ctx = c.finish()?;
    let scale = a.softmax_scale.map(|s| s as f32);
    let shape = match seqlens {
        None => Shape::Dense(AttnArgs {
            batch: q.shape[0],
            seqlen_q: q.shape[1],
            seqlen_kv: k.shape[1],
            heads_q: hq,
            heads_kv: hkv,
            head_dim: d,
            causal: a.causal,
            softmax_scale: scale,
            num_kv_splits: splits,
        }),
        Some((cq, ck, mq, mk)) => Shape::Varlen(
            VarlenArgs {
                max_seqlen_q: mq,
                max_seqlen_kv: mk,
                heads_q: hq,
                heads_kv: hkv,
                head_dim: d,
                causal: a.causal,
                softmax_scale: scale,
                num_kv_splits: splits,
            },
            cq,
            ck,
        ),
    };
    let views = Views {
        q: &q,
        k: &k,
        v: &v,
        descales: descales.as_ref(),
        out: &out,
        lse: lse.as_ref(),
    };
    // SAFETY (every arm): forwarded from this function's contract; the type parameter is the
    // dtype of q, k, v and out.
    match (fp8, q.dtype) {
        (true, _) => unsafe { run::<F8E4M3FN, bf16>(&ctx, &views, &shape, kernel) },
        (false, Dtype::BF16) => unsafe { run::<bf16, bf16>(&ctx, &views, &shape, kernel) },
        (false, Dtype::F16) => unsafe { run::<f16, f16>(&ctx, &views, &shape, kernel) },
        (false, other) => Err(crate::internal(&ctx, format_args!("attention on {other}"))),
    }?;
    Ok([Some(out), lse])
}

enum Offsets {
    Host(Vec<i32>),
    Device(View),
}

enum Shape {
    Dense(AttnArgs),
    Varlen(VarlenArgs, Offsets, Offsets),
}

struct Views<'v> {
    q: &'v View,
    k: &'v View,
    v: &'v View,
    descales: Option<&'v [View; 3]>,
    out: &'v View,
    lse: Option<&'v View>,
}

/// The element types of one attention call: inputs `I` and output `O` (`I == O` for 16-bit;
/// e4m3fn into bf16).
trait Pair<O: Element>: flydsl_rt::DeviceRepr {
    /// The fly-attn entry point for these types.
    #[allow(clippy::too_many_arguments)]
    fn call(
        ctx: &Ctx,
        q: &DeviceBuffer<Self>,
        k: &DeviceBuffer<Self>,
        v: &DeviceBuffer<Self>,
        descales: Option<Fp8Descales<'_>>,
        out: &mut DeviceBuffer<O>,
        lse: Option<&mut DeviceBuffer<f32>>,
        shape: &ShapeBufs<'_>,
        kernel: AttnKernel,
    ) -> flydsl_rt::Result<()>;
}

/// The shape with device offsets wrapped.
enum ShapeBufs<'a> {
    Dense(&'a AttnArgs),
    Varlen(&'a VarlenArgs, CuSeqlens<'a>, CuSeqlens<'a>),
}

macro_rules! half_pair {
    ($t:ty) => {
        impl Pair<$t> for $t {
            fn call(
                ctx: &Ctx,
                q: &DeviceBuffer<$t>,
                k: &DeviceBuffer<$t>,
                v: &DeviceBuffer<$t>,
                _: Option<Fp8Descales<'_>>,
                out: &mut DeviceBuffer<$t>,
                lse: Option<&mut DeviceBuffer<f32>>,
                shape: &ShapeBufs<'_>,
                kernel: AttnKernel,
            ) -> flydsl_rt::Result<()> {
                let s = ctx.stream();
                match shape {
                    ShapeBufs::Dense(a) => {
                        fly_attn::flash_attn_fwd_with(s, q, k, v, out, lse, a, kernel)
                    }
                    ShapeBufs::Varlen(a, cq, ck) => fly_attn::flash_attn_varlen_fwd_with(
                        s, q, k, v, out, lse, *cq, *ck, a, kernel,
                    ),
                }
            }
        }
    };
}
half_pair!(bf16);
half_pair!(f16);

impl Pair<bf16> for F8E4M3FN {
    fn call(
        ctx: &Ctx,
        q: &DeviceBuffer<F8E4M3FN>,
        k: &DeviceBuffer<F8E4M3FN>,
        v: &DeviceBuffer<F8E4M3FN>,
        descales: Option<Fp8Descales<'_>>,
        out: &mut DeviceBuffer<bf16>,
        lse: Option<&mut DeviceBuffer<f32>>,
        shape: &ShapeBufs<'_>,
        kernel: AttnKernel,
    ) -> flydsl_rt::Result<()> {
        let Some(d) = descales else {
            return Err(flydsl_rt::Error::InvalidArgument {
                op: ctx.op().into(),
                reason: "fp8 attention without descales (a flydsl-bind bug)".into(),
            });
        };
        let s = ctx.stream();
        match shape {
            ShapeBufs::Dense(a) => {
                fly_attn::flash_attn_fp8_fwd_with(s, q, k, v, d, out, lse, a, kernel)
            }
            ShapeBufs::Varlen(a, cq, ck) => fly_attn::flash_attn_varlen_fp8_fwd_with(
                s, q, k, v, d, out, lse, *cq, *ck, a, kernel,
            ),
        }
    }
}

/// # Safety
/// As [`attention`]; q, k, v are `I` and out `O`.
unsafe fn run<I: Pair<O>, O: Element>(
    ctx: &Ctx,
    v: &Views<'_>,
    shape: &Shape,
    kernel: AttnKernel,
) -> Result<()> {
    // SAFETY (every `buf` below): forwarded from this function's contract.
    let (q, k, vv) = unsafe { (ctx.buf::<I>(v.q)?, ctx.buf::<I>(v.k)?, ctx.buf::<I>(v.v)?) };
    let mut out = unsafe { ctx.buf::<O>(v.out)? };
    let mut lse = v.lse.map(|l| unsafe { ctx.buf::<f32>(l) }).transpose()?;
    let ds = match v.descales {
        Some([a, b, c]) => {
            Some(unsafe { [ctx.buf::<f32>(a)?, ctx.buf::<f32>(b)?, ctx.buf::<f32>(c)?] })
        }
        None => None,
    };
    let descales = ds.as_ref().map(|[q, k, v]| Fp8Descales { q, k, v });
    let dev = |o: &Offsets| -> Result<Option<DeviceBuffer<i32>>> {
        match o {
            Offsets::Device(view) => Ok(Some(unsafe { ctx.buf::<i32>(view)? })),
            Offsets::Host(_) => Ok(None),
        }
    };
    let r = match shape {
        Shape::Dense(a) => I::call(
            ctx,
            &q,
            &k,
            &vv,
            descales,
            &mut out,
            lse.as_mut(),
            &ShapeBufs::Dense(a),
            kernel,
        ),
        Shape::Varlen(a, oq, ok) => {
            let (bq, bk) = (dev(oq)?, dev(ok)?);
            let (Some(cq), Some(ck)) = (cu(oq, &bq), cu(ok, &bk)) else {
                return Err(crate::internal(ctx, "varlen offsets were not wrapped"));
            };
            I::call(
                ctx,
                &q,
                &k,
                &vv,
                descales,
                &mut out,
                lse.as_mut(),
                &ShapeBufs::Varlen(a, cq, ck),
                kernel,
            )
        }
    };
    r.map_err(|e| ctx.rt(e))
}

/// The offsets of a varlen call as fly-attn takes them (`b`: the device buffer of `o`).
fn cu<'a>(o: &'a Offsets, b: &'a Option<DeviceBuffer<i32>>) -> Option<CuSeqlens<'a>> {
    match (o, b) {
        (Offsets::Host(h), _) => Some(CuSeqlens::Host(h)),
        (Offsets::Device(_), Some(b)) => Some(CuSeqlens::Device(b)),
        (Offsets::Device(_), None) => None,
    }
}
