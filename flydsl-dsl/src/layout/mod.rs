//! CuTe-style layout algebra (FlyDSL follows NVIDIA CuTe).
//!
//! A [`Layout`] is a nested shape with a congruent stride; as a function it maps a coordinate
//! (natural, nested like the shape, or a 1-D colexicographic index) to an offset. Shapes and
//! strides are static `i64`s evaluated in Rust while a kernel is generated. Coordinates may be
//! run-time values of that kernel: [`Layout::crd2idx`], [`Layout::idx2crd`], [`Layout::call`]
//! and [`Swizzle::apply`] are generic over [`IndexExpr`], so the same code folds literals here
//! and emits only the non-trivial arithmetic for dynamic values.
//!
//! The algebra: [`composition`], [`complement`], [`right_inverse`], [`left_inverse`],
//! [`logical_divide`] (and zipped / tiled / flat), [`logical_product`] (and zipped / tiled /
//! flat / blocked / raked), [`Layout::coalesce`], and swizzles ([`Swizzle`],
//! [`ComposedLayout`]).
//!
//! ```
//! use flydsl_dsl::layout::{logical_divide, Layout};
//! // CuTe's 1-D logical_divide example (CuTe docs, "Logical Divide 1-D Example").
//! let a = Layout::new((4, 2, 3), (2, 1, 8))?;
//! let b = Layout::new(4, 2)?;
//! assert_eq!(logical_divide(&a, &b)?.to_string(), "((2,2),(2,3)):((4,1),(2,8))");
//! # Ok::<(), flydsl_dsl::layout::LayoutError>(())
//! ```

mod base;
mod coalesce;
mod complement;
mod composition;
mod coord;
mod divide;
mod error;
pub(crate) mod expr;
mod fit;
mod int_tuple;
mod inverse;
mod product;
mod swizzle;
#[cfg(test)]
mod tests;
mod tiler;

pub use crate::tup;
pub use base::Layout;
pub use complement::complement;
pub use composition::composition;
pub use coord::Coord;
pub use divide::{flat_divide, logical_divide, tiled_divide, zipped_divide};
pub use error::LayoutError;
pub use int_tuple::{IntTuple, Shape, Stride};
pub use inverse::{left_inverse, right_inverse};
pub use product::{
    blocked_product, flat_product, logical_product, raked_product, tiled_product, zipped_product,
};
pub use swizzle::{swizzle_fp8_128, swizzle_xor16, ComposedLayout, Swizzle, SwizzledLayout};
pub use tiler::Tiler;

/// An index value that is either known now (a literal) or computed by the generated kernel.
///
/// The layout code calls these methods only with non-negative values and positive constants,
/// and never for trivial work: it folds literals itself (via [`IndexExpr::as_lit`]) and skips
/// `mul_lit(1)`, `mul_lit(0)`, adding a literal 0, `div_lit(1)`, `rem_lit(1)` and a `rem_lit`
/// that cannot change an in-range value. Division and remainder by a power of two are
/// emitted as `shr_lit` / `and_lit` (exact for non-negative values).
///
/// Implemented here for `i64` (everything is a literal).
///
/// ```
/// use flydsl_dsl::layout::{IndexExpr, Layout};
/// assert_eq!(<i64 as IndexExpr>::lit(5).mul_lit(3), 15);
/// let l = Layout::new((4, 8), (1, 16))?;
/// assert_eq!(l.call(&9i64)?, 1 + 2 * 16);
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub trait IndexExpr: Clone {
    /// The constant `v`.
    fn lit(v: i64) -> Self;
    /// `self + o`.
    fn add(&self, o: &Self) -> Self;
    /// `self * k`.
    fn mul_lit(&self, k: i64) -> Self;
    /// `self / k` for `self >= 0`, `k > 0`.
    fn div_lit(&self, k: i64) -> Self;
    /// `self % k` for `self >= 0`, `k > 0`.
    fn rem_lit(&self, k: i64) -> Self;
    /// `self ^ o`.
    fn xor(&self, o: &Self) -> Self;
    /// `self & m`.
    fn and_lit(&self, m: i64) -> Self;
    /// `self >> s` (logical; values are non-negative).
    fn shr_lit(&self, s: u32) -> Self;
    /// The value if it is known now.
    fn as_lit(&self) -> Option<i64>;
}

impl IndexExpr for i64 {
    fn lit(v: i64) -> Self {
        v
    }
    fn add(&self, o: &Self) -> Self {
        self.wrapping_add(*o)
    }
    fn mul_lit(&self, k: i64) -> Self {
        self.wrapping_mul(k)
    }
    fn div_lit(&self, k: i64) -> Self {
        debug_assert!(k > 0, "div_lit by {k}");
        self.checked_div(k).unwrap_or(0)
    }
    fn rem_lit(&self, k: i64) -> Self {
        debug_assert!(k > 0, "rem_lit by {k}");
        self.checked_rem(k).unwrap_or(0)
    }
    fn xor(&self, o: &Self) -> Self {
        self ^ o
    }
    fn and_lit(&self, m: i64) -> Self {
        self & m
    }
    fn shr_lit(&self, s: u32) -> Self {
        self.checked_shr(s).unwrap_or(0)
    }
    fn as_lit(&self) -> Option<i64> {
        Some(*self)
    }
}
