//! The walk over blocks and the structured control flow (`If`, `For`).
//!
//! `If` becomes a diamond with one `phi` per yielded value; `For` becomes
//! preheader -> header (phis of iv and carried values, `iv < ub` signed) -> body ... latch ->
//! header, exit; the latch steps `iv` by `umin(step, ub - iv)`, so it stops at `ub` instead of
//! wrapping (see `lower_for`). Values of enclosing regions stay visible inside; values of a
//! region are forgotten when it closes, so a use outside its region is a [`LowerError`], not
//! bad SSA.

use super::func::Func;
use super::{amd_pipe, arith, memory, mma, nv_pipe, vector, LowerError};
use flydsl_ir::{Block, Op, OpKind, Type, ValueId};

/// Short op name, as the verifier prints it.
fn op_name(kind: &OpKind) -> String {
    if let OpKind::Amd(a) = kind {
        return a.name().to_string();
    }
    let s = match kind {
        OpKind::Nv(nv) => format!("{nv:?}"),
        k => format!("{k:?}"),
    };
    s.split(['(', ' ', '{']).next().unwrap_or("?").to_string()
}

/// Lower the ops of a block (the body of the kernel or a region). Returns the operands of
/// the final `Yield`, if the block ends with one.
pub(crate) fn lower_block_ops(f: &mut Func, b: &Block) -> Result<Vec<String>, LowerError> {
    let mut yielded = Vec::new();
    for op in &b.ops {
        f.op_index += 1;
        f.op_name = op_name(&op.kind);
        if let OpKind::Yield(vals) = &op.kind {
            yielded = vals.iter().map(|&v| f.get(v)).collect::<Result<_, _>>()?;
            continue;
        }
        lower_op(f, op)?;
    }
    Ok(yielded)
}

/// The single result of an op.
fn one_result(f: &Func, op: &Op) -> Result<(ValueId, Type), LowerError> {
    match op.results[..] {
        [r] => Ok((r, f.ty(r)?)),
        _ => Err(f.err(format!("expects 1 result, has {}", op.results.len()))),
    }
}

/// Lower one non-`Yield` op.
fn lower_op(f: &mut Func, op: &Op) -> Result<(), LowerError> {
    match &op.kind {
        OpKind::If {
            cond,
            then_block,
            else_block,
        } => lower_if(f, op, *cond, then_block, else_block),
        OpKind::For {
            lb,
            ub,
            step,
            init,
            body,
        } => lower_for(f, op, [*lb, *ub, *step], init, body),
        OpKind::Store {
            ptr,
            index,
            value,
            flags,
        } => memory::store(f, *ptr, *index, *value, *flags),
        OpKind::BufferStore {
            rsrc,
            index,
            value,
            flags,
        } => memory::buffer_store(f, *rsrc, *index, *value, *flags),
        OpKind::Barrier => {
            f.hooks().barrier(f);
            Ok(())
        }
        OpKind::FlagStore { ptr, index, value } => memory::flag_store(f, *ptr, *index, *value),
        OpKind::FenceRelease => {
            f.emit("fence release".into());
            Ok(())
        }
        OpKind::Yield(_) => Err(f.err("yield outside a region")),
        OpKind::Nv(nv) => nv_pipe::lower(f, op, nv),
        OpKind::Amd(a) => amd_pipe::lower(f, a, &op.results),
        kind => {
            let (r, rt) = one_result(f, op)?;
            let v = lower_value_op(f, kind, rt)?;
            f.def(r, v);
            Ok(())
        }
    }
}

/// Lower an op with one result; returns the result operand.
fn lower_value_op(f: &mut Func, kind: &OpKind, rt: Type) -> Result<String, LowerError> {
    match kind {
        OpKind::Const(c) => arith::constant(f, *c, rt),
        OpKind::Special(s) => f.hooks().special(f, *s),
        OpKind::Binary(op, a, b) => arith::binary(f, *op, *a, *b, rt),
        OpKind::Unary(op, a) => arith::unary(f, *op, *a, rt),
        OpKind::Fma(a, b, c) => arith::fma(f, *a, *b, *c, rt),
        OpKind::Cmp(p, a, b) => arith::cmp(f, *p, *a, *b),
        OpKind::Select(c, a, b) => arith::select(f, *c, *a, *b, rt),
        OpKind::Cast(k, a) => arith::cast(f, *k, *a, rt),
        OpKind::Splat(a) => vector::splat_value(f, *a, rt),
        OpKind::Extract(v, i) => vector::extract(f, *v, *i),
        OpKind::Insert(v, s, i) => vector::insert(f, *v, *s, *i),
        OpKind::Build(vals) => vector::build(f, vals, rt),
        OpKind::Slice(v, start) => vector::slice(f, *v, *start, rt),
        OpKind::LdsBase(id) => memory::lds_base(f, *id),
        OpKind::DynLdsBase(off) => memory::dyn_lds_base(f, *off),
        OpKind::PtrAdd(p, i) => memory::ptr_add(f, *p, *i),
        OpKind::Load { ptr, index, flags } => memory::load(f, *ptr, *index, *flags, rt),
        OpKind::MakeRsrc { ptr, num_elems } => memory::make_rsrc(f, *ptr, *num_elems, rt),
        OpKind::BufferLoad { rsrc, index, flags } => {
            memory::buffer_load(f, *rsrc, *index, *flags, rt)
        }
        OpKind::AtomicAdd { ptr, index, value } => memory::atomic_add(f, *ptr, *index, *value),
        OpKind::FlagWait {
            ptr,
            index,
            expect,
            timeout,
        } => memory::flag_wait(f, [*ptr, *index, *expect, *timeout]),
        OpKind::Shuffle(mode, v, lane) => f.hooks().shuffle(f, *mode, *v, *lane),
        OpKind::ReadFirstLane(v) => f.hooks().read_first_lane(f, *v),
        OpKind::LdsAddr(p) => nv_pipe::lds_addr(f, *p),
        OpKind::Mma(atom, a, b, c) => mma::lower(f, *atom, *a, *b, *c),
        OpKind::MmaScaled(atom, a, b, c, sa, sb) => {
            mma::lower_scaled(f, *atom, [*a, *b, *c, *sa, *sb])
        }
        _ => Err(f.err("op has no single-result lowering")),
    }
}

/// Lower a region: open a scope, bind its arguments, lower its ops, return the yielded
/// operands and the label of the block the region ends in.
fn lower_region(
    f: &mut Func,
    b: &Block,
    args: &[String],
) -> Result<(Vec<String>, String), LowerError> {
    f.push_scope();
    for (&a, op) in b.args.iter().zip(args) {
        f.def(a, op.clone());
    }
    let res = lower_block_ops(f, b);
    let end = f.cur_block.clone();
    f.pop_scope();
    Ok((res?, end))
}

/// Check a region yields one value per result.
fn check_yield(f: &Func, got: &[String], want: usize) -> Result<(), LowerError> {
    if got.len() != want {
        return Err(f.err(format!(
            "region yields {} values, the op has {want} results",
            got.len()
        )));
    }
    Ok(())
}

fn lower_if(
    f: &mut Func,
    op: &Op,
    cond: ValueId,
    then_block: &Block,
    else_block: &Block,
) -> Result<(), LowerError> {
    let c = f.get(cond)?;
    let (lt, le, lm) = (
        f.new_label("then"),
        f.new_label("else"),
        f.new_label("endif"),
    );
    let (op_index, op_name) = (f.op_index, f.op_name.clone());
    f.cond_br(&c, &lt, &le);
    f.start_block(&lt);
    let (tv, tend) = lower_region(f, then_block, &[])?;
    f.br(&lm);
    f.start_block(&le);
    let (ev, eend) = lower_region(f, else_block, &[])?;
    f.br(&lm);
    f.start_block(&lm);
    // Errors about the phis belong to the `If` itself.
    let (saved_i, saved_n) = (f.op_index, std::mem::replace(&mut f.op_name, op_name));
    f.op_index = op_index;
    check_yield(f, &tv, op.results.len())?;
    check_yield(f, &ev, op.results.len())?;
    for (k, &r) in op.results.iter().enumerate() {
        let t = f.lty(f.ty(r)?);
        let p = f.inst(format!(
            "phi {t} [ {}, %{tend} ], [ {}, %{eend} ]",
            tv[k], ev[k]
        ));
        f.def(r, p);
    }
    f.op_index = saved_i;
    f.op_name = saved_n;
    Ok(())
}

/// `For`: the header tests `iv < ub` (signed); the latch computes
/// `iv + umin(step, ub - iv)` (`ub - iv` taken unsigned), which is `iv + step` when that is
/// below `ub` and exactly `ub` otherwise, so the next header test ends the loop without the
/// increment ever overflowing (the IR contract of `For`). Kept in this non-rotated form on
/// purpose: a rotated loop with an `ub - iv > step` exit test lets LLVM's loop strength
/// reduction keep one 64-bit pointer per address in registers (measured in
/// `bench/for-latch-and-sim-checks.md`).
fn lower_for(
    f: &mut Func,
    op: &Op,
    [lb, ub, step]: [ValueId; 3],
    init: &[ValueId],
    body: &Block,
) -> Result<(), LowerError> {
    let it = f.lty(f.ty(lb)?);
    let (lb, ub, step) = (f.get(lb)?, f.get(ub)?, f.get(step)?);
    let init: Vec<String> = init.iter().map(|&v| f.get(v)).collect::<Result<_, _>>()?;
    if body.args.len() != init.len() + 1 || op.results.len() != init.len() {
        return Err(f.err("for body args must be [iv, carried...] matching init and results"));
    }
    let carried_tys: Vec<String> = op
        .results
        .iter()
        .map(|&r| Ok(f.lty(f.ty(r)?)))
        .collect::<Result<_, LowerError>>()?;
    let (op_index, op_name) = (f.op_index, f.op_name.clone());
    let pre = f.cur_block.clone();
    let (lh, lb_, le) = (
        f.new_label("loop"),
        f.new_label("body"),
        f.new_label("endloop"),
    );
    f.br(&lh);
    f.start_block(&lh);
    let phi_pos = f.mark();
    let id = lh.clone();
    let iv = format!("%{id}.iv");
    let carried: Vec<String> = (0..init.len()).map(|k| format!("%{id}.c{k}")).collect();
    let cond = f.inst(format!("icmp slt {it} {iv}, {ub}"));
    f.cond_br(&cond, &lb_, &le);
    f.start_block(&lb_);
    let mut args = vec![iv.clone()];
    args.extend(carried.iter().cloned());
    let (next, latch) = lower_region(f, body, &args)?;
    let (saved_i, saved_n) = (f.op_index, std::mem::replace(&mut f.op_name, op_name));
    f.op_index = op_index;
    check_yield(f, &next, init.len())?;
    let rem = f.inst(format!("sub {it} {ub}, {iv}"));
    let inc = f.call(
        &it,
        &format!("llvm.umin.{it}"),
        &[(&it, &rem), (&it, &step)],
    );
    let iv_next = format!("%{id}.ivnext");
    f.emit(format!("{iv_next} = add {it} {iv}, {inc}"));
    f.br(&lh);
    let mut phis = vec![format!(
        "{iv} = phi {it} [ {lb}, %{pre} ], [ {iv_next}, %{latch} ]"
    )];
    for k in 0..init.len() {
        phis.push(format!(
            "{} = phi {} [ {}, %{pre} ], [ {}, %{latch} ]",
            carried[k], carried_tys[k], init[k], next[k]
        ));
    }
    f.insert_at(phi_pos, &phis);
    f.start_block(&le);
    for (k, &r) in op.results.iter().enumerate() {
        f.def(r, carried[k].clone());
    }
    f.op_index = saved_i;
    f.op_name = saved_n;
    Ok(())
}
