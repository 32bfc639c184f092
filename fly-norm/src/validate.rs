//! fly-norm's own argument rules (shape limits, eps), on top of the workspace's argument
//! checks ([`flydsl_rt::validate::Call`]), whose errors name the public function, the
//! argument, its value, the rule and the fix.

use flydsl_rt::validate::Call;
use flydsl_rt::Result;

/// The smallest `eps` accepted: the smallest normal f32 (`f32::MIN_POSITIVE`, about
/// 1.18e-38). GPUs flush subnormal f32 values to zero, so a smaller positive eps would act as
/// 0 in the kernels (a zero row would then divide by zero).
///
/// ```
/// assert_eq!(fly_norm::MIN_EPS, f32::MIN_POSITIVE);
/// ```
pub const MIN_EPS: f32 = f32::MIN_POSITIVE;

/// `m * n` as an element count, with `n >= 1`, `m <= MAX_ROWS` and `n <= MAX_COLS` (the
/// bounds the kernels' i32 loop counters and offsets rely on).
pub(crate) fn shape(call: Call<'_>, m: usize, n: usize) -> Result<usize> {
    if n == 0 {
        return Err(call.error(
            "n",
            0,
            "rows must have at least one element (n >= 1)",
            "pass n >= 1 (an empty batch is m = 0)",
        ));
    }
    let (ml, nl) = (crate::config::MAX_ROWS, crate::config::MAX_COLS);
    call.at_most(
        "m",
        m,
        ml,
        "split the rows over several calls (the kernels count rows in i32)",
    )?;
    call.at_most(
        "n",
        n,
        nl,
        "rows past this length are not supported (f32 row byte offsets stay below 2^31)",
    )?;
    call.product(m, n)
}

/// `eps` is finite and at least [`MIN_EPS`].
pub(crate) fn eps(call: Call<'_>, eps: f32) -> Result<()> {
    if eps.is_finite() && eps >= MIN_EPS {
        Ok(())
    } else {
        Err(call.error(
            "eps",
            eps,
            format_args!(
                "eps must be finite and at least {MIN_EPS:e} (the smallest normal f32: GPUs \
                 flush subnormals to zero)"
            ),
            "pass e.g. 1e-5 or 1e-6",
        ))
    }
}
