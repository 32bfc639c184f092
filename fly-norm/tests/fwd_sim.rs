//! Every forward variant (plain, mean/rstd outputs, fused add, dynamic and smooth int8 quant,
//! fused add + quant) of both norms, every dtype and weight dtype, on every kernel path, on
//! the Sim of every target, against the CPU reference.

mod common;

use common::fwd_case::{case, Opts, OPTS};
use common::*;
use fly_norm::{
    forward_plans, norm_fwd, norm_fwd_with_plan, plan_forward, ragged_slots, Element, FwdBuffers,
    FwdOut, Norm, NormArgs, Path, Plan,
};
use flydsl_rt::{LaunchConfig, Target};
use flydsl_testutil::compare::Storage;
use flydsl_testutil::norm::{layer_norm_fwd, rms_norm_fwd, NormDtype};
use half::{bf16, f16};

fn all_paths_one<T: Element + NormDtype, W: Element + Storage>(t: Target, norm: Norm) {
    let s = sim(t);
    let ws = t.wave_size() as usize;
    let paths = [
        Path::Rows(1),
        Path::Rows(4),
        Path::Fast(2),
        Path::Fast(4),
        Path::Fast(8),
        Path::RowsRagged(1),
        Path::RowsRagged(4),
        Path::FastRagged(2),
        Path::FastRagged(4),
        Path::FastRagged(8),
        Path::Generic,
    ];
    for (pi, path) in paths.into_iter().enumerate() {
        let n = n_for_fwd(path, T::DTYPE, ws);
        // Multi-row blocks hold several rows: use enough rows for a partial last block (and
        // ragged rows of several phases).
        let m = match path {
            Path::Rows(_) | Path::RowsRagged(_) => 11,
            Path::FastRagged(_) => 3,
            _ => 2,
        };
        // Ragged rows have no 8-tile kernel (`fwd_fast_tiles`): past the 4-tile
        // kernel's 256-thread blocks they are generic (the quant forward's 4 tiles take
        // blocks up to 512 and still hold them, below).
        let want = if path == Path::FastRagged(8) {
            Path::Generic
        } else {
            path
        };
        assert_eq!(
            plan_forward(Norm::Rms, m, n, T::DTYPE, false, ws as u32, 64).path,
            want,
            "n = {n}"
        );
        // Quant has no 8-tile kernel at these rows: its 4-tile one takes them.
        let qpath = match path {
            Path::Fast(8) => Path::Fast(4),
            Path::FastRagged(8) => Path::FastRagged(4),
            p => p,
        };
        assert_eq!(
            plan_forward(Norm::Rms, m, n, T::DTYPE, true, ws as u32, 64).path,
            qpath,
            "n = {n}"
        );
        for (oi, o) in OPTS.iter().enumerate() {
            case::<T, W>(&s, norm, m, n, *o, (pi * 10 + oi) as u64);
        }
    }
}

fn all_families(t: Target) {
    for norm in [Norm::Layer, Norm::Rms] {
        all_paths_one::<f32, f32>(t, norm);
        all_paths_one::<f16, f16>(t, norm);
        all_paths_one::<bf16, bf16>(t, norm);
    }
    all_paths_one::<f16, f32>(t, Norm::Rms);
    all_paths_one::<bf16, f32>(t, Norm::Rms);
}

#[test]
fn all_variants_gfx942() {
    all_families(Target::Gfx942);
}

#[test]
fn all_variants_gfx950() {
    all_families(Target::Gfx950);
}

#[test]
fn all_variants_gfx1201() {
    all_families(Target::Gfx1201);
}

#[test]
fn all_variants_gfx1250() {
    all_families(Target::Gfx1250);
}

#[test]
fn all_variants_sm90() {
    all_families(Target::Sm90);
}

/// Odd shapes: N = 1, primes, non-multiples of the vector width, M = 0, 1, 37, on every
/// target; the quant cases alternate between targets between smooth quant without the
/// residual add and dynamic quant with it.
#[test]
fn odd_shapes() {
    for (ti, t) in Target::ALL.into_iter().enumerate() {
        let s = sim(t);
        let smooth = ti % 2 == 0;
        for (m, n) in [
            (0, 8),
            (1, 1),
            (3, 1),
            (37, 1),
            (1, 127),
            (37, 127),
            (2, 1021),
            (5, 12),
            (7, 36),
            (37, 64),
        ] {
            let o = Opts {
                add: true,
                stats: true,
                beta: true,
                quant: None,
            };
            case::<bf16, bf16>(&s, Norm::Layer, m, n, o, 1);
            case::<f32, f32>(&s, Norm::Rms, m, n, o, 2);
            let oq = Opts {
                add: !smooth,
                stats: true,
                beta: false,
                quant: Some(smooth),
            };
            case::<f16, f16>(&s, Norm::Layer, m, n, oq, 3);
            case::<bf16, f32>(&s, Norm::Rms, m, n, oq, 4);
        }
    }
}

/// The fast paths at common hidden sizes (one wave64 and one wave32 target, M = 2).
/// The generic path's 128-bit branch: rows of a multiple of the vector width one vector past
/// what the fast paths hold (f32: 16388, 2-byte: 32776) take it with every option set. On a
/// wave64 and a wave32 target. (`every_plan` runs the generic plan's 128-bit branch for the
/// plain forward.)
#[test]
fn generic_vector_rows() {
    for t in [Target::Gfx942, Target::Sm90] {
        let s = sim(t);
        let ws = t.wave_size();
        for (ci, &o) in OPTS.iter().enumerate() {
            let quant = o.quant.is_some();
            for (n, dt) in [
                (16388, fly_norm::DType::F32),
                (32776, fly_norm::DType::BF16),
            ] {
                assert_eq!(
                    plan_forward(Norm::Rms, 2, n, dt, quant, ws, 64).path,
                    Path::Generic
                );
            }
            case::<f32, f32>(&s, Norm::Rms, 2, 16388, o, ci as u64);
            case::<bf16, bf16>(&s, Norm::Layer, 2, 32776, o, 10 + ci as u64);
            case::<bf16, f32>(&s, Norm::Rms, 2, 32776, o, 20 + ci as u64);
        }
    }
}

#[test]
fn hidden_sizes() {
    for (t, n) in [
        (Target::Gfx950, 1024),
        (Target::Gfx942, 4096),
        (Target::Sm90, 8192),
        (Target::Gfx1250, 5120),
    ] {
        let s = sim(t);
        let o = Opts {
            add: true,
            stats: true,
            beta: true,
            quant: None,
        };
        case::<bf16, bf16>(&s, Norm::Rms, 2, n, o, 5);
        case::<f32, f32>(&s, Norm::Layer, 2, n, o, 6);
        case::<f16, f16>(
            &s,
            Norm::Layer,
            2,
            n,
            Opts {
                quant: Some(false),
                ..o
            },
            7,
        );
    }
}

/// NaN and Inf inputs propagate like the reference (a NaN row is all NaN, an Inf row follows
/// rsqrt(inf) = 0 / inf - inf = NaN), and do not leak into other rows: f32 and bf16, on a
/// wave64 and a wave32 target, on the fast, multi-row and generic paths.
#[test]
fn nan_inf_propagate() {
    for t in [Target::Gfx942, Target::Sm90] {
        let s = sim(t);
        for n in [64usize, 1021, 4096] {
            nan_inf_one::<f32>(&s, n);
            nan_inf_one::<bf16>(&s, n);
        }
    }
}

fn nan_inf_one<T: Element + NormDtype + Storage>(s: &flydsl_rt::Stream, n: usize) {
    let m = 3;
    let mut x: Vec<T> = (0..m * n)
        .map(|i| <T as Element>::from_f32(((i * 7919) % 13) as f32 / 13.0 - 0.5))
        .collect();
    x[3] = <T as Element>::from_f32(f32::NAN);
    x[n + 5] = <T as Element>::from_f32(f32::INFINITY);
    let xf = flydsl_testutil::compare::widen(&x);
    let g = vec![<T as Element>::from_f32(1.0); n];
    let gf = vec![1.0f64; n];
    let (xd, gd) = (up(s, &x), up(s, &g));
    for norm in [Norm::Layer, Norm::Rms] {
        let want = match norm {
            Norm::Layer => layer_norm_fwd::<T>(&xf, None, &gf, None, m, n, 1e-5),
            Norm::Rms => rms_norm_fwd::<T>(&xf, None, &gf, m, n, 1e-5),
        };
        let mut y = zeros::<T>(s, m * n);
        let b = FwdBuffers {
            x: &xd,
            residual: None,
            gamma: &gd,
            beta: None,
            out: FwdOut::Y(&mut y),
            mean: None,
            rstd: None,
        };
        norm_fwd(s, norm, b, NormArgs::new(m, n)).unwrap();
        let got = down(&y);
        let what = format!("{norm:?} {:?} n={n} on {}", T::DTYPE, s.device().target());
        assert!(got[..n].iter().all(|v| v.is_nan()), "{what}: NaN row");
        check(&what, &got, &want.y, T::TOL.fwd_atol, T::TOL.fwd_rtol);
    }
}

/// One forward of `norm` on every plan of `forward_plans` (every block size, lane count and
/// multi-row block), each also with a persistent grid of 2 blocks looping over the rows and
/// the keep-in-L2 hint (the kernels' hinted branch; the Sim reads the same values), against
/// the reference; x is offset by 8 so that LayerNorm's `x * rstd - mean * rstd` sees a mean
/// well away from 0.
fn every_plan_one<T: Element + NormDtype, W: Element + Storage>(
    s: &flydsl_rt::Stream,
    norm: Norm,
    m: usize,
    n: usize,
) {
    let ws = s.device().wave_size();
    let mut rng = flydsl_testutil::rng::Rng::new((m * n) as u64);
    let x: Vec<T> = rng
        .randn(m * n)
        .into_iter()
        .map(|v| <T as Element>::from_f32(v + 8.0))
        .collect();
    let xf = flydsl_testutil::compare::widen(&x);
    let (g, gf) = rand::<W>(&mut rng, n);
    let (b, bf) = randn::<W>(&mut rng, n);
    let want = match norm {
        Norm::Layer => layer_norm_fwd::<T>(&xf, None, &gf, Some(&bf), m, n, 1e-5),
        Norm::Rms => rms_norm_fwd::<T>(&xf, None, &gf, m, n, 1e-5),
    };
    let (xd, gd, bd) = (up(s, &x), up(s, &g), up(s, &b));
    let mut plans = forward_plans(m, n, T::DTYPE, false, ws);
    let persistent: Vec<Plan> = plans
        .iter()
        .filter(|p| p.cfg.grid[0] > 2)
        .map(|p| Plan {
            cfg: LaunchConfig::linear(2, p.cfg.block[0]),
            keep_l2: true,
            ..*p
        })
        .collect();
    plans.extend(persistent);
    assert!(plans.len() > 4, "{plans:?}");
    for p in plans {
        let what = format!(
            "{norm:?} {:?} m={m} n={n} {p:?} on {}",
            T::DTYPE,
            s.device().target()
        );
        let mut y = zeros::<T>(s, m * n);
        let bufs = FwdBuffers {
            x: &xd,
            residual: None,
            gamma: &gd,
            beta: (norm == Norm::Layer).then_some(&bd),
            out: FwdOut::Y(&mut y),
            mean: None,
            rstd: None,
        };
        norm_fwd_with_plan(s, norm, bufs, NormArgs::new(m, n), p)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        check(&what, &down(&y), &want.y, T::TOL.fwd_atol, T::TOL.fwd_rtol);
    }
}

/// Every plan the sweep (`examples/fwd_sweep.rs`) may time computes the same norm as the
/// dispatcher's, on a wave32 and a wave64 target.
#[test]
fn every_plan() {
    for t in [Target::Sm90, Target::Gfx942] {
        let s = sim(t);
        for (m, n) in [(5, 1024), (9, 256)] {
            every_plan_one::<bf16, bf16>(&s, Norm::Layer, m, n);
            every_plan_one::<f32, f32>(&s, Norm::Rms, m, n);
        }
        every_plan_one::<f16, f16>(&s, Norm::Layer, 3, 2048);
    }
}

/// Ragged rows (`n % vec != 0`) on the ragged paths: lengths around every slot count that
/// matters (rows within one vector, across two, the multi-row and fast thresholds), `m`
/// odd and at least the vector width so that the rows start at every phase of a vector,
/// every dtype, with the fused add, mean/rstd, and dynamic and smooth quant, on a wave64
/// and a wave32 target (memcheck and racecheck on: nothing outside a row is read or
/// written).
#[test]
fn ragged_rows() {
    for t in [Target::Gfx942, Target::Sm90] {
        let s = sim(t);
        let ws = t.wave_size();
        for (ni, n) in [1usize, 3, 7, 9, 127, 129, 1021, 4001, 8191]
            .into_iter()
            .enumerate()
        {
            let m = if n > 1024 { 9 } else { 17 };
            for dt in [fly_norm::DType::F32, fly_norm::DType::BF16] {
                for quant in [false, true] {
                    let path = plan_forward(Norm::Rms, m, n, dt, quant, ws, 64).path;
                    // Ragged rows stop at 4 tiles (`fwd_fast_tiles`): the plain forward's
                    // 256-thread blocks hold 1024 vectors of them, the quant's 512 2048.
                    let held = if quant { 2048 } else { 1024 };
                    let past_4_tiles = ragged_slots(n, dt.vec() as usize) > held;
                    let ok = match past_4_tiles {
                        true => path == Path::Generic,
                        false => path.is_ragged(),
                    };
                    assert!(ok, "n = {n} {dt:?} quant {quant}: {path:?}");
                }
            }
            for (oi, o) in OPTS.iter().enumerate() {
                let seed = (ni * 10 + oi) as u64;
                case::<f32, f32>(&s, Norm::Layer, m, n, *o, seed);
                case::<bf16, bf16>(&s, Norm::Rms, m, n, *o, seed);
                case::<f16, f16>(&s, Norm::Layer, m, n, *o, seed);
                case::<bf16, f32>(&s, Norm::Rms, m, n, *o, seed);
            }
        }
    }
}

/// Every ragged plan the sweep may time, persistent grids included, on both wave sizes.
#[test]
fn every_ragged_plan() {
    for t in [Target::Sm90, Target::Gfx942] {
        let s = sim(t);
        for (m, n) in [(5, 1021), (9, 255)] {
            every_plan_one::<bf16, bf16>(&s, Norm::Layer, m, n);
            every_plan_one::<f32, f32>(&s, Norm::Rms, m, n);
        }
        every_plan_one::<f16, f16>(&s, Norm::Layer, 3, 2047);
    }
}

/// The quant forward's 8-tile kernels (aligned and ragged), which compute `y` twice: rows one
/// vector past what 4 tiles in 512 threads hold, and the longest rows 8 tiles hold, with
/// dynamic and smooth quant, with and without the fused add, on a wave64 and a wave32 target.
#[test]
fn quant_eight_tiles() {
    for t in [Target::Gfx942, Target::Sm90] {
        let s = sim(t);
        let ws = t.wave_size();
        for (ci, &o) in OPTS[2..].iter().enumerate() {
            let seed = 30 + ci as u64;
            for (n, dt, path) in [
                (8196, fly_norm::DType::F32, Path::Fast(8)),
                (8195, fly_norm::DType::F32, Path::Generic),
                (16384, fly_norm::DType::F32, Path::Fast(8)),
                (16392, fly_norm::DType::BF16, Path::Fast(8)),
                // Ragged rows stop at 4 tiles (`fwd_fast_tiles`): generic past them.
                (16391, fly_norm::DType::BF16, Path::Generic),
            ] {
                assert_eq!(plan_forward(Norm::Rms, 3, n, dt, true, ws, 64).path, path);
            }
            case::<f32, f32>(&s, Norm::Layer, 3, 8196, o, seed);
            case::<f32, f32>(&s, Norm::Rms, 3, 8195, o, seed);
            case::<f32, f32>(&s, Norm::Rms, 2, 16384, o, seed);
            case::<bf16, bf16>(&s, Norm::Layer, 3, 16392, o, seed);
            case::<f16, f16>(&s, Norm::Rms, 3, 16391, o, seed);
            case::<bf16, f32>(&s, Norm::Rms, 3, 16391, o, seed);
        }
    }
}
