//! The forward case runner: one call with a set of options, every output against the
//! CPU reference.

use super::*;
use fly_norm::{norm_fwd, DType, Element, FwdBuffers, FwdOut, Norm, NormArgs};
use flydsl_rt::Stream;
use flydsl_testutil::compare::Storage;
use flydsl_testutil::norm::{layer_norm_fwd, quant, rms_norm_fwd, NormDtype};
use flydsl_testutil::rng::Rng;

/// Options of one forward call.
#[derive(Clone, Copy, Debug, Default)]
pub struct Opts {
    pub add: bool,
    pub stats: bool,
    pub beta: bool,
    /// Some(smooth) for the int8 quant output.
    pub quant: Option<bool>,
}

/// Run one forward call and compare every output with the reference.
pub fn case<T: Element + NormDtype, W: Element + Storage>(
    s: &Stream,
    norm: Norm,
    m: usize,
    n: usize,
    o: Opts,
    seed: u64,
) {
    let what = format!(
        "{norm:?} {:?}/{:?} m={m} n={n} {o:?} on {}",
        T::DTYPE,
        W::DTYPE,
        s.device().target()
    );
    let mut rng = Rng::new(seed);
    let (x, xf) = randn::<T>(&mut rng, m * n);
    let (r, rf) = randn::<T>(&mut rng, m * n);
    let g: Vec<W> = rng
        .rand(n)
        .into_iter()
        .map(<W as Element>::from_f32)
        .collect();
    let b: Vec<W> = rng
        .rand(n)
        .into_iter()
        .map(<W as Element>::from_f32)
        .collect();
    let xs: Vec<f32> = rng.rand(n).into_iter().map(|v| v + 0.5).collect();
    let (gf, bf) = (
        flydsl_testutil::compare::widen(&g),
        flydsl_testutil::compare::widen(&b),
    );
    let xsf: Vec<f64> = xs.iter().map(|&v| f64::from(v)).collect();
    let eps = 1e-5f32;
    let want = match norm {
        Norm::Layer => layer_norm_fwd::<T>(
            &xf,
            o.add.then_some(&rf[..]),
            &gf,
            o.beta.then_some(&bf[..]),
            m,
            n,
            eps as f64,
        ),
        Norm::Rms => rms_norm_fwd::<T>(&xf, o.add.then_some(&rf[..]), &gf, m, n, eps as f64),
    };
    let tol = if W::DTYPE == DType::F32 {
        T::TOL_F32_WEIGHT
    } else {
        T::TOL
    };
    let (xd, rd, gd, bd, xsd) = (up(s, &x), up(s, &r), up(s, &g), up(s, &b), up(s, &xs));
    let mut ro = zeros::<T>(s, m * n);
    let mut y = zeros::<T>(s, m * n);
    let mut q = zeros::<i8>(s, m * n);
    let mut ys = zeros::<f32>(s, m);
    let (mut mean, mut rstd) = (zeros::<f32>(s, m), zeros::<f32>(s, m));
    let layer = norm == Norm::Layer;
    let out = match o.quant {
        None => FwdOut::Y(&mut y),
        Some(smooth) => FwdOut::Quant {
            q: &mut q,
            yscale: &mut ys,
            xscale: smooth.then_some(&xsd),
        },
    };
    let bufs = FwdBuffers {
        x: &xd,
        residual: o.add.then_some((&rd, &mut ro)),
        gamma: &gd,
        beta: (o.beta && layer).then_some(&bd),
        out,
        mean: (o.stats && layer).then_some(&mut mean),
        rstd: o.stats.then_some(&mut rstd),
    };
    norm_fwd(s, norm, bufs, NormArgs { m, n, eps }).unwrap_or_else(|e| panic!("{what}: {e}"));
    match o.quant {
        None => check(
            &format!("{what}: y"),
            &down(&y),
            &want.y,
            tol.fwd_atol,
            tol.fwd_rtol,
        ),
        Some(smooth) => {
            let (wq, ws) = quant(&want.y, smooth.then_some(&xsf[..]), m, n);
            check(
                &format!("{what}: yscale"),
                &down_f32(&ys),
                &ws,
                tol.yscale,
                0.0,
            );
            check_q(&format!("{what}: q"), &q.to_vec().unwrap(), &wq, tol.q);
        }
    }
    if o.add {
        check(
            &format!("{what}: residual_out"),
            &down(&ro),
            &want.input,
            0.0,
            0.0,
        );
    }
    if o.stats {
        check(
            &format!("{what}: rstd"),
            &down_f32(&rstd),
            &want.rstd,
            1e-4,
            1e-4,
        );
        if layer {
            check(
                &format!("{what}: mean"),
                &down_f32(&mean),
                &want.mean,
                1e-4,
                1e-4,
            );
        }
    }
}

/// The option sets every (family, path) is run with.
pub const OPTS: [Opts; 4] = [
    Opts {
        add: false,
        stats: true,
        beta: true,
        quant: None,
    },
    Opts {
        add: true,
        stats: false,
        beta: false,
        quant: None,
    },
    Opts {
        add: false,
        stats: true,
        beta: true,
        quant: Some(false),
    },
    Opts {
        add: true,
        stats: false,
        beta: true,
        quant: Some(true),
    },
];
