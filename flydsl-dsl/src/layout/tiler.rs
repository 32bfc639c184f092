//! Tilers: the right-hand side of composition, divides and products.

use std::fmt;

use super::base::Layout;
use super::error::LayoutError;
use super::int_tuple::IntTuple;

/// A layout applied to a whole layout, or a tuple of tilers applied mode by mode (CuTe's
/// `Tiler`, written `<t0, t1, ...>`).
///
/// ```
/// use flydsl_dsl::layout::{Layout, Tiler};
/// let t = Tiler::modes([Layout::new(3, 4)?, Layout::new(8, 2)?]);
/// assert_eq!(t.to_string(), "<3:4, 8:2>");
/// let s = Tiler::from_shape((3, 8))?;
/// assert_eq!(s.to_string(), "<3:1, 8:1>");
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Tiler {
    /// Acts on the whole layout as a 1-D function.
    Layout(Layout),
    /// Acts on the leading modes, one tiler per mode.
    Modes(Vec<Tiler>),
}

impl Tiler {
    /// A by-mode tiler from its parts.
    ///
    /// ```
    /// use flydsl_dsl::layout::{Layout, Tiler};
    /// assert_eq!(Tiler::modes([Layout::new(4, 1)?]).rank(), 1);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn modes<T: Into<Tiler>>(parts: impl IntoIterator<Item = T>) -> Tiler {
        Tiler::Modes(parts.into_iter().map(Into::into).collect())
    }

    /// A shape read as a tiler, like CuTe: an integer `n` is `n:1`, a tuple is one
    /// column-major layout per top-level entry.
    ///
    /// ```
    /// use flydsl_dsl::layout::Tiler;
    /// assert_eq!(Tiler::from_shape((2, (3, 4)))?.to_string(), "<2:1, (3,4):(1,3)>");
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn from_shape(shape: impl Into<IntTuple>) -> Result<Tiler, LayoutError> {
        match shape.into() {
            IntTuple::Int(n) => Ok(Tiler::Layout(Layout::new(n, 1)?)),
            IntTuple::Tuple(v) => v
                .into_iter()
                .map(|t| Layout::col_major(t).map(Tiler::Layout))
                .collect::<Result<Vec<_>, _>>()
                .map(Tiler::Modes),
        }
    }

    /// 1 for a layout tiler, the number of parts for a by-mode tiler.
    ///
    /// ```
    /// use flydsl_dsl::layout::{Layout, Tiler};
    /// assert_eq!(Tiler::from(Layout::col_major((2, 2))?).rank(), 1);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn rank(&self) -> usize {
        match self {
            Tiler::Layout(_) => 1,
            Tiler::Modes(v) => v.len(),
        }
    }

    /// Checks that a by-mode tiler fits `layout`'s rank.
    pub(crate) fn check_rank(&self, layout: &Layout) -> Result<(), LayoutError> {
        if let Tiler::Modes(v) = self {
            if v.len() > layout.rank() {
                return Err(LayoutError::TilerRank {
                    tiler: self.to_string(),
                    tiler_rank: v.len(),
                    layout: layout.to_string(),
                    layout_rank: layout.rank(),
                });
            }
        }
        Ok(())
    }

    /// Applies `f(mode_i, tiler_i)` by mode (keeping extra modes of `layout`) or `whole` to
    /// the whole layout; returns the concatenated result.
    pub(crate) fn apply(
        &self,
        layout: &Layout,
        whole: &dyn Fn(&Layout, &Layout) -> Result<Layout, LayoutError>,
    ) -> Result<Layout, LayoutError> {
        match self {
            Tiler::Layout(b) => whole(layout, b),
            Tiler::Modes(ts) => {
                self.check_rank(layout)?;
                let mut modes = Vec::with_capacity(layout.rank());
                for (i, m) in layout.modes().into_iter().enumerate() {
                    modes.push(match ts.get(i) {
                        Some(t) => t.apply(&m, whole)?,
                        None => m,
                    });
                }
                Layout::concat(&modes)
            }
        }
    }
}

impl From<Layout> for Tiler {
    fn from(l: Layout) -> Self {
        Tiler::Layout(l)
    }
}

impl From<&Layout> for Tiler {
    fn from(l: &Layout) -> Self {
        Tiler::Layout(l.clone())
    }
}

impl From<&Tiler> for Tiler {
    fn from(t: &Tiler) -> Self {
        t.clone()
    }
}

impl fmt::Display for Tiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tiler::Layout(l) => write!(f, "{l}"),
            Tiler::Modes(v) => {
                f.write_str("<")?;
                for (i, t) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(">")
            }
        }
    }
}
