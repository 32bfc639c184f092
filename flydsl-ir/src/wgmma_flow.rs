//! The verifier rule "wgmma results appear at the wait": a value made by [`NvOp::Wgmma`] (or
//! [`NvOp::WgmmaRs`], whose register A fragment must itself be complete) is
//! in flight until a [`NvOp::WgmmaWait`] that covers it returns it. Until then it may only
//! be another wgmma's accumulator, a loop's carried value or a region's yield, or a value
//! passed to a wait; any other read is an error.
//!
//! A static data flow over the structured regions: each in-flight value carries the fewest
//! `wgmma.commit_group`s issued since it was made, over every path (0: its batch is still
//! open). A wait with `pending = p` completes a value that has more than `p` commits after
//! it (its batch is then not among the `p` newest), so the wait's result for it is an
//! ordinary value; otherwise the result is still in flight. `If` joins both branches, and a
//! `For` iterates its body to a fixed point (it may run any number of times), so a value that
//! enters a loop, or is carried around it, is checked on every iteration. The original
//! operand of a wait stays in flight: read the wait's result.
//!
//! Checking statically costs nothing when kernels run, covers paths a test never takes, and
//! reports the error when the kernel is built (the Sim verifies every kernel it launches).

use crate::kernel::*;
use crate::{NvOp, ValueId};
use std::collections::HashMap;

/// Commits counted per value saturate here (a wait allows at most 7 pending batches).
const MAX_COMMITS: u8 = 8;

/// In-flight values and the fewest commits issued since each was made.
type State = HashMap<ValueId, u8>;

/// A violation: the op's pre-order number (as the verifier counts), its name and the reason.
pub(crate) type Violation = (usize, String, String);

/// The SSA operands an op reads directly (the verifier's `operands_of`).
pub(crate) type Operands = fn(&OpKind) -> Vec<ValueId>;

/// Check `k` (a kernel that passed the rest of the verifier).
pub(crate) fn check(k: &Kernel, operands: Operands) -> Result<(), Violation> {
    let mut f = Flow {
        counter: 0,
        operands,
    };
    f.block(&k.body, &mut State::new(), &[]).map(|_| ())
}

/// Join `b` into `a`: in flight on either path, with the fewer commits.
fn join(a: &mut State, b: &State) -> bool {
    let mut changed = false;
    for (&v, &n) in b {
        match a.get_mut(&v) {
            Some(m) if *m <= n => {}
            Some(m) => {
                *m = n;
                changed = true;
            }
            None => {
                a.insert(v, n);
                changed = true;
            }
        }
    }
    changed
}

fn join_opt(a: Option<u8>, b: Option<u8>) -> Option<u8> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

fn set(st: &mut State, v: ValueId, s: Option<u8>) {
    match s {
        Some(n) => st.insert(v, n),
        None => st.remove(&v),
    };
}

struct Flow {
    counter: usize,
    operands: Operands,
}

impl Flow {
    /// Run block `b` with its arguments in states `args`; returns the states of its yield.
    fn block(
        &mut self,
        b: &Block,
        st: &mut State,
        args: &[Option<u8>],
    ) -> Result<Vec<Option<u8>>, Violation> {
        for (&a, &s) in b.args.iter().zip(args) {
            set(st, a, s);
        }
        let mut yields = Vec::new();
        for op in &b.ops {
            self.counter += 1;
            let at = self.counter;
            match &op.kind {
                OpKind::Yield(ys) => yields = ys.iter().map(|y| st.get(y).copied()).collect(),
                OpKind::Nv(NvOp::Wgmma { acc: _, .. }) => {
                    // The accumulator may be in flight: wgmmas chain on it.
                    st.insert(op.results[0], 0);
                }
                OpKind::Nv(NvOp::WgmmaRs { a, .. }) => {
                    // The register A fragment is read at issue: it must be complete.
                    self.reads(at, op, &[*a], st)?;
                    st.insert(op.results[0], 0);
                }
                OpKind::Nv(NvOp::WgmmaCommit) => {
                    for n in st.values_mut() {
                        *n = (*n + 1).min(MAX_COMMITS);
                    }
                }
                OpKind::Nv(NvOp::WgmmaWait { pending, values }) => {
                    for (v, &r) in values.iter().zip(&op.results) {
                        let s = st.get(v).copied().filter(|&n| n <= *pending as u8);
                        set(st, r, s);
                    }
                }
                OpKind::If {
                    cond,
                    then_block,
                    else_block,
                } => {
                    self.reads(at, op, &[*cond], st)?;
                    let mut st2 = st.clone();
                    let y1 = self.block(then_block, st, &[])?;
                    let y2 = self.block(else_block, &mut st2, &[])?;
                    join(st, &st2);
                    for (i, &r) in op.results.iter().enumerate() {
                        let s =
                            join_opt(y1.get(i).copied().flatten(), y2.get(i).copied().flatten());
                        set(st, r, s);
                    }
                }
                OpKind::For {
                    lb,
                    ub,
                    step,
                    init,
                    body,
                } => {
                    self.reads(at, op, &[*lb, *ub, *step], st)?;
                    let start = self.counter;
                    // Body arguments: the counter (never in flight), then the carried values.
                    let mut carried: Vec<Option<u8>> = std::iter::once(None)
                        .chain(init.iter().map(|v| st.get(v).copied()))
                        .collect();
                    loop {
                        self.counter = start;
                        let mut out = st.clone();
                        let ys = self.block(body, &mut out, &carried)?;
                        let mut changed = join(st, &out);
                        for (i, y) in ys.into_iter().enumerate() {
                            let c = &mut carried[i + 1];
                            let j = join_opt(*c, y);
                            changed |= j != *c;
                            *c = j;
                        }
                        if !changed {
                            break;
                        }
                    }
                    for (&r, &s) in op.results.iter().zip(&carried[1..]) {
                        set(st, r, s);
                    }
                }
                kind => {
                    self.reads(at, op, &(self.operands)(kind), st)?;
                    for &r in &op.results {
                        st.remove(&r);
                    }
                }
            }
        }
        Ok(yields)
    }

    /// Report a read of an in-flight value.
    fn reads(&self, at: usize, op: &Op, vals: &[ValueId], st: &State) -> Result<(), Violation> {
        let Some(v) = vals.iter().find(|v| st.contains_key(v)) else {
            return Ok(());
        };
        let name = match &op.kind {
            OpKind::Nv(nv) => format!("{nv:?}"),
            k => format!("{k:?}"),
        };
        let name = name
            .split(['(', ' ', '{'])
            .next()
            .unwrap_or("?")
            .to_string();
        Err((
            at,
            name.clone(),
            format!(
                "{name} reads a wgmma accumulator before wgmma.wait_group: %{} is the result \
                 of a wgmma that may still be running here. Read it only through the result of \
                 a wgmma_wait (NvOp::WgmmaWait) issued after the wgmma_commit of its batch, \
                 with a pending count that leaves its batch complete (wait 0 after the last \
                 commit)",
                v.0
            ),
        ))
    }
}
