//! Every compiled configuration (forward and backward, every path) of every dtype runs on the
//! Sim for every target, on shapes that exercise partial row blocks and masked tails, against
//! the f64 CPU reference. Large classes run on one target per dtype (the Sim is an
//! interpreter) with few rows.

mod common;

use common::{check_bwd, check_fwd, Dt};
use fly_softmax::plan::{all, Variant};
use fly_softmax::table::{Kind, Path};
use fly_softmax::Dispatch;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, Target};

/// A row length that exercises the configuration: just below its class (so the last tile is
/// masked), not a power of two; odd on scalar and ragged paths; a prime on looped scalar
/// paths.
fn n_for<T: Dt>(v: &Variant) -> usize {
    let vec = T::DTYPE.vec() as usize;
    let c = v.config;
    match c.path {
        Path::Vector => (c.class as usize - vec).max(vec),
        Path::Scalar => c.class as usize - 3,
        Path::LoopVector => 3 * c.threads as usize * vec + 5 * vec,
        Path::LoopScalar => 1021,
        Path::Ragged => c.class as usize - 3,
        Path::LoopRagged => 3 * c.threads as usize * vec + 5 * vec + 3,
        Path::Split => 2 * fly_softmax::plan::MIN_CHUNK + 5,
    }
}

/// Rows: several row blocks with a partial last one for small rows, few rows for long ones.
fn m_for(v: &Variant, n: usize) -> usize {
    let rows = v.config.rows_per_block() as usize;
    if n >= 8192 {
        2
    } else {
        (2 * rows + 3).min(37)
    }
}

fn targets_for(v: &Variant, n: usize, dtype_index: usize) -> Vec<Target> {
    let mut t: Vec<Target> = Target::ALL.to_vec();
    if v.config.amd_only() {
        t.retain(|t| t.is_amd());
    }
    if n >= 4096 {
        // One target per dtype, rotating, keeping wave64 and wave32 both covered.
        let pick = t[dtype_index % t.len()];
        t = vec![pick];
    }
    t
}

fn every_variant<T: Dt>(kind: Kind, dtype_index: usize) {
    for v in all(kind) {
        if !v.config.serves(T::DTYPE) {
            // Never dispatched for this dtype (the row would not fit in registers).
            assert!(!v.supports::<T>(v.config.class as usize));
            continue;
        }
        let name = v.name::<T>();
        let n = n_for::<T>(&v);
        let m = m_for(&v, n);
        for t in targets_for(&v, n, dtype_index) {
            let dev = Device::sim(t);
            let what = format!("{name} on {t} ({m}x{n})");
            match kind {
                Kind::Forward => check_fwd::<T>(&what, &dev, m, n, Dispatch::Variant(&name)),
                Kind::Backward => check_bwd::<T>(&what, &dev, m, n, Dispatch::Variant(&name)),
            }
        }
    }
}

#[test]
fn forward_f32_every_variant() {
    every_variant::<f32>(Kind::Forward, 0);
}

#[test]
fn forward_f16_every_variant() {
    every_variant::<f16>(Kind::Forward, 1);
}

#[test]
fn forward_bf16_every_variant() {
    every_variant::<bf16>(Kind::Forward, 2);
}

#[test]
fn backward_f32_every_variant() {
    every_variant::<f32>(Kind::Backward, 3);
}

#[test]
fn backward_f16_every_variant() {
    every_variant::<f16>(Kind::Backward, 4);
}

#[test]
fn backward_bf16_every_variant() {
    every_variant::<bf16>(Kind::Backward, 0);
}
