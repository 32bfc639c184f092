//! Layout products (tiling by repetition): logical, zipped, tiled, flat, blocked, raked.

use super::base::Layout;
use super::complement::complement;
use super::composition::compose_layouts;
use super::divide::unzip;
use super::error::{cmul, LayoutError};
use super::tiler::Tiler;

/// CuTe's `logical_product(A, B) = (A, complement(A, size(A) * cosize(B)) o B)`: mode 0 is
/// `A`, mode 1 places one "unique replication" of `A` at each element of `B`. With a
/// by-mode [`Tiler`] the product is taken mode by mode.
///
/// ```
/// use flydsl_dsl::layout::{logical_product, Layout};
/// // CuTe docs, "Logical Product 1-D Example".
/// let a = Layout::new((2, 2), (4, 1))?;
/// let p = logical_product(&a, &Layout::new(6, 1)?)?;
/// assert_eq!(p.to_string(), "((2,2),(2,3)):((4,1),(2,8))");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn logical_product(a: &Layout, tiler: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    tiler.into().apply(a, &product_layouts)
}

fn product_layouts(a: &Layout, b: &Layout) -> Result<Layout, LayoutError> {
    let target = cmul(a.size(), b.cosize(), "logical_product cotarget")?;
    let rest = compose_layouts(&complement(a, target)?, b)?;
    Layout::concat(&[a.clone(), rest])
}

/// CuTe's `zipped_product`: `((A modes...), (tiles..., extra modes...))` of the by-mode
/// logical product.
///
/// ```
/// use flydsl_dsl::layout::{zipped_product, Layout};
/// let a = Layout::col_major((2, 2))?;
/// let z = zipped_product(&a, &Layout::col_major((3, 4))?)?;
/// assert_eq!(z.to_string(), "((2,2),(3,4)):((1,2),(4,12))");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn zipped_product(a: &Layout, tiler: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    let tiler = tiler.into();
    let (block, rest) = unzip(&logical_product(a, &tiler)?, &tiler)?;
    Layout::concat(&[block, rest])
}

/// CuTe's `tiled_product`: `((A modes...), tile0, tile1, ..., extra modes...)`.
///
/// ```
/// use flydsl_dsl::layout::{tiled_product, Layout};
/// let a = Layout::col_major((2, 2))?;
/// let t = tiled_product(&a, &Layout::col_major((3, 4))?)?;
/// assert_eq!(t.to_string(), "((2,2),3,4):((1,2),4,12)");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn tiled_product(a: &Layout, tiler: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    let tiler = tiler.into();
    let (block, rest) = unzip(&logical_product(a, &tiler)?, &tiler)?;
    let mut modes = vec![block];
    modes.extend(rest.modes());
    Layout::concat(&modes)
}

/// CuTe's `flat_product`: `(A modes..., tile0, tile1, ..., extra modes...)`.
///
/// ```
/// use flydsl_dsl::layout::{flat_product, Layout};
/// let a = Layout::col_major((2, 2))?;
/// let f = flat_product(&a, &Layout::col_major((3, 4))?)?;
/// assert_eq!(f.to_string(), "(2,2,3,4):(1,2,4,12)");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn flat_product(a: &Layout, tiler: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    let tiler = tiler.into();
    let (block, rest) = unzip(&logical_product(a, &tiler)?, &tiler)?;
    let mut modes = block.modes();
    modes.extend(rest.modes());
    Layout::concat(&modes)
}

/// CuTe's `blocked_product(A, B)`: `B` arranges copies of the block `A`; mode `i` of the
/// result is `(A_i, B'_i)` coalesced, where `B' = complement(A, ..) o B`. For compact `A`
/// the element at per-mode 1-D coordinates `a_i + size(A_i) * b_i` is
/// `A(a) + size(A) * B(b)`. Both are padded with `1:0` modes to the same rank.
///
/// ```
/// use flydsl_dsl::layout::{blocked_product, Layout};
/// // CuTe docs, "Blocked and Raked Products": a 2x5 row-major block in a 3x4
/// // column-major arrangement; mode 0 gets coalesced.
/// let a = Layout::new((2, 5), (5, 1))?;
/// let b = Layout::new((3, 4), (1, 3))?;
/// assert_eq!(blocked_product(&a, &b)?.to_string(), "(6,(5,4)):(5,(1,30))");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn blocked_product(a: &Layout, b: &Layout) -> Result<Layout, LayoutError> {
    rank_product(a, b, false)
}

/// CuTe's `raked_product(A, B)`: like [`blocked_product`] but mode `i` is `(B'_i, A_i)`, so
/// copies of `A` are interleaved ("raked", a cyclic distribution): the element at per-mode
/// 1-D coordinates `b_i + size(B_i) * a_i` is `A(a) + size(A) * B(b)` for compact `A`.
///
/// ```
/// use flydsl_dsl::layout::{raked_product, Layout};
/// let a = Layout::new((2, 5), (5, 1))?;
/// let b = Layout::new((3, 4), (1, 3))?;
/// assert_eq!(raked_product(&a, &b)?.to_string(), "((3,2),(4,5)):((10,5),(30,1))");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn raked_product(a: &Layout, b: &Layout) -> Result<Layout, LayoutError> {
    rank_product(a, b, true)
}

fn rank_product(a: &Layout, b: &Layout, raked: bool) -> Result<Layout, LayoutError> {
    let r = a.rank().max(b.rank());
    let (a, b) = (a.padded_to_rank(r)?, b.padded_to_rank(r)?);
    let p = product_layouts(&a, &b)?;
    let (block, tiles) = (p.mode(0)?, p.mode(1)?);
    let mut modes = Vec::with_capacity(r);
    for i in 0..r {
        let (ai, bi) = (block.mode(i)?, tiles.mode(i)?);
        let pair = if raked { [bi, ai] } else { [ai, bi] };
        modes.push(Layout::concat(&pair)?.coalesce());
    }
    Layout::concat(&modes)
}
