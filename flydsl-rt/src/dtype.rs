//! The element types of kernel-crate APIs: [`DType`] (the dtype enum, shared with build
//! scripts through `flydsl_ir`), the sealed [`Element`] trait of the Rust types that carry
//! it, and [`PerElement`], a table with one value per element type, typed by that type (how
//! a generic `T: Element` finds its typed launchers without a downcast).

use crate::DeviceRepr;
use half::{bf16, f16};

pub use flydsl_ir::DType;

mod sealed {
    use super::{ElementMap, PerElement};

    /// Implemented only by the element types below; picks the element's field of a
    /// [`PerElement`] table.
    pub trait Sealed: Sized {
        fn pick<M: ElementMap>(table: &PerElement<M>) -> &M::Of<Self>
        where
            Self: super::Element;
    }
}

/// An element type of kernel-crate activations, weights and outputs: `f32`, `half::f16`,
/// `half::bf16` (sealed; one impl per [`DType`]).
///
/// ```
/// use flydsl_rt::{DType, Element};
/// assert_eq!(<half::bf16 as Element>::DTYPE, DType::BF16);
/// assert_eq!(f32::DTYPE.vec(), 4); // elements per 128-bit vector
/// assert_eq!(half::f16::from_f32(1.5).to_f32(), 1.5);
/// ```
pub trait Element: DeviceRepr + sealed::Sealed {
    /// The dtype.
    const DTYPE: DType;
    /// Round an f32 to this type (round to nearest even).
    fn from_f32(v: f32) -> Self;
    /// Widen to f32 (exact).
    fn to_f32(self) -> f32;
}

macro_rules! element {
    ($t:ty, $d:ident, $field:ident, $from:expr, $to:expr) => {
        impl sealed::Sealed for $t {
            fn pick<M: ElementMap>(table: &PerElement<M>) -> &M::Of<Self> {
                &table.$field
            }
        }
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn from_f32(v: f32) -> Self {
                $from(v)
            }
            fn to_f32(self) -> f32 {
                $to(self)
            }
        }
    };
}

element!(f32, F32, f32, |v| v, |v| v);
element!(f16, F16, f16, f16::from_f32, f16::to_f32);
element!(bf16, BF16, bf16, bf16::from_f32, bf16::to_f32);

/// A type for each element type: `Of<f32>`, `Of<f16>`, `Of<bf16>` (the value type of a
/// [`PerElement`] table). Implemented by a kernel crate's marker types, e.g. "the launchers of
/// kernels on elements `T`".
///
/// ```
/// use flydsl_rt::{Element, ElementMap, PerElement};
/// struct Zero;
/// impl ElementMap for Zero {
///     type Of<T: Element> = T;
/// }
/// let zeros: PerElement<Zero> = PerElement { f32: 0.0, f16: half::f16::ZERO, bf16: half::bf16::ZERO };
/// assert_eq!(*zeros.get::<f32>(), 0.0);
/// ```
pub trait ElementMap {
    /// The type for elements `T`.
    type Of<T: Element>;
}

/// One value per element type, each of the type `M` gives it; [`PerElement::get`] returns the
/// one of a generic `T: Element`, typed `M::Of<T>`. A table of two element types (activations
/// and weights, A and B) nests one in another: see [`ElementMap2`].
///
/// The fields are named as [`DType::name`] writes the dtypes (the builder's generated tables
/// rely on it).
///
/// ```
/// use flydsl_rt::{Element, ElementMap, PerElement};
/// struct Name;
/// impl ElementMap for Name {
///     type Of<T: Element> = &'static str;
/// }
/// static NAMES: PerElement<Name> = PerElement { f32: "single", f16: "half", bf16: "brain" };
/// fn name<T: Element>() -> &'static str {
///     NAMES.get::<T>()
/// }
/// assert_eq!(name::<half::bf16>(), "brain");
/// ```
pub struct PerElement<M: ElementMap> {
    /// The value for `f32`.
    pub f32: M::Of<f32>,
    /// The value for `half::f16`.
    pub f16: M::Of<f16>,
    /// The value for `half::bf16`.
    pub bf16: M::Of<bf16>,
}

impl<M: ElementMap> PerElement<M> {
    /// The value for elements `T`.
    pub fn get<T: Element>(&self) -> &M::Of<T> {
        <T as sealed::Sealed>::pick(self)
    }
}

impl<M: ElementMap> std::fmt::Debug for PerElement<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerElement").finish_non_exhaustive()
    }
}

/// A type for each pair of element types, `Of<A, B>`: the value type of a two-level
/// [`PerElement2`] table (e.g. launchers of kernels on activations `A` and weights `B`).
///
/// ```
/// use flydsl_rt::{Element, ElementMap2, PerElement, PerElement2};
/// struct Same;
/// impl ElementMap2 for Same {
///     type Of<A: Element, B: Element> = bool;
/// }
/// let t: PerElement2<Same> = PerElement {
///     f32: PerElement { f32: true, f16: false, bf16: false },
///     f16: PerElement { f32: false, f16: true, bf16: false },
///     bf16: PerElement { f32: false, f16: false, bf16: true },
/// };
/// assert!(*t.get2::<half::f16, half::f16>() && !*t.get2::<half::f16, f32>());
/// ```
pub trait ElementMap2 {
    /// The type for elements `A` and `B`.
    type Of<A: Element, B: Element>;
}

/// The outer level of a [`PerElement2`] table (indexed by `A`).
pub struct OuterElement<M>(std::marker::PhantomData<fn() -> M>);

/// The inner level of a [`PerElement2`] table (indexed by `B`, for a fixed `A`).
pub struct InnerElement<M, A>(std::marker::PhantomData<fn() -> (M, A)>);

impl<M: ElementMap2> ElementMap for OuterElement<M> {
    type Of<A: Element> = PerElement<InnerElement<M, A>>;
}

impl<M: ElementMap2, A: Element> ElementMap for InnerElement<M, A> {
    type Of<B: Element> = M::Of<A, B>;
}

/// A table with one value per pair of element types, typed by [`ElementMap2`]: a
/// [`PerElement`] of [`PerElement`]s, the outer indexed by `A`.
pub type PerElement2<M> = PerElement<OuterElement<M>>;

impl<M: ElementMap2> PerElement<OuterElement<M>> {
    /// The value for elements `A` and `B`.
    pub fn get2<A: Element, B: Element>(&self) -> &M::Of<A, B> {
        self.get::<A>().get::<B>()
    }
}
