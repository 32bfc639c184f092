//! Structured control flow: run-time loops and branches with carried / yielded values.

use crate::context::with;
use crate::val::{emit0, Val};
use flydsl_ir::{Block, OpKind, Type};

fn region(args: &[Type], f: impl FnOnce(&[Val]) -> Vec<Val>) -> (Block, Vec<Type>) {
    let arg_vals: Vec<Val> = with(|s| {
        let ids: Vec<Val> = args
            .iter()
            .map(|&t| Val::from_id(s.new_value(t), t))
            .collect();
        s.blocks.push(Block {
            args: ids.iter().map(|v| v.id()).collect(),
            ops: vec![],
        });
        ids
    });
    let out = f(&arg_vals);
    emit0(OpKind::Yield(out.iter().map(|v| v.id()).collect()));
    let blk = with(|s| s.blocks.pop().expect("region block"));
    (blk, out.iter().map(|v| v.ty()).collect())
}

fn push_with_results(kind: OpKind, tys: &[Type]) -> Vec<Val> {
    with(|s| {
        let ids = s.push(kind, tys);
        ids.into_iter()
            .zip(tys)
            .map(|(i, &t)| Val::from_id(i, t))
            .collect()
    })
}

/// A run-time loop `for iv in (lb..ub).step_by(step)` (i32, step > 0) carrying `init`
/// through the iterations; `body(iv, carried)` returns the next carried values. Returns the
/// final carried values.
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
pub fn for_range(
    lb: Val,
    ub: Val,
    step: Val,
    init: &[Val],
    body: impl FnOnce(Val, &[Val]) -> Vec<Val>,
) -> Vec<Val> {
    let mut arg_tys = vec![lb.ty()];
    arg_tys.extend(init.iter().map(|v| v.ty()));
    let (blk, _) = region(&arg_tys, |args| body(args[0], &args[1..]));
    let tys: Vec<Type> = init.iter().map(|v| v.ty()).collect();
    push_with_results(
        OpKind::For {
            lb: lb.id(),
            ub: ub.id(),
            step: step.id(),
            init: init.iter().map(|v| v.id()).collect(),
            body: blk,
        },
        &tys,
    )
}

/// A run-time loop with no carried values.
pub fn for_range_(lb: Val, ub: Val, step: Val, body: impl FnOnce(Val)) {
    for_range(lb, ub, step, &[], |iv, _| {
        body(iv);
        vec![]
    });
}

/// A run-time branch yielding values: both closures must return values of the same types.
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
pub fn if_else(
    cond: Val,
    then_f: impl FnOnce() -> Vec<Val>,
    else_f: impl FnOnce() -> Vec<Val>,
) -> Vec<Val> {
    let (then_block, tys) = region(&[], |_| then_f());
    let (else_block, _) = region(&[], |_| else_f());
    push_with_results(
        OpKind::If {
            cond: cond.id(),
            then_block,
            else_block,
        },
        &tys,
    )
}

/// A run-time branch with no results.
pub fn if_(cond: Val, then_f: impl FnOnce()) {
    if_else(
        cond,
        || {
            then_f();
            vec![]
        },
        Vec::new,
    );
}
