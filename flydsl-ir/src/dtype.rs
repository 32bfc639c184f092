//! The element dtypes of kernel-crate APIs: one enum for every kernel crate, shared by their
//! build scripts (kernel names, IR types) and their run-time dispatchers (re-exported as
//! `flydsl_rt::DType`, with the `flydsl_rt::Element` trait mapping Rust types to it).

use crate::ScalarType;

/// An element dtype of activations, weights and outputs in the kernel crates' APIs.
///
/// A subset of [`ScalarType`] (see [`DType::scalar`]): the types a kernel crate's public
/// functions accept. To add one (i8, an fp8 format for GEMM / attention), add the variant
/// here, to [`DType::ALL`], and its `flydsl_rt::Element` impl and `PerElement` field.
///
/// ```
/// use flydsl_ir::{DType, ScalarType};
/// assert_eq!((DType::BF16.bytes(), DType::BF16.vec()), (2, 8));
/// assert_eq!((DType::F32.name(), DType::F32.scalar()), ("f32", ScalarType::F32));
/// assert_eq!(DType::ALL.len(), 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `f32`.
    F32,
    /// `half::f16`.
    F16,
    /// `half::bf16`.
    BF16,
}

impl DType {
    /// Every dtype, in a fixed order.
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// The IR scalar type of its elements.
    ///
    /// ```
    /// assert_eq!(flydsl_ir::DType::F16.scalar(), flydsl_ir::ScalarType::F16);
    /// ```
    pub const fn scalar(self) -> ScalarType {
        match self {
            DType::F32 => ScalarType::F32,
            DType::F16 => ScalarType::F16,
            DType::BF16 => ScalarType::BF16,
        }
    }

    /// The short name used in kernel names, tuner keys and error messages (`f32`, `f16`,
    /// `bf16`).
    ///
    /// ```
    /// assert_eq!(flydsl_ir::DType::BF16.name(), "bf16");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }

    /// Bytes per element.
    ///
    /// ```
    /// assert_eq!(flydsl_ir::DType::F32.bytes(), 4);
    /// ```
    pub const fn bytes(self) -> u32 {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// Elements per 128-bit vector.
    ///
    /// ```
    /// assert_eq!(flydsl_ir::DType::F16.vec(), 8);
    /// ```
    pub const fn vec(self) -> u32 {
        16 / self.bytes()
    }

    /// The dtype named `name` (as [`DType::name`] writes it).
    ///
    /// ```
    /// use flydsl_ir::DType;
    /// assert_eq!(DType::from_name("bf16"), Some(DType::BF16));
    /// assert_eq!(DType::from_name("f64"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
