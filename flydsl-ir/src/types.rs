//! Scalar, vector and pointer types of the IR.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A scalar element type.
///
/// ```
/// use flydsl_ir::ScalarType;
/// assert!(ScalarType::F8E4M3FNUZ.is_float());
/// assert_eq!(ScalarType::I64.bits(), 64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScalarType {
    /// Boolean (comparison results, masks).
    I1,
    /// 8-bit integer (signedness is a property of the op, not the type).
    I8,
    /// 16-bit integer.
    I16,
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// OCP fp8 E4M3FN (bias 7, max 448, no inf).
    F8E4M3FN,
    /// AMD gfx942 fp8 E4M3FNUZ (bias 8, max 240, 0x80 = NaN).
    F8E4M3FNUZ,
    /// OCP fp8 E5M2 (bias 15, with inf).
    F8E5M2,
    /// AMD gfx942 bf8 E5M2FNUZ (bias 16, 0x80 = NaN).
    F8E5M2FNUZ,
}

impl ScalarType {
    /// Width in bits (i1 counts as 1).
    pub fn bits(self) -> u32 {
        use ScalarType::*;
        match self {
            I1 => 1,
            I8 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ => 8,
            I16 | F16 | BF16 => 16,
            I32 | F32 => 32,
            I64 => 64,
        }
    }
    /// Storage size in bytes (i1 is stored as one byte).
    pub fn size_bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }
    /// True for every floating-point type, fp8 included.
    pub fn is_float(self) -> bool {
        use ScalarType::*;
        matches!(
            self,
            F16 | BF16 | F32 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ
        )
    }
    /// True for the fp8 types.
    pub fn is_fp8(self) -> bool {
        self.is_float() && self.bits() == 8
    }
    /// True for integer types (i1 included).
    pub fn is_int(self) -> bool {
        !self.is_float()
    }
    /// The short name used in kernel and variant names (`f32`, `bf16`, `e4m3fn`, ...).
    pub fn name(self) -> &'static str {
        use ScalarType::*;
        match self {
            I1 => "i1",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            F16 => "f16",
            BF16 => "bf16",
            F32 => "f32",
            F8E4M3FN => "e4m3fn",
            F8E4M3FNUZ => "e4m3fnuz",
            F8E5M2 => "e5m2",
            F8E5M2FNUZ => "e5m2fnuz",
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Address space of a pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AddrSpace {
    /// Device global memory.
    Global,
    /// Workgroup-shared memory (AMD LDS, NVIDIA shared).
    Shared,
    /// Read-only constant memory.
    Constant,
}

/// The type of an SSA value.
///
/// ```
/// use flydsl_ir::{Type, ScalarType};
/// let t = Type::vec(ScalarType::F16, 8);
/// assert_eq!(t.size_bytes(), 16);
/// assert_eq!(t.elem(), Some(ScalarType::F16));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Type {
    /// A scalar.
    Scalar(ScalarType),
    /// A vector of 2..=[`Type::MAX_LANES`] lanes of one scalar type (build it with
    /// [`Type::vec`] or [`Type::try_vec`]; the verifier rejects fewer than 2 lanes).
    Vector(ScalarType, u8),
    /// A pointer to elements of the given type in an address space.
    Ptr(AddrSpace, ScalarType),
    /// An AMD buffer resource (V#) over elements of the given type: out-of-range loads give
    /// zero, out-of-range stores are dropped. Emulated with a bounds check on other targets.
    BufferRsrc(ScalarType),
}

impl Type {
    /// Shorthand for a scalar type.
    pub const fn s(t: ScalarType) -> Type {
        Type::Scalar(t)
    }
    /// Shorthand for a vector type (`n == 1` gives the scalar).
    ///
    /// # Panics
    ///
    /// When `n` is 0 or above [`Type::MAX_LANES`]: the kernel description is wrong (inside
    /// `KernelBuilder::build` the panic becomes a build error naming the kernel). Use
    /// [`Type::try_vec`] to get the error as a value.
    ///
    /// ```
    /// use flydsl_ir::{Type, ScalarType};
    /// assert_eq!(Type::vec(ScalarType::F32, 1), Type::s(ScalarType::F32));
    /// assert_eq!(Type::vec(ScalarType::F32, 4).lanes(), 4);
    /// ```
    #[track_caller]
    pub fn vec(t: ScalarType, n: u32) -> Type {
        match Type::try_vec(t, n) {
            Ok(ty) => ty,
            Err(e) => panic!("{e}"),
        }
    }
    /// Most lanes a vector type holds.
    pub const MAX_LANES: u32 = u8::MAX as u32;
    /// A vector type of `n` lanes (`n == 1` gives the scalar), or an error when `n` is 0 or
    /// above [`Type::MAX_LANES`] (never a silently truncated lane count).
    ///
    /// ```
    /// use flydsl_ir::{Type, ScalarType};
    /// assert_eq!(Type::try_vec(ScalarType::F16, 255).unwrap().lanes(), 255);
    /// assert!(Type::try_vec(ScalarType::F16, 256).is_err());
    /// assert!(Type::try_vec(ScalarType::F16, 0).is_err());
    /// ```
    pub fn try_vec(t: ScalarType, n: u32) -> Result<Type, LanesError> {
        match n {
            1 => Ok(Type::Scalar(t)),
            2..=Self::MAX_LANES => Ok(Type::Vector(t, n as u8)),
            _ => Err(LanesError { elem: t, lanes: n }),
        }
    }
    /// The element type of a scalar, vector, pointer or resource.
    pub fn elem(self) -> Option<ScalarType> {
        match self {
            Type::Scalar(s) | Type::Vector(s, _) => Some(s),
            Type::Ptr(_, s) | Type::BufferRsrc(s) => Some(s),
        }
    }
    /// Number of lanes (1 for scalars and pointers).
    pub fn lanes(self) -> u32 {
        match self {
            Type::Vector(_, n) => n as u32,
            _ => 1,
        }
    }
    /// The element type of a scalar or vector value (None for pointers).
    pub fn value_elem(self) -> Option<ScalarType> {
        match self {
            Type::Scalar(s) | Type::Vector(s, _) => Some(s),
            _ => None,
        }
    }
    /// Size in bytes when stored in memory.
    pub fn size_bytes(self) -> u32 {
        match self {
            Type::Scalar(s) => s.size_bytes(),
            Type::Vector(s, n) => s.size_bytes() * n as u32,
            Type::Ptr(..) => 8,
            Type::BufferRsrc(_) => 16,
        }
    }
    /// True for `i1` scalars and vectors.
    pub fn is_bool(self) -> bool {
        self.value_elem() == Some(ScalarType::I1)
    }
}

/// A vector type with a lane count no [`Type`] can hold (0, or above [`Type::MAX_LANES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "Type::vec: lanes = {lanes} for element type {elem} is outside 1..={max}; \
     split the value into vectors of at most {max} lanes",
    max = Type::MAX_LANES
)]
pub struct LanesError {
    /// The element type asked for.
    pub elem: ScalarType,
    /// The lane count asked for.
    pub lanes: u32,
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(s) => write!(f, "{s}"),
            Type::Vector(s, n) => write!(f, "<{n} x {s}>"),
            Type::Ptr(a, s) => write!(f, "ptr<{a:?}, {s}>"),
            Type::BufferRsrc(s) => write!(f, "rsrc<{s}>"),
        }
    }
}
