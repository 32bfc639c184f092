//! LayerNorm / RMSNorm CPU references (f64 accumulation from the already-cast inputs, given as
//! f64 slices of their exact values) and the norm tolerances of `shared/facts/kernels.md`.
//!
//! Every function takes row-major `[m, n]` matrices and `[n]` weights.
//!
//! ```
//! use flydsl_testutil::norm::*;
//! let r = rms_norm_fwd::<f32>(&[3.0, 4.0], None, &[1.0, 1.0], 1, 2, 0.0);
//! assert!((r.y[0] - 3.0 / 12.5f64.sqrt()).abs() < 1e-12);
//! ```

use crate::compare::Storage;

/// Tolerances of one activation dtype (kernels.md, LayerNorm / RMSNorm). Outputs and `dx`
/// pass when `|got - want| <= atol + rtol * |want|`; weight gradients likewise with the
/// `dw_*` pair; quant outputs by max abs (yscale) and max |diff| (int8).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tol {
    /// Forward output, absolute.
    pub fwd_atol: f64,
    /// Forward output, relative (0 except for the f32-weight mixed case).
    pub fwd_rtol: f64,
    /// Quant yscale, max abs.
    pub yscale: f64,
    /// Quant int8, max |diff|.
    pub q: i32,
    /// Backward dx, absolute.
    pub dx_atol: f64,
    /// Backward dx, relative (0 except for the mixed case).
    pub dx_rtol: f64,
    /// Weight gradients, relative.
    pub dw_rtol: f64,
    /// Weight gradients, absolute.
    pub dw_atol: f64,
}

impl Tol {
    /// f32 activations.
    pub const F32: Tol = Tol::plain(1e-4, 1e-3, 1e-4, 1e-2);
    /// f16 activations.
    pub const F16: Tol = Tol::plain(1e-2, 3e-2, 3e-2, 1e-1);
    /// bf16 activations.
    pub const BF16: Tol = Tol::plain(2e-2, 2e-1, 1e-1, 5e-1);
    /// RMSNorm with f32 weights and f16 activations.
    pub const MIXED_F16: Tol = Tol::mixed(3e-2, 3e-2);
    /// RMSNorm with f32 weights and bf16 activations.
    pub const MIXED_BF16: Tol = Tol::mixed(2e-1, 1e-1);

    const fn plain(fwd: f64, dx: f64, dw_rtol: f64, dw_atol: f64) -> Tol {
        Tol {
            fwd_atol: fwd,
            fwd_rtol: 0.0,
            yscale: 1e-3,
            q: 1,
            dx_atol: dx,
            dx_rtol: 0.0,
            dw_rtol,
            dw_atol,
        }
    }
    const fn mixed(atol: f64, rtol: f64) -> Tol {
        Tol {
            fwd_atol: atol,
            fwd_rtol: rtol,
            yscale: 1e-3,
            q: 1,
            dx_atol: atol,
            dx_rtol: rtol,
            dw_rtol: 5e-3,
            dw_atol: 5e-2,
        }
    }
}

/// An activation dtype with its tolerances.
pub trait NormDtype: Storage {
    /// Its tolerances with weights of the same dtype.
    const TOL: Tol;
    /// Its tolerances with f32 weights (RMSNorm mixed case; f32 activations: same as `TOL`).
    const TOL_F32_WEIGHT: Tol;
}
impl NormDtype for f32 {
    const TOL: Tol = Tol::F32;
    const TOL_F32_WEIGHT: Tol = Tol::F32;
}
impl NormDtype for half::f16 {
    const TOL: Tol = Tol::F16;
    const TOL_F32_WEIGHT: Tol = Tol::MIXED_F16;
}
impl NormDtype for half::bf16 {
    const TOL: Tol = Tol::BF16;
    const TOL_F32_WEIGHT: Tol = Tol::MIXED_BF16;
}

/// Forward results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FwdRef {
    /// Normalised output `[m, n]` (unrounded).
    pub y: Vec<f64>,
    /// Per-row mean `[m]` (0 for RMSNorm).
    pub mean: Vec<f64>,
    /// Per-row rstd `[m]`.
    pub rstd: Vec<f64>,
    /// The normalised input `[m, n]`: `x`, or `x + residual` rounded to the activation dtype.
    pub input: Vec<f64>,
}

/// The fused-add input `round_T(f32(x + residual))` (or `x`), as the kernels compute it.
pub fn fused_input<T: Storage>(x: &[f64], residual: Option<&[f64]>) -> Vec<f64> {
    match residual {
        None => x.to_vec(),
        Some(r) => x
            .iter()
            .zip(r)
            .map(|(&a, &b)| T::from_f32((a + b) as f32).to_f64())
            .collect(),
    }
}

fn norm_fwd<T: Storage>(
    layer: bool,
    x: &[f64],
    residual: Option<&[f64]>,
    gamma: &[f64],
    beta: Option<&[f64]>,
    m: usize,
    n: usize,
    eps: f64,
) -> FwdRef {
    let input = fused_input::<T>(x, residual);
    let mut r = FwdRef {
        y: vec![0.0; m * n],
        mean: vec![0.0; m],
        rstd: vec![0.0; m],
        input,
    };
    for i in 0..m {
        let row = &r.input[i * n..(i + 1) * n];
        let (mean, var) = if layer {
            // Two passes: accurate whatever |mean| / std.
            let mean = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|&v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
            (mean, var)
        } else {
            (0.0, row.iter().map(|&v| v * v).sum::<f64>() / n as f64)
        };
        let rstd = 1.0 / (var + eps).sqrt();
        r.mean[i] = mean;
        r.rstd[i] = rstd;
        for j in 0..n {
            let b = beta.map_or(0.0, |b| b[j]);
            r.y[i * n + j] = (row[j] - mean) * rstd * gamma[j] + if layer { b } else { 0.0 };
        }
    }
    r
}

/// LayerNorm forward: `(x - mean) * rstd * gamma + beta`, var = mean((x - mean)^2) (two
/// passes in f64); with `residual`, the input is `x + residual` rounded to `T`.
///
/// ```
/// let r = flydsl_testutil::norm::layer_norm_fwd::<f32>(&[1.0, 3.0], None, &[1.0, 1.0], Some(&[0.5, 0.5]), 1, 2, 0.0);
/// assert_eq!((r.mean[0], r.y[0], r.y[1]), (2.0, -0.5, 1.5));
/// ```
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_fwd<T: Storage>(
    x: &[f64],
    residual: Option<&[f64]>,
    gamma: &[f64],
    beta: Option<&[f64]>,
    m: usize,
    n: usize,
    eps: f64,
) -> FwdRef {
    norm_fwd::<T>(true, x, residual, gamma, beta, m, n, eps)
}

/// RMSNorm forward: `x * rsqrt(mean(x^2) + eps) * gamma` (input fused as in
/// [`layer_norm_fwd`]).
pub fn rms_norm_fwd<T: Storage>(
    x: &[f64],
    residual: Option<&[f64]>,
    gamma: &[f64],
    m: usize,
    n: usize,
    eps: f64,
) -> FwdRef {
    norm_fwd::<T>(false, x, residual, gamma, None, m, n, eps)
}

/// Dynamic / smooth int8 quant of `y` `[m, n]`: `y' = y * xscale` (if given), `yscale =
/// rowmax|y'| / 127` (0 -> 1; +inf when the row has a NaN or an infinity), `q =
/// trunc(y' / yscale)` clamped to [-127, 127] (NaN -> 0, so a non-finite row's q are all 0).
/// Returns (q, yscale).
///
/// ```
/// let (q, s) = flydsl_testutil::norm::quant(&[1.0, -2.0, 0.0, 0.0], None, 2, 2);
/// assert_eq!(q, vec![63, -127, 0, 0]);
/// assert_eq!(s, vec![2.0 / 127.0, 1.0]);
/// let (q, s) = flydsl_testutil::norm::quant(&[f64::NAN, 1.0], None, 1, 2);
/// assert_eq!((q, s), (vec![0, 0], vec![f64::INFINITY]));
/// ```
pub fn quant(y: &[f64], xscale: Option<&[f64]>, m: usize, n: usize) -> (Vec<i8>, Vec<f64>) {
    let mut q = vec![0i8; m * n];
    let mut scales = vec![0.0; m];
    for i in 0..m {
        let ys: Vec<f64> = (0..n)
            .map(|j| y[i * n + j] * xscale.map_or(1.0, |s| s[j]))
            .collect();
        let amax = if ys.iter().all(|v| v.is_finite()) {
            ys.iter().fold(0.0f64, |a, &v| a.max(v.abs()))
        } else {
            f64::INFINITY
        };
        let s = if amax == 0.0 { 1.0 } else { amax / 127.0 };
        scales[i] = s;
        for j in 0..n {
            let v = (ys[j] / s).trunc();
            q[i * n + j] = if v.is_nan() {
                0
            } else {
                v.clamp(-127.0, 127.0) as i8
            };
        }
    }
    (q, scales)
}

/// Backward results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BwdRef {
    /// Input gradient `[m, n]`.
    pub dx: Vec<f64>,
    /// Gamma gradient `[n]`.
    pub dgamma: Vec<f64>,
    /// Beta gradient `[n]` (LayerNorm).
    pub dbeta: Vec<f64>,
}

/// LayerNorm backward with the forward's `mean` / `rstd`:
/// `xhat = (x - mean) * rstd`, `wdy = dy * gamma`,
/// `dx = (wdy - mean(wdy) - xhat * mean(xhat * wdy)) * rstd`,
/// `dgamma = sum_rows(dy * xhat)`, `dbeta = sum_rows(dy)`.
///
/// ```
/// let r = flydsl_testutil::norm::layer_norm_bwd(&[1.0, 3.0], &[1.0, 1.0], &[1.0, 1.0], &[2.0], &[1.0], 1, 2);
/// assert_eq!((r.dgamma.clone(), r.dbeta.clone(), r.dx.clone()), (vec![-1.0, 1.0], vec![1.0, 1.0], vec![0.0, 0.0]));
/// ```
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd(
    x: &[f64],
    gamma: &[f64],
    dy: &[f64],
    mean: &[f64],
    rstd: &[f64],
    m: usize,
    n: usize,
) -> BwdRef {
    norm_bwd(true, x, gamma, dy, mean, rstd, None, m, n)
}

/// RMSNorm backward with the forward's `rstd`: `xhat = x * rstd`,
/// `c1 = mean(xhat * dy * gamma)`, `dx = (dy * gamma - xhat * c1) * rstd (+ dresidual)`,
/// `dgamma = sum_rows(dy * xhat)`.
///
/// ```
/// let r = flydsl_testutil::norm::rms_norm_bwd(&[2.0], &[1.0], &[1.0], &[0.5], Some(&[3.0]), 1, 1);
/// assert_eq!((r.dx[0], r.dgamma[0]), (3.0, 1.0));
/// ```
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_bwd(
    x: &[f64],
    gamma: &[f64],
    dy: &[f64],
    rstd: &[f64],
    dresidual: Option<&[f64]>,
    m: usize,
    n: usize,
) -> BwdRef {
    let zeros = vec![0.0; m];
    norm_bwd(false, x, gamma, dy, &zeros, rstd, dresidual, m, n)
}

#[allow(clippy::too_many_arguments)]
fn norm_bwd(
    layer: bool,
    x: &[f64],
    gamma: &[f64],
    dy: &[f64],
    mean: &[f64],
    rstd: &[f64],
    dres: Option<&[f64]>,
    m: usize,
    n: usize,
) -> BwdRef {
    let mut r = BwdRef {
        dx: vec![0.0; m * n],
        dgamma: vec![0.0; n],
        dbeta: vec![0.0; n],
    };
    for i in 0..m {
        let xh: Vec<f64> = (0..n).map(|j| (x[i * n + j] - mean[i]) * rstd[i]).collect();
        let wdy: Vec<f64> = (0..n).map(|j| dy[i * n + j] * gamma[j]).collect();
        let c1 = xh.iter().zip(&wdy).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        let c2 = if layer {
            wdy.iter().sum::<f64>() / n as f64
        } else {
            0.0
        };
        for j in 0..n {
            let d = dres.map_or(0.0, |d| d[i * n + j]);
            r.dx[i * n + j] = (wdy[j] - (xh[j] * c1 + c2)) * rstd[i] + d;
            r.dgamma[j] += dy[i * n + j] * xh[j];
            r.dbeta[j] += dy[i * n + j];
        }
    }
    r
}
