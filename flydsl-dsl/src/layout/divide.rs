//! Layout divides (tiling): logical, zipped, tiled and flat.

use super::base::Layout;
use super::complement::complement;
use super::composition::compose_layouts;
use super::error::LayoutError;
use super::tiler::Tiler;

/// CuTe's `logical_divide(A, B) = A o (B, complement(B, size(A)))`: mode 0 of the result is
/// the tile `B` selects, mode 1 iterates over the tiles. With a by-mode [`Tiler`] each mode
/// of `A` is divided by its tiler part; extra modes of `A` are kept.
///
/// ```
/// use flydsl_dsl::layout::{logical_divide, Layout, Tiler};
/// // CuTe docs, "Logical Divide 1-D Example".
/// let a = Layout::new((4, 2, 3), (2, 1, 8))?;
/// let d = logical_divide(&a, &Layout::new(4, 2)?)?;
/// assert_eq!(d.to_string(), "((2,2),(2,3)):((4,1),(2,8))");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn logical_divide(a: &Layout, tiler: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    tiler.into().apply(a, &divide_layouts)
}

fn divide_layouts(a: &Layout, b: &Layout) -> Result<Layout, LayoutError> {
    let rest = complement(b, a.size())?;
    compose_layouts(a, &Layout::concat(&[b.clone(), rest])?)
}

/// CuTe's `zipped_divide`: `((Tile...), (Rest..., extra modes...))`.
///
/// ```
/// use flydsl_dsl::layout::{zipped_divide, Layout, Tiler};
/// // CuTe docs, "Zipped, Tiled, Flat Divides": shape ((3,8),(3,4)).
/// let a = Layout::new((9, (4, 8)), (59, (13, 1)))?;
/// let t = Tiler::modes([Layout::new(3, 3)?, Layout::new((2, 4), (1, 8))?]);
/// let z = zipped_divide(&a, t)?;
/// assert_eq!(z.mode(0)?.size(), 24);
/// assert_eq!(z.mode(0)?.to_string(), "(3,(2,4)):(177,(13,2))");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn zipped_divide(a: &Layout, tiler: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    let tiler = tiler.into();
    let (tile, rest) = unzip(&logical_divide(a, &tiler)?, &tiler)?;
    Layout::concat(&[tile, rest])
}

/// CuTe's `tiled_divide`: `((Tile...), Rest0, Rest1, ..., extra modes...)`.
///
/// ```
/// use flydsl_dsl::layout::{tiled_divide, Layout, Tiler};
/// let a = Layout::col_major((8, 6))?;
/// let t = tiled_divide(&a, Tiler::from_shape((4, 3))?)?;
/// assert_eq!(t.to_string(), "((4,3),2,2):((1,8),4,24)");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn tiled_divide(a: &Layout, tiler: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    let tiler = tiler.into();
    let (tile, rest) = unzip(&logical_divide(a, &tiler)?, &tiler)?;
    let mut modes = vec![tile];
    modes.extend(rest.modes());
    Layout::concat(&modes)
}

/// CuTe's `flat_divide`: `(Tile0, Tile1, ..., Rest0, Rest1, ..., extra modes...)`.
///
/// ```
/// use flydsl_dsl::layout::{flat_divide, Layout, Tiler};
/// let a = Layout::col_major((8, 6))?;
/// let f = flat_divide(&a, Tiler::from_shape((4, 3))?)?;
/// assert_eq!(f.to_string(), "(4,3,2,2):(1,8,4,24)");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn flat_divide(a: &Layout, tiler: impl Into<Tiler>) -> Result<Layout, LayoutError> {
    let tiler = tiler.into();
    let (tile, rest) = unzip(&logical_divide(a, &tiler)?, &tiler)?;
    let mut modes = tile.modes();
    modes.extend(rest.modes());
    Layout::concat(&modes)
}

/// Splits a by-mode divide/product result `((T0,R0),(T1,R1),...,E...)` along `tiler` into
/// `(T0,T1,...)` and `(R0,R1,...,E...)` (CuTe's `tile_unzip`); a layout tiler's result is
/// already `(T, R)`.
pub(crate) fn unzip(l: &Layout, tiler: &Tiler) -> Result<(Layout, Layout), LayoutError> {
    match tiler {
        Tiler::Layout(_) => Ok((l.mode(0)?, l.mode(1)?)),
        Tiler::Modes(ts) => {
            let mut tiles = Vec::with_capacity(ts.len());
            let mut rests = Vec::with_capacity(l.rank());
            for (i, t) in ts.iter().enumerate() {
                let (ti, ri) = unzip(&l.mode(i)?, t)?;
                tiles.push(ti);
                rests.push(ri);
            }
            rests.extend(l.modes().into_iter().skip(ts.len()));
            Ok((Layout::concat(&tiles)?, Layout::concat(&rests)?))
        }
    }
}
