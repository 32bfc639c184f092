//! The complement of a layout: the layout of its repetitions up to a cotarget.

use super::base::Layout;
use super::coalesce::coalesce_leaves;
use super::error::{cmul, LayoutError};

/// CuTe's `complement(A, M)`: the ordered layout `R` (positive increasing strides) whose
/// offsets are disjoint from `A`'s (except 0) and that "repeats" `A` up to `M`:
/// `cosize((A, R)) >= M`. When `M` is a multiple of the largest `shape * stride` over
/// `A`'s modes, `(A, R)` is a bijection onto `[0, M)`.
///
/// Errors: `M < 1`; a negative stride; or modes that overlap / are not aligned so no
/// layout complement exists ([`LayoutError::NotComplementable`]). Stride-0 and size-1
/// modes of `A` are ignored.
///
/// ```
/// use flydsl_dsl::layout::{complement, Layout};
/// // CuTe docs, "Complement Examples".
/// assert_eq!(complement(&Layout::new(4, 2)?, 24)?.to_string(), "(2,3):(1,8)");
/// let a = Layout::new((2, 2), (1, 6))?;
/// assert_eq!(complement(&a, 24)?.to_string(), "(3,2):(2,12)");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn complement(a: &Layout, cotarget: i64) -> Result<Layout, LayoutError> {
    if cotarget < 1 {
        return Err(LayoutError::BadArgument {
            what: "complement cotarget",
            value: cotarget,
            fix: "the cotarget (the codomain size to complete) must be >= 1",
        });
    }
    let mut modes: Vec<(i64, i64)> = Vec::new();
    for (s, d) in a.leaves() {
        if d < 0 {
            return Err(LayoutError::NegativeStride {
                op: "complement",
                layout: a.to_string(),
                stride: d,
            });
        }
        if s > 1 && d > 0 {
            modes.push((s, d));
        }
    }
    modes.sort_by_key(|&(s, d)| (d, s));

    let mut out: Vec<(i64, i64)> = Vec::with_capacity(modes.len() + 1);
    let mut current = 1i64;
    for (s, d) in modes {
        if d % current != 0 {
            return Err(LayoutError::NotComplementable {
                op: "complement",
                layout: a.to_string(),
                reason: format!(
                    "the mode {s}:{d} starts at {d}, which is not a multiple of {current} \
                     (the extent of the modes with smaller strides)"
                ),
            });
        }
        out.push((d / current, current));
        current = cmul(s, d, "complement extent")?;
    }
    let reps = cotarget / current + i64::from(cotarget % current != 0);
    out.push((reps, current));
    Layout::from_leaves(&coalesce_leaves(&out))
}
