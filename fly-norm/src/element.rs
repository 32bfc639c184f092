//! The activation / weight element types the kernels are built for.

use crate::config::Dtype;
use flydsl_rt::DeviceRepr;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// An element type of activations and weights: `f32`, `half::f16` or `half::bf16` (sealed).
///
/// ```
/// use fly_norm::{Dtype, Element};
/// assert_eq!(<half::bf16 as Element>::DTYPE, Dtype::Bf16);
/// assert_eq!(<f32 as Element>::DTYPE.vec(), 4); // elements per 128-bit vector
/// ```
pub trait Element: sealed::Sealed + DeviceRepr {
    /// The dtype.
    const DTYPE: Dtype;
    /// Round an f32 to this type (round to nearest even).
    fn from_f32(v: f32) -> Self;
    /// Widen to f32 (exact).
    fn to_f32(self) -> f32;
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Element for half::f16 {
    const DTYPE: Dtype = Dtype::F16;
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
}

impl Element for half::bf16 {
    const DTYPE: Dtype = Dtype::Bf16;
    fn from_f32(v: f32) -> Self {
        half::bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        half::bf16::to_f32(self)
    }
}
