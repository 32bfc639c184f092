//! Shared test support for every kernel family: CPU references (f64/f32 accumulation),
//! per-dtype tolerances from `shared/facts/kernels.md` in one place, deterministic random
//! inputs, and comparison helpers that report the worst element.

pub mod compare;
pub mod norm;
pub mod rng;
pub mod softmax;
