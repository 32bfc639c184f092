//! Structured control flow: run-time loops and branches carrying typed state.
//!
//! The state a loop carries or a branch yields is any [`Carry`] type: a [`Val`], a
//! [`Typed`](crate::Typed) value, tuples, arrays and `Vec`s of carries, `()` and user structs
//! (with [`carry_struct!`](crate::carry_struct)). It is flattened to the IR's positional
//! values at the loop boundary and rebuilt on the other side, so a kernel names its state
//! (`s.m`, `s.l`, `s.acc[i]`) instead of indexing `c[0]`, `c[1]`.

use crate::context::with;
use crate::val::{emit0, Operand, Val};
use flydsl_ir::{Block, OpKind, ScalarType, SrcLoc, Type};

/// State that run-time loops and branches can carry: a fixed-shape bundle of [`Val`]s.
///
/// [`flatten`](Carry::flatten) appends the values in a fixed order; [`rebuild`](Carry::rebuild)
/// makes a value of the same shape as `self` from the front of a list of values (the shape,
/// such as a `Vec`'s length, comes from `self`; the values from the list). Implemented for
/// `Val`, [`Typed`](crate::Typed), `()`, tuples of up to 8 carries, arrays `[T; N]` and
/// `Vec<T>`; for a struct use [`carry_struct!`](crate::carry_struct) or write the two
/// methods by hand, field by field:
///
/// ```
/// use flydsl_dsl::*;
/// #[derive(Clone)]
/// struct Acc<const N: usize> { sum: Val, parts: [Val; N] }
/// impl<const N: usize> Carry for Acc<N> {
///     fn flatten(&self, out: &mut Vec<Val>) {
///         self.sum.flatten(out);
///         self.parts.flatten(out);
///     }
///     fn rebuild(&self, vals: &mut std::slice::Iter<'_, Val>) -> Self {
///         Acc { sum: self.sum.rebuild(vals), parts: self.parts.rebuild(vals) }
///     }
/// }
/// ```
pub trait Carry {
    /// Append this state's values to `out`, in a fixed order.
    fn flatten(&self, out: &mut Vec<Val>);
    /// A state of the same shape as `self` made of the next values of `vals`. The DSL
    /// always passes at least as many values as `self` flattens to.
    fn rebuild(&self, vals: &mut std::slice::Iter<'_, Val>) -> Self
    where
        Self: Sized;
    /// The values of this state, in order.
    fn to_vals(&self) -> Vec<Val> {
        let mut out = Vec::new();
        self.flatten(&mut out);
        out
    }
}

impl Carry for Val {
    fn flatten(&self, out: &mut Vec<Val>) {
        out.push(*self);
    }
    fn rebuild(&self, vals: &mut std::slice::Iter<'_, Val>) -> Self {
        *vals.next().expect(
            "Carry::rebuild took more values than Carry::flatten gave: a hand-written Carry \
             impl must rebuild exactly the fields it flattens, in the same order",
        )
    }
}

impl Carry for () {
    fn flatten(&self, _: &mut Vec<Val>) {}
    fn rebuild(&self, _: &mut std::slice::Iter<'_, Val>) -> Self {}
}

impl<T: Carry, const N: usize> Carry for [T; N] {
    fn flatten(&self, out: &mut Vec<Val>) {
        for x in self {
            x.flatten(out);
        }
    }
    fn rebuild(&self, vals: &mut std::slice::Iter<'_, Val>) -> Self {
        std::array::from_fn(|i| self[i].rebuild(vals))
    }
}

impl<T: Carry> Carry for Vec<T> {
    fn flatten(&self, out: &mut Vec<Val>) {
        for x in self {
            x.flatten(out);
        }
    }
    fn rebuild(&self, vals: &mut std::slice::Iter<'_, Val>) -> Self {
        self.iter().map(|x| x.rebuild(vals)).collect()
    }
}

macro_rules! carry_tuple {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Carry),+> Carry for ($($t,)+) {
            fn flatten(&self, out: &mut Vec<Val>) {
                $(self.$i.flatten(out);)+
            }
            fn rebuild(&self, vals: &mut std::slice::Iter<'_, Val>) -> Self {
                ($(self.$i.rebuild(vals),)+)
            }
        }
    };
}
carry_tuple!(A 0);
carry_tuple!(A 0, B 1);
carry_tuple!(A 0, B 1, C 2);
carry_tuple!(A 0, B 1, C 2, D 3);
carry_tuple!(A 0, B 1, C 2, D 3, E 4);
carry_tuple!(A 0, B 1, C 2, D 3, E 4, F 5);
carry_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
carry_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// Implement [`Carry`] for a struct whose fields are all [`Carry`], field by field in the
/// order listed (list every field; a missing one is a compile error). For generic structs
/// write the impl by hand (see [`Carry`]).
///
/// ```
/// use flydsl_dsl::*;
/// #[derive(Clone)]
/// struct Online { m: Val, l: Val, acc: Vec<Val> }
/// carry_struct!(Online { m, l, acc });
/// ```
#[macro_export]
macro_rules! carry_struct {
    ($name:ident { $($field:ident),+ $(,)? }) => {
        impl $crate::Carry for $name {
            fn flatten(&self, out: &mut ::std::vec::Vec<$crate::Val>) {
                $($crate::Carry::flatten(&self.$field, out);)+
            }
            fn rebuild(&self, vals: &mut ::std::slice::Iter<'_, $crate::Val>) -> Self {
                $name { $($field: $crate::Carry::rebuild(&self.$field, vals)),+ }
            }
        }
    };
}

/// A branch condition: an i1 [`Val`] (from a comparison) or a [`Typed<bool>`](crate::Typed).
pub trait Cond {
    /// The condition as an untyped value.
    fn cond_val(self) -> Val;
}
impl Cond for Val {
    fn cond_val(self) -> Val {
        self
    }
}

/// Build a region: a block with arguments of types `args`, filled by `f`, ended by a yield
/// of what `f` returns (written at the caller's location).
#[track_caller]
fn region(
    args: &[Type],
    f: impl FnOnce(&[Val]) -> Vec<Val>,
) -> (Block, crate::context::RegionLocs, Vec<Type>) {
    let arg_vals: Vec<Val> = with(|s| {
        let vals: Vec<Val> = args
            .iter()
            .map(|&t| Val::from_id(s.new_value(t), t))
            .collect();
        s.push_block(vals.iter().map(|v| v.id()).collect());
        vals
    });
    let out = f(&arg_vals);
    emit0(OpKind::Yield(out.iter().map(|v| v.id()).collect()));
    let (blk, locs) = with(|s| s.pop_block());
    (blk, locs, out.iter().map(|v| v.ty()).collect())
}

fn push_with_regions(
    kind: OpKind,
    tys: &[Type],
    loc: SrcLoc,
    regions: Vec<crate::context::RegionLocs>,
) -> Vec<Val> {
    with(|s| {
        let ids = s.push_with_regions(kind, tys, loc, regions);
        ids.into_iter()
            .zip(tys)
            .map(|(i, &t)| Val::from_id(i, t))
            .collect()
    })
}

/// A run-time loop `for iv in (lb..ub).step_by(step)` (step > 0) carrying the state `init`
/// through the iterations; `body(iv, state)` returns the next state. Returns the final
/// state. The state is any [`Carry`]: a value, a tuple, an array, a `Vec` (a register
/// fragment) or a struct. `iv` has the type of the first bound that is a [`Val`] (i32 or
/// i64), i32 when all three are numbers.
///
/// An online softmax over a row, carrying the running max `m`, the running sum `l` and a
/// weighted accumulator by name:
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::{F32, I32}};
/// #[derive(Clone)]
/// struct Online { m: Val, l: Val, acc: [Val; 2] }
/// carry_struct!(Online { m, l, acc });
///
/// KernelBuilder::new("online", Target::Gfx942, 64).build(|k| {
///     let x = k.tensor("x", F32);
///     let w = k.tensor("w", F32);
///     let out = k.tensor_mut("out", F32);
///     let n = k.scalar("n", I32);
///     let init = Online { m: c_f32(f32::NEG_INFINITY), l: c_f32(0.0), acc: [c_f32(0.0); 2] };
///     let s = for_range_with(0, n, 1, init, |i, s| {
///         let v = x.load(i);
///         let m = s.m.max(v);
///         let scale = ((s.m - m) * std::f32::consts::LOG2_E).exp2();
///         let p = ((v - m) * std::f32::consts::LOG2_E).exp2();
///         Online {
///             m,
///             l: s.l.fma(scale, p),
///             acc: [0, 1].map(|j| s.acc[j].fma(scale, p * w.load(i * 2 + j as i32))),
///         }
///     });
///     out.store(0, s.acc[0] / s.l);
///     out.store(1, s.acc[1] / s.l);
/// }).unwrap();
/// ```
///
/// Tuples work the same way: `for_range_with(0, n, 1, (c_f32(0.0), c_i32(0)), |i, (sum, cnt)| (sum + x.load(i), cnt + 1))`.
#[track_caller]
pub fn for_range_with<S: Carry>(
    lb: impl Into<Operand>,
    ub: impl Into<Operand>,
    step: impl Into<Operand>,
    init: S,
    body: impl FnOnce(Val, S) -> S,
) -> S {
    let (lb, ub, step) = (lb.into(), ub.into(), step.into());
    let ity = [lb, ub, step]
        .iter()
        .find_map(|o| match o {
            Operand::V(v) => Some(v.ty()),
            _ => None,
        })
        .unwrap_or(Type::s(ScalarType::I32));
    let (lb, ub, step) = (lb.to_val(ity), ub.to_val(ity), step.to_val(ity));
    let init_vals = init.to_vals();
    let tys: Vec<Type> = init_vals.iter().map(|v| v.ty()).collect();
    let mut arg_tys = vec![lb.ty()];
    arg_tys.extend(&tys);
    let (blk, locs, _) = region(&arg_tys, |args| {
        let state = init.rebuild(&mut args[1..].iter());
        body(args[0], state).to_vals()
    });
    let results = push_with_regions(
        OpKind::For {
            lb: lb.id(),
            ub: ub.id(),
            step: step.id(),
            init: init_vals.iter().map(|v| v.id()).collect(),
            body: blk,
        },
        &tys,
        SrcLoc::caller(),
        vec![locs],
    );
    init.rebuild(&mut results.iter())
}

/// A run-time loop `for iv in (lb..ub).step_by(step)` (i32, step > 0) carrying the values
/// `init` positionally; `body(iv, carried)` returns the next carried values. Returns the
/// final carried values. [`for_range_with`] carries named, typed state instead.
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::*};
/// KernelBuilder::new("k", Target::Sm90, 32).build(|k| {
///     let x = k.tensor_mut("x", F32);
///     let n = k.scalar("n", I32);
///     let s = for_range(c_i32(0), n, c_i32(1), &[c_f32(0.0)], |i, acc| vec![acc[0] + x.load(i)]);
///     x.store(c_i32(0), s[0]);
/// }).unwrap();
/// ```
#[track_caller]
pub fn for_range(
    lb: Val,
    ub: Val,
    step: Val,
    init: &[Val],
    body: impl FnOnce(Val, &[Val]) -> Vec<Val>,
) -> Vec<Val> {
    for_range_with(lb, ub, step, init.to_vec(), |iv, c| body(iv, &c))
}

/// A run-time loop with no carried values.
#[track_caller]
pub fn for_range_(lb: Val, ub: Val, step: Val, body: impl FnOnce(Val)) {
    for_range_with(lb, ub, step, (), |iv, ()| body(iv))
}

/// A run-time branch yielding state of any [`Carry`] type: both closures return the same
/// shape and types (a mismatch is a verifier error naming this call's line).
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::*};
/// KernelBuilder::new("k", Target::Gfx942, 64).build(|k| {
///     let x = k.tensor_mut("x", F32);
///     let t = thread_id_x();
///     let (v, off) = if_then_else(t.lt(3), || (c_f32(1.0), c_i32(0)), || (c_f32(2.0), c_i32(64)));
///     x.store(t + off, v);
/// }).unwrap();
/// ```
#[track_caller]
pub fn if_then_else<S: Carry>(
    cond: impl Cond,
    then_f: impl FnOnce() -> S,
    else_f: impl FnOnce() -> S,
) -> S {
    let mut shape = None;
    let (then_block, then_locs, tys) = region(&[], |_| {
        let s = then_f();
        let v = s.to_vals();
        shape = Some(s);
        v
    });
    let (else_block, else_locs, _) = region(&[], |_| else_f().to_vals());
    let results = push_with_regions(
        OpKind::If {
            cond: cond.cond_val().id(),
            then_block,
            else_block,
        },
        &tys,
        SrcLoc::caller(),
        vec![then_locs, else_locs],
    );
    shape
        .expect("region runs its closure")
        .rebuild(&mut results.iter())
}

/// A run-time branch yielding values positionally: both closures must return values of the
/// same types. [`if_then_else`] yields named, typed state instead.
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::*};
/// KernelBuilder::new("k", Target::Gfx942, 64).build(|k| {
///     let x = k.tensor_mut("x", F32);
///     let t = thread_id_x();
///     let v = if_else(t.lt(3), || vec![c_f32(1.0)], || vec![c_f32(2.0)]);
///     x.store(t, v[0]);
/// }).unwrap();
/// ```
#[track_caller]
pub fn if_else(
    cond: impl Cond,
    then_f: impl FnOnce() -> Vec<Val>,
    else_f: impl FnOnce() -> Vec<Val>,
) -> Vec<Val> {
    if_then_else(cond, then_f, else_f)
}

/// A run-time branch with no results.
#[track_caller]
pub fn if_(cond: impl Cond, then_f: impl FnOnce()) {
    if_then_else(cond, then_f, || ())
}
