//! Numerics at the edges, on the Sim of a wave64 (gfx942), a wave32 (gfx1201) and the sm_90
//! target (whose forward uses its own instruction forms), on every forward plan the
//! dispatcher may pick (fast, multi-row, their ragged forms, generic with vector and scalar
//! accesses):
//!
//! - LayerNorm rows with |mean| / std of 1e2, 1e3, 1e4, 1e6 (and constant rows) against the f64
//!   two-pass reference, to within a few roundings of the f32 mean (what torch achieves);
//!   `E[x^2] - mean^2` in f32 misses this by orders of magnitude;
//! - rows of magnitude 1e30 (squares past f32's range) for RMSNorm and LayerNorm, forward
//!   and backward;
//! - int8 quant of rows holding a NaN or an infinity: yscale +inf, q all 0, other rows
//!   unaffected.

mod common;

use common::*;
use fly_norm::{
    forward_plans, norm_bwd, norm_fwd_with_plan, plan_backward, BwdBuffers, BwdStrategy, Element,
    FwdBuffers, FwdOut, Norm, NormArgs, NormBwdArgs, Path, Plan,
};
use flydsl_rt::{Stream, Target};
use flydsl_testutil::compare::Storage;
use flydsl_testutil::norm::{layer_norm_bwd, layer_norm_fwd, quant, rms_norm_bwd, rms_norm_fwd};
use flydsl_testutil::norm::{FwdRef, NormDtype};
use flydsl_testutil::rng::Rng;
use half::bf16;

/// The targets: wave64, wave32, and sm_90's lean forward.
const TARGETS: [Target; 3] = [Target::Gfx942, Target::Gfx1201, Target::Sm90];

/// Row lengths: one that every aligned vectorised plan serves (and the generic path with
/// vector accesses), and one that the ragged plans and the generic path with scalar accesses
/// serve.
const NS: [usize; 2] = [256, 1021];

const EPS: f32 = 1e-5;

/// The forward plans of `n` on `s`'s device, each path kind at least once.
fn plans<T: Element>(s: &Stream, m: usize, n: usize, quant: bool) -> Vec<Plan> {
    let ws = s.device().wave_size();
    let ps = forward_plans(m, n, T::DTYPE, quant, ws);
    let has = |f: fn(&Path) -> bool| ps.iter().any(|p| f(&p.path));
    if n.is_multiple_of(T::DTYPE.vec() as usize) {
        assert!(has(|p| matches!(p, Path::Fast(_))), "{ps:?}");
        assert!(has(|p| matches!(p, Path::Rows(_))), "{ps:?}");
    } else {
        assert!(has(|p| p.is_ragged()), "{ps:?}");
    }
    assert!(has(|p| *p == Path::Generic), "{ps:?}");
    ps
}

/// Forward outputs of one plan.
struct Out {
    y: Vec<f64>,
    mean: Vec<f64>,
    rstd: Vec<f64>,
}

/// Run the forward of `norm` with `plan` on `x` (weights `g`, `b`), with mean/rstd outputs.
#[allow(clippy::too_many_arguments)]
fn fwd<T: Element + Storage>(
    s: &Stream,
    norm: Norm,
    x: &[T],
    g: &[T],
    b: &[T],
    m: usize,
    n: usize,
    plan: Plan,
) -> Out {
    let (xd, gd, bd) = (up(s, x), up(s, g), up(s, b));
    let mut y = zeros::<T>(s, m * n);
    let (mut mean, mut rstd) = (zeros::<f32>(s, m), zeros::<f32>(s, m));
    let layer = norm == Norm::Layer;
    let bufs = FwdBuffers {
        x: &xd,
        residual: None,
        gamma: &gd,
        beta: layer.then_some(&bd),
        out: FwdOut::Y(&mut y),
        mean: layer.then_some(&mut mean),
        rstd: Some(&mut rstd),
    };
    let args = NormArgs { m, n, eps: EPS };
    norm_fwd_with_plan(s, norm, bufs, args, plan).unwrap_or_else(|e| panic!("{plan:?}: {e}"));
    Out {
        y: down(&y),
        mean: down_f32(&mean),
        rstd: down_f32(&rstd),
    }
}

/// The reference forward.
fn reference<T: Storage>(
    norm: Norm,
    x: &[f64],
    g: &[f64],
    b: &[f64],
    m: usize,
    n: usize,
) -> FwdRef {
    match norm {
        Norm::Layer => layer_norm_fwd::<T>(x, None, g, Some(b), m, n, f64::from(EPS)),
        Norm::Rms => rms_norm_fwd::<T>(x, None, g, m, n, f64::from(EPS)),
    }
}

/// Compare `got` with `want` (inputs `x`) row by row: `y` within the dtype's tolerance plus
/// 4 roundings (2^-24) of the f32 mean in units of the row's rstd (the error any f32
/// implementation, torch's included, makes in `x - mean`; none for a constant row, whose y
/// is beta exactly), mean and rstd to a few f32 roundings.
fn compare<T: NormDtype>(what: &str, got: &Out, want: &FwdRef, x: &[f64], g: &[f64], n: usize) {
    let gmax = g.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for r in 0..want.rstd.len() {
        let row = &x[r * n..(r + 1) * n];
        let k = if row.iter().all(|&v| v == row[0]) {
            0.0
        } else {
            4.0
        };
        let mean_err = k * want.mean[r].abs() * want.rstd[r] * 2f64.powi(-24) * gmax;
        let rows = r * n..(r + 1) * n;
        check(
            &format!("{what}: y row {r}"),
            &got.y[rows.clone()],
            &want.y[rows],
            T::TOL.fwd_atol + mean_err,
            T::TOL.fwd_rtol,
        );
        check(
            &format!("{what}: rstd row {r}"),
            &got.rstd[r..r + 1],
            &want.rstd[r..r + 1],
            0.0,
            1e-5,
        );
        check(
            &format!("{what}: mean row {r}"),
            &got.mean[r..r + 1],
            &want.mean[r..r + 1],
            1e-6 / want.rstd[r],
            1e-6,
        );
    }
}

/// Weights: gamma in [0.5, 1.5), beta in [-1, 1).
fn weights<T: Element + Storage>(rng: &mut Rng, n: usize) -> (Vec<T>, Vec<T>) {
    let g = rng
        .rand(n)
        .into_iter()
        .map(|v| <T as Element>::from_f32(v + 0.5));
    let b = rng
        .rand(n)
        .into_iter()
        .map(|v| <T as Element>::from_f32(2.0 * v - 1.0));
    (g.collect(), b.collect())
}

/// LayerNorm rows of `T` with |mean| / std = `ratio`: mean = +-ratio * std (std 1, then
/// 0.01, then 100), and a constant row, on every plan of every target.
fn large_mean<T: Element + Storage + NormDtype>() {
    for t in TARGETS {
        let s = sim(t);
        for n in NS {
            for ratio in [1e2f32, 1e3, 1e4, 1e6] {
                let mut rng = Rng::new(n as u64 + ratio as u64);
                // (mean, std) of each row; the last is constant.
                let rows: [(f32, f32); 4] = [
                    (ratio, 1.0),
                    (-ratio * 0.01, 0.01),
                    (ratio * 100.0, 100.0),
                    (ratio, 0.0),
                ];
                let m = rows.len();
                let mut x = Vec::with_capacity(m * n);
                for (mean, std) in rows {
                    let z = rng.randn(n);
                    x.extend(
                        z.into_iter()
                            .map(|v| <T as Element>::from_f32(mean + std * v)),
                    );
                }
                let (g, b) = weights::<T>(&mut rng, n);
                let (xf, gf, bf) = (widen_t(&x), widen_t(&g), widen_t(&b));
                let want = reference::<T>(Norm::Layer, &xf, &gf, &bf, m, n);
                for plan in plans::<T>(&s, m, n, false) {
                    let what = format!("{:?} ratio {ratio} n={n} {plan:?} on {t}", T::DTYPE);
                    let got = fwd(&s, Norm::Layer, &x, &g, &b, m, n, plan);
                    compare::<T>(&what, &got, &want, &xf, &gf, n);
                }
            }
        }
    }
}

fn widen_t<T: Storage>(v: &[T]) -> Vec<f64> {
    flydsl_testutil::compare::widen(v)
}

#[test]
fn layernorm_large_mean_f32() {
    large_mean::<f32>();
}

#[test]
fn layernorm_large_mean_bf16() {
    large_mean::<bf16>();
}

/// Rows of magnitude `scale`: randn * scale, a constant row, and randn * scale + 3 * scale.
fn huge_rows<T: Element + Storage>(rng: &mut Rng, n: usize, scale: f32) -> Vec<T> {
    let mut x = Vec::new();
    x.extend(
        rng.randn(n)
            .into_iter()
            .map(|v| <T as Element>::from_f32(v * scale)),
    );
    x.extend(std::iter::repeat_n(<T as Element>::from_f32(-scale), n));
    x.extend(
        rng.randn(n)
            .into_iter()
            .map(|v| <T as Element>::from_f32((v + 3.0) * scale)),
    );
    x
}

/// Forward of rows of 1e30 (and 1e20, and 1e37, whose constant row overflows `mean * rstd`)
/// on every plan.
fn huge_fwd<T: Element + Storage + NormDtype>(norm: Norm) {
    for t in TARGETS {
        let s = sim(t);
        for n in NS {
            for scale in [1e20f32, 1e30, 1e37] {
                let mut rng = Rng::new(7 + n as u64);
                let x = huge_rows::<T>(&mut rng, n, scale);
                let m = x.len() / n;
                let (g, b) = weights::<T>(&mut rng, n);
                let (xf, gf, bf) = (widen_t(&x), widen_t(&g), widen_t(&b));
                let want = reference::<T>(norm, &xf, &gf, &bf, m, n);
                for plan in plans::<T>(&s, m, n, false) {
                    let what = format!(
                        "{norm:?} {:?} scale {scale} n={n} {plan:?} on {t}",
                        T::DTYPE
                    );
                    let got = fwd(&s, norm, &x, &g, &b, m, n, plan);
                    compare::<T>(&what, &got, &want, &xf, &gf, n);
                }
            }
        }
    }
}

#[test]
fn huge_rows_forward_f32() {
    huge_fwd::<f32>(Norm::Rms);
    huge_fwd::<f32>(Norm::Layer);
}

#[test]
fn huge_rows_forward_bf16() {
    huge_fwd::<bf16>(Norm::Rms);
    huge_fwd::<bf16>(Norm::Layer);
}

/// Backward of rows of 1e30 with the reference forward's statistics (as f32), on the fast
/// path's aligned and ragged kernels and the generic path (rows of 16385: past every
/// family's ragged fast kernels): dx (of the order of rstd, 1e-30) within the dtype's
/// tolerance scaled by the row's rstd, dgamma / dbeta as usual.
fn huge_bwd<T: Element + Storage + NormDtype>(norm: Norm) {
    let layer = norm == Norm::Layer;
    for t in TARGETS {
        let s = sim(t);
        let ws = t.wave_size();
        for n in [T::DTYPE.vec() as usize * 37, 127, 16385] {
            let mut rng = Rng::new(11 + n as u64);
            let x = huge_rows::<T>(&mut rng, n, 1e30);
            let m = x.len() / n;
            let path = plan_backward(norm, m, n, T::DTYPE, ws, 64).path;
            assert_eq!(
                path == fly_norm::Path::Generic,
                n == 16385,
                "n={n}: {path:?}"
            );
            let what = format!("{norm:?} bwd {:?} n={n} {path:?} on {t}", T::DTYPE);
            let (g, _) = weights::<T>(&mut rng, n);
            let dy: Vec<T> = rng
                .randn(m * n)
                .into_iter()
                .map(<T as Element>::from_f32)
                .collect();
            let (xf, gf, dyf) = (widen_t(&x), widen_t(&g), widen_t(&dy));
            let f = reference::<T>(norm, &xf, &gf, &gf, m, n);
            let mean: Vec<f32> = f.mean.iter().map(|&v| v as f32).collect();
            let rstd: Vec<f32> = f.rstd.iter().map(|&v| v as f32).collect();
            let (meanf, rstdf): (Vec<f64>, Vec<f64>) = (
                mean.iter().map(|&v| f64::from(v)).collect(),
                rstd.iter().map(|&v| f64::from(v)).collect(),
            );
            let want = if layer {
                layer_norm_bwd(&xf, &gf, &dyf, &meanf, &rstdf, m, n)
            } else {
                rms_norm_bwd(&xf, &gf, &dyf, &rstdf, None, m, n)
            };
            let (xd, gd, dyd, md, rd) = (
                up(&s, &x),
                up(&s, &g),
                up(&s, &dy),
                up(&s, &mean),
                up(&s, &rstd),
            );
            let mut dx = zeros::<T>(&s, m * n);
            let mut dg = zeros::<T>(&s, n);
            let mut db = zeros::<T>(&s, n);
            let bufs = BwdBuffers {
                x: &xd,
                gamma: &gd,
                dy: &dyd,
                mean: layer.then_some(&md),
                rstd: &rd,
                dresidual: None,
                dx: &mut dx,
                dgamma: &mut dg,
                dbeta: layer.then_some(&mut db),
            };
            let strategy = BwdStrategy::default();
            norm_bwd(&s, norm, bufs, NormBwdArgs { m, n, strategy })
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = down(&dx);
            for (r, &rs) in rstdf.iter().enumerate() {
                let rows = r * n..(r + 1) * n;
                check(
                    &format!("{what}: dx row {r}"),
                    &got[rows.clone()],
                    &want.dx[rows],
                    T::TOL.dx_atol * rs,
                    T::TOL.dx_rtol,
                );
            }
            check(
                &format!("{what}: dgamma"),
                &down(&dg),
                &want.dgamma,
                T::TOL.dw_atol,
                T::TOL.dw_rtol + 1.0 / 256.0,
            );
            if layer {
                check(
                    &format!("{what}: dbeta"),
                    &down(&db),
                    &want.dbeta,
                    T::TOL.dw_atol,
                    T::TOL.dw_rtol + 1.0 / 256.0,
                );
            }
        }
    }
}

#[test]
fn huge_rows_backward() {
    for norm in [Norm::Rms, Norm::Layer] {
        huge_bwd::<f32>(norm);
        huge_bwd::<bf16>(norm);
    }
}

/// Quant rows with a NaN or an infinity get yscale +inf and q all 0; the rows around them
/// match the reference, on every quant plan.
fn quant_nonfinite<T: Element + Storage + NormDtype>(norm: Norm) {
    for t in TARGETS {
        let s = sim(t);
        for n in NS {
            let mut rng = Rng::new(3 + n as u64);
            let m = 5;
            let mut x: Vec<T> = rng
                .randn(m * n)
                .into_iter()
                .map(<T as Element>::from_f32)
                .collect();
            x[n + n / 2] = <T as Element>::from_f32(f32::NAN);
            x[3 * n + 1] = <T as Element>::from_f32(f32::INFINITY);
            x[4 * n + n - 1] = <T as Element>::from_f32(f32::NEG_INFINITY);
            let (g, b) = weights::<T>(&mut rng, n);
            let (xf, gf, bf) = (widen_t(&x), widen_t(&g), widen_t(&b));
            let want = reference::<T>(norm, &xf, &gf, &bf, m, n);
            let (wq, ws) = quant(&want.y, None, m, n);
            for (r, &w) in ws.iter().enumerate() {
                assert_eq!(
                    w.is_finite(),
                    r % 2 == 0 && r != 4,
                    "reference yscale {r}: {w}"
                );
            }
            let (xd, gd, bd) = (up(&s, &x), up(&s, &g), up(&s, &b));
            for plan in plans::<T>(&s, m, n, true) {
                let what = format!("{norm:?} quant {:?} n={n} {plan:?} on {t}", T::DTYPE);
                let mut q = zeros::<i8>(&s, m * n);
                let mut ys = zeros::<f32>(&s, m);
                let bufs = FwdBuffers {
                    x: &xd,
                    residual: None,
                    gamma: &gd,
                    beta: (norm == Norm::Layer).then_some(&bd),
                    out: FwdOut::Quant {
                        q: &mut q,
                        yscale: &mut ys,
                        xscale: None,
                    },
                    mean: None,
                    rstd: None,
                };
                norm_fwd_with_plan(&s, norm, bufs, NormArgs { m, n, eps: EPS }, plan)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let got = down_f32(&ys);
                for (r, (&g, &w)) in got.iter().zip(&ws).enumerate() {
                    if w.is_finite() {
                        assert!(
                            (g - w).abs() <= T::TOL.yscale,
                            "{what}: yscale row {r}: {g} vs {w}"
                        );
                    } else {
                        assert_eq!(g, f64::INFINITY, "{what}: yscale row {r}");
                    }
                }
                check_q(&what, &q.to_vec().unwrap(), &wq, T::TOL.q);
            }
        }
    }
}

#[test]
fn quant_nonfinite_rows() {
    for norm in [Norm::Rms, Norm::Layer] {
        quant_nonfinite::<f32>(norm);
        quant_nonfinite::<bf16>(norm);
    }
}
