//! The build context: the kernel being built, held in a thread-local while a
//! [`KernelBuilder::build`](crate::KernelBuilder::build) body runs, so DSL operations can
//! record ops without passing a builder around.

use flydsl_ir::{Block, Kernel, Op, OpKind, SrcLoc, SrcLocs, Target, Type, ValueId};
use std::cell::RefCell;

/// A kernel could not be built: the description or the IR it produced is invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The IR failed verification.
    #[error(transparent)]
    Verify(#[from] flydsl_ir::VerifyError),
    /// The description itself is invalid (names the kernel and the reason).
    #[error("kernel `{kernel}` (target {target}): {reason}")]
    Invalid {
        /// Kernel name.
        kernel: String,
        /// Target.
        target: Target,
        /// What is wrong.
        reason: String,
    },
}

pub(crate) struct State {
    pub kernel: Kernel,
    /// The open blocks: the body, then one per region being built.
    pub blocks: Vec<Block>,
    /// Parallel to `blocks`: where each op of the open block was written, with the
    /// locations of its regions' ops.
    pub locs: Vec<Vec<LocNode>>,
    pub error: Option<String>,
}

/// Where one op was written, and the same for the ops of its regions (in region order).
pub(crate) struct LocNode {
    loc: SrcLoc,
    regions: Vec<Vec<LocNode>>,
}

/// The locations of a region's ops, returned by [`State::pop_block`] and attached to the
/// op that owns the region by [`State::push_with_regions`].
pub(crate) struct RegionLocs(Vec<LocNode>);

/// Flatten a tree of locations into the pre-order numbering the verifier and the lowering
/// report (op #1 first; a region's ops right after the op that owns them).
pub(crate) fn pre_order(nodes: Vec<LocNode>) -> SrcLocs {
    fn walk(nodes: Vec<LocNode>, out: &mut Vec<Option<SrcLoc>>) {
        for n in nodes {
            out.push(Some(n.loc));
            for r in n.regions {
                walk(r, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(nodes, &mut out);
    SrcLocs::new(out)
}

thread_local! {
    pub(crate) static CTX: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Run `f` with the active builder state. Panics only on misuse of the DSL outside
/// [`KernelBuilder::build`] (a programming error in a build script, not a user-input error).
pub(crate) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    CTX.with(|c| {
        let mut g = c.borrow_mut();
        let st = g
            .as_mut()
            .expect("flydsl DSL values can only be used inside KernelBuilder::build");
        f(st)
    })
}

impl State {
    pub fn new_value(&mut self, ty: Type) -> ValueId {
        let id = ValueId(self.kernel.values.len() as u32);
        self.kernel.values.push(ty);
        id
    }
    /// Append an op written at `loc` to the open block; returns its results.
    pub fn push(&mut self, kind: OpKind, result_tys: &[Type], loc: SrcLoc) -> Vec<ValueId> {
        self.push_with_regions(kind, result_tys, loc, vec![])
    }
    /// [`State::push`] for an op that owns regions (`For`, `If`): `regions` are the
    /// locations of their ops, in the order the op lists its regions.
    pub fn push_with_regions(
        &mut self,
        kind: OpKind,
        result_tys: &[Type],
        loc: SrcLoc,
        regions: Vec<RegionLocs>,
    ) -> Vec<ValueId> {
        let results: Vec<ValueId> = result_tys.iter().map(|&t| self.new_value(t)).collect();
        let blk = self
            .blocks
            .last_mut()
            .expect("builder always has an open block");
        blk.ops.push(Op {
            results: results.clone(),
            kind,
        });
        self.locs
            .last_mut()
            .expect("locations parallel to blocks")
            .push(LocNode {
                loc,
                regions: regions.into_iter().map(|r| r.0).collect(),
            });
        results
    }
    /// Open a region block with arguments `args`.
    pub fn push_block(&mut self, args: Vec<ValueId>) {
        self.blocks.push(Block { args, ops: vec![] });
        self.locs.push(vec![]);
    }
    /// Close the innermost region block.
    pub fn pop_block(&mut self) -> (Block, RegionLocs) {
        let b = self.blocks.pop().expect("region block");
        let l = self.locs.pop().expect("locations parallel to blocks");
        (b, RegionLocs(l))
    }
    pub fn fail(&mut self, msg: String) {
        if self.error.is_none() {
            self.error = Some(msg);
        }
    }
}

/// The target of the kernel being built.
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::ir::Target;
/// KernelBuilder::new("k", Target::Gfx1201, 64).build(|_| assert_eq!(target(), Target::Gfx1201)).unwrap();
/// ```
pub fn target() -> Target {
    with(|s| s.kernel.target)
}
