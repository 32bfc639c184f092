//! LayerNorm and RMSNorm (fly-norm) on foreign tensors: one forward with every option
//! (residual add, statistics, int8 quant) and one backward.

use crate::call::{Alloc, Call, Ctx, View};
use crate::desc::{Dtype, Env, Tensor};
use crate::error::Result;
use crate::float_type;
use fly_norm::{BwdBuffers, BwdStrategy, FwdBuffers, FwdOut, Norm, NormArgs, NormBwdArgs};
use flydsl_rt::Element;

const FLOATS: [Dtype; 3] = [Dtype::F32, Dtype::F16, Dtype::BF16];

/// A forward call: `y = norm(x [+ residual]) * weight [+ bias]`, optionally quantized to int8.
///
/// Layouts: `x` `[..., n]` (rows are every dimension but the last), `weight` and `bias` `[n]`,
/// `residual` like `x`, `xscale` `[n]` f32. Outputs (slots): 0 `out` (like `x`, or int8 `q`
/// with `quant`), 1 `yscale` (`x.shape[:-1]` f32, with `quant`), 2 `residual_out` (like `x`,
/// with `residual`), 3 `mean` and 4 `rstd` (`x.shape[:-1]` f32, with `stats`; RMSNorm writes
/// only `rstd`).
#[derive(Clone, Debug)]
pub struct NormFwd<'t> {
    /// The Python function's name (`rms_norm`, `layer_norm_quant`, ...).
    pub name: &'t str,
    /// Which norm.
    pub norm: Norm,
    /// Input.
    pub x: &'t Tensor,
    /// Fused residual add.
    pub residual: Option<&'t Tensor>,
    /// Scale.
    pub weight: &'t Tensor,
    /// LayerNorm bias.
    pub bias: Option<&'t Tensor>,
    /// int8 output (dynamic quant; smooth with `xscale`).
    pub quant: bool,
    /// Smooth-quant column scales.
    pub xscale: Option<&'t Tensor>,
    /// Write the per-row statistics.
    pub stats: bool,
    /// Epsilon.
    pub eps: f64,
    /// The caller's outputs by slot (`None`: allocate).
    pub outs: [Option<&'t Tensor>; 5],
}

/// Run a [`NormFwd`]; the outputs by slot (`None` for slots the call does not write).
///
/// # Safety
/// Every tensor describes live memory of its device as the crate docs require.
pub unsafe fn norm_fwd(
    env: Env,
    alloc: &mut dyn Alloc,
    a: &NormFwd<'_>,
) -> Result<[Option<View>; 5]> {
    let mut c = Call::new(a.name, env, alloc);
    let x = c.input("x", a.x, &FLOATS)?;
    c.expect_rows(&x, "rows of the last dimension")?;
    let n = x.last();
    if n == 0 {
        return Err(c.value_error(
            "x",
            format_args!("a tensor of shape {}", crate::call::shape_str(&x.shape)),
            "rows must have at least one element (x.shape[-1] >= 1)",
            "pass a non-empty last dimension",
        ));
    }
    let m = x.numel / n;
    let w = c.input("weight", a.weight, &FLOATS)?;
    c.expect_shape(&w, &[n], "[x.shape[-1]]")?;
    let bias = c.opt_input("bias", a.bias, &[w.dtype])?;
    if let Some(b) = &bias {
        c.expect_shape(b, &[n], "[x.shape[-1]]")?;
    }
    let residual = c.opt_input("residual", a.residual, &[x.dtype])?;
    if let Some(r) = &residual {
        c.expect_shape(r, &x.shape, "the shape of x")?;
    }
    let xscale = c.opt_input("xscale", a.xscale, &[Dtype::F32])?;
    if let Some(s) = &xscale {
        c.expect_shape(s, &[n], "[x.shape[-1]]")?;
    }
    let rows = x.leading().to_vec();
    let out_dtype = if a.quant { Dtype::I8 } else { x.dtype };
    let out_name = if a.quant { "q" } else { "out" };
    let mut outs: [Option<View>; 5] = Default::default();
    outs[0] = Some(c.output(out_name, 0, a.outs[0], &x.shape, out_dtype)?);
    if a.quant {
        outs[1] = Some(c.output("yscale", 1, a.outs[1], &rows, Dtype::F32)?);
    }
    if residual.is_some() {
        outs[2] = Some(c.output("residual_out", 2, a.outs[2], &x.shape, x.dtype)?);
    }
    if a.stats {
        if a.norm == Norm::Layer {
            outs[3] = Some(c.output("mean", 3, a.outs[3], &rows, Dtype::F32)?);
        }
        outs[4] = Some(c.output("rstd", 4, a.outs[4], &rows, Dtype::F32)?);
    }
    let ctx = c.finish()?;
    let args = NormArgs {
        m,
        n,
        eps: a.eps as f32,
    };
    let ins = FwdIns {
        x: &x,
        w: &w,
        bias: bias.as_ref(),
        residual: residual.as_ref(),
        xscale: xscale.as_ref(),
    };
    float_type!(ctx, x.dtype, T, {
        float_type!(ctx, w.dtype, W, {
            // SAFETY: forwarded from this function's contract.
            unsafe { fwd::<T, W>(&ctx, a.norm, &ins, &outs, args) }
        })
    })?;
    Ok(outs)
}

struct FwdIns<'v> {
    x: &'v View,
    w: &'v View,
    bias: Option<&'v View>,
    residual: Option<&'v View>,
    xscale: Option<&'v View>,
}

/// # Safety
/// As [`norm_fwd`].
unsafe fn fwd<T: Element, W: Element>(
    ctx: &Ctx,
    norm: Norm,
    i: &FwdIns<'_>,
    outs: &[Option<View>; 5],
    args: NormArgs,
) -> Result<()> {
    // SAFETY (every `buf` below): forwarded from this function's contract; each view's dtype
    // is the one its type parameter stands for.
    let (x, w) = unsafe { (ctx.buf::<T>(i.x)?, ctx.buf::<W>(i.w)?) };
    let bias = i.bias.map(|v| unsafe { ctx.buf::<W>(v) }).transpose()?;
    let residual = i.residual.map(|v| unsafe { ctx.buf::<T>(v) }).transpose()?;
    let xscale = i.xscale.map(|v| unsafe { ctx.buf::<f32>(v) }).transpose()?;
    let mut y = None;
    let mut q = None;
    match &outs[1] {
        Some(_) => q = Some(unsafe { ctx.buf::<i8>(slot(ctx, outs, 0)?)? }),
        None => y = Some(unsafe { ctx.buf::<T>(slot(ctx, outs, 0)?)? }),
    }
    let mut yscale = outs[1]
        .as_ref()
        .map(|v| unsafe { ctx.buf::<f32>(v) })
        .transpose()?;
    let mut rout = outs[2]
        .as_ref()
        .map(|v| unsafe { ctx.buf::<T>(v) })
        .transpose()?;
    let mut mean = outs[3]
        .as_ref()
        .map(|v| unsafe { ctx.buf::<f32>(v) })
        .transpose()?;
    let mut rstd = outs[4]
        .as_ref()
        .map(|v| unsafe { ctx.buf::<f32>(v) })
        .transpose()?;
    let out = match (&mut y, &mut q, &mut yscale) {
        (Some(y), _, _) => FwdOut::Y(y),
        (None, Some(q), Some(yscale)) => FwdOut::Quant {
            q,
            yscale,
            xscale: xscale.as_ref(),
        },
        _ => {
            return Err(crate::internal(
                ctx,
                "slot 0 is neither y nor q with yscale",
            ))
        }
    };
    let b = FwdBuffers {
        x: &x,
        residual: match (&residual, &mut rout) {
            (Some(r), Some(ro)) => Some((r, ro)),
            _ => None,
        },
        gamma: &w,
        beta: bias.as_ref(),
        out,
        mean: mean.as_mut(),
        rstd: rstd.as_mut(),
    };
    fly_norm::norm_fwd(ctx.stream(), norm, b, args).map_err(|e| ctx.rt(e))
}

/// How the weight gradients are summed (fly-norm's [`BwdStrategy`]) by name: `auto`,
/// `atomic` or `two_stage`.
///
/// ```
/// assert_eq!(flydsl_bind::norm::strategy("two_stage"), Some(fly_norm::BwdStrategy::TwoStage));
/// assert_eq!(flydsl_bind::norm::strategy("fast"), None);
/// ```
pub fn strategy(s: &str) -> Option<BwdStrategy> {
    match s {
        "auto" => Some(BwdStrategy::Auto),
        "atomic" => Some(BwdStrategy::Atomic),
        "two_stage" => Some(BwdStrategy::TwoStage),
        _ => None,
    }
}

/// A backward call: `dx`, `dweight` (and LayerNorm's `dbias`) from `dy`, `x`, `weight` and
/// the forward's statistics (`mean` for LayerNorm, `rstd`: `x.shape[:-1]` f32); `dresidual`
/// (like `x`) is added to `dx` (RMSNorm's fused-add backward). Outputs (slots): 0 `dx` (like
/// `x`), 1 `dweight` (like `weight`), 2 `dbias` (like `weight`, with `dbias`).
#[derive(Clone, Debug)]
pub struct NormBwd<'t> {
    /// The Python function's name.
    pub name: &'t str,
    /// Which norm.
    pub norm: Norm,
    /// Gradient of the output.
    pub dy: &'t Tensor,
    /// The forward's input.
    pub x: &'t Tensor,
    /// Scale.
    pub weight: &'t Tensor,
    /// The forward's per-row mean (LayerNorm).
    pub mean: Option<&'t Tensor>,
    /// The forward's per-row rstd.
    pub rstd: &'t Tensor,
    /// Gradient arriving at the fused add's `residual_out`.
    pub dresidual: Option<&'t Tensor>,
    /// Write the bias gradient (LayerNorm).
    pub dbias: bool,
    /// Weight-gradient summation strategy name ([`strategy`]).
    pub strategy: &'t str,
    /// The caller's outputs by slot.
    pub outs: [Option<&'t Tensor>; 3],
}

/// Run a [`NormBwd`]; the outputs by slot.
///
/// # Safety
/// As [`norm_fwd`].
pub unsafe fn norm_bwd(
    env: Env,
    alloc: &mut dyn Alloc,
    a: &NormBwd<'_>,
) -> Result<[Option<View>; 3]> {
    let mut c = Call::new(a.name, env, alloc);
    let Some(strategy) = strategy(a.strategy) else {
        return Err(c.value_error(
            "strategy",
            format_args!("{:?}", a.strategy),
            "the strategy is one of \"auto\", \"atomic\", \"two_stage\"",
            "pass one of them",
        ));
    };
    let dy = c.input("dy", a.dy, &FLOATS)?;
    c.expect_rows(&dy, "rows of the last dimension")?;
    let x = c.input("x", a.x, &[dy.dtype])?;
    c.expect_shape(&x, &dy.shape, "the shape of dy")?;
    let n = x.last();
    if n == 0 {
        return Err(c.value_error(
            "x",
            format_args!("a tensor of shape {}", crate::call::shape_str(&x.shape)),
            "rows must have at least one element (x.shape[-1] >= 1)",
            "pass a non-empty last dimension",
        ));
    }
    let m = x.numel / n;
    let w = c.input("weight", a.weight, &FLOATS)?;
    c.expect_shape(&w, &[n], "[x.shape[-1]]")?;
    let mean = c.opt_input("mean", a.mean, &[Dtype::F32])?;
    if let Some(v) = &mean {
        c.expect_numel(v, m, "one per row of x")?;
    }
    let rstd = c.input("rstd", a.rstd, &[Dtype::F32])?;
    c.expect_numel(&rstd, m, "one per row of x")?;
    let dres = c.opt_input("dresidual", a.dresidual, &[x.dtype])?;
    if let Some(v) = &dres {
        c.expect_shape(v, &x.shape, "the shape of x")?;
    }
    let mut outs: [Option<View>; 3] = Default::default();
    outs[0] = Some(c.output("dx", 0, a.outs[0], &x.shape, x.dtype)?);
    outs[1] = Some(c.output("dweight", 1, a.outs[1], &[n], w.dtype)?);
    if a.dbias {
        outs[2] = Some(c.output("dbias", 2, a.outs[2], &[n], w.dtype)?);
    }
    let ctx = c.finish()?;
    let args = NormBwdArgs { m, n, strategy };
    let ins = BwdIns {
        dy: &dy,
        x: &x,
        w: &w,
        mean: mean.as_ref(),
        rstd: &rstd,
        dres: dres.as_ref(),
    };
    float_type!(ctx, x.dtype, T, {
        float_type!(ctx, w.dtype, W, {
            // SAFETY: forwarded from this function's contract.
            unsafe { bwd::<T, W>(&ctx, a.norm, &ins, &outs, args) }
        })
    })?;
    Ok(outs)
}

struct BwdIns<'v> {
    dy: &'v View,
    x: &'v View,
    w: &'v View,
    mean: Option<&'v View>,
    rstd: &'v View,
    dres: Option<&'v View>,
}

/// # Safety
/// As [`norm_fwd`].
unsafe fn bwd<T: Element, W: Element>(
    ctx: &Ctx,
    norm: Norm,
    i: &BwdIns<'_>,
    outs: &[Option<View>; 3],
    args: NormBwdArgs,
) -> Result<()> {
    // SAFETY (every `buf` below): forwarded from this function's contract; each view's dtype
    // is the one its type parameter stands for.
    let (dy, x, w) = unsafe { (ctx.buf::<T>(i.dy)?, ctx.buf::<T>(i.x)?, ctx.buf::<W>(i.w)?) };
    let mean = i.mean.map(|v| unsafe { ctx.buf::<f32>(v) }).transpose()?;
    let rstd = unsafe { ctx.buf::<f32>(i.rstd)? };
    let dres = i.dres.map(|v| unsafe { ctx.buf::<T>(v) }).transpose()?;
    let mut dx = unsafe { ctx.buf::<T>(slot(ctx, outs, 0)?)? };
    let mut dw = unsafe { ctx.buf::<W>(slot(ctx, outs, 1)?)? };
    let mut db = outs[2]
        .as_ref()
        .map(|v| unsafe { ctx.buf::<W>(v) })
        .transpose()?;
    let b = BwdBuffers {
        x: &x,
        gamma: &w,
        dy: &dy,
        mean: mean.as_ref(),
        rstd: &rstd,
        dresidual: dres.as_ref(),
        dx: &mut dx,
        dgamma: &mut dw,
        dbeta: db.as_mut(),
    };
    fly_norm::norm_bwd(ctx.stream(), norm, b, args).map_err(|e| ctx.rt(e))
}

/// Output `i`, which the validation filled.
fn slot<'v, const N: usize>(ctx: &Ctx, outs: &'v [Option<View>; N], i: usize) -> Result<&'v View> {
    outs[i]
        .as_ref()
        .ok_or_else(|| crate::internal(ctx, format_args!("output slot {i} is empty")))
}
