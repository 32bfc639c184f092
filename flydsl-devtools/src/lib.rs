//! flydsl-devtools: tooling for the project's own tests, xtask and benches, never a
//! dependency of a kernel crate's library.
//!
//! - [`inspect`]: disassembly of code objects (`llvm-objdump`) and instruction counts, for the
//!   structural tests of every family;
//! - [`proof`]: the proof kernels that exercise the generator and the runtime end to end.

pub mod inspect;
pub mod proof;
