//! The build context: the kernel being built, held in a thread-local while a
//! [`KernelBuilder::build`](crate::KernelBuilder::build) body runs, so DSL operations can
//! record ops without passing a builder around.

use flydsl_ir::{Block, Kernel, Op, OpKind, Target, Type, ValueId};
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
    pub blocks: Vec<Block>,
    pub error: Option<String>,
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
    pub fn push(&mut self, kind: OpKind, result_tys: &[Type]) -> Vec<ValueId> {
        let results: Vec<ValueId> = result_tys.iter().map(|&t| self.new_value(t)).collect();
        let blk = self
            .blocks
            .last_mut()
            .expect("builder always has an open block");
        blk.ops.push(Op {
            results: results.clone(),
            kind,
        });
        results
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
