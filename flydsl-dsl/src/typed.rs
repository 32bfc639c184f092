//! [`Typed<T>`]: a [`Val`] whose scalar type the Rust compiler checks.
//!
//! `Val` is untyped at compile time: `f + i` with an f32 and an i32 builds, and the verifier
//! rejects it when the kernel is built. `Typed<f32>`, `Typed<i32>`, `Typed<i64>` and
//! `Typed<bool>` (and `Typed<F16>` / `Typed<Bf16>` with the marker types here) carry the
//! scalar type in the Rust type, so mixing them is a compile error, and comparisons return
//! `Typed<bool>`. They are a thin layer over `Val` for new code (the tile layer, kernels
//! written from now on): `.val()` and `Val::from` leave the typed world, [`Val::typed`] enters
//! it (a wrong type is a build error naming the line), and every DSL function that takes a
//! `Val` or a number takes `.val()` or the typed value itself where it accepts an
//! [`Operand`]. They are [`Carry`](crate::Carry), so loops carry them by name.
//!
//! Plan: existing kernels keep `Val`; typed tensor views (`load` returning `Typed<T>`) and
//! typed vectors (`Typed<[f32; 8]>`-style fragments) come with the tile layer, which already
//! knows element types statically. `Val` stays as the untyped escape hatch.
//!
//! ```
//! use flydsl_dsl::*;
//! use flydsl_dsl::ir::{ScalarType, Target};
//! KernelBuilder::new("typed", Target::Gfx942, 64).build(|k| {
//!     let x = k.tensor_mut("x", ScalarType::F32);
//!     let n: Typed<i32> = k.scalar("n", ScalarType::I32).typed();
//!     let i: Typed<i32> = thread_id_x().typed();
//!     let v: Typed<f32> = x.load(i).typed();
//!     let y = (v * 2.0 + Typed::lit(1.0f32)).max(0.0);
//!     // let bad = v + i; // does not compile: Typed<f32> + Typed<i32>
//!     let keep: Typed<bool> = i.lt(n) & i.ge(0);
//!     if_(keep, || x.store(i, y.val()));
//! }).unwrap();
//! ```

use crate::context::with;
use crate::val::{cnst, Operand, Val};
use flydsl_ir::{Const, ScalarType, Type};
use std::marker::PhantomData;
use std::ops;

/// A Rust type naming an IR scalar type: `f32`, `i32`, `i64`, `bool` (i1), [`F16`], [`Bf16`].
pub trait Elem: Copy + 'static {
    /// The IR scalar type.
    const TYPE: ScalarType;
}
/// Marker for IR `f16` values (`Typed<F16>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F16 {}
/// Marker for IR `bf16` values (`Typed<Bf16>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16 {}

impl Elem for f32 {
    const TYPE: ScalarType = ScalarType::F32;
}
impl Elem for i32 {
    const TYPE: ScalarType = ScalarType::I32;
}
impl Elem for i64 {
    const TYPE: ScalarType = ScalarType::I64;
}
impl Elem for bool {
    const TYPE: ScalarType = ScalarType::I1;
}
impl Elem for F16 {
    const TYPE: ScalarType = ScalarType::F16;
}
impl Elem for Bf16 {
    const TYPE: ScalarType = ScalarType::BF16;
}

/// Element types with arithmetic (`+ - * / %`, min/max, fma).
pub trait Num: Elem {}
impl Num for f32 {}
impl Num for i32 {}
impl Num for i64 {}
impl Num for F16 {}
impl Num for Bf16 {}
/// Float element types (exp2, log2, rsqrt, ...).
pub trait Float: Num {}
impl Float for f32 {}
impl Float for F16 {}
impl Float for Bf16 {}
/// Integer element types (bit operations, shifts).
pub trait Int: Elem {}
impl Int for i32 {}
impl Int for i64 {}

/// A scalar [`Val`] of IR type `T::TYPE`, checked by the Rust compiler (see the module docs
/// of [`typed`](crate::typed)). Cheap to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Typed<T: Elem> {
    v: Val,
    _t: PhantomData<T>,
}

impl<T: Elem> Typed<T> {
    /// `v` as a `Typed<T>`, or an error naming both types when `v` is not a scalar `T`.
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::Target;
    /// KernelBuilder::new("k", Target::Sm90, 32).build(|_| {
    ///     assert!(Typed::<i32>::new(thread_id_x()).is_ok());
    ///     let e = Typed::<f32>::new(thread_id_x()).unwrap_err();
    ///     assert!(e.contains("i32") && e.contains("f32"), "{e}");
    /// }).unwrap();
    /// ```
    pub fn new(v: Val) -> Result<Self, String> {
        if v.ty() == Type::s(T::TYPE) {
            Ok(Typed::wrap(v))
        } else {
            Err(format!(
                "Typed::<{0}>::new: value %{1} has type {2}, not the scalar {0}; convert it \
                 first (Val::cast) or use the matching Typed type",
                T::TYPE,
                v.id().0,
                v.ty()
            ))
        }
    }
    fn wrap(v: Val) -> Self {
        Typed { v, _t: PhantomData }
    }
    /// The untyped value.
    pub fn val(self) -> Val {
        self.v
    }
    /// Numeric conversion to `U` (`Val::cast`).
    #[track_caller]
    pub fn cast<U: Elem>(self) -> Typed<U> {
        Typed::wrap(self.v.cast(U::TYPE))
    }
    /// `self < o` (signed for integers).
    #[track_caller]
    pub fn lt(self, o: impl Into<TypedOperand<T>>) -> Typed<bool> {
        Typed::wrap(self.v.lt(o.into().0))
    }
    /// `self <= o`.
    #[track_caller]
    pub fn le(self, o: impl Into<TypedOperand<T>>) -> Typed<bool> {
        Typed::wrap(self.v.le(o.into().0))
    }
    /// `self > o`.
    #[track_caller]
    pub fn gt(self, o: impl Into<TypedOperand<T>>) -> Typed<bool> {
        Typed::wrap(self.v.gt(o.into().0))
    }
    /// `self >= o`.
    #[track_caller]
    pub fn ge(self, o: impl Into<TypedOperand<T>>) -> Typed<bool> {
        Typed::wrap(self.v.ge(o.into().0))
    }
    /// `self == o`.
    #[track_caller]
    pub fn eq(self, o: impl Into<TypedOperand<T>>) -> Typed<bool> {
        Typed::wrap(self.v.eq(o.into().0))
    }
    /// `self != o`.
    #[track_caller]
    pub fn ne(self, o: impl Into<TypedOperand<T>>) -> Typed<bool> {
        Typed::wrap(self.v.ne(o.into().0))
    }
}

impl<T: Num> Typed<T> {
    /// Float maxNum / signed integer max.
    #[track_caller]
    pub fn max(self, o: impl Into<TypedOperand<T>>) -> Self {
        Typed::wrap(self.v.max(o.into().0))
    }
    /// Float minNum / signed integer min.
    #[track_caller]
    pub fn min(self, o: impl Into<TypedOperand<T>>) -> Self {
        Typed::wrap(self.v.min(o.into().0))
    }
    /// `self * b + c`, fused.
    #[track_caller]
    pub fn fma(self, b: impl Into<TypedOperand<T>>, c: impl Into<TypedOperand<T>>) -> Self {
        Typed::wrap(self.v.fma(b.into().0, c.into().0))
    }
    /// |self|.
    #[track_caller]
    pub fn abs(self) -> Self {
        Typed::wrap(self.v.abs())
    }
}

impl<T: Float> Typed<T> {
    /// 2^self (hardware fast form).
    #[track_caller]
    pub fn exp2(self) -> Self {
        Typed::wrap(self.v.exp2())
    }
    /// log2(self) (hardware fast form).
    #[track_caller]
    pub fn log2(self) -> Self {
        Typed::wrap(self.v.log2())
    }
    /// 1/sqrt(self) (hardware fast form).
    #[track_caller]
    pub fn rsqrt(self) -> Self {
        Typed::wrap(self.v.rsqrt())
    }
    /// 1/self (hardware fast form).
    #[track_caller]
    pub fn rcp(self) -> Self {
        Typed::wrap(self.v.rcp())
    }
    /// Correctly rounded square root.
    #[track_caller]
    pub fn sqrt(self) -> Self {
        Typed::wrap(self.v.sqrt())
    }
}

/// Constants: `Typed::lit(1.5f32)`, `Typed::lit(7i32)`, `Typed::lit(true)`.
pub trait Lit: Elem {
    /// The IR constant of `self`.
    fn konst(self) -> Const;
}
impl Lit for f32 {
    fn konst(self) -> Const {
        Const::Float(self as f64)
    }
}
impl Lit for i32 {
    fn konst(self) -> Const {
        Const::Int(self as i64)
    }
}
impl Lit for i64 {
    fn konst(self) -> Const {
        Const::Int(self)
    }
}
impl Lit for bool {
    fn konst(self) -> Const {
        Const::Int(self as i64)
    }
}

impl<T: Lit> Typed<T> {
    /// A constant.
    #[track_caller]
    pub fn lit(x: T) -> Self {
        Typed::wrap(cnst(Type::s(T::TYPE), x.konst()))
    }
}

/// A right-hand operand of a `Typed<T>` operation: another `Typed<T>` or a Rust `T`
/// (which becomes a constant); built by `From`, never named by users.
#[derive(Clone, Copy, Debug)]
pub struct TypedOperand<T: Elem>(Operand, PhantomData<T>);

impl<T: Elem> From<Typed<T>> for TypedOperand<T> {
    fn from(t: Typed<T>) -> Self {
        TypedOperand(Operand::V(t.v), PhantomData)
    }
}
macro_rules! typed_operand_lit {
    ($($e:ty: $($l:ty),*);*) => {$($(
        impl From<$l> for TypedOperand<$e> {
            fn from(x: $l) -> Self { TypedOperand(Operand::from(x), PhantomData) }
        }
    )*)*};
}
// Unsuffixed literals fall back to i32 / f64 in generic positions (`n.lt(3)`, `x.max(0.0)`).
typed_operand_lit!(f32: f32, f64; F16: f32, f64; Bf16: f32, f64; i32: i32; i64: i64, i32);

impl<T: Elem> From<Typed<T>> for Val {
    fn from(t: Typed<T>) -> Val {
        t.v
    }
}
impl<T: Elem> From<Typed<T>> for Operand {
    fn from(t: Typed<T>) -> Operand {
        Operand::V(t.v)
    }
}

// The typed layer's impls of control flow's traits live here, so `control` does not depend
// on `typed`.
impl crate::Cond for Typed<bool> {
    fn cond_val(self) -> Val {
        self.val()
    }
}

impl<T: Elem> crate::Carry for Typed<T> {
    fn flatten(&self, out: &mut Vec<Val>) {
        out.push(self.v);
    }
    fn rebuild(&self, vals: &mut std::slice::Iter<'_, Val>) -> Self {
        Typed::wrap(self.v.rebuild(vals))
    }
}

macro_rules! typed_binop {
    ($bound:ident: $($tr:ident $m:ident),*) => {$(
        impl<T: $bound> ops::$tr for Typed<T> {
            type Output = Typed<T>;
            #[track_caller]
            fn $m(self, o: Typed<T>) -> Typed<T> {
                Typed::wrap(ops::$tr::$m(self.v, o.v))
            }
        }
    )*};
}
typed_binop!(Num: Add add, Sub sub, Mul mul, Div div, Rem rem);
typed_binop!(Int: BitAnd bitand, BitOr bitor, BitXor bitxor, Shl shl, Shr shr);

/// `Typed<E> op lit` for a Rust number `lit` of type `L` (a constant of type `E`).
macro_rules! typed_binop_lit {
    ($($e:ty, $l:ty: [$($tr:ident $m:ident),*]);*) => {$($(
        impl ops::$tr<$l> for Typed<$e> {
            type Output = Typed<$e>;
            #[track_caller]
            fn $m(self, o: $l) -> Typed<$e> {
                Typed::wrap(ops::$tr::$m(self.v, o))
            }
        }
    )*)*};
}
typed_binop_lit!(
    f32, f32: [Add add, Sub sub, Mul mul, Div div, Rem rem];
    F16, f32: [Add add, Sub sub, Mul mul, Div div, Rem rem];
    Bf16, f32: [Add add, Sub sub, Mul mul, Div div, Rem rem];
    i32, i32: [Add add, Sub sub, Mul mul, Div div, Rem rem, BitAnd bitand, BitOr bitor, BitXor bitxor, Shl shl, Shr shr];
    i64, i64: [Add add, Sub sub, Mul mul, Div div, Rem rem, BitAnd bitand, BitOr bitor, BitXor bitxor, Shl shl, Shr shr]
);

impl<T: Num> ops::Neg for Typed<T> {
    type Output = Typed<T>;
    #[track_caller]
    fn neg(self) -> Typed<T> {
        Typed::wrap(-self.v)
    }
}
impl ops::Not for Typed<bool> {
    type Output = Typed<bool>;
    #[track_caller]
    fn not(self) -> Typed<bool> {
        Typed::wrap(!self.v)
    }
}
impl ops::BitAnd for Typed<bool> {
    type Output = Typed<bool>;
    #[track_caller]
    fn bitand(self, o: Typed<bool>) -> Typed<bool> {
        Typed::wrap(self.v & o.v)
    }
}
impl ops::BitOr for Typed<bool> {
    type Output = Typed<bool>;
    #[track_caller]
    fn bitor(self, o: Typed<bool>) -> Typed<bool> {
        Typed::wrap(self.v | o.v)
    }
}

impl Val {
    /// This value as a [`Typed<T>`]. A value that is not a scalar `T` is a build error (the
    /// kernel fails to build with a message naming this line); the returned wrapper is
    /// then only a placeholder.
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::Target;
    /// let e = KernelBuilder::new("k", Target::Sm90, 32)
    ///     .build(|_| { let _f: Typed<f32> = thread_id_x().typed(); })
    ///     .unwrap_err()
    ///     .to_string();
    /// assert!(e.contains("not the scalar f32") && e.contains(file!()), "{e}");
    /// ```
    #[track_caller]
    pub fn typed<T: Elem>(self) -> Typed<T> {
        match Typed::new(self) {
            Ok(t) => t,
            Err(e) => {
                let loc = flydsl_ir::SrcLoc::caller();
                with(|s| s.fail(format!("{loc}: {e}")));
                Typed::wrap(self)
            }
        }
    }
}
