//! CPU reference of the GEMM family: `C = act(A * B^T + bias)` in f64 from the (already
//! rounded) inputs, for the tests of every target.

/// The activation after the bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// Identity.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `x / (1 + exp(-x))`.
    Silu,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    Gelu,
}

impl Act {
    /// Apply to one value.
    ///
    /// ```
    /// use flydsl_testutil::gemm::Act;
    /// assert_eq!(Act::Relu.apply(-2.0), 0.0);
    /// assert!((Act::Gelu.apply(1.0) - 0.8411919906).abs() < 1e-9);
    /// ```
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Act::None => x,
            Act::Relu => x.max(0.0),
            Act::Silu => x / (1.0 + (-x).exp()),
            Act::Gelu => {
                let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                0.5 * x * (1.0 + u.tanh())
            }
        }
    }
}

/// `act(A * B^T + bias)` for row-major `a` [m, k], `b` [n, k], `bias` [n]; row-major [m, n].
///
/// ```
/// use flydsl_testutil::gemm::{gemm_ref, Act};
/// let c = gemm_ref(&[1.0, 2.0], &[3.0, 4.0, -1.0, 0.0], Some(&[0.5, 0.0]), 1, 2, 2, Act::Relu);
/// assert_eq!(c, vec![11.5, 0.0]);
/// ```
pub fn gemm_ref(
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    m: usize,
    n: usize,
    k: usize,
    act: Act,
) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k)
                .map(|p| a[i * k + p] as f64 * b[j * k + p] as f64)
                .sum();
            let x = dot + bias.map_or(0.0, |bv| bv[j] as f64);
            c[i * n + j] = act.apply(x);
        }
    }
    c
}

/// The scaled GEMM's reference: `act((A * B^T)[i][j] * scale_a[i] * scale_b[j] + bias[j])`
/// for row-major `a` [m, k] and `b` [n, k] holding the 8-bit inputs' exact values (fp8
/// decoded, int8 as integers), in f64; row-major [m, n].
///
/// ```
/// use flydsl_testutil::gemm::{gemm_scaled_ref, Act};
/// let c = gemm_scaled_ref(&[1.0, 2.0], &[3.0, 4.0], &[0.5], &[2.0], None, 1, 1, 2, Act::None);
/// assert_eq!(c, vec![11.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm_scaled_ref(
    a: &[f32],
    b: &[f32],
    scale_a: &[f32],
    scale_b: &[f32],
    bias: Option<&[f32]>,
    m: usize,
    n: usize,
    k: usize,
    act: Act,
) -> Vec<f64> {
    let mut c = gemm_ref(a, b, None, m, n, k, Act::None);
    for i in 0..m {
        for j in 0..n {
            let x = c[i * n + j] * scale_a[i] as f64 * scale_b[j] as f64
                + bias.map_or(0.0, |bv| bv[j] as f64);
            c[i * n + j] = act.apply(x);
        }
    }
    c
}

/// The unit roundoff of a GEMM output dtype by name: `"bf16"` 2^-8, `"f16"` 2^-11, else
/// (`"f32"`) 2^-24.
///
/// ```
/// assert_eq!(flydsl_testutil::gemm::unit_roundoff("f16"), 1.0 / 2048.0);
/// ```
pub fn unit_roundoff(dtype: &str) -> f64 {
    match dtype {
        "bf16" => 2f64.powi(-8),
        "f16" => 2f64.powi(-11),
        _ => 2f64.powi(-24),
    }
}

/// The accumulation error of an fp8 GEMM on Hopper's tensor cores, relative to the sum of
/// |terms|: the hardware keeps 13 mantissa bits of each wgmma's sum (truncated) and the
/// fly-gemm kernel adds each 128-wide K stage into f32, so up to 2^-8 of the scaled sum of
/// |a b|. cuBLAS's `torch._scaled_mm` shows the same error on the H200.
pub const HOPPER_FP8_SUM_ERR: f64 = 1.0 / 256.0;

/// The largest `|C[i][j] - reference|` a GEMM with f32 accumulation (in any summation order)
/// and output dtype `dtype` may show at one element, for the 16-bit [`gemm_ref`] and the
/// scaled [`gemm_scaled_ref`] alike.
///
/// - `k`: the reduction length.
/// - `mag`: what the f32 arithmetic adds up: `sum_p |a[i][p] * b[j][p]|`, times
///   `|scale_a[i] * scale_b[j]|` for the scaled GEMM, plus `|bias[j]|`.
/// - `extra`: any further absolute error of the value before the activation the caller
///   allows (e.g. the products of inputs a target may flush to zero); usually 0.
/// - `pre` / `want`: the reference before and after the activation.
///
/// The bound: f32 accumulation, bias add and scaling, `2 (k + 4) 2^-24 mag`, plus a flushed
/// f32 subnormal per product and per epilogue step, `(k + 2) 2^-126`; through the activation
/// (gain 1 for ReLU, 1.2 for SiLU and GELU: their slopes stay below 1.13) plus its f32
/// evaluation with exp2 / rcp, `2^-14 (|pre| + |want|)`; then the rounding to `dtype`
/// (its unit roundoff times the value, plus half its smallest subnormal step, or the smallest
/// normal f32 for bf16, whose subnormals a target may flush).
///
/// ```
/// use flydsl_testutil::gemm::{elem_tolerance, Act};
/// // K = 64 products of magnitude 1 summing to 3: the bf16 rounding dominates.
/// let t = elem_tolerance("bf16", 64, 64.0, 0.0, 3.0, 3.0, Act::None);
/// assert!(t > 3.0 / 256.0 && t < 3.0 / 256.0 + 1e-3);
/// ```
pub fn elem_tolerance(
    dtype: &str,
    k: usize,
    mag: f64,
    extra: f64,
    pre: f64,
    want: f64,
    act: Act,
) -> f64 {
    let u32_ = 2f64.powi(-24);
    let tiny32 = 2f64.powi(-126);
    let k = k as f64;
    let e_pre = 2.0 * (k + 4.0) * u32_ * mag + (k + 2.0) * tiny32 + extra;
    let e = match act {
        Act::None | Act::Relu => e_pre,
        Act::Silu | Act::Gelu => 1.2 * e_pre + 2f64.powi(-14) * (pre.abs() + want.abs()),
    };
    let sub = match dtype {
        "f16" => 2f64.powi(-25),
        _ => tiny32,
    };
    e + unit_roundoff(dtype) * (want.abs() + e) + sub
}
