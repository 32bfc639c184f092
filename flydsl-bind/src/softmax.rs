//! Row softmax (fly-softmax) on foreign tensors, over the last dimension.

use crate::call::{Alloc, Call, Ctx, View};
use crate::desc::{Dtype, Env, Tensor};
use crate::error::Result;
use crate::float_type;
use fly_softmax::SoftmaxArgs;
use flydsl_rt::Element;

const FLOATS: [Dtype; 3] = [Dtype::F32, Dtype::F16, Dtype::BF16];

/// `out = softmax(x, dim=-1)` (f32 math, `x`'s dtype out). Output slot 0: `out` (like `x`).
///
/// # Safety
/// Every tensor describes live memory of its device as the crate docs require.
pub unsafe fn softmax(
    env: Env,
    alloc: &mut dyn Alloc,
    x: &Tensor,
    out: Option<&Tensor>,
) -> Result<View> {
    let mut c = Call::new("softmax", env, alloc);
    let x = c.input("x", x, &FLOATS)?;
    let args = rows(&c, &x)?;
    let y = c.output("out", 0, out, &x.shape, x.dtype)?;
    let ctx = c.finish()?;
    float_type!(ctx, x.dtype, T, {
        // SAFETY: forwarded from this function's contract.
        unsafe { fwd::<T>(&ctx, &x, &y, args) }
    })?;
    Ok(y)
}

/// `dx = y * (dy - sum(dy * y, dim=-1))` from the forward's output `y` and the gradient
/// `dy` (like `y`). Output slot 0: `dx` (like `y`).
///
/// # Safety
/// As [`softmax`].
pub unsafe fn softmax_backward(
    env: Env,
    alloc: &mut dyn Alloc,
    y: &Tensor,
    dy: &Tensor,
    dx: Option<&Tensor>,
) -> Result<View> {
    let mut c = Call::new("softmax_backward", env, alloc);
    let y = c.input("y", y, &FLOATS)?;
    let args = rows(&c, &y)?;
    let dy = c.input("dy", dy, &[y.dtype])?;
    c.expect_shape(&dy, &y.shape, "the shape of y")?;
    let dx = c.output("dx", 0, dx, &y.shape, y.dtype)?;
    let ctx = c.finish()?;
    float_type!(ctx, y.dtype, T, {
        // SAFETY: forwarded from this function's contract.
        unsafe { bwd::<T>(&ctx, &y, &dy, &dx, args) }
    })?;
    Ok(dx)
}

/// Rows and row length of `x` (`[..., n]`, `n >= 1`).
fn rows(c: &Call<'_>, x: &View) -> Result<SoftmaxArgs> {
    c.expect_rows(x, "rows of the last dimension")?;
    let n = x.last();
    if n == 0 {
        return Err(c.value_error(
            x.arg,
            format_args!("a tensor of shape {}", crate::call::shape_str(&x.shape)),
            "rows must have at least one element (shape[-1] >= 1)",
            "pass a non-empty last dimension",
        ));
    }
    Ok(SoftmaxArgs { m: x.numel / n, n })
}

/// # Safety
/// As [`softmax`]; the views' dtypes are `T`.
unsafe fn fwd<T: Element>(ctx: &Ctx, x: &View, y: &View, args: SoftmaxArgs) -> Result<()> {
    // SAFETY: forwarded from this function's contract.
    let (x, mut y) = unsafe { (ctx.buf::<T>(x)?, ctx.buf::<T>(y)?) };
    fly_softmax::softmax(ctx.stream(), &x, &mut y, args).map_err(|e| ctx.rt(e))
}

/// # Safety
/// As [`softmax`]; the views' dtypes are `T`.
unsafe fn bwd<T: Element>(
    ctx: &Ctx,
    y: &View,
    dy: &View,
    dx: &View,
    args: SoftmaxArgs,
) -> Result<()> {
    // SAFETY: forwarded from this function's contract.
    let (y, dy, mut dx) = unsafe { (ctx.buf::<T>(y)?, ctx.buf::<T>(dy)?, ctx.buf::<T>(dx)?) };
    fly_softmax::softmax_backward(ctx.stream(), &y, &dy, &mut dx, args).map_err(|e| ctx.rt(e))
}
