//! Source locations of ops: where in the kernel's Rust source each op was written.
//!
//! Debug information only. The DSL records a [`SrcLoc`] per op (`#[track_caller]`) into
//! [`Kernel::src_locs`](crate::Kernel::src_locs); the verifier and the lowering use it to
//! name the line of a bad op. It is never serialized (the IR embedded for the Sim stays the
//! same size), never lowered (so the LLVM IR and its cache key do not change when a kernel's
//! source moves), and ignored by equality.

use std::fmt;
use std::panic::Location;

/// A `file:line:col` in Rust source: a `std::panic::Location` (one pointer, so errors that
/// carry one stay small).
///
/// ```
/// use flydsl_ir::SrcLoc;
/// let here = SrcLoc::caller();
/// assert_eq!((here.file(), here.line()), (file!(), line!() - 1));
/// assert_eq!(here.to_string(), format!("{}:{}:{}", file!(), line!() - 2, here.col()));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SrcLoc(&'static Location<'static>);

impl SrcLoc {
    /// The location of the call to the outermost `#[track_caller]` function that led here.
    #[track_caller]
    pub fn caller() -> SrcLoc {
        SrcLoc(Location::caller())
    }
    /// Source file, as the compiler names it (relative to the workspace or package root).
    pub fn file(self) -> &'static str {
        self.0.file()
    }
    /// 1-based line.
    pub fn line(self) -> u32 {
        self.0.line()
    }
    /// 1-based column.
    pub fn col(self) -> u32 {
        self.0.column()
    }
}

impl From<&'static Location<'static>> for SrcLoc {
    fn from(l: &'static Location<'static>) -> Self {
        SrcLoc(l)
    }
}

impl fmt::Display for SrcLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file(), self.line(), self.col())
    }
}

/// The source location of every op of a kernel, indexed by the op's number in a pre-order
/// walk of the body (the number the verifier and the lowering report: op #1 is the first op
/// of the body, a region's ops follow the op that owns them, then-region before
/// else-region). Empty for kernels built without the DSL.
///
/// Equality ignores it: two kernels that differ only in where their ops were written are
/// the same kernel.
///
/// ```
/// use flydsl_ir::{SrcLoc, SrcLocs};
/// let l = SrcLoc::caller();
/// let locs = SrcLocs::new(vec![Some(l), None]);
/// assert_eq!(locs.op(1), Some(l));
/// assert_eq!(locs.op(2), None);
/// assert_eq!(locs.op(0), None); // op 0: kernel-level
/// assert_eq!(locs, SrcLocs::default());
/// ```
#[derive(Clone, Debug, Default)]
pub struct SrcLocs(Vec<Option<SrcLoc>>);

impl SrcLocs {
    /// A table from the locations of ops #1, #2, ... in pre-order.
    pub fn new(pre_order: Vec<Option<SrcLoc>>) -> Self {
        SrcLocs(pre_order)
    }
    /// The location of op number `op` (1-based, pre-order), if recorded.
    pub fn op(&self, op: usize) -> Option<SrcLoc> {
        op.checked_sub(1)
            .and_then(|i| self.0.get(i).copied().flatten())
    }
    /// Number of ops covered.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True when no op has a recorded location.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

impl PartialEq for SrcLocs {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
