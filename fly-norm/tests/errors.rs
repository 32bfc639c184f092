//! Bad inputs are errors whose messages name the bad value, never panics; M = 0 is a no-op.

mod common;

use common::*;
use fly_norm::*;
use flydsl_rt::Target;
use half::bf16;

fn msg<T: std::fmt::Debug>(r: flydsl_rt::Result<T>) -> String {
    r.expect_err("must be an error").to_string()
}

#[test]
fn bad_forward_arguments() {
    let s = sim(Target::Gfx942);
    let x = zeros::<f32>(&s, 12);
    let g = zeros::<f32>(&s, 4);
    let mut y = zeros::<f32>(&s, 12);
    let a = NormArgs::new(3, 4);
    rms_norm(&s, &x, &g, &mut y, a).unwrap();
    // eps
    for eps in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let m = msg(rms_norm(&s, &x, &g, &mut y, NormArgs { eps, ..a }));
        assert!(m.contains("eps") && m.contains(&eps.to_string()), "{m}");
    }
    // n = 0
    let m = msg(layer_norm(&s, &x, &g, None, &mut y, NormArgs::new(3, 0)));
    assert!(m.contains("n = 0"), "{m}");
    // lengths
    let m = msg(rms_norm(&s, &x, &g, &mut y, NormArgs::new(4, 4)));
    assert!(m.contains("`x` has 12 elements") && m.contains("16"), "{m}");
    let g5 = zeros::<f32>(&s, 5);
    let m = msg(rms_norm(&s, &x, &g5, &mut y, a));
    assert!(m.contains("`gamma` has 5"), "{m}");
    let mut y2 = zeros::<f32>(&s, 11);
    let m = msg(rms_norm(&s, &x, &g, &mut y2, a));
    assert!(m.contains("`y` has 11"), "{m}");
    let b3 = zeros::<f32>(&s, 3);
    let m = msg(layer_norm(&s, &x, &g, Some(&b3), &mut y, a));
    assert!(m.contains("`beta` has 3"), "{m}");
    let (mut mean, mut rstd) = (zeros::<f32>(&s, 2), zeros::<f32>(&s, 3));
    let m = msg(layer_norm_stats(
        &s, &x, &g, None, &mut y, &mut mean, &mut rstd, a,
    ));
    assert!(m.contains("`mean` has 2"), "{m}");
    let r = zeros::<f32>(&s, 12);
    let mut ro = zeros::<f32>(&s, 10);
    let m = msg(rms_norm_add(&s, &x, &r, &g, &mut y, &mut ro, a));
    assert!(m.contains("`residual_out` has 10"), "{m}");
    let (mut q, mut ys) = (zeros::<i8>(&s, 12), zeros::<f32>(&s, 2));
    let m = msg(rms_norm_quant(&s, &x, &g, None, &mut q, &mut ys, a));
    assert!(m.contains("`yscale` has 2"), "{m}");
    let xs = zeros::<f32>(&s, 3);
    let mut ys = zeros::<f32>(&s, 3);
    let m = msg(layer_norm_quant(
        &s,
        &x,
        &g,
        None,
        Some(&xs),
        &mut q,
        &mut ys,
        a,
    ));
    assert!(m.contains("`xscale` has 3"), "{m}");
    // shape overflow
    let m = msg(rms_norm(&s, &x, &g, &mut y, NormArgs::new(usize::MAX, 4)));
    assert!(m.contains("exceeds") || m.contains("overflow"), "{m}");
}

#[test]
fn weight_dtype_not_allowed() {
    let s = sim(Target::Sm90);
    let x = zeros::<bf16>(&s, 8);
    let mut y = zeros::<bf16>(&s, 8);
    // f32 weights are allowed for RMSNorm with bf16 activations ...
    rms_norm(&s, &x, &zeros::<f32>(&s, 4), &mut y, NormArgs::new(2, 4)).unwrap();
    // ... but not for LayerNorm, nor f16 weights with bf16 activations.
    let m = msg(layer_norm(
        &s,
        &x,
        &zeros::<f32>(&s, 4),
        None,
        &mut y,
        NormArgs::new(2, 4),
    ));
    assert!(
        m.contains("not supported") && m.contains("f32 weights") && m.contains("bf16 activations"),
        "{m}"
    );
    let m = msg(rms_norm(
        &s,
        &x,
        &zeros::<half::f16>(&s, 4),
        &mut y,
        NormArgs::new(2, 4),
    ));
    assert!(m.contains("not supported"), "{m}");
    let xf = zeros::<f32>(&s, 8);
    let mut yf = zeros::<f32>(&s, 8);
    let m = msg(rms_norm(
        &s,
        &xf,
        &zeros::<bf16>(&s, 4),
        &mut yf,
        NormArgs::new(2, 4),
    ));
    assert!(m.contains("not supported"), "{m}");
}

#[test]
fn rms_rejects_layer_only_operands() {
    let s = sim(Target::Gfx1201);
    let x = zeros::<f32>(&s, 8);
    let g = zeros::<f32>(&s, 4);
    let mut y = zeros::<f32>(&s, 8);
    let mut mean = zeros::<f32>(&s, 2);
    let b = FwdBuffers {
        x: &x,
        residual: None,
        gamma: &g,
        beta: Some(&g),
        out: FwdOut::Y(&mut y),
        mean: None,
        rstd: None,
    };
    assert!(msg(norm_fwd(&s, Norm::Rms, b, NormArgs::new(2, 4))).contains("no bias"));
    let b = FwdBuffers {
        x: &x,
        residual: None,
        gamma: &g,
        beta: None,
        out: FwdOut::Y(&mut y),
        mean: Some(&mut mean),
        rstd: None,
    };
    assert!(msg(norm_fwd(&s, Norm::Rms, b, NormArgs::new(2, 4))).contains("no mean"));
}

#[test]
fn m_zero_is_a_no_op() {
    let s = sim(Target::Gfx950);
    let x = zeros::<f32>(&s, 0);
    let g = zeros::<f32>(&s, 7);
    let mut y = zeros::<f32>(&s, 0);
    rms_norm(&s, &x, &g, &mut y, NormArgs::new(0, 7)).unwrap();
    layer_norm(&s, &x, &g, None, &mut y, NormArgs::new(0, 7)).unwrap();
    // Still validated: n = 0 and a bad eps are errors even with no rows.
    assert!(rms_norm(&s, &x, &g, &mut y, NormArgs::new(0, 0)).is_err());
    assert!(rms_norm(
        &s,
        &x,
        &g,
        &mut y,
        NormArgs {
            eps: -1.0,
            ..NormArgs::new(0, 7)
        }
    )
    .is_err());
}

#[test]
fn bad_backward_arguments() {
    let s = sim(Target::Gfx942);
    let (x, dy, g) = (
        zeros::<f32>(&s, 12),
        zeros::<f32>(&s, 12),
        zeros::<f32>(&s, 4),
    );
    let (mean, rstd) = (zeros::<f32>(&s, 3), zeros::<f32>(&s, 3));
    let mut dx = zeros::<f32>(&s, 12);
    let (mut dg, mut db) = (zeros::<f32>(&s, 4), zeros::<f32>(&s, 4));
    let a = NormBwdArgs::new(3, 4);
    layer_norm_bwd(&s, &x, &g, &dy, &mean, &rstd, &mut dx, &mut dg, &mut db, a).unwrap();
    let short = zeros::<f32>(&s, 2);
    let m = msg(layer_norm_bwd(
        &s, &x, &g, &dy, &short, &rstd, &mut dx, &mut dg, &mut db, a,
    ));
    assert!(m.contains("`mean` has 2"), "{m}");
    let m = msg(rms_norm_bwd(
        &s, &x, &g, &dy, &short, None, &mut dx, &mut dg, a,
    ));
    assert!(m.contains("`rstd` has 2"), "{m}");
    let mut dg3 = zeros::<f32>(&s, 3);
    let m = msg(rms_norm_bwd(
        &s, &x, &g, &dy, &rstd, None, &mut dx, &mut dg3, a,
    ));
    assert!(m.contains("`dgamma` has 3"), "{m}");
    let m = msg(rms_norm_bwd(
        &s,
        &x,
        &g,
        &dy,
        &rstd,
        Some(&short),
        &mut dx,
        &mut dg,
        a,
    ));
    assert!(m.contains("`dresidual` has 2"), "{m}");
    let m = msg(rms_norm_bwd(
        &s,
        &x,
        &g,
        &dy,
        &rstd,
        None,
        &mut dx,
        &mut dg,
        NormBwdArgs::new(3, 0),
    ));
    assert!(m.contains("n = 0"), "{m}");
    let bufs = BwdBuffers {
        x: &x,
        gamma: &g,
        dy: &dy,
        mean: None,
        rstd: &rstd,
        dresidual: None,
        dx: &mut dx,
        dgamma: &mut dg,
        dbeta: None,
    };
    assert!(msg(norm_bwd(&s, Norm::Layer, bufs, a)).contains("mean"));
}

#[test]
fn buffers_of_another_device_are_rejected() {
    let s = sim(Target::Gfx942);
    let other = flydsl_rt::Device::new_sim(Target::Gfx942);
    let x = flydsl_rt::DeviceBuffer::<f32>::zeroed(&other, 8).unwrap();
    let g = zeros::<f32>(&s, 4);
    let mut y = zeros::<f32>(&s, 8);
    let e = rms_norm(&s, &x, &g, &mut y, NormArgs::new(2, 4)).expect_err("wrong device");
    assert!(matches!(e, flydsl_rt::Error::WrongDevice { .. }), "{e}");
}

/// Plans that do not fit the shape, dtype or device are errors naming the problem, never
/// launches; every plan of `forward_plans` is accepted.
#[test]
fn bad_forward_plans() {
    let s = sim(Target::Sm90); // wave 32
    let (m, n) = (4, 1024);
    let x = zeros::<f32>(&s, m * n);
    let g = zeros::<f32>(&s, n);
    let mut y = zeros::<f32>(&s, m * n);
    let mut run = |p: Plan| {
        let b = FwdBuffers {
            x: &x,
            residual: None,
            gamma: &g,
            beta: None,
            out: FwdOut::Y(&mut y),
            mean: None,
            rstd: None,
        };
        norm_fwd_with_plan(&s, Norm::Rms, b, NormArgs::new(m, n), p)
    };
    let lin = |path, grid, block, lanes| Plan {
        path,
        cfg: flydsl_rt::LaunchConfig::linear(grid, block),
        lanes,
        keep_l2: false,
    };
    for p in forward_plans(m, n, DType::F32, false, 32) {
        run(p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    }
    // f32 rows of 1024: 256 vectors.
    for (p, want) in [
        (
            lin(Path::Fast(3), 4, 128, 0),
            "no fast-path kernel with 3 tiles",
        ),
        (
            lin(Path::Fast(2), 4, 100, 0),
            "multiple of the wave size 32",
        ),
        (lin(Path::Fast(2), 4, 512, 0), "in 32..=256"),
        (lin(Path::Fast(2), 4, 96, 0), "does not cover a row"),
        (lin(Path::Fast(2), 4, 128, 8), "lanes 8 must be 0"),
        (lin(Path::Fast(2), 0, 128, 0), "grid 0"),
        (
            lin(Path::Rows(4), 1, 256, 16),
            "16 lanes x 4 tiles hold 64 vectors",
        ),
        (
            lin(Path::Rows(4), 1, 256, 64),
            "lanes 64 must be a power of two in 1..=32",
        ),
        (lin(Path::Rows(4), 1, 256, 0), "lanes 0"),
        (
            lin(Path::Rows(2), 1, 256, 32),
            "no multi-row kernel with 2 tiles",
        ),
        (lin(Path::Generic, 4, 128, 0), "exactly 256 threads"),
    ] {
        let e = msg(run(p));
        assert!(e.contains(want), "{p:?}: {e}");
    }
    let mut p = lin(Path::Fast(2), 4, 128, 0);
    p.cfg.grid[1] = 2;
    assert!(msg(run(p)).contains("1-D"));
    // Vectorised paths need whole vectors.
    let x = zeros::<f32>(&s, 2 * 6);
    let g = zeros::<f32>(&s, 6);
    let mut y = zeros::<f32>(&s, 2 * 6);
    let b = FwdBuffers {
        x: &x,
        residual: None,
        gamma: &g,
        beta: None,
        out: FwdOut::Y(&mut y),
        mean: None,
        rstd: None,
    };
    let e = msg(norm_fwd_with_plan(
        &s,
        Norm::Layer,
        b,
        NormArgs::new(2, 6),
        lin(Path::Fast(2), 2, 32, 0),
    ));
    assert!(e.contains("n % 4 == 0"), "{e}");
}
