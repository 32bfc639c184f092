//! The `Layout` type: construction, structural queries and printing.

use std::fmt;

use super::error::{cmul, LayoutError};
use super::int_tuple::{IntTuple, Shape, Stride};

/// A shape with a congruent stride: CuTe's `Layout`. Printed like CuTe, `shape:stride`.
///
/// ```
/// use flydsl_dsl::layout::Layout;
/// let l = Layout::new((2, (3, 4)), (1, (2, 6)))?;
/// assert_eq!(l.to_string(), "(2,(3,4)):(1,(2,6))");
/// assert_eq!((l.size(), l.cosize(), l.rank(), l.depth()), (24, 24, 2, 2));
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Shape,
    stride: Stride,
}

impl Layout {
    /// A layout from a shape and a congruent stride. Shape entries must be >= 1 and the size
    /// and cosize must fit in an `i64`. Strides may be any integers (0 broadcasts).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// assert!(Layout::new((4, 8), (8, 1)).is_ok());
    /// assert!(Layout::new((4, 0), (8, 1)).is_err());
    /// assert!(Layout::new((4, 8), 1).is_err());
    /// ```
    pub fn new(shape: impl Into<Shape>, stride: impl Into<Stride>) -> Result<Self, LayoutError> {
        let (shape, stride) = (shape.into(), stride.into());
        if !shape.is_congruent(&stride) {
            return Err(LayoutError::Incongruent { shape, stride });
        }
        let shapes = shape.leaves();
        if let Some(&bad) = shapes.iter().find(|&&s| s < 1) {
            return Err(LayoutError::BadShapeEntry { shape, value: bad });
        }
        let mut size: i64 = 1;
        let mut cospan: i64 = 0;
        for (s, d) in shapes.iter().zip(stride.leaves()) {
            size = cmul(size, *s, "layout size")?;
            let span = cmul(s - 1, d.checked_abs().unwrap_or(i64::MAX), "layout cosize")?;
            cospan = cospan
                .checked_add(span)
                .ok_or_else(|| LayoutError::Overflow {
                    what: format!("cosize of {shape}:{stride}"),
                })?;
        }
        cospan.checked_add(1).ok_or_else(|| LayoutError::Overflow {
            what: format!("cosize of {shape}:{stride}"),
        })?;
        Ok(Layout { shape, stride })
    }

    /// The compact column-major (CuTe `LayoutLeft`) layout of `shape`: strides are the
    /// colexicographic prefix products of the leaves.
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// assert_eq!(Layout::col_major((2, (3, 4)))?.to_string(), "(2,(3,4)):(1,(2,6))");
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn col_major(shape: impl Into<Shape>) -> Result<Self, LayoutError> {
        let shape = shape.into();
        let strides = compact_strides(&shape.leaves(), false);
        Layout::new(shape.clone(), rebuild(&shape, &mut strides.into_iter()))
    }

    /// The compact row-major (CuTe `LayoutRight`) layout of `shape`: the last leaf has
    /// stride 1.
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// assert_eq!(Layout::row_major((2, (3, 4)))?.to_string(), "(2,(3,4)):(12,(4,1))");
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn row_major(shape: impl Into<Shape>) -> Result<Self, LayoutError> {
        let shape = shape.into();
        let strides = compact_strides(&shape.leaves(), true);
        Layout::new(shape.clone(), rebuild(&shape, &mut strides.into_iter()))
    }

    /// The concatenation `(m0, m1, ...)` of layouts as the modes of a new layout (CuTe's
    /// `make_layout(m0, m1, ...)`).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// let l = Layout::concat(&[Layout::new(4, 2)?, Layout::new((2, 3), (1, 8))?])?;
    /// assert_eq!(l.to_string(), "(4,(2,3)):(2,(1,8))");
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn concat(modes: &[Layout]) -> Result<Self, LayoutError> {
        Layout::new(
            IntTuple::Tuple(modes.iter().map(|m| m.shape.clone()).collect()),
            IntTuple::Tuple(modes.iter().map(|m| m.stride.clone()).collect()),
        )
    }

    /// The shape.
    ///
    /// ```
    /// use flydsl_dsl::layout::{IntTuple, Layout};
    /// assert_eq!(Layout::col_major((4, 8))?.shape(), &IntTuple::from((4, 8)));
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The stride.
    ///
    /// ```
    /// use flydsl_dsl::layout::{IntTuple, Layout};
    /// assert_eq!(Layout::col_major((4, 8))?.stride(), &IntTuple::from((1, 4)));
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn stride(&self) -> &Stride {
        &self.stride
    }

    /// Number of coordinates: the product of the shape.
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// assert_eq!(Layout::new((4, 8), (0, 1))?.size(), 32);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn size(&self) -> i64 {
        self.shape.product()
    }

    /// One past the largest offset magnitude: `1 + sum((s - 1) * |d|)` (CuTe's `cosize`).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// assert_eq!(Layout::new((4, 8), (2, 16))?.cosize(), 1 + 3 * 2 + 7 * 16);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn cosize(&self) -> i64 {
        // Cannot overflow: checked in `new`.
        1 + self
            .leaves()
            .iter()
            .map(|&(s, d)| (s - 1) * d.abs())
            .sum::<i64>()
    }

    /// Number of top-level modes (1 for an integral shape).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// assert_eq!(Layout::col_major((2, (3, 4)))?.rank(), 2);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// Nesting depth of the shape (0 for an integral shape).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// assert_eq!(Layout::col_major(8)?.depth(), 0);
    /// assert_eq!(Layout::col_major((2, (3, 4)))?.depth(), 2);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn depth(&self) -> usize {
        self.shape.depth()
    }

    /// Top-level mode `i` as a layout (an integral layout's mode 0 is itself).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// let l = Layout::col_major((2, (3, 4)))?;
    /// assert_eq!(l.mode(1)?.to_string(), "(3,4):(2,6)");
    /// assert!(l.mode(2).is_err());
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn mode(&self, i: usize) -> Result<Layout, LayoutError> {
        match (self.shape.get(i), self.stride.get(i)) {
            (Some(s), Some(d)) => Ok(Layout {
                shape: s.clone(),
                stride: d.clone(),
            }),
            _ => Err(LayoutError::ModeOutOfRange {
                layout: self.to_string(),
                index: i,
                rank: self.rank(),
            }),
        }
    }

    /// All top-level modes.
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// let m = Layout::col_major((2, 3))?.modes();
    /// assert_eq!(m.len(), 2);
    /// assert_eq!(m[1].to_string(), "3:2");
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn modes(&self) -> Vec<Layout> {
        (0..self.rank()).filter_map(|i| self.mode(i).ok()).collect()
    }

    /// The same function with a flat (depth <= 1) shape.
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// let l = Layout::new((2, (3, 4)), (1, (2, 6)))?;
    /// assert_eq!(l.flatten().to_string(), "(2,3,4):(1,2,6)");
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn flatten(&self) -> Layout {
        Layout {
            shape: self.shape.flatten(),
            stride: self.stride.flatten(),
        }
    }

    /// `(shape, stride)` of every leaf mode, in colexicographic order.
    pub(crate) fn leaves(&self) -> Vec<(i64, i64)> {
        self.shape
            .leaves()
            .into_iter()
            .zip(self.stride.leaves())
            .collect()
    }

    /// A flat layout from leaf modes: `1:0` for none, an integral layout for one.
    pub(crate) fn from_leaves(modes: &[(i64, i64)]) -> Result<Layout, LayoutError> {
        match modes {
            [] => Layout::new(1, 0),
            [(s, d)] => Layout::new(*s, *d),
            _ => Layout::new(
                IntTuple::Tuple(modes.iter().map(|m| m.0.into()).collect()),
                IntTuple::Tuple(modes.iter().map(|m| m.1.into()).collect()),
            ),
        }
    }

    /// This layout as `r` top-level modes, appending `1:0` modes (always tuple-shaped).
    pub(crate) fn padded_to_rank(&self, r: usize) -> Result<Layout, LayoutError> {
        let mut modes = self.modes();
        while modes.len() < r {
            modes.push(Layout::new(1, 0)?);
        }
        Layout::concat(&modes)
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.shape, self.stride)
    }
}

/// Prefix products of `shapes` (from the back when `right`), saturating; `new` rejects
/// overflow afterwards.
fn compact_strides(shapes: &[i64], right: bool) -> Vec<i64> {
    let mut out = vec![0; shapes.len()];
    let mut p: i64 = 1;
    let order: Vec<usize> = if right {
        (0..shapes.len()).rev().collect()
    } else {
        (0..shapes.len()).collect()
    };
    for i in order {
        out[i] = p;
        p = p.saturating_mul(shapes[i].max(1));
    }
    out
}

/// A tuple congruent with `like` whose leaves come from `vals` in order.
fn rebuild(like: &IntTuple, vals: &mut impl Iterator<Item = i64>) -> IntTuple {
    match like {
        IntTuple::Int(_) => IntTuple::Int(vals.next().unwrap_or(0)),
        IntTuple::Tuple(v) => IntTuple::Tuple(v.iter().map(|t| rebuild(t, vals)).collect()),
    }
}
