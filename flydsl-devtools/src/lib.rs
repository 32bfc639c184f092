//! flydsl-devtools: tooling for the project's own tests, xtask and benches, never a
//! dependency of a kernel crate's library.
//!
//! - [`inspect`]: disassembly of code objects (`llvm-objdump`) and instruction counts, for the
//!   structural tests of every family;
//! - [`proof`]: the proof kernels that exercise the generator and the runtime end to end;
//! - [`wgmma_gemm`]: the Hopper GEMM proof (TMA, mbarrier pipeline, wgmma; sm_90 only).

pub mod inspect;
pub mod proof;
pub mod wgmma_gemm;
