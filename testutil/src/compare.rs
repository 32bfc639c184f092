//! Comparison helpers that report the worst element, and dtype rounding helpers.

use half::{bf16, f16};

/// The worst mismatch of a comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Worst {
    /// Index of the worst element.
    pub index: usize,
    /// Its absolute error.
    pub abs_err: f64,
    /// Got value there.
    pub got: f64,
    /// Expected value there.
    pub want: f64,
}

/// Largest `|got - want|` (NaN in exactly one side counts as infinite; NaN in both is equal).
///
/// ```
/// let w = flydsl_testutil::compare::max_abs_err(&[1.0, 2.5], &[1.0, 2.0]);
/// assert_eq!((w.index, w.abs_err), (1, 0.5));
/// ```
pub fn max_abs_err(got: &[f64], want: &[f64]) -> Worst {
    assert_eq!(got.len(), want.len(), "length mismatch");
    let mut w = Worst {
        index: 0,
        abs_err: 0.0,
        got: 0.0,
        want: 0.0,
    };
    for (i, (&g, &r)) in got.iter().zip(want).enumerate() {
        let e = if g.is_nan() && r.is_nan() {
            0.0
        } else if g.is_nan() || r.is_nan() {
            f64::INFINITY
        } else if g == r {
            0.0
        } else {
            (g - r).abs()
        };
        if e > w.abs_err || (e.is_infinite() && !w.abs_err.is_infinite()) {
            w = Worst {
                index: i,
                abs_err: e,
                got: g,
                want: r,
            };
        }
    }
    w
}

/// Assert every element satisfies `|got - want| <= atol + rtol * |want|`, naming the worst.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length mismatch");
    for (i, (&g, &r)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && r.is_nan()) || g == r || (g - r).abs() <= atol + rtol * r.abs();
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {r} (atol {atol}, rtol {rtol})"
        );
    }
}

/// A value rounded through a storage dtype, back in f64.
pub trait Storage: Copy {
    /// From f32 with round-to-nearest-even.
    fn from_f32(v: f32) -> Self;
    /// To f64 exactly.
    fn to_f64(self) -> f64;
}
impl Storage for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}
impl Storage for f16 {
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
}
impl Storage for bf16 {
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
}

/// Convert a slice of f32 to a storage type (RNE).
pub fn cast_vec<T: Storage>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}

/// Widen a slice of a storage type to f64.
pub fn widen<T: Storage>(v: &[T]) -> Vec<f64> {
    v.iter().map(|&x| x.to_f64()).collect()
}
