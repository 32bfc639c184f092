//! Functional composition `A o B` of layouts (CuTe's `composition`).

use super::base::Layout;
use super::coalesce::coalesce_leaves;
use super::error::{cmul, LayoutError};
use super::int_tuple::IntTuple;
use super::tiler::Tiler;

/// `A o B`: the layout `R` with `R(c) = A(B(c))` for every coordinate `c` of `B`, and with a
/// shape compatible with `B`'s. `b` is a [`Layout`] (composed as a 1-D function, by mode over
/// `B`'s modes) or a by-mode [`Tiler`] (`<B0, B1, ...>` composes mode `i` of `A` with `Bi`).
///
/// Follows CuTe's algorithm on the coalesced `A`: divide `B`'s stride out of `A`'s shape,
/// then keep the first `size(B)` elements; `A`'s last mode extends past `size(A)`. Returns
/// [`LayoutError::StrideDivisibility`] / [`LayoutError::ShapeDivisibility`] when the result
/// is not a layout, and [`LayoutError::NegativeStride`] for negative strides in `B`.
///
/// As in CuTe, a multi-mode `B` is composed mode by mode (`A o (B0, B1) = (A o B0, A o B1)`),
/// which equals `A(B(c))` when `B`'s non-broadcast modes do not overlap (`B` injective up
/// to stride-0 modes); that is the caller's precondition and is not checked.
///
/// ```
/// use flydsl_dsl::layout::{composition, Layout, Tiler};
/// // CuTe docs, "Composition": (6,2):(8,2) o (4,3):(3,1) = ((2,2),3):((24,2),8)
/// let a = Layout::new((6, 2), (8, 2))?;
/// let b = Layout::new((4, 3), (3, 1))?;
/// assert_eq!(composition(&a, &b)?.to_string(), "((2,2),3):((24,2),8)");
/// // CuTe docs, "By-mode Composition": (12,(4,8)):(59,(13,1)) o <3:4, 8:2>
/// let a = Layout::new((12, (4, 8)), (59, (13, 1)))?;
/// let t = Tiler::modes([Layout::new(3, 4)?, Layout::new(8, 2)?]);
/// assert_eq!(composition(&a, t)?.to_string(), "(3,(2,4)):(236,(26,1))");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn composition(a: &Layout, b: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    b.into().apply(a, &compose_layouts)
}

/// `A o B` for a layout `B`, distributing over `B`'s modes.
pub(crate) fn compose_layouts(a: &Layout, b: &Layout) -> Result<Layout, LayoutError> {
    let flat = coalesce_leaves(&a.leaves());
    // A right operand with one non-trivial mode may use exact relaxations of the divisibility
    // conditions; the modes of a multi-mode one must meet them strictly so that A
    // distributes over them.
    let relaxed = b.shape().leaves().iter().filter(|&&s| s > 1).count() <= 1;
    let (shape, stride) = compose_rec(a, &flat, b.shape(), b.stride(), relaxed)?;
    Layout::new(shape, stride)
}

fn compose_rec(
    a: &Layout,
    flat: &[(i64, i64)],
    shape: &IntTuple,
    stride: &IntTuple,
    relaxed: bool,
) -> Result<(IntTuple, IntTuple), LayoutError> {
    match (shape, stride) {
        (IntTuple::Int(s), IntTuple::Int(d)) => {
            let r = compose_1d(a, flat, *s, *d, relaxed)?;
            Ok((r.shape().clone(), r.stride().clone()))
        }
        (IntTuple::Tuple(ss), IntTuple::Tuple(ds)) => {
            let mut shapes = Vec::with_capacity(ss.len());
            let mut strides = Vec::with_capacity(ss.len());
            for (s, d) in ss.iter().zip(ds) {
                let (rs, rd) = compose_rec(a, flat, s, d, relaxed)?;
                shapes.push(rs);
                strides.push(rd);
            }
            Ok((IntTuple::Tuple(shapes), IntTuple::Tuple(strides)))
        }
        _ => Err(LayoutError::Incongruent {
            shape: shape.clone(),
            stride: stride.clone(),
        }),
    }
}

/// `A o s:d` with `flat` the coalesced leaf modes of `A`. `relaxed` also accepts the exact
/// 1-D cases outside CuTe's conditions: all of `s:d` inside one mode of `A`, or `s` ending
/// inside a mode whose extent it does not divide.
fn compose_1d(
    a: &Layout,
    flat: &[(i64, i64)],
    s: i64,
    d: i64,
    relaxed: bool,
) -> Result<Layout, LayoutError> {
    if d < 0 {
        return Err(LayoutError::NegativeStride {
            op: "composition",
            layout: format!("{s}:{d}"),
            stride: d,
        });
    }
    let Some((&(_, last_d), init)) = flat.split_last() else {
        // A is constant 0 (all modes have size 1).
        return Layout::new(s, 0);
    };
    if s == 1 {
        return Layout::new(1, 0);
    }
    if d == 0 {
        return Layout::new(s, 0);
    }
    let b_str = || format!("{s}:{d}");

    // 1. Divide the stride d out of A's shape (all modes but the last, which is unbounded).
    let mut rest_d = d;
    let mut strided: Vec<(i64, i64)> = Vec::with_capacity(init.len());
    for &(si, di) in init {
        if rest_d == 1 {
            strided.push((si, di));
        } else if rest_d % si == 0 {
            strided.push((1, di));
            rest_d /= si;
        } else if si % rest_d == 0 {
            strided.push((si / rest_d, cmul(di, rest_d, "composition stride")?));
            rest_d = 1;
        } else if relaxed && (s - 1).checked_mul(rest_d).is_some_and(|span| span < si) {
            // Not divisible, but every element of B lands inside this one mode.
            return Layout::new(s, cmul(di, rest_d, "composition stride")?);
        } else {
            return Err(LayoutError::StrideDivisibility {
                a: a.to_string(),
                b: b_str(),
                stride: rest_d,
                extent: si,
            });
        }
    }
    let last_stride = cmul(last_d, rest_d, "composition stride")?;

    // 2. Keep the first s elements of the strided layout.
    let mut rest_s = s;
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(flat.len());
    for (si, di) in strided {
        if rest_s == 1 {
            break;
        }
        if si == 1 {
            continue;
        }
        if rest_s % si == 0 {
            out.push((si, di));
            rest_s /= si;
        } else if rest_s < si && (relaxed || si % rest_s == 0) {
            out.push((rest_s, di));
            rest_s = 1;
        } else {
            return Err(LayoutError::ShapeDivisibility {
                a: a.to_string(),
                b: b_str(),
                size: rest_s,
                extent: si,
            });
        }
    }
    if rest_s > 1 {
        out.push((rest_s, last_stride));
    }
    Layout::from_leaves(&coalesce_leaves(&out))
}
