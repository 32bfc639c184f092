//! Softmax CPU references (f64) and the contract's tolerances (`shared/facts/kernels.md`,
//! section Softmax).
//!
//! ```
//! use flydsl_testutil::softmax::{check_forward, forward, tolerance};
//! let x = [1.0, 2.0, 3.0, 0.0];
//! let y = forward(&x, 2, 2);
//! assert!((y[0] + y[1] - 1.0).abs() < 1e-15 && y[2] > y[3]);
//! check_forward("demo", &y, &y, 2, 2, &tolerance("f32")).unwrap();
//! ```

/// Tolerances of one dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Forward max abs error.
    pub max_abs: f64,
    /// Forward scale-aware form: `|out - ref| <= rtol * (|ref| + rowmax(ref))`.
    pub rtol: f64,
    /// Forward: every row's sum within this of 1.
    pub row_sum: f64,
    /// Backward: `max_err / max|ref|` below this.
    pub bwd_rel: f64,
}

/// The tolerances of `dtype` (`"f32"`, `"f16"` or `"bf16"`).
///
/// # Panics
/// On any other name (a test-suite bug).
///
/// ```
/// assert_eq!(flydsl_testutil::softmax::tolerance("bf16").max_abs, 2e-2);
/// ```
pub fn tolerance(dtype: &str) -> Tolerance {
    match dtype {
        "f32" => Tolerance {
            max_abs: 1e-5,
            rtol: 1e-5,
            row_sum: 1e-5,
            bwd_rel: 1e-5,
        },
        "f16" => Tolerance {
            max_abs: 1e-2,
            rtol: 5e-3,
            row_sum: 2e-3,
            bwd_rel: 2e-3,
        },
        "bf16" => Tolerance {
            max_abs: 2e-2,
            rtol: 2e-2,
            row_sum: 1e-2,
            bwd_rel: 1e-2,
        },
        other => panic!("no softmax tolerance for dtype `{other}`"),
    }
}

/// Row-wise softmax of a row-major `[m, n]` matrix in f64: `exp(x - max) / sum(exp(x - max))`,
/// where the max ignores NaN (a NaN still makes its row NaN through the sum), a row holding
/// `+inf` or only `-inf` is NaN, as in the exp2-domain kernels and torch.
///
/// ```
/// let y = flydsl_testutil::softmax::forward(&[0.0, f64::NEG_INFINITY], 1, 2);
/// assert_eq!(y, vec![1.0, 0.0]);
/// ```
pub fn forward(x: &[f64], m: usize, n: usize) -> Vec<f64> {
    assert_eq!(
        x.len(),
        m * n,
        "reference: x has {} elements, not m * n",
        x.len()
    );
    let mut y = vec![0.0; m * n];
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|&v| (v - mx).exp()).collect();
        let s: f64 = e.iter().sum();
        for (o, v) in y[r * n..(r + 1) * n].iter_mut().zip(e) {
            *o = v / s;
        }
    }
    y
}

/// Softmax backward in f64: `dx = y * (dy - sum(dy * y))` per row.
///
/// ```
/// let dx = flydsl_testutil::softmax::backward(&[0.5, 0.5], &[1.0, -1.0], 1, 2);
/// assert_eq!(dx, vec![0.5, -0.5]);
/// ```
pub fn backward(y: &[f64], dy: &[f64], m: usize, n: usize) -> Vec<f64> {
    assert_eq!(
        y.len(),
        m * n,
        "reference: y has {} elements, not m * n",
        y.len()
    );
    assert_eq!(
        dy.len(),
        m * n,
        "reference: dy has {} elements, not m * n",
        dy.len()
    );
    let mut dx = vec![0.0; m * n];
    for r in 0..m {
        let (ys, ds) = (&y[r * n..(r + 1) * n], &dy[r * n..(r + 1) * n]);
        let dot: f64 = ys.iter().zip(ds).map(|(a, b)| a * b).sum();
        for ((o, &a), &d) in dx[r * n..(r + 1) * n].iter_mut().zip(ys).zip(ds) {
            *o = a * (d - dot);
        }
    }
    dx
}

fn same_special(g: f64, w: f64) -> Option<bool> {
    if g.is_nan() || w.is_nan() {
        return Some(g.is_nan() && w.is_nan());
    }
    if g.is_infinite() || w.is_infinite() {
        return Some(g == w);
    }
    None
}

/// Check a forward output against the reference: max abs, the scale-aware form, and row sums
/// (rows whose reference is NaN must be NaN in the same places). The error names the worst
/// element and its row.
///
/// ```
/// use flydsl_testutil::softmax::{check_forward, tolerance};
/// let t = tolerance("f32");
/// assert!(check_forward("ok", &[0.5, 0.5], &[0.5, 0.5], 1, 2, &t).is_ok());
/// assert!(check_forward("bad", &[0.6, 0.4], &[0.5, 0.5], 1, 2, &t).is_err());
/// ```
pub fn check_forward(
    what: &str,
    got: &[f64],
    want: &[f64],
    m: usize,
    n: usize,
    t: &Tolerance,
) -> Result<(), String> {
    if got.len() != m * n || want.len() != m * n {
        return Err(format!(
            "{what}: {} / {} elements, expected m * n = {}",
            got.len(),
            want.len(),
            m * n
        ));
    }
    for r in 0..m {
        let (g, w) = (&got[r * n..(r + 1) * n], &want[r * n..(r + 1) * n]);
        let rowmax = w
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        for (c, (&a, &b)) in g.iter().zip(w).enumerate() {
            let ok = match same_special(a, b) {
                Some(ok) => ok,
                None => {
                    let e = (a - b).abs();
                    e <= t.max_abs && e <= t.rtol * (b.abs() + rowmax)
                }
            };
            if !ok {
                return Err(format!(
                    "{what}: row {r} col {c}: got {a}, want {b} (|err| {:e}; max abs {:e}, rtol {:e}, rowmax {rowmax:e})",
                    (a - b).abs(),
                    t.max_abs,
                    t.rtol
                ));
            }
        }
        if w.iter().all(|v| v.is_finite()) {
            let s: f64 = g.iter().sum();
            if (s - 1.0).abs() > t.row_sum {
                return Err(format!(
                    "{what}: row {r} sums to {s}, not 1 within {:e}",
                    t.row_sum
                ));
            }
        }
    }
    Ok(())
}

/// Check a backward output: `max |got - want| / max |want| < bwd_rel` over finite elements;
/// NaN and infinities must match exactly.
///
/// ```
/// use flydsl_testutil::softmax::{check_backward, tolerance};
/// assert!(check_backward("ok", &[0.5, -0.5], &[0.5, -0.5], &tolerance("f16")).is_ok());
/// assert!(check_backward("bad", &[0.5, -0.4], &[0.5, -0.5], &tolerance("f16")).is_err());
/// ```
pub fn check_backward(what: &str, got: &[f64], want: &[f64], t: &Tolerance) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} elements, expected {}",
            got.len(),
            want.len()
        ));
    }
    let scale = want
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |a, v| a.max(v.abs()));
    let mut worst = (0usize, 0.0f64);
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        if let Some(ok) = same_special(a, b) {
            if !ok {
                return Err(format!("{what}: element {i}: got {a}, want {b}"));
            }
            continue;
        }
        let e = (a - b).abs();
        if e > worst.1 {
            worst = (i, e);
        }
    }
    let rel = if scale > 0.0 {
        worst.1 / scale
    } else {
        worst.1
    };
    if rel >= t.bwd_rel && worst.1 > 0.0 {
        let (i, e) = worst;
        return Err(format!(
            "{what}: element {i}: got {}, want {} (err {e:e} = {rel:e} of max|ref| {scale:e}, limit {:e})",
            got[i], want[i], t.bwd_rel
        ));
    }
    Ok(())
}
