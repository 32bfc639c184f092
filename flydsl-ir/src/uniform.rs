//! Which SSA values are provably wave-uniform (the same in every lane of a wave).
//!
//! A conservative forward analysis over the structured IR: parameters, constants and the
//! workgroup-level geometry (`BlockId`, `BlockDim`, `GridDim`) are uniform; `ThreadId` and
//! `LaneId` are not; a pure op is uniform when all its operands are; `ReadFirstLane` is
//! uniform; everything that reads memory, talks across lanes or runs a matrix unit is
//! treated as not uniform. A `For` loop's induction variable is uniform when its bounds and
//! step are, a carried value when its initial and every yielded value are (a fixpoint); an
//! `If`'s results when its condition and both yields are.
//!
//! AMD lowering uses it to keep buffer resources in scalar registers: a resource built from
//! uniform values gets its operands through `readfirstlane`, which is exact for them and
//! stops LLVM from wrapping every access in a waterfall loop when it happened to compute a
//! uniform value in vector registers.

use crate::{Block, Kernel, OpKind, Special, ValueId};

/// `uniform[v]` for every value `v` of `k` (indexed by `ValueId.0`).
///
/// ```
/// use flydsl_ir::{uniform::uniform_values, Kernel, Target};
/// let k = Kernel::empty("k", Target::Gfx942);
/// assert!(uniform_values(&k).is_empty());
/// ```
pub fn uniform_values(k: &Kernel) -> Vec<bool> {
    let mut u = vec![false; k.values.len()];
    for vs in &k.param_values {
        for v in vs {
            set(&mut u, *v, true);
        }
    }
    block(&mut u, &k.body);
    u
}

fn get(u: &[bool], v: ValueId) -> bool {
    u.get(v.0 as usize).copied().unwrap_or(false)
}

fn set(u: &mut [bool], v: ValueId, x: bool) {
    if let Some(s) = u.get_mut(v.0 as usize) {
        *s = x;
    }
}

/// The values a block yields (its last op's `Yield`), if any.
fn yields(b: &Block) -> &[ValueId] {
    match b.ops.last().map(|o| &o.kind) {
        Some(OpKind::Yield(v)) => v,
        _ => &[],
    }
}

fn block(u: &mut [bool], b: &Block) {
    for op in &b.ops {
        let all = |u: &[bool], vs: &[ValueId]| vs.iter().all(|&v| get(u, v));
        let res: Option<bool> = match &op.kind {
            OpKind::Const(_) => Some(true),
            OpKind::Special(s) => Some(matches!(
                s,
                Special::BlockId(_) | Special::BlockDim(_) | Special::GridDim(_)
            )),
            OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) | OpKind::PtrAdd(a, b) => {
                Some(all(u, &[*a, *b]))
            }
            OpKind::Unary(_, a)
            | OpKind::Cast(_, a)
            | OpKind::Splat(a)
            | OpKind::Extract(a, _)
            | OpKind::Slice(a, _)
            | OpKind::DynLdsBase(a)
            | OpKind::LdsAddr(a) => Some(get(u, *a)),
            OpKind::Fma(a, b, c) | OpKind::Select(a, b, c) => Some(all(u, &[*a, *b, *c])),
            OpKind::Insert(a, b, _) => Some(all(u, &[*a, *b])),
            OpKind::Build(vs) => Some(all(u, vs)),
            OpKind::LdsBase(_) => Some(true),
            OpKind::MakeRsrc { ptr, num_elems } => Some(all(u, &[*ptr, *num_elems])),
            OpKind::ReadFirstLane(_) => Some(true),
            OpKind::If {
                cond,
                then_block,
                else_block,
            } => {
                block(u, then_block);
                block(u, else_block);
                let c = get(u, *cond);
                let (t, e) = (yields(then_block), yields(else_block));
                for (i, r) in op.results.iter().enumerate() {
                    let x = c
                        && t.get(i).is_some_and(|&v| get(u, v))
                        && e.get(i).is_some_and(|&v| get(u, v));
                    set(u, *r, x);
                }
                None
            }
            OpKind::For {
                lb,
                ub,
                step,
                init,
                body,
            } => {
                let iv_uniform = all(u, &[*lb, *ub, *step]);
                // Optimistic start: a carried value is uniform while its initial value is;
                // a divergent yield clears it and the body is analysed again.
                let mut carried: Vec<bool> = init.iter().map(|&v| get(u, v)).collect();
                loop {
                    if let Some(&iv) = body.args.first() {
                        set(u, iv, iv_uniform);
                    }
                    for (a, &c) in body.args.iter().skip(1).zip(&carried) {
                        set(u, *a, c);
                    }
                    block(u, body);
                    let y = yields(body);
                    let next: Vec<bool> = carried
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| c && y.get(i).is_some_and(|&v| get(u, v)))
                        .collect();
                    if next == carried {
                        break;
                    }
                    carried = next;
                }
                for (r, &c) in op.results.iter().zip(&carried) {
                    set(u, *r, c);
                }
                None
            }
            // Memory reads, cross-lane ops, matrix units and vendor ops: not uniform.
            _ => Some(false),
        };
        if let Some(x) = res {
            for r in &op.results {
                set(u, *r, x);
            }
        }
    }
}
