//! Coordinates and the layout function: `crd2idx`, `idx2crd`, `call`, generic over
//! [`IndexExpr`] so coordinates may be run-time values of the generated kernel.

use std::fmt;

use super::base::Layout;
use super::error::LayoutError;
use super::expr;
use super::int_tuple::IntTuple;
use super::IndexExpr;

/// A (possibly nested) coordinate whose entries are index values `I` (`i64` now, or a
/// run-time value of the kernel being generated).
///
/// A coordinate may be *natural* (nested exactly like the shape) or coarser: an integer in
/// place of a sub-tuple of the shape is a colexicographic index into that sub-shape.
///
/// ```
/// use flydsl_dsl::layout::{Coord, Layout};
/// use flydsl_dsl::tup;
/// let l = Layout::new((2, (3, 4)), (1, (2, 6)))?;
/// // natural, partly linear, and fully linear coordinates of the same element
/// let a = l.crd2idx(&Coord::from(tup![1, (2, 3)]))?;
/// let b = l.crd2idx(&Coord::Tuple(vec![Coord::Int(1), Coord::Int(11)]))?;
/// let c = l.crd2idx(&Coord::Int(23i64))?;
/// assert_eq!((a, b, c), (23, 23, 23));
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Coord<I> {
    /// One index value.
    Int(I),
    /// A tuple of coordinates.
    Tuple(Vec<Coord<I>>),
}

impl<I: IndexExpr> Coord<I> {
    /// The literal coordinate with the values of `t`.
    ///
    /// ```
    /// use flydsl_dsl::layout::{Coord, IntTuple};
    /// let c: Coord<i64> = Coord::from_int_tuple(&IntTuple::from((1, (2, 3))));
    /// assert_eq!(c.to_string(), "(1,(2,3))");
    /// ```
    pub fn from_int_tuple(t: &IntTuple) -> Self {
        match t {
            IntTuple::Int(v) => Coord::Int(I::lit(*v)),
            IntTuple::Tuple(v) => Coord::Tuple(v.iter().map(Coord::from_int_tuple).collect()),
        }
    }

    /// The values as an [`IntTuple`] if every entry is a literal.
    ///
    /// ```
    /// use flydsl_dsl::layout::{Coord, IntTuple};
    /// let c = Coord::Tuple(vec![Coord::Int(1i64), Coord::Int(2)]);
    /// assert_eq!(c.as_int_tuple(), Some(IntTuple::from((1, 2))));
    /// ```
    pub fn as_int_tuple(&self) -> Option<IntTuple> {
        match self {
            Coord::Int(v) => v.as_lit().map(IntTuple::Int),
            Coord::Tuple(v) => v
                .iter()
                .map(Coord::as_int_tuple)
                .collect::<Option<Vec<_>>>()
                .map(IntTuple::Tuple),
        }
    }
}

impl From<IntTuple> for Coord<i64> {
    fn from(t: IntTuple) -> Self {
        Coord::from_int_tuple(&t)
    }
}

impl From<&IntTuple> for Coord<i64> {
    fn from(t: &IntTuple) -> Self {
        Coord::from_int_tuple(t)
    }
}

impl<I: fmt::Display> fmt::Display for Coord<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Coord::Int(v) => write!(f, "{v}"),
            Coord::Tuple(v) => {
                f.write_str("(")?;
                for (i, c) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{c}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl Layout {
    /// The offset of coordinate `crd`: the inner product of the natural coordinate with the
    /// stride. An integer given for a tuple-shaped (sub)mode is a colexicographic index
    /// into it. Literal entries are range-checked; run-time entries are assumed in range.
    ///
    /// Only non-trivial arithmetic is emitted for run-time values: 1-D indices are evaluated
    /// through the coalesced sub-layout, stride-0 and size-1 modes cost nothing, and the
    /// outermost mode needs no remainder.
    ///
    /// ```
    /// use flydsl_dsl::layout::{Coord, Layout};
    /// use flydsl_dsl::tup;
    /// let l = Layout::row_major((4, 8))?;
    /// assert_eq!(l.crd2idx(&Coord::from(tup![2, 5]))?, 21);
    /// assert!(l.crd2idx(&Coord::from(tup![4, 0])).is_err());
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn crd2idx<I: IndexExpr>(&self, crd: &Coord<I>) -> Result<I, LayoutError> {
        crd2idx_rec(crd, self.shape(), self.stride())
    }

    /// The layout function at 1-D coordinate `i` (CuTe's `layout(i)`): same as
    /// `crd2idx(&Coord::Int(i))`. A literal `i` must lie in `[0, size)`.
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// let l = Layout::new((2, 3), (3, 1))?;
    /// let offs: Vec<i64> = (0..6).map(|i| l.call(&i)).collect::<Result<_, _>>()?;
    /// assert_eq!(offs, vec![0, 3, 1, 4, 2, 5]);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn call<I: IndexExpr>(&self, i: &I) -> Result<I, LayoutError> {
        self.crd2idx(&Coord::Int(i.clone()))
    }

    /// The natural coordinate (nested like the shape) of 1-D index `idx`, colexicographic:
    /// leaf `k` is `(idx / (s_0 * ... * s_{k-1})) % s_k`. A literal `idx` must lie in
    /// `[0, size)`; a run-time one is assumed to (the last non-trivial leaf gets no `%`).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// let l = Layout::col_major((2, (3, 4)))?;
    /// assert_eq!(l.idx2crd(&17i64)?.to_string(), "(1,(2,2))");
    /// assert!(l.idx2crd(&24i64).is_err());
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn idx2crd<I: IndexExpr>(&self, idx: &I) -> Result<Coord<I>, LayoutError> {
        let size = self.size();
        check_lit(idx, size, self.shape())?;
        let mut prefix = 1i64;
        Ok(idx2crd_rec(self.shape(), idx, &mut prefix, size))
    }
}

fn check_lit<I: IndexExpr>(v: &I, extent: i64, shape: &IntTuple) -> Result<(), LayoutError> {
    match v.as_lit() {
        Some(x) if x < 0 || x >= extent => Err(LayoutError::CoordOutOfRange {
            value: x,
            extent,
            shape: shape.clone(),
        }),
        _ => Ok(()),
    }
}

fn crd2idx_rec<I: IndexExpr>(
    crd: &Coord<I>,
    shape: &IntTuple,
    stride: &IntTuple,
) -> Result<I, LayoutError> {
    match (crd, shape, stride) {
        (Coord::Int(x), IntTuple::Int(s), IntTuple::Int(d)) => {
            check_lit(x, *s, shape)?;
            Ok(expr::mul(x, *d))
        }
        (Coord::Int(x), IntTuple::Tuple(_), _) => {
            let sub = Layout::new(shape.clone(), stride.clone())?;
            check_lit(x, sub.size(), shape)?;
            Ok(linear_eval(&sub.coalesce(), x))
        }
        (Coord::Tuple(cs), IntTuple::Tuple(ss), IntTuple::Tuple(ds)) if cs.len() == ss.len() => {
            let mut acc = I::lit(0);
            for ((c, s), d) in cs.iter().zip(ss).zip(ds) {
                acc = expr::add(&acc, &crd2idx_rec(c, s, d)?);
            }
            Ok(acc)
        }
        // A rank-1 tuple coordinate for an integral mode is that coordinate.
        (Coord::Tuple(cs), IntTuple::Int(_), _) if cs.len() == 1 => {
            crd2idx_rec(&cs[0], shape, stride)
        }
        _ => Err(LayoutError::CoordMismatch {
            coord: describe(crd),
            shape: shape.clone(),
        }),
    }
}

/// Prints a coordinate, showing run-time entries as `?`.
fn describe<I: IndexExpr>(crd: &Coord<I>) -> String {
    match crd {
        Coord::Int(v) => v
            .as_lit()
            .map_or_else(|| "?".to_string(), |x| x.to_string()),
        Coord::Tuple(v) => {
            let parts: Vec<String> = v.iter().map(describe).collect();
            format!("({})", parts.join(","))
        }
    }
}

/// The 1-D function of a flat (coalesced) layout at `x`, emitting only needed work.
pub(crate) fn linear_eval<I: IndexExpr>(flat: &Layout, x: &I) -> I {
    let size = flat.size();
    let mut prefix = 1i64;
    let mut acc = I::lit(0);
    for (s, d) in flat.leaves() {
        if s > 1 && d != 0 {
            let q = expr::div(x, prefix);
            // In range, the quotient of the outermost non-trivial mode is already < s.
            let c = if prefix * s == size {
                q
            } else {
                expr::rem(&q, s)
            };
            acc = expr::add(&acc, &expr::mul(&c, d));
        }
        prefix *= s;
    }
    acc
}

fn idx2crd_rec<I: IndexExpr>(shape: &IntTuple, idx: &I, prefix: &mut i64, size: i64) -> Coord<I> {
    match shape {
        IntTuple::Int(s) => {
            let c = if *s == 1 {
                I::lit(0)
            } else {
                let q = expr::div(idx, *prefix);
                if *prefix * s == size {
                    q
                } else {
                    expr::rem(&q, *s)
                }
            };
            *prefix *= s;
            Coord::Int(c)
        }
        IntTuple::Tuple(v) => Coord::Tuple(
            v.iter()
                .map(|t| idx2crd_rec(t, idx, prefix, size))
                .collect(),
        ),
    }
}
