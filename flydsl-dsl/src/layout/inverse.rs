//! Right and left inverses of layouts.

use super::base::Layout;
use super::coalesce::coalesce_leaves;
use super::complement::complement;
use super::error::LayoutError;

/// CuTe's `right_inverse(L)`: the largest compact-domain layout `R` with `L(R(i)) == i` for
/// all `i` in `[0, size(R))`. It collects `L`'s modes of stride 1, `s1`, `s1*s2`, ... in
/// order; `1:0` when `L` never produces offset 1.
///
/// ```
/// use flydsl_dsl::layout::{right_inverse, Layout};
/// let l = Layout::new((4, 8), (8, 1))?;
/// let r = right_inverse(&l)?;
/// assert_eq!(r.to_string(), "(8,4):(4,1)");
/// for i in 0..r.size() {
///     assert_eq!(l.call(&r.call(&i)?)?, i);
/// }
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn right_inverse(l: &Layout) -> Result<Layout, LayoutError> {
    let flat = coalesce_leaves(&l.leaves());
    // (shape, stride, colexicographic index stride) of each coalesced mode.
    let mut with_index = Vec::with_capacity(flat.len());
    let mut prefix = 1i64;
    for &(s, d) in &flat {
        with_index.push((s, d, prefix));
        prefix *= s;
    }
    let mut out: Vec<(i64, i64)> = Vec::new();
    let mut current = 1i64;
    while let Some(&(s, _, p)) = with_index.iter().find(|m| m.1 == current) {
        out.push((s, p));
        current *= s;
    }
    Layout::from_leaves(&coalesce_leaves(&out))
}

/// CuTe's `left_inverse(L)`: a layout `R` with `R(L(i)) == i` for all `i` in
/// `[0, size(L))`, computed as `right_inverse((L, complement(L, cosize(L))))`. Needs `L`
/// injective with a complement ([`LayoutError::NotComplementable`] otherwise).
///
/// ```
/// use flydsl_dsl::layout::{left_inverse, Layout};
/// let l = Layout::new((2, 3), (3, 1))?;
/// let r = left_inverse(&l)?;
/// for i in 0..l.size() {
///     assert_eq!(r.call(&l.call(&i)?)?, i);
/// }
/// assert!(left_inverse(&Layout::new((2, 3), (0, 1))?).is_err());
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn left_inverse(l: &Layout) -> Result<Layout, LayoutError> {
    if let Some((s, _)) = l.leaves().into_iter().find(|&(s, d)| s > 1 && d == 0) {
        return Err(LayoutError::NotComplementable {
            op: "left_inverse",
            layout: l.to_string(),
            reason: format!("a mode of size {s} has stride 0, so the layout is not injective"),
        });
    }
    let c = complement(l, l.cosize())?;
    right_inverse(&Layout::concat(&[l.clone(), c])?)
}
