//! GEMM (fly-gemm) on foreign tensors: `out = epilogue(a @ b.T)` for 16-bit inputs and the
//! 8-bit scaled form.

use crate::call::{Alloc, Call, Ctx, View};
use crate::desc::{Dtype, Env, Tensor};
use crate::error::{BindError, Result};
use fly_gemm::{BLayout, Epilogue, GemmArgs, QuantElement};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Element, F8E4M3FN, F8E4M3FNUZ};

/// The 16-bit dtypes of A, B, bias and out, and the outputs of the scaled GEMM.
const HALVES: [Dtype; 2] = [Dtype::BF16, Dtype::F16];
/// The 8-bit input dtypes of the scaled GEMM.
const BYTES: [Dtype; 3] = [Dtype::F8E4M3FN, Dtype::F8E4M3FNUZ, Dtype::I8];

/// A GEMM call: `out[..., n] = act(a[..., k] @ b[n, k].T [+ bias[n]])`.
///
/// `a` is `[..., k]` (rows are every dimension but the last), `b` `[n, k]` (a linear layer's
/// weight; with `b_preshuffled` the output of `flydsl.preshuffle_b`, same shape), `bias`
/// `[n]`. With `scales` (8-bit inputs), `out = act((a @ b.T) * scale_a[m] * scale_b[n] +
/// bias)` with `scale_a` of `m` and `scale_b` of `n` float32 elements, and the output
/// dtype `out_dtype`. Output slot 0: `out` `a.shape[:-1] + [n]`.
#[derive(Clone, Debug)]
pub struct Gemm<'t> {
    /// The Python function's name.
    pub name: &'t str,
    /// A.
    pub a: &'t Tensor,
    /// B.
    pub b: &'t Tensor,
    /// `(scale_a, scale_b)` of the 8-bit GEMM.
    pub scales: Option<(&'t Tensor, &'t Tensor)>,
    /// Bias.
    pub bias: Option<&'t Tensor>,
    /// Activation after the bias: `None`, `relu`, `silu` or `gelu` (tanh approximation).
    pub activation: Option<&'t str>,
    /// B is in the preshuffled layout.
    pub b_preshuffled: bool,
    /// Output dtype of the 8-bit GEMM (the 16-bit GEMM writes a's dtype).
    pub out_dtype: Option<&'t str>,
    /// The caller's output.
    pub out: Option<&'t Tensor>,
}

/// The epilogue for a bias (or none) and an activation name.
///
/// ```
/// use flydsl_bind::gemm::epilogue;
/// use fly_gemm::Epilogue;
/// assert_eq!(epilogue(true, Some("silu")), Ok(Epilogue::BiasSilu));
/// assert_eq!(epilogue(false, None), Ok(Epilogue::None));
/// assert!(epilogue(false, Some("relu")).is_err()); // the activations follow a bias
/// assert!(epilogue(true, Some("tanh")).is_err());
/// ```
pub fn epilogue(bias: bool, activation: Option<&str>) -> std::result::Result<Epilogue, String> {
    match (bias, activation) {
        (false, None) => Ok(Epilogue::None),
        (true, None) => Ok(Epilogue::Bias),
        (true, Some("relu")) => Ok(Epilogue::BiasRelu),
        (true, Some("silu")) => Ok(Epilogue::BiasSilu),
        (true, Some("gelu")) => Ok(Epilogue::BiasGelu),
        (false, Some("relu" | "silu" | "gelu")) => Err(
            "the fused activations follow a bias add; pass a bias (torch.zeros(n) for none)".into(),
        ),
        (_, Some(other)) => Err(format!(
            "{other:?} is not an activation; pass None, \"relu\", \"silu\" or \"gelu\""
        )),
    }
}

/// Run a [`Gemm`]; the output.
///
/// # Safety
/// Every tensor describes live memory of its device as the crate docs require.
pub unsafe fn gemm(env: Env, alloc: &mut dyn Alloc, g: &Gemm<'_>) -> Result<View> {
    let mut c = Call::new(g.name, env, alloc);
    let epi = epilogue(g.bias.is_some(), g.activation).map_err(|fix| {
        c.value_error(
            "activation",
            format_args!("{:?}", g.activation),
            "the epilogue is a bias add optionally followed by relu, silu or gelu",
            fix,
        )
    })?;
    let a_dtypes: &[Dtype] = if g.scales.is_some() { &BYTES } else { &HALVES };
    let a = c.input("a", g.a, a_dtypes)?;
    c.expect_rows(&a, "rows of k")?;
    let k = a.last();
    let m: usize = a.leading().iter().product();
    let b = c.input("b", g.b, &[a.dtype])?;
    c.expect_ndim(&b, 2, "[n, k]")?;
    let n = b.shape[0];
    if b.shape[1] != k {
        return Err(c.value_error(
            "b",
            format_args!("a tensor of shape {}", crate::call::shape_str(&b.shape)),
            format_args!("b is [n, k] with k = a.shape[-1] = {k}"),
            "pass b with as many columns as a (a linear layer's weight [out, in])",
        ));
    }
    let out_dtype = match (&g.scales, g.out_dtype) {
        (None, _) => a.dtype,
        (Some(_), None) => Dtype::BF16,
        (Some(_), Some(s)) => match Dtype::parse(s) {
            Some(d) if HALVES.contains(&d) => d,
            _ => {
                return Err(c.error(
                    crate::ErrorKind::Type,
                    "out_dtype",
                    s,
                    "the 8-bit GEMM writes torch.bfloat16 or torch.float16",
                    "pass one of them",
                ))
            }
        },
    };
    let scales = match g.scales {
        Some((sa, sb)) => {
            let sa = c.input("scale_a", sa, &[Dtype::F32])?;
            c.expect_numel(&sa, m, "one per row of a")?;
            let sb = c.input("scale_b", sb, &[Dtype::F32])?;
            c.expect_numel(&sb, n, "one per row of b")?;
            Some((sa, sb))
        }
        None => None,
    };
    let bias = c.opt_input("bias", g.bias, &[out_dtype])?;
    if let Some(v) = &bias {
        c.expect_shape(v, &[n], "[n] = [b.shape[0]]")?;
    }
    let mut shape = a.leading().to_vec();
    shape.push(n);
    let out = c.output("out", 0, g.out, &shape, out_dtype)?;
    let ctx = c.finish()?;
    let args = GemmArgs {
        m,
        n,
        k,
        epilogue: epi,
        b_layout: if g.b_preshuffled {
            BLayout::Preshuffled
        } else {
            BLayout::Plain
        },
    };
    let v = Views {
        a: &a,
        b: &b,
        bias: bias.as_ref(),
        out: &out,
    };
    match (&scales, out_dtype) {
        // SAFETY (every arm): forwarded from this function's contract; the type parameters
        // are the views' dtypes.
        (None, Dtype::BF16) => unsafe { run16::<bf16>(&ctx, &v, args) },
        (None, Dtype::F16) => unsafe { run16::<f16>(&ctx, &v, args) },
        (Some((sa, sb)), o) => {
            let s = (sa, sb);
            match (a.dtype, o) {
                (Dtype::F8E4M3FN, Dtype::BF16) => unsafe {
                    run8::<F8E4M3FN, bf16>(&ctx, &v, s, args)
                },
                (Dtype::F8E4M3FN, Dtype::F16) => unsafe {
                    run8::<F8E4M3FN, f16>(&ctx, &v, s, args)
                },
                (Dtype::F8E4M3FNUZ, Dtype::BF16) => unsafe {
                    run8::<F8E4M3FNUZ, bf16>(&ctx, &v, s, args)
                },
                (Dtype::F8E4M3FNUZ, Dtype::F16) => unsafe {
                    run8::<F8E4M3FNUZ, f16>(&ctx, &v, s, args)
                },
                (Dtype::I8, Dtype::BF16) => unsafe { run8::<i8, bf16>(&ctx, &v, s, args) },
                (Dtype::I8, Dtype::F16) => unsafe { run8::<i8, f16>(&ctx, &v, s, args) },
                (q, o) => Err(crate::internal(&ctx, format_args!("gemm of {q} into {o}"))),
            }
        }
        (None, o) => Err(crate::internal(&ctx, format_args!("gemm into {o}"))),
    }?;
    Ok(out)
}

struct Views<'v> {
    a: &'v View,
    b: &'v View,
    bias: Option<&'v View>,
    out: &'v View,
}

/// # Safety
/// As [`gemm`]; a, b, bias and out are `T`.
unsafe fn run16<T: Element>(ctx: &Ctx, v: &Views<'_>, args: GemmArgs) -> Result<()> {
    // SAFETY: forwarded from this function's contract.
    let (a, b, mut out) = unsafe { (ctx.buf::<T>(v.a)?, ctx.buf::<T>(v.b)?, ctx.buf::<T>(v.out)?) };
    // SAFETY: as above.
    let bias = v.bias.map(|b| unsafe { ctx.buf::<T>(b) }).transpose()?;
    fly_gemm::gemm(ctx.stream(), &a, &b, bias.as_ref(), &mut out, args).map_err(|e| ctx.rt(e))
}

/// # Safety
/// As [`gemm`]; a and b are `Q`, bias and out `T`, the scales f32.
unsafe fn run8<Q: QuantElement, T: Element>(
    ctx: &Ctx,
    v: &Views<'_>,
    (sa, sb): (&View, &View),
    args: GemmArgs,
) -> Result<()> {
    // SAFETY: forwarded from this function's contract.
    let (a, b, mut out) = unsafe { (ctx.buf::<Q>(v.a)?, ctx.buf::<Q>(v.b)?, ctx.buf::<T>(v.out)?) };
    // SAFETY: as above.
    let (sa, sb) = unsafe { (ctx.buf::<f32>(sa)?, ctx.buf::<f32>(sb)?) };
    // SAFETY: as above.
    let bias = v.bias.map(|b| unsafe { ctx.buf::<T>(b) }).transpose()?;
    fly_gemm::gemm_scaled(
        ctx.stream(),
        &a,
        &b,
        &sa,
        &sb,
        bias.as_ref(),
        &mut out,
        args,
    )
    .map_err(|e| ctx.rt(e))
}

/// fly-gemm's host-side B preshuffle of the row-major `[n, k]` matrix `b` of `elem_bytes`-byte
/// elements (1 or 2), as bytes: the layout `b_preshuffled` expects. For checking a
/// framework-side preshuffle against this one.
///
/// ```
/// let (n, k) = (16, 64);
/// let b: Vec<u8> = (0..n * k).map(|i| i as u8).collect();
/// let s = flydsl_bind::gemm::preshuffle_b_bytes(&b, n, k, 1).unwrap();
/// assert_eq!(s.len(), b.len());
/// assert_eq!(&s[..16], &b[..16]); // row 0, bytes 0..16 first
/// assert_eq!(s[16], b[k]); // then row 1's first chunk
/// assert!(flydsl_bind::gemm::preshuffle_b_bytes(&b, n, k, 4).is_err());
/// ```
pub fn preshuffle_b_bytes(b: &[u8], n: usize, k: usize, elem_bytes: usize) -> Result<Vec<u8>> {
    let op = "flydsl.preshuffle_b";
    let rt = |e| BindError::from_rt(op, e);
    match elem_bytes {
        1 => fly_gemm::preshuffle_b(b, n, k).map_err(rt),
        2 => {
            let v: Vec<u16> = b
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            if v.len() * 2 != b.len() {
                return Err(BindError::new(
                    crate::ErrorKind::Value,
                    format!(
                        "{op}: {} bytes is not a whole number of 2-byte elements",
                        b.len()
                    ),
                ));
            }
            let s = fly_gemm::preshuffle_b(&v, n, k).map_err(rt)?;
            Ok(s.iter().flat_map(|x| x.to_le_bytes()).collect())
        }
        other => Err(BindError::new(
            crate::ErrorKind::Value,
            format!("{op}: `elem_bytes` = {other}: B has 1- or 2-byte elements; pass 1 or 2"),
        )),
    }
}
