//! Backward of both norms (LayerNorm dx/dgamma/dbeta; RMSNorm dx/dgamma with and without the
//! fused-add gradient), both weight-gradient strategies, every dtype and weight dtype, every
//! backward path, on the Sim of every target, against the CPU reference.

mod common;

use common::bwd_case::case;
use common::*;
use fly_norm::{plan_backward, BwdStrategy, Element, Norm, NormBwdArgs, Path};
use flydsl_rt::Target;
use flydsl_testutil::compare::Storage;
use flydsl_testutil::norm::NormDtype;
use flydsl_testutil::rng::Rng;
use half::{bf16, f16};

fn family<T: Element + NormDtype, W: Element + Storage>(t: Target, norm: Norm) {
    let s = sim(t);
    let ws = t.wave_size();
    for (pi, path) in [Path::Fast(1), Path::Fast(2), Path::Fast(4), Path::Generic]
        .into_iter()
        .enumerate()
    {
        let n = n_for_bwd(path, T::DTYPE);
        let m = if path == Path::Generic { 9 } else { 3 };
        assert_eq!(plan_backward(m, n, T::DTYPE, ws, 4).path, path);
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
/// on both sides of the m >= 512 threshold.
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
    case::<f32, f32>(
        &sim(Target::Gfx942),
        Norm::Rms,
        600,
        8,
        BwdStrategy::Auto,
        false,
        4,
    );
}

/// The two-stage strategy is bitwise reproducible.
#[test]
fn two_stage_is_deterministic() {
    let s = sim(Target::Sm90);
    let (m, n) = (64, 256);
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
            let p = plan_backward(5, n, bf16::DTYPE, ws, 4);
            assert_eq!(p.path, Path::Fast(2));
            assert!(p.cfg.block[0] > 256 && p.cfg.block[0] <= 512);
            assert_eq!(p.cfg.grid[0], 3); // 4 CUs x 1 block, 2 rows per block
            let seed = 40 + i as u64;
            case::<bf16, bf16>(&s, Norm::Layer, 5, n, BwdStrategy::TwoStage, false, seed);
            case::<f16, f32>(&s, Norm::Rms, 5, n, BwdStrategy::Atomic, true, seed);
        }
    }
}
