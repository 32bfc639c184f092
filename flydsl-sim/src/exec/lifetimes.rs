//! When each SSA value's storage can be released: after its last use in the block that
//! defines it.
//!
//! A use inside a nested region (an `If` branch, a `For` body, at any depth) counts as a use
//! by the op that holds the region in the defining block, so a value defined before a loop
//! and read inside it lives through the whole loop, and a value defined in a loop body is
//! released at the end of each iteration (the next iteration computes it again before any
//! read: its definition dominates its uses). A value never read is released right after the
//! op that defines it. Block arguments (a loop's counter and carried values) are not listed:
//! the `For` releases them when the loop is done, and kernel arguments live for the run.

use flydsl_ir::{operands_of, Block, Kernel, OpKind, ValueId};
use std::collections::HashMap;

/// The release plan of one block.
#[derive(Debug, Default)]
pub(crate) struct BlockPlan {
    /// `release[i]`: values whose last use in the block is its op `i`.
    release: Vec<Vec<ValueId>>,
    /// The block's trailing yield passes one of the block's arguments to a different
    /// position (a loop rotating its carried values), so the copy must read before writing.
    pub yield_alias: bool,
}

impl BlockPlan {
    /// The values to release after op `i`.
    #[inline]
    pub fn release_after(&self, i: usize) -> &[ValueId] {
        self.release.get(i).map_or(&[], |v| v.as_slice())
    }
}

/// Release plans of every block of a kernel, keyed by the block's address (the kernel is
/// borrowed for the whole launch, so the addresses are stable).
#[derive(Debug, Default)]
pub(crate) struct Lifetimes {
    plans: HashMap<usize, BlockPlan>,
}

/// Where a value is defined: its block's number and the op's index there.
#[derive(Clone, Copy)]
struct Home {
    block: u32,
    op: u32,
}

struct Walk {
    /// Per value: where an op defines it (`None` for block and kernel arguments).
    home: Vec<Option<Home>>,
    /// Per value: the index, in its home block, of the op of its last use.
    last: Vec<u32>,
    /// Per block number: its depth in the current walk path.
    depth: Vec<u32>,
    /// The op index at each depth of the current path.
    pos: Vec<u32>,
    /// Per block number: the block's address and op count.
    blocks: Vec<(usize, usize)>,
    yield_alias: Vec<bool>,
}

impl Walk {
    fn used(&mut self, v: ValueId) {
        let Some(h) = self.home.get(v.0 as usize).copied().flatten() else {
            return;
        };
        // The verifier guarantees the home block is on the current path.
        let d = self.depth[h.block as usize] as usize;
        if let Some(&at) = self.pos.get(d) {
            let l = &mut self.last[v.0 as usize];
            *l = (*l).max(at);
        }
    }

    fn block(&mut self, b: &Block) {
        let bn = self.blocks.len() as u32;
        self.blocks.push((b as *const Block as usize, b.ops.len()));
        self.yield_alias.push(false);
        let d = self.pos.len() as u32;
        self.depth.push(d);
        self.pos.push(0);
        for (i, op) in b.ops.iter().enumerate() {
            self.pos[d as usize] = i as u32;
            for v in operands_of(&op.kind) {
                self.used(v);
            }
            match &op.kind {
                OpKind::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    self.block(then_block);
                    self.block(else_block);
                }
                OpKind::For { body, .. } => self.block(body),
                OpKind::Yield(ys) => {
                    self.yield_alias[bn as usize] = ys.iter().enumerate().any(|(j, y)| {
                        // Arguments: the loop counter, then the carried values.
                        let p = b.args.iter().position(|a| a == y);
                        p.is_some_and(|p| p >= 1 && p != j + 1)
                    });
                }
                _ => {}
            }
            for &r in &op.results {
                if let Some(h) = self.home.get_mut(r.0 as usize) {
                    *h = Some(Home {
                        block: bn,
                        op: i as u32,
                    });
                    self.last[r.0 as usize] = i as u32;
                }
            }
        }
        self.pos.pop();
    }
}

impl Lifetimes {
    /// The plans of every block of `k`.
    pub fn of(k: &Kernel) -> Lifetimes {
        let n = k.values.len();
        let mut w = Walk {
            home: vec![None; n],
            last: vec![0; n],
            depth: Vec::new(),
            pos: Vec::new(),
            blocks: Vec::new(),
            yield_alias: Vec::new(),
        };
        w.block(&k.body);
        let mut plans: Vec<BlockPlan> = w
            .blocks
            .iter()
            .zip(&w.yield_alias)
            .map(|(&(_, ops), &yield_alias)| BlockPlan {
                release: vec![Vec::new(); ops],
                yield_alias,
            })
            .collect();
        for (v, h) in w.home.iter().enumerate() {
            if let Some(h) = h {
                let at = w.last[v].max(h.op) as usize;
                plans[h.block as usize].release[at].push(ValueId(v as u32));
            }
        }
        Lifetimes {
            plans: w.blocks.iter().map(|&(addr, _)| addr).zip(plans).collect(),
        }
    }

    /// The plan of block `b` (a block of the kernel this was made from).
    #[inline]
    pub fn block(&self, b: &Block) -> Option<&BlockPlan> {
        self.plans.get(&(b as *const Block as usize))
    }
}
