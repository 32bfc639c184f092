//! Shared test support for every kernel family: CPU references (f64/f32 accumulation),
//! per-dtype tolerances from `shared/facts/kernels.md` in one place, deterministic random
//! inputs, comparison helpers that report the worst element, and the gating of GPU tests
//! (`FLYDSL_REQUIRE_GPU`).

pub mod attn;
pub mod comm;
pub mod compare;
pub mod gemm;
pub mod gpu;
pub mod norm;
pub mod rng;
pub mod softmax;
