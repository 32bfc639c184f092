//! The element types softmax supports: `f32`, `half::f16`, `half::bf16` (sealed).

use crate::kernels::{Launcher, LAUNCHERS_BF16, LAUNCHERS_F16, LAUNCHERS_F32};
use crate::table::DType;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::DeviceRepr;

mod sealed {
    /// Implemented only by this crate's element types.
    pub trait Sealed: flydsl_rt::DeviceRepr {
        /// The launchers of this dtype, in configuration-table order.
        fn launchers() -> &'static [crate::kernels::Launcher<Self>];
    }
}

/// An element type softmax kernels are built for. Sealed: `f32`, `half::f16`, `half::bf16`.
///
/// ```
/// use fly_softmax::{Element, table::DType};
/// assert_eq!(<half::bf16 as Element>::DTYPE, DType::BF16);
/// assert_eq!(f32::DTYPE.vec(), 4);
/// ```
pub trait Element: DeviceRepr + sealed::Sealed {
    /// The dtype tag.
    const DTYPE: DType;
    /// Widen to f64 (for host-side checks).
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $d:ident, $table:ident) => {
        impl sealed::Sealed for $t {
            fn launchers() -> &'static [Launcher<Self>] {
                $table
            }
        }
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
        }
    };
}

element!(f32, F32, LAUNCHERS_F32);
element!(f16, F16, LAUNCHERS_F16);
element!(bf16, BF16, LAUNCHERS_BF16);

/// The launchers of `T` (crate-internal access to the sealed table).
pub(crate) fn launchers<T: Element>() -> &'static [Launcher<T>] {
    <T as sealed::Sealed>::launchers()
}
