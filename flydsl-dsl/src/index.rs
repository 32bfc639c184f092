//! [`Idx`]: layout-algebra index expressions whose static parts fold in Rust and whose
//! dynamic parts become IR (the bridge between `crate::layout` and the DSL).

use crate::layout::IndexExpr;
use crate::val::{c_i32, Val};

/// An index that is either known at generation time or a run-time [`Val`] (i32 or i64).
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::layout::{IndexExpr, Layout};
/// use flydsl_dsl::ir::{Target, ScalarType::F32};
/// KernelBuilder::new("k", Target::Gfx942, 64).build(|k| {
///     let x = k.tensor_mut("x", F32);
///     let l = Layout::new((4, 16), (16, 1)).unwrap(); // row-major 4 x 16
///     // Static coordinates fold to a literal ...
///     // 1-D coordinates are colexicographic (CuTe): 17 -> (1, 4) -> 1*16 + 4.
///     assert_eq!(l.call(&Idx::lit(17)).unwrap().as_lit(), Some(20));
///     // ... a run-time coordinate becomes IR.
///     let off = l.call(&Idx::from(thread_id_x())).unwrap().val();
///     x.store(off, c_f32(1.0));
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Idx {
    /// Known now.
    Lit(i64),
    /// Computed at run time.
    Dyn(Val),
}

impl From<Val> for Idx {
    fn from(v: Val) -> Self {
        Idx::Dyn(v)
    }
}

impl Idx {
    /// The value as IR (an i32 constant if it is static).
    #[track_caller]
    pub fn val(self) -> Val {
        match self {
            Idx::Lit(v) => c_i32(v as i32),
            Idx::Dyn(v) => v,
        }
    }
    #[track_caller]
    fn bin(&self, o: &Self, f: fn(i64, i64) -> i64, g: fn(Val, Val) -> Val) -> Idx {
        match (*self, *o) {
            (Idx::Lit(a), Idx::Lit(b)) => Idx::Lit(f(a, b)),
            (Idx::Dyn(a), Idx::Lit(b)) => Idx::Dyn(g(a, crate::val::Operand::I(b).to_val(a.ty()))),
            (Idx::Lit(a), Idx::Dyn(b)) => Idx::Dyn(g(crate::val::Operand::I(a).to_val(b.ty()), b)),
            (Idx::Dyn(a), Idx::Dyn(b)) => Idx::Dyn(g(a, b)),
        }
    }
}

impl IndexExpr for Idx {
    fn lit(v: i64) -> Self {
        Idx::Lit(v)
    }
    #[track_caller]
    fn add(&self, o: &Self) -> Self {
        match (*self, *o) {
            (Idx::Lit(0), x) | (x, Idx::Lit(0)) => x,
            _ => self.bin(o, i64::wrapping_add, |a, b| a + b),
        }
    }
    #[track_caller]
    fn mul_lit(&self, k: i64) -> Self {
        match (*self, k) {
            (_, 0) => Idx::Lit(0),
            (x, 1) => x,
            _ => self.bin(&Idx::Lit(k), i64::wrapping_mul, |a, b| a * b),
        }
    }
    #[track_caller]
    fn div_lit(&self, k: i64) -> Self {
        match (*self, k) {
            (x, 1) => x,
            _ => self.bin(
                &Idx::Lit(k),
                |a, b| if b > 0 { a / b } else { 0 },
                |a, b| a.udiv(b),
            ),
        }
    }
    #[track_caller]
    fn rem_lit(&self, k: i64) -> Self {
        match (*self, k) {
            (_, 1) => Idx::Lit(0),
            _ => self.bin(
                &Idx::Lit(k),
                |a, b| if b > 0 { a % b } else { 0 },
                |a, b| a.urem(b),
            ),
        }
    }
    #[track_caller]
    fn xor(&self, o: &Self) -> Self {
        match (*self, *o) {
            (Idx::Lit(0), x) | (x, Idx::Lit(0)) => x,
            _ => self.bin(o, |a, b| a ^ b, |a, b| a ^ b),
        }
    }
    #[track_caller]
    fn and_lit(&self, m: i64) -> Self {
        self.bin(&Idx::Lit(m), |a, b| a & b, |a, b| a & b)
    }
    #[track_caller]
    fn shr_lit(&self, s: u32) -> Self {
        if s == 0 {
            return *self;
        }
        self.bin(
            &Idx::Lit(s as i64),
            |a, b| ((a as u64) >> b) as i64,
            |a, b| a.lshr(b),
        )
    }
    fn as_lit(&self) -> Option<i64> {
        match self {
            Idx::Lit(v) => Some(*v),
            Idx::Dyn(_) => None,
        }
    }
}
