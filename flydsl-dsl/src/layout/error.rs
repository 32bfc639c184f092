//! The one error type of the layout algebra.

use super::int_tuple::IntTuple;

/// Why a layout operation was refused. Every message names the offending value and says
/// what to change.
///
/// ```
/// use flydsl_dsl::layout::{Layout, LayoutError};
/// let err = Layout::new((2, 3), 1).unwrap_err();
/// assert!(matches!(err, LayoutError::Incongruent { .. }));
/// assert!(err.to_string().contains("(2,3)"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// Shape and stride do not have the same nesting.
    #[error(
        "shape {shape} and stride {stride} are not congruent: give the stride exactly the \
         nesting of the shape (one integer per shape entry)"
    )]
    Incongruent {
        /// The shape.
        shape: IntTuple,
        /// The stride.
        stride: IntTuple,
    },
    /// A shape entry is zero or negative.
    #[error(
        "shape {shape} has entry {value}: every shape entry must be >= 1 (a layout cannot \
         describe an empty or negative extent; handle zero-size tensors before building layouts)"
    )]
    BadShapeEntry {
        /// The shape.
        shape: IntTuple,
        /// The offending entry.
        value: i64,
    },
    /// A size, cosize or stride product does not fit in an i64.
    #[error("{what} overflows i64: use smaller shapes or strides")]
    Overflow {
        /// What was being computed.
        what: String,
    },
    /// A (literal) coordinate lies outside its mode.
    #[error(
        "coordinate {value} is out of range for the mode of extent {extent} (shape {shape}): \
         coordinates of a mode of extent n must lie in [0, n)"
    )]
    CoordOutOfRange {
        /// The coordinate value.
        value: i64,
        /// The extent of the mode it indexes.
        extent: i64,
        /// The (sub)shape the coordinate was given for.
        shape: IntTuple,
    },
    /// A coordinate's nesting does not match the shape.
    #[error(
        "coordinate {coord} does not fit shape {shape}: give one entry per mode (an integer \
         may stand for a whole sub-tuple, a tuple may not stand for an integer mode)"
    )]
    CoordMismatch {
        /// The coordinate, printed.
        coord: String,
        /// The (sub)shape.
        shape: IntTuple,
    },
    /// A mode index is not below the rank.
    #[error("mode {index} does not exist in layout {layout} of rank {rank}: use 0..{rank}")]
    ModeOutOfRange {
        /// The layout, printed.
        layout: String,
        /// The requested mode.
        index: usize,
        /// The rank of the layout.
        rank: usize,
    },
    /// Composition violates CuTe's stride divisibility condition.
    #[error(
        "composition {a} o {b}: stride {stride} neither divides nor is a multiple of the \
         extent {extent} of the coalesced left layout (CuTe's stride divisibility condition); \
         pick a right-hand stride that divides that extent or is a multiple of it"
    )]
    StrideDivisibility {
        /// Left operand, printed.
        a: String,
        /// Right operand mode, printed.
        b: String,
        /// The remaining stride being divided out.
        stride: i64,
        /// The extent of the left layout's mode that blocks it.
        extent: i64,
    },
    /// Composition violates CuTe's shape divisibility condition.
    #[error(
        "composition {a} o {b}: the remaining size {size} is neither a multiple of nor smaller \
         than the extent {extent} of the strided left layout (CuTe's shape divisibility \
         condition); pick a right-hand shape that tiles the left layout's modes evenly"
    )]
    ShapeDivisibility {
        /// Left operand, printed.
        a: String,
        /// Right operand mode, printed.
        b: String,
        /// The remaining size being modded out.
        size: i64,
        /// The extent of the mode that blocks it.
        extent: i64,
    },
    /// An operation needs non-negative strides.
    #[error(
        "{op} needs non-negative strides but {layout} has stride {stride}: reverse the \
         mode's direction in the tensor's base pointer instead"
    )]
    NegativeStride {
        /// The operation.
        op: &'static str,
        /// The layout, printed.
        layout: String,
        /// The negative stride.
        stride: i64,
    },
    /// Complement / inverse is not defined for this layout.
    #[error(
        "{op} is not defined for {layout}: {reason}; the layout's modes, sorted by stride, must \
         each start at a multiple of the previous mode's extent (stride * shape)"
    )]
    NotComplementable {
        /// The operation.
        op: &'static str,
        /// The layout, printed.
        layout: String,
        /// What went wrong.
        reason: String,
    },
    /// A tiler has more modes than the layout it is applied to.
    #[error(
        "tiler {tiler} has rank {tiler_rank} but layout {layout} has rank {layout_rank}: \
         give at most one tiler mode per layout mode"
    )]
    TilerRank {
        /// The tiler, printed.
        tiler: String,
        /// The tiler's rank.
        tiler_rank: usize,
        /// The layout, printed.
        layout: String,
        /// The layout's rank.
        layout_rank: usize,
    },
    /// An integer argument is outside its allowed range.
    #[error("{what} = {value} is not allowed: {fix}")]
    BadArgument {
        /// The argument's name.
        what: &'static str,
        /// Its value.
        value: i64,
        /// What it must be.
        fix: &'static str,
    },
}

/// `a * b`, or [`LayoutError::Overflow`] naming `what`.
pub(crate) fn cmul(a: i64, b: i64, what: &str) -> Result<i64, LayoutError> {
    a.checked_mul(b).ok_or_else(|| LayoutError::Overflow {
        what: format!("{what} ({a} * {b})"),
    })
}
