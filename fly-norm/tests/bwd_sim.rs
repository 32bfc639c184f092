//! Backward of both norms (LayerNorm dx/dgamma/dbeta; RMSNorm dx/dgamma with and without the
//! fused-add gradient), both weight-gradient strategies, every dtype and weight dtype, every
//! backward path, on the Sim of every target, against the CPU reference.

mod common;

use common::bwd_case::case;
use common::*;
use fly_norm::{plan_backward, BwdStrategy, DType, Element, Norm, NormBwdArgs, Path};
use flydsl_rt::Target;
use flydsl_testutil::compare::Storage;
use flydsl_testutil::norm::NormDtype;
use flydsl_testutil::rng::Rng;
use half::{bf16, f16};

fn family<T: Element + NormDtype, W: Element + Storage>(t: Target, norm: Norm) {
    let s = sim(t);
    let ws = t.wave_size();
    for (pi, path) in bwd_paths(norm).into_iter().enumerate() {
        let n = n_for_bwd(norm, path, T::DTYPE);
        let m = if path == Path::Generic { 3 } else { 5 };
        assert_eq!(plan_backward(norm, m, n, T::DTYPE, ws, 4).path, path);
        for (si, strategy) in [BwdStrategy::Atomic, BwdStrategy::TwoStage]
            .into_iter()
            .enumerate()
        {
            let dres = norm == Norm::Rms && si == 1;
            case::<T, W>(&s, norm, m, n, strategy, dres, (pi * 2 + si) as u64);
        }
    }
}

fn all_families(t: Target) {
    for norm in [Norm::Layer, Norm::Rms] {
        family::<f32, f32>(t, norm);
        family::<f16, f16>(t, norm);
        family::<bf16, bf16>(t, norm);
    }
    family::<f16, f32>(t, Norm::Rms);
    family::<bf16, f32>(t, Norm::Rms);
}

#[test]
fn bwd_gfx942() {
    all_families(Target::Gfx942);
}

#[test]
fn bwd_gfx950() {
    all_families(Target::Gfx950);
}

#[test]
fn bwd_gfx1201() {
    all_families(Target::Gfx1201);
}

#[test]
fn bwd_gfx1250() {
    all_families(Target::Gfx1250);
}

#[test]
fn bwd_sm90() {
    all_families(Target::Sm90);
}

/// Odd shapes and M = 0 (zero weight gradients) on every target, and the automatic strategy
/// on the fast and the generic path.
#[test]
fn bwd_odd_shapes() {
    for t in Target::ALL {
        let s = sim(t);
        for (m, n) in [(0, 5), (1, 1), (37, 1), (37, 127), (2, 1021), (5, 24)] {
            case::<bf16, bf16>(&s, Norm::Layer, m, n, BwdStrategy::Auto, false, 1);
            case::<f32, f32>(&s, Norm::Rms, m, n, BwdStrategy::Auto, true, 2);
            case::<f16, f32>(&s, Norm::Rms, m, n, BwdStrategy::TwoStage, false, 3);
        }
    }
    // The generic path under the automatic strategy (atomics: few rows).
    let s = sim(Target::Gfx942);
    assert_eq!(
        plan_backward(Norm::Rms, 3, 16385, DType::F32, 64, 4).path,
        Path::Generic
    );
    case::<f32, f32>(&s, Norm::Rms, 3, 16385, BwdStrategy::Auto, false, 4);
}

/// Ragged rows (not a multiple of the vector width, so unaligned row starts) on the fast
/// path's ragged kernels, next to aligned ones (4096, 8192 and 16384 are covered exactly by
/// their blocks, no padding lanes), around each tile count's threshold and
/// past the longest fast row, odd `m`, both strategies, wave64 and wave32, every dtype.
fn ragged<T: Element + NormDtype, W: Element + Storage>(t: Target, norm: Norm) {
    let s = sim(t);
    let ns = [
        1, 3, 7, 127, 129, 1021, 4096, 4097, 8191, 8192, 16383, 16384, 16385,
    ];
    for (i, n) in ns.into_iter().enumerate() {
        let m = if n > 4096 { 3 } else { 7 };
        for (si, strategy) in [BwdStrategy::TwoStage, BwdStrategy::Atomic]
            .into_iter()
            .enumerate()
        {
            let dres = norm == Norm::Rms && si == 0;
            case::<T, W>(&s, norm, m, n, strategy, dres, (i * 2 + si) as u64 + 100);
        }
    }
}

fn ragged_all(t: Target) {
    for norm in [Norm::Layer, Norm::Rms] {
        ragged::<f32, f32>(t, norm);
        ragged::<f16, f16>(t, norm);
        ragged::<bf16, bf16>(t, norm);
    }
    ragged::<bf16, f32>(t, Norm::Rms);
}

#[test]
fn bwd_ragged_gfx942() {
    ragged_all(Target::Gfx942);
}

#[test]
fn bwd_ragged_gfx1201() {
    ragged_all(Target::Gfx1201);
}

#[test]
fn bwd_ragged_sm90() {
    ragged_all(Target::Sm90);
}

/// Ragged rows reach the fast path (its ragged kernels) wherever aligned ones of the same
/// vector count do and a ragged kernel of that tile count is built (4 tiles for LayerNorm,
/// 8 for RMSNorm f32, per `bwd_fast_spill_free`); else the generic path.
#[test]
fn bwd_ragged_plans() {
    for dt in [DType::F32, DType::BF16] {
        let vec = dt.vec() as usize;
        for norm in [Norm::Layer, Norm::Rms] {
            for n in [1, 3, vec * 37 + 1, vec * 1100 - 1, vec * 2100 + 3] {
                let ragged = plan_backward(norm, 9, n, dt, 32, 132);
                let aligned = plan_backward(norm, 9, n.div_ceil(vec) * vec, dt, 32, 132);
                let built = match aligned.path {
                    Path::Fast(8) => norm == Norm::Rms && dt == DType::F32,
                    Path::Fast(_) => true,
                    _ => false,
                };
                if built {
                    assert_eq!(ragged, aligned, "{norm:?} {dt:?} n={n}");
                } else {
                    assert_eq!(ragged.path, Path::Generic, "{norm:?} {dt:?} n={n}");
                }
            }
        }
    }
}

/// Every plan of `backward_plans` (each built tile count with every block size that covers
/// a row, the generic path, persistent grids) under both strategies, through
/// `norm_bwd_with_plan`, against the reference: aligned rows (some blocks of 1, 2 and 4 tiles
/// cover them exactly, others leave padding lanes) and ragged ones, wave64 and wave32.
#[test]
fn bwd_every_plan() {
    for t in [Target::Gfx942, Target::Sm90] {
        let s = sim(t);
        let ws = t.wave_size();
        for (i, n) in [1024, 8 * 150 + 5].into_iter().enumerate() {
            for norm in [Norm::Layer, Norm::Rms] {
                let plans = fly_norm::backward_plans(norm, 5, n, DType::BF16, ws, 2);
                assert!(plans.len() > 10, "{norm:?} n={n}: {} plans", plans.len());
                for (pi, &p) in plans.iter().enumerate() {
                    let st = [BwdStrategy::TwoStage, BwdStrategy::Atomic][pi % 2];
                    let seed = (i * 100 + pi) as u64;
                    common::bwd_case::case_on::<bf16, bf16>(
                        &s,
                        norm,
                        5,
                        n,
                        st,
                        false,
                        seed,
                        Some(p),
                    );
                }
            }
        }
    }
}

/// The two-stage strategy is bitwise reproducible, on a row-resident, a row-streaming and a
/// ragged kernel.
#[test]
fn two_stage_is_deterministic() {
    for n in [256, 4 * 2100, 4 * 300 + 1] {
        two_stage_repeats(n);
    }
}

fn two_stage_repeats(n: usize) {
    let s = sim(Target::Sm90);
    let m = 24;
    let mut rng = Rng::new(9);
    let (x, _) = randn::<f32>(&mut rng, m * n);
    let (dy, _) = randn::<f32>(&mut rng, m * n);
    let g = vec![1.0f32; n];
    let rstd = vec![1.0f32; m];
    let (xd, dyd, gd, rd) = (up(&s, &x), up(&s, &dy), up(&s, &g), up(&s, &rstd));
    let run = || {
        let mut dx = zeros::<f32>(&s, m * n);
        let mut dg = zeros::<f32>(&s, n);
        let args = NormBwdArgs {
            m,
            n,
            strategy: BwdStrategy::TwoStage,
        };
        fly_norm::rms_norm_bwd(&s, &xd, &gd, &dyd, &rd, None, &mut dx, &mut dg, args).unwrap();
        dg.to_vec().unwrap()
    };
    let a = run();
    assert_eq!(
        a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        run().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}

/// 2-byte rows of 4096 < n <= 8192 take the spill-free 2-tile kernel in blocks of more than
/// 256 threads (up to its 512-thread bound), one block per compute unit.
#[test]
fn bwd_two_tiles_in_large_blocks() {
    for t in [Target::Sm90, Target::Gfx942, Target::Gfx1250] {
        let s = sim(t);
        let ws = t.wave_size();
        for (i, n) in [8 * 600, 8192].into_iter().enumerate() {
            let p = plan_backward(Norm::Layer, 5, n, bf16::DTYPE, ws, 4);
            assert_eq!(p.path, Path::Fast(2));
            assert!(p.cfg.block[0] > 256 && p.cfg.block[0] <= 512);
            assert_eq!(p.cfg.grid[0], 3); // 4 CUs x 1 block, 2 rows per block
            let seed = 40 + i as u64;
            case::<bf16, bf16>(&s, Norm::Layer, 5, n, BwdStrategy::TwoStage, false, seed);
            case::<f16, f32>(&s, Norm::Rms, 5, n, BwdStrategy::Atomic, true, seed);
        }
    }
}
