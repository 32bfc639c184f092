//! [`Val`]: a run-time value of the kernel being built, with arithmetic operators.

use crate::context::with;
use flydsl_ir::{
    BinOp, CastKind, CmpPred, Const, Dim, OpKind, ScalarType, Special, SrcLoc, Type, UnOp, ValueId,
};
use std::ops;

/// An SSA value of the kernel being built (scalar, vector or pointer). Cheap to copy.
///
/// Binary operators take another `Val` of the same type, or a Rust number that becomes a
/// constant of this value's type (`i + 1`, `x * 0.5`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Val {
    id: ValueId,
    ty: Type,
}

impl Val {
    pub(crate) fn from_id(id: ValueId, ty: Type) -> Val {
        Val { id, ty }
    }
    /// The IR value id.
    pub fn id(self) -> ValueId {
        self.id
    }
    /// The IR type.
    pub fn ty(self) -> Type {
        self.ty
    }
    /// The element type (scalars and vectors).
    pub fn elem(self) -> ScalarType {
        self.ty.elem().unwrap_or(ScalarType::I32)
    }
    /// Vector lanes (1 for scalars).
    pub fn lanes(self) -> u32 {
        self.ty.lanes()
    }
    #[track_caller]
    fn bin(self, op: BinOp, o: Val) -> Val {
        emit(OpKind::Binary(op, self.id, o.id), self.ty)
    }
    #[track_caller]
    fn un(self, op: UnOp) -> Val {
        emit(OpKind::Unary(op, self.id), self.ty)
    }
    #[track_caller]
    fn cmp(self, p: CmpPred, o: impl Into<Operand>) -> Val {
        let o = o.into().to_val(self.ty);
        emit(
            OpKind::Cmp(p, self.id, o.id),
            Type::vec(ScalarType::I1, self.lanes()),
        )
    }
    /// `self < o` (signed for integers).
    #[track_caller]
    pub fn lt(self, o: impl Into<Operand>) -> Val {
        self.cmp(CmpPred::Lt, o)
    }
    /// `self <= o`.
    #[track_caller]
    pub fn le(self, o: impl Into<Operand>) -> Val {
        self.cmp(CmpPred::Le, o)
    }
    /// `self > o`.
    #[track_caller]
    pub fn gt(self, o: impl Into<Operand>) -> Val {
        self.cmp(CmpPred::Gt, o)
    }
    /// `self >= o`.
    #[track_caller]
    pub fn ge(self, o: impl Into<Operand>) -> Val {
        self.cmp(CmpPred::Ge, o)
    }
    /// `self == o`.
    #[track_caller]
    pub fn eq(self, o: impl Into<Operand>) -> Val {
        self.cmp(CmpPred::Eq, o)
    }
    /// `self != o` (floats: true when unordered).
    #[track_caller]
    pub fn ne(self, o: impl Into<Operand>) -> Val {
        self.cmp(CmpPred::Ne, o)
    }
    /// Unsigned `self < o`.
    #[track_caller]
    pub fn ult(self, o: impl Into<Operand>) -> Val {
        self.cmp(CmpPred::ULt, o)
    }
    /// Float maxNum / signed integer max.
    #[track_caller]
    pub fn max(self, o: impl Into<Operand>) -> Val {
        let o = o.into().to_val(self.ty);
        self.bin(BinOp::Max, o)
    }
    /// Float minNum / signed integer min.
    #[track_caller]
    pub fn min(self, o: impl Into<Operand>) -> Val {
        let o = o.into().to_val(self.ty);
        self.bin(BinOp::Min, o)
    }
    /// Unsigned integer division.
    #[track_caller]
    pub fn udiv(self, o: impl Into<Operand>) -> Val {
        let o = o.into().to_val(self.ty);
        self.bin(BinOp::UDiv, o)
    }
    /// Unsigned integer remainder.
    #[track_caller]
    pub fn urem(self, o: impl Into<Operand>) -> Val {
        let o = o.into().to_val(self.ty);
        self.bin(BinOp::URem, o)
    }
    /// Logical shift right.
    #[track_caller]
    pub fn lshr(self, o: impl Into<Operand>) -> Val {
        let o = o.into().to_val(self.ty);
        self.bin(BinOp::LShr, o)
    }
    /// `self * b + c`, fused.
    #[track_caller]
    pub fn fma(self, b: impl Into<Operand>, c: impl Into<Operand>) -> Val {
        let b = b.into().to_val(self.ty);
        let c = c.into().to_val(self.ty);
        emit(OpKind::Fma(self.id, b.id, c.id), self.ty)
    }
    /// |self|.
    #[track_caller]
    pub fn abs(self) -> Val {
        self.un(UnOp::Abs)
    }
    /// 2^self (hardware fast form).
    #[track_caller]
    pub fn exp2(self) -> Val {
        self.un(UnOp::Exp2)
    }
    /// log2(self) (hardware fast form).
    #[track_caller]
    pub fn log2(self) -> Val {
        self.un(UnOp::Log2)
    }
    /// 1/sqrt(self) (hardware fast form).
    #[track_caller]
    pub fn rsqrt(self) -> Val {
        self.un(UnOp::Rsqrt)
    }
    /// 1/self (hardware fast form).
    #[track_caller]
    pub fn rcp(self) -> Val {
        self.un(UnOp::Rcp)
    }
    /// Correctly rounded square root.
    #[track_caller]
    pub fn sqrt(self) -> Val {
        self.un(UnOp::Sqrt)
    }
    /// Round toward zero to an integral float.
    #[track_caller]
    pub fn trunc(self) -> Val {
        self.un(UnOp::Trunc)
    }
    /// Numeric conversion to `to` (same number of lanes; see `CastKind::Convert`).
    #[track_caller]
    pub fn cast(self, to: ScalarType) -> Val {
        if self.elem() == to {
            return self;
        }
        emit(
            OpKind::Cast(CastKind::Convert, self.id),
            Type::vec(to, self.lanes()),
        )
    }
    /// Numeric conversion treating integers as unsigned.
    #[track_caller]
    pub fn cast_unsigned(self, to: ScalarType) -> Val {
        emit(
            OpKind::Cast(CastKind::ConvertUnsigned, self.id),
            Type::vec(to, self.lanes()),
        )
    }
    /// Reinterpret the bits as `to` (same total size).
    #[track_caller]
    pub fn bitcast(self, to: Type) -> Val {
        emit(OpKind::Cast(CastKind::Bitcast, self.id), to)
    }
    /// Element `i` of a vector.
    #[track_caller]
    pub fn at(self, i: u32) -> Val {
        if self.lanes() == 1 {
            return self;
        }
        emit(OpKind::Extract(self.id, i), Type::s(self.elem()))
    }
    /// Copy of a vector with element `i` replaced by `s`.
    #[track_caller]
    pub fn with(self, i: u32, s: Val) -> Val {
        emit(OpKind::Insert(self.id, s.id, i), self.ty)
    }
    /// Elements `[start, start+n)` of a vector.
    #[track_caller]
    pub fn slice(self, start: u32, n: u32) -> Val {
        if start == 0 && n == self.lanes() {
            return self;
        }
        if n == 1 {
            return self.at(start);
        }
        emit(OpKind::Slice(self.id, start), Type::vec(self.elem(), n))
    }
    /// The scalars of a vector, in order.
    #[track_caller]
    pub fn elems(self) -> Vec<Val> {
        let mut out = Vec::with_capacity(self.lanes() as usize);
        for i in 0..self.lanes() {
            out.push(self.at(i)); // a loop, not a closure: keeps the caller's location
        }
        out
    }
}

/// A right-hand operand: a [`Val`] or a Rust number that becomes a constant.
#[derive(Clone, Copy, Debug)]
pub enum Operand {
    /// An existing value.
    V(Val),
    /// An integer constant.
    I(i64),
    /// A float constant.
    F(f64),
}

impl Operand {
    #[track_caller]
    pub(crate) fn to_val(self, ty: Type) -> Val {
        match self {
            Operand::V(v) => v,
            Operand::I(i) => {
                if ty.elem().is_some_and(|e| e.is_float()) {
                    cnst(ty, Const::Float(i as f64))
                } else {
                    cnst(ty, Const::Int(i))
                }
            }
            Operand::F(f) => cnst(ty, Const::Float(f)),
        }
    }
}

impl From<Val> for Operand {
    fn from(v: Val) -> Self {
        Operand::V(v)
    }
}
macro_rules! operand_from {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for Operand { fn from(x: $t) -> Self { Operand::$v(x as $c) } }
    )*};
}
operand_from!(i32 => I as i64, i64 => I as i64, u32 => I as i64, usize => I as i64, f32 => F as f64, f64 => F as f64);

macro_rules! binop {
    ($tr:ident, $m:ident, $op:expr) => {
        impl<T: Into<Operand>> ops::$tr<T> for Val {
            type Output = Val;
            #[track_caller]
            fn $m(self, o: T) -> Val {
                let o = o.into().to_val(self.ty);
                self.bin($op, o)
            }
        }
    };
}
binop!(Add, add, BinOp::Add);
binop!(Sub, sub, BinOp::Sub);
binop!(Mul, mul, BinOp::Mul);
binop!(Div, div, BinOp::Div);
binop!(Rem, rem, BinOp::Rem);
binop!(BitAnd, bitand, BinOp::And);
binop!(BitOr, bitor, BinOp::Or);
binop!(BitXor, bitxor, BinOp::Xor);
binop!(Shl, shl, BinOp::Shl);
binop!(Shr, shr, BinOp::AShr);

impl ops::Neg for Val {
    type Output = Val;
    #[track_caller]
    fn neg(self) -> Val {
        self.un(UnOp::Neg)
    }
}
impl ops::Not for Val {
    type Output = Val;
    #[track_caller]
    fn not(self) -> Val {
        if self.ty.is_bool() {
            self ^ 1
        } else {
            self.un(UnOp::Not)
        }
    }
}

/// A constant of type `ty` (splatted when `ty` is a vector).
#[track_caller]
pub fn cnst(ty: Type, c: Const) -> Val {
    emit(OpKind::Const(c), ty)
}
/// An i32 constant.
#[track_caller]
pub fn c_i32(v: i32) -> Val {
    cnst(Type::s(ScalarType::I32), Const::Int(v as i64))
}
/// An i64 constant.
#[track_caller]
pub fn c_i64(v: i64) -> Val {
    cnst(Type::s(ScalarType::I64), Const::Int(v))
}
/// An f32 constant.
#[track_caller]
pub fn c_f32(v: f32) -> Val {
    cnst(Type::s(ScalarType::F32), Const::Float(v as f64))
}
/// `cond ? a : b` (`b` may be a number).
#[track_caller]
pub fn select(cond: Val, a: Val, b: impl Into<Operand>) -> Val {
    let b = b.into().to_val(a.ty);
    emit(OpKind::Select(cond.id, a.id, b.id), a.ty)
}
/// Broadcast a scalar into an `n`-lane vector.
#[track_caller]
pub fn splat(s: Val, n: u32) -> Val {
    if n == 1 {
        return s;
    }
    emit(OpKind::Splat(s.id), Type::vec(s.elem(), n))
}
/// A vector of the given scalars.
#[track_caller]
pub fn vec_of(vals: &[Val]) -> Val {
    if vals.len() == 1 {
        return vals[0];
    }
    let e = vals.first().map(|v| v.elem()).unwrap_or(ScalarType::I32);
    if vals.is_empty() {
        with(|s| s.fail("vec_of needs at least one value".into()));
    }
    emit(
        OpKind::Build(vals.iter().map(|v| v.id).collect()),
        Type::vec(e, vals.len().max(1) as u32),
    )
}
#[track_caller]
fn special(s: Special) -> Val {
    emit(OpKind::Special(s), Type::s(ScalarType::I32))
}
/// Thread index in the workgroup along `dim`.
#[track_caller]
pub fn thread_id(dim: Dim) -> Val {
    special(Special::ThreadId(dim))
}
/// Thread index in the workgroup along x.
#[track_caller]
pub fn thread_id_x() -> Val {
    thread_id(Dim::X)
}
/// Workgroup index along `dim`.
#[track_caller]
pub fn block_id(dim: Dim) -> Val {
    special(Special::BlockId(dim))
}
/// Workgroup index along x.
#[track_caller]
pub fn block_id_x() -> Val {
    block_id(Dim::X)
}
/// Workgroup size along x (on AMD this reads the hidden kernel arguments).
#[track_caller]
pub fn block_dim_x() -> Val {
    special(Special::BlockDim(Dim::X))
}
/// Number of workgroups along x (on AMD this reads the hidden kernel arguments).
#[track_caller]
pub fn grid_dim_x() -> Val {
    special(Special::GridDim(Dim::X))
}
/// Lane index within the wave.
#[track_caller]
pub fn lane_id() -> Val {
    special(Special::LaneId)
}

/// Emit one op with one result of type `ty`.
#[track_caller]
pub(crate) fn emit(kind: OpKind, ty: Type) -> Val {
    let loc = SrcLoc::caller();
    with(|s| Val::from_id(s.push(kind, &[ty], loc)[0], ty))
}

/// Emit one op with no results.
#[track_caller]
pub(crate) fn emit0(kind: OpKind) {
    let loc = SrcLoc::caller();
    with(|s| {
        s.push(kind, &[], loc);
    })
}
