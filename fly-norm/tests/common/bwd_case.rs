//! The backward case runner: one call, dx and the weight gradients against the CPU
//! reference (statistics from the reference forward).

use super::*;
use fly_norm::{
    norm_bwd, norm_bwd_with_plan, BwdBuffers, BwdStrategy, DType, Element, Norm, NormBwdArgs, Plan,
};
use flydsl_rt::Stream;
use flydsl_testutil::compare::{widen, Storage};
use flydsl_testutil::norm::{
    layer_norm_bwd, layer_norm_fwd, rms_norm_bwd, rms_norm_fwd, NormDtype,
};
use flydsl_testutil::rng::Rng;

/// Run one backward call and compare.
pub fn case<T: Element + NormDtype, W: Element + Storage>(
    s: &Stream,
    norm: Norm,
    m: usize,
    n: usize,
    strategy: BwdStrategy,
    dres: bool,
    seed: u64,
) {
    case_on::<T, W>(s, norm, m, n, strategy, dres, seed, None);
}

/// [`case`] on `plan` (through `norm_bwd_with_plan`), or the dispatcher's plan.
#[allow(clippy::too_many_arguments)]
pub fn case_on<T: Element + NormDtype, W: Element + Storage>(
    s: &Stream,
    norm: Norm,
    m: usize,
    n: usize,
    strategy: BwdStrategy,
    dres: bool,
    seed: u64,
    plan: Option<Plan>,
) {
    let what = format!(
        "{norm:?} bwd {:?}/{:?} m={m} n={n} {strategy:?} dres={dres} plan={plan:?} on {}",
        T::DTYPE,
        W::DTYPE,
        s.device().target()
    );
    let mut rng = Rng::new(seed);
    let (x, xf) = randn::<T>(&mut rng, m * n);
    let (dy, dyf) = randn::<T>(&mut rng, m * n);
    let (dr, drf) = randn::<T>(&mut rng, m * n);
    let g: Vec<W> = rng
        .rand(n)
        .into_iter()
        .map(<W as Element>::from_f32)
        .collect();
    let gf = widen(&g);
    let layer = norm == Norm::Layer;
    // Statistics from the reference forward, rounded to f32 as the kernels store them.
    let fwd = if layer {
        layer_norm_fwd::<T>(&xf, None, &gf, None, m, n, 1e-5)
    } else {
        rms_norm_fwd::<T>(&xf, None, &gf, m, n, 1e-5)
    };
    let mean: Vec<f32> = fwd.mean.iter().map(|&v| v as f32).collect();
    let rstd: Vec<f32> = fwd.rstd.iter().map(|&v| v as f32).collect();
    let meanf: Vec<f64> = mean.iter().map(|&v| f64::from(v)).collect();
    let rstdf: Vec<f64> = rstd.iter().map(|&v| f64::from(v)).collect();
    let want = if layer {
        layer_norm_bwd(&xf, &gf, &dyf, &meanf, &rstdf, m, n)
    } else {
        rms_norm_bwd(&xf, &gf, &dyf, &rstdf, dres.then_some(&drf[..]), m, n)
    };
    let tol = if W::DTYPE == DType::F32 {
        T::TOL_F32_WEIGHT
    } else {
        T::TOL
    };
    let (xd, dyd, drd, gd, md, rd) = (
        up(s, &x),
        up(s, &dy),
        up(s, &dr),
        up(s, &g),
        up(s, &mean),
        up(s, &rstd),
    );
    let mut dx = zeros::<T>(s, m * n);
    let mut dg = up(s, &vec![<W as Element>::from_f32(7.0); n]); // must be overwritten
    let mut db = up(s, &vec![<W as Element>::from_f32(7.0); n]);
    let bufs = BwdBuffers {
        x: &xd,
        gamma: &gd,
        dy: &dyd,
        mean: layer.then_some(&md),
        rstd: &rd,
        dresidual: dres.then_some(&drd),
        dx: &mut dx,
        dgamma: &mut dg,
        dbeta: layer.then_some(&mut db),
    };
    let args = NormBwdArgs { m, n, strategy };
    match plan {
        Some(p) => norm_bwd_with_plan(s, norm, bufs, args, p),
        None => norm_bwd(s, norm, bufs, args),
    }
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    check(
        &format!("{what}: dx"),
        &down(&dx),
        &want.dx,
        tol.dx_atol,
        tol.dx_rtol,
    );
    // dgamma / dbeta are rounded to the weight dtype: add its half-ulp to the tolerance.
    let wround = match W::DTYPE {
        DType::F32 => 0.0,
        DType::F16 => 1.0 / 2048.0,
        DType::BF16 => 1.0 / 256.0,
    };
    check(
        &format!("{what}: dgamma"),
        &down(&dg),
        &want.dgamma,
        tol.dw_atol,
        tol.dw_rtol + wround,
    );
    if layer {
        check(
            &format!("{what}: dbeta"),
            &down(&db),
            &want.dbeta,
            tol.dw_atol,
            tol.dw_rtol + wround,
        );
    }
}
