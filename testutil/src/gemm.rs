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
