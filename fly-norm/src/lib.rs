//! LayerNorm and RMSNorm GPU kernels for AMD Instinct / Radeon (gfx942, gfx950, gfx1201,
//! gfx1250) and NVIDIA Hopper (sm_90), built at `cargo build` time by flydsl and embedded in
//! this crate; the Sim backend runs them on the CPU when no GPU is present.
//!
//! Families: forward (optionally writing per-row mean / rstd), fused residual add, dynamic
//! and smooth int8 quant (and both combined), and backward (dx, dgamma, dbeta; RMSNorm with
//! f32-atomic or deterministic two-stage weight-gradient sums, and a fused-add gradient).
//! Activations are `f32`, `half::f16` or `half::bf16`; weights are of the same type, or `f32`
//! with f16/bf16 activations for RMSNorm. All accumulation is in f32.
//!
//! Shapes are run-time values: any `m >= 0` rows of any `n >= 1` elements. A dispatcher
//! ([`plan_forward`], [`plan_backward`]) picks a kernel path from the shape, dtype and the
//! device's wave size: a register-resident 128-bit vectorised path with one row per block
//! for common hidden sizes, a multi-row path without LDS for short rows, their ragged forms
//! for rows that are not a multiple of the vector width (vectors aligned to memory, the
//! partial first and last ones of a row masked), and a generic looped path for rows too long
//! for those.
//!
//! ```
//! use flydsl_rt::{Device, DeviceBuffer};
//! use half::bf16;
//! let dev = Device::sim(flydsl_rt::Target::Gfx942); // applications: Device::best()?
//! let stream = dev.stream().unwrap();
//! let (m, n) = (4, 1024);
//! let x: Vec<bf16> = (0..m * n).map(|i| bf16::from_f32((i % 7) as f32 - 3.0)).collect();
//! let x = DeviceBuffer::from_slice(&dev, &x).unwrap();
//! let gamma = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; n]).unwrap();
//! let mut y = DeviceBuffer::<bf16>::zeroed(&dev, m * n).unwrap();
//! fly_norm::rms_norm(&stream, &x, &gamma, &mut y, fly_norm::RmsNormArgs { m, n, eps: 1e-6 }).unwrap();
//! assert_eq!(y.to_vec().unwrap().len(), m * n);
//! ```

#![warn(missing_docs)]

mod bwd;
mod bwd_plans;
#[path = "../kernels/config.rs"]
mod config;
mod dispatch;
mod fwd;
pub mod host;
pub mod kernels;
mod layernorm;
mod rmsnorm;
mod validate;

pub use bwd::{norm_bwd, norm_bwd_unchecked, BwdBuffers, BwdStrategy, NormBwdArgs};
pub use config::{ragged_slots, Norm, Path, MAX_COLS, MAX_GRID, MAX_ROWS};
pub use dispatch::{forward_plans, plan_backward, plan_forward, Plan, KEEP_L2_MIN_BYTES};
/// The element types and dtype enum of every kernel crate.
pub use flydsl_rt::{DType, Element};
pub use fwd::{norm_fwd, norm_fwd_unchecked, norm_fwd_with_plan, FwdBuffers, FwdOut, NormArgs};
pub use layernorm::{
    layer_norm, layer_norm_add, layer_norm_add_quant, layer_norm_bwd, layer_norm_quant,
    layer_norm_stats,
};
pub use rmsnorm::{
    rms_norm, rms_norm_add, rms_norm_add_quant, rms_norm_bwd, rms_norm_quant, rms_norm_rstd,
    RmsNormArgs,
};
pub use validate::MIN_EPS;

// The backward plan sweep's hooks (benchmarks and tuning, not a stable API).
pub use bwd::norm_bwd_with_plan;
pub use bwd_plans::backward_plans;

/// Arguments of the LayerNorm forward functions (`m`, `n`, `eps`).
///
/// ```
/// let a = fly_norm::LayerNormArgs { eps: 1e-6, ..fly_norm::LayerNormArgs::new(4, 128) };
/// assert_eq!((a.m, a.n, a.eps), (4, 128, 1e-6));
/// ```
pub type LayerNormArgs = NormArgs;
