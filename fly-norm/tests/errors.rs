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
    assert!(m.contains("`n` = 0"), "{m}");
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
    assert!(m.contains("`m` = ") && m.contains("at most"), "{m}");
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
    assert!(m.contains("`n` = 0"), "{m}");
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
    // Both devices by backend, ordinal, name and id (two Sim devices share ordinal and name).
    let e = e.to_string();
    let (a, b) = (other.id().to_string(), s.device().id().to_string());
    assert!(
        e.starts_with("fly_norm::rms_norm: `x` lives on Sim device 0"),
        "{e}"
    );
    assert!(
        e.contains(&a) && e.contains(&b) && e.contains(s.device().name()),
        "{e}"
    );
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

/// Which argument of a call is made wrong.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bad {
    /// One element too many.
    Len(&'static str),
    /// On a second Sim device (a distinct device of the same target).
    Device(&'static str),
}

type Buf = flydsl_rt::DeviceBuffer<f32>;

/// Every buffer of the forward and backward calls (f32), on the stream's device except the one
/// `bad` names; every buffer holds sentinels.
struct Io {
    x: Buf,
    residual: Buf,
    gamma: Buf,
    beta: Buf,
    xscale: Buf,
    dy: Buf,
    dresidual: Buf,
    mean_in: Buf,
    rstd_in: Buf,
    y: Buf,
    residual_out: Buf,
    yscale: Buf,
    mean: Buf,
    rstd: Buf,
    dx: Buf,
    dgamma: Buf,
    dbeta: Buf,
    q: flydsl_rt::DeviceBuffer<i8>,
}

fn sentinel(i: usize) -> f32 {
    7.25 + (i % 3) as f32 * 0.25
}

const Q_SENTINEL: i8 = 5;

impl Io {
    fn new(s: &flydsl_rt::Stream, other: &flydsl_rt::Device, bad: Option<Bad>) -> Io {
        Io::rows(s, other, bad, 3)
    }

    fn rows(s: &flydsl_rt::Stream, other: &flydsl_rt::Device, bad: Option<Bad>, m: usize) -> Io {
        let n = 8;
        let place = |name: &str, len: usize| match bad {
            Some(Bad::Len(b)) if b == name => (s.device().clone(), len + 1),
            Some(Bad::Device(b)) if b == name => (other.clone(), len),
            _ => (s.device().clone(), len),
        };
        let f = |name: &str, len: usize| {
            let (dev, len) = place(name, len);
            let v: Vec<f32> = (0..len).map(sentinel).collect();
            Buf::from_slice(&dev, &v).unwrap()
        };
        let (qdev, qlen) = place("q", m * n);
        Io {
            x: f("x", m * n),
            residual: f("residual", m * n),
            gamma: f("gamma", n),
            beta: f("beta", n),
            xscale: f("xscale", n),
            dy: f("dy", m * n),
            dresidual: f("dresidual", m * n),
            mean_in: f("mean", m),
            rstd_in: f("rstd", m),
            y: f("y", m * n),
            residual_out: f("residual_out", m * n),
            yscale: f("yscale", m),
            mean: f("mean", m),
            rstd: f("rstd", m),
            dx: f("dx", m * n),
            dgamma: f("dgamma", n),
            dbeta: f("dbeta", n),
            q: flydsl_rt::DeviceBuffer::from_slice(&qdev, &vec![Q_SENTINEL; qlen]).unwrap(),
        }
    }

    /// Every buffer still holds its sentinels.
    fn assert_untouched(&self, what: &str) {
        let all = [
            ("y", &self.y),
            ("residual_out", &self.residual_out),
            ("yscale", &self.yscale),
            ("mean", &self.mean),
            ("rstd", &self.rstd),
            ("dx", &self.dx),
            ("dgamma", &self.dgamma),
            ("dbeta", &self.dbeta),
        ];
        for (k, b) in all {
            let ok = b
                .to_vec()
                .unwrap()
                .iter()
                .enumerate()
                .all(|(i, &v)| v == sentinel(i));
            assert!(ok, "{what}: `{k}` was written by a call that failed");
        }
        assert!(
            self.q.to_vec().unwrap().iter().all(|&v| v == Q_SENTINEL),
            "{what}: `q` was written by a call that failed"
        );
    }
}

type FwdCall = fn(&flydsl_rt::Stream, &mut Io, f32) -> flydsl_rt::Result<()>;

/// Every public forward entry point: its name, its buffer arguments, and a call with `eps`.
fn forward_calls() -> Vec<(&'static str, &'static [&'static str], FwdCall)> {
    fn a(eps: f32) -> NormArgs {
        NormArgs {
            eps,
            ..NormArgs::new(3, 8)
        }
    }
    vec![
        ("fly_norm::rms_norm", &["x", "gamma", "y"], |s, io, e| {
            rms_norm(s, &io.x, &io.gamma, &mut io.y, a(e))
        }),
        (
            "fly_norm::rms_norm_rstd",
            &["x", "gamma", "y", "rstd"],
            |s, io, e| rms_norm_rstd(s, &io.x, &io.gamma, &mut io.y, &mut io.rstd, a(e)),
        ),
        (
            "fly_norm::rms_norm_add",
            &["x", "residual", "gamma", "y", "residual_out"],
            |s, io, e| {
                let (x, r, g) = (&io.x, &io.residual, &io.gamma);
                rms_norm_add(s, x, r, g, &mut io.y, &mut io.residual_out, a(e))
            },
        ),
        (
            "fly_norm::rms_norm_quant",
            &["x", "gamma", "xscale", "q", "yscale"],
            |s, io, e| {
                let (x, g, xs) = (&io.x, &io.gamma, Some(&io.xscale));
                rms_norm_quant(s, x, g, xs, &mut io.q, &mut io.yscale, a(e))
            },
        ),
        (
            "fly_norm::rms_norm_add_quant",
            &[
                "x",
                "residual",
                "gamma",
                "xscale",
                "q",
                "yscale",
                "residual_out",
            ],
            |s, io, e| {
                let (x, r, g, xs) = (&io.x, &io.residual, &io.gamma, Some(&io.xscale));
                let (q, ys, ro) = (&mut io.q, &mut io.yscale, &mut io.residual_out);
                rms_norm_add_quant(s, x, r, g, xs, q, ys, ro, a(e))
            },
        ),
        (
            "fly_norm::layer_norm",
            &["x", "gamma", "beta", "y"],
            |s, io, e| layer_norm(s, &io.x, &io.gamma, Some(&io.beta), &mut io.y, a(e)),
        ),
        (
            "fly_norm::layer_norm_stats",
            &["x", "gamma", "beta", "y", "mean", "rstd"],
            |s, io, e| {
                let (x, g, b) = (&io.x, &io.gamma, Some(&io.beta));
                let (y, mean, rstd) = (&mut io.y, &mut io.mean, &mut io.rstd);
                layer_norm_stats(s, x, g, b, y, mean, rstd, a(e))
            },
        ),
        (
            "fly_norm::layer_norm_add",
            &["x", "residual", "gamma", "beta", "y", "residual_out"],
            |s, io, e| {
                let (x, r, g, b) = (&io.x, &io.residual, &io.gamma, Some(&io.beta));
                layer_norm_add(s, x, r, g, b, &mut io.y, &mut io.residual_out, a(e))
            },
        ),
        (
            "fly_norm::layer_norm_quant",
            &["x", "gamma", "beta", "xscale", "q", "yscale"],
            |s, io, e| {
                let (x, g, b, xs) = (&io.x, &io.gamma, Some(&io.beta), Some(&io.xscale));
                layer_norm_quant(s, x, g, b, xs, &mut io.q, &mut io.yscale, a(e))
            },
        ),
        (
            "fly_norm::layer_norm_add_quant",
            &[
                "x",
                "residual",
                "gamma",
                "beta",
                "xscale",
                "q",
                "yscale",
                "residual_out",
            ],
            |s, io, e| {
                let (x, r, g) = (&io.x, &io.residual, &io.gamma);
                let (b, xs) = (Some(&io.beta), Some(&io.xscale));
                let (q, ys, ro) = (&mut io.q, &mut io.yscale, &mut io.residual_out);
                layer_norm_add_quant(s, x, r, g, b, xs, q, ys, ro, a(e))
            },
        ),
        (
            "fly_norm::norm_fwd",
            &[
                "x",
                "residual",
                "gamma",
                "beta",
                "residual_out",
                "y",
                "mean",
                "rstd",
            ],
            |s, io, e| {
                let b = FwdBuffers {
                    x: &io.x,
                    residual: Some((&io.residual, &mut io.residual_out)),
                    gamma: &io.gamma,
                    beta: Some(&io.beta),
                    out: FwdOut::Y(&mut io.y),
                    mean: Some(&mut io.mean),
                    rstd: Some(&mut io.rstd),
                };
                norm_fwd(s, Norm::Layer, b, a(e))
            },
        ),
    ]
}

type BwdCall = fn(&flydsl_rt::Stream, &mut Io, usize) -> flydsl_rt::Result<()>;

/// Every public backward entry point: its name, its buffer arguments, and a call on `m` rows
/// of 8.
fn backward_calls() -> Vec<(&'static str, &'static [&'static str], BwdCall)> {
    vec![
        (
            "fly_norm::rms_norm_bwd",
            &["x", "gamma", "dy", "rstd", "dresidual", "dx", "dgamma"],
            |s, io, m| {
                let (x, g, dy, rstd, dr) =
                    (&io.x, &io.gamma, &io.dy, &io.rstd_in, Some(&io.dresidual));
                rms_norm_bwd(
                    s,
                    x,
                    g,
                    dy,
                    rstd,
                    dr,
                    &mut io.dx,
                    &mut io.dgamma,
                    NormBwdArgs::new(m, 8),
                )
            },
        ),
        (
            "fly_norm::layer_norm_bwd",
            &["x", "gamma", "dy", "mean", "rstd", "dx", "dgamma", "dbeta"],
            |s, io, m| {
                let (x, g, dy, mean, rstd) = (&io.x, &io.gamma, &io.dy, &io.mean_in, &io.rstd_in);
                let (dx, dg, db) = (&mut io.dx, &mut io.dgamma, &mut io.dbeta);
                layer_norm_bwd(s, x, g, dy, mean, rstd, dx, dg, db, NormBwdArgs::new(m, 8))
            },
        ),
        (
            "fly_norm::norm_bwd",
            &["x", "gamma", "dy", "mean", "rstd", "dx", "dgamma", "dbeta"],
            |s, io, m| {
                let b = BwdBuffers {
                    x: &io.x,
                    gamma: &io.gamma,
                    dy: &io.dy,
                    mean: Some(&io.mean_in),
                    rstd: &io.rstd_in,
                    dresidual: None,
                    dx: &mut io.dx,
                    dgamma: &mut io.dgamma,
                    dbeta: Some(&mut io.dbeta),
                };
                norm_bwd(s, Norm::Layer, b, NormBwdArgs::new(m, 8))
            },
        ),
    ]
}

/// A call with one wrong argument fails naming the public function and the argument, and
/// leaves every output unchanged.
fn check_failure(
    s: &flydsl_rt::Stream,
    io: &Io,
    name: &str,
    what: &str,
    r: flydsl_rt::Result<()>,
    needle: &str,
) {
    let e = match r {
        Ok(()) => panic!("{name} with {what} must fail"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.starts_with(&format!("{name}: ")),
        "{what}: the error must name {name}: {e}"
    );
    assert!(
        e.contains(needle),
        "{what}: the error must name {needle}: {e}"
    );
    s.synchronize().unwrap();
    io.assert_untouched(&format!("{name} with {what}"));
}

#[test]
fn failed_forward_calls_leave_outputs_unchanged() {
    let s = sim(Target::Gfx942);
    let other = flydsl_rt::Device::new_sim(Target::Gfx942);
    for (name, args, call) in forward_calls() {
        // The valid call runs (so the failures below are the argument's fault).
        let mut io = Io::new(&s, &other, None);
        call(&s, &mut io, 1e-5).unwrap_or_else(|e| panic!("{name}: {e}"));
        for &arg in args {
            for bad in [Bad::Len(arg), Bad::Device(arg)] {
                let mut io = Io::new(&s, &other, Some(bad));
                let r = call(&s, &mut io, 1e-5);
                check_failure(&s, &io, name, &format!("{bad:?}"), r, &format!("`{arg}`"));
            }
        }
        // Bad parameters: eps of 0, a subnormal (flushed to 0 on GPUs), NaN.
        for eps in [0.0, 1e-40, f32::NAN] {
            let mut io = Io::new(&s, &other, None);
            let r = call(&s, &mut io, eps);
            check_failure(&s, &io, name, &format!("eps = {eps}"), r, "`eps`");
        }
    }
}

#[test]
fn failed_backward_calls_leave_outputs_unchanged() {
    let s = sim(Target::Gfx1201);
    let other = flydsl_rt::Device::new_sim(Target::Gfx1201);
    for (name, args, call) in backward_calls() {
        let mut io = Io::new(&s, &other, None);
        call(&s, &mut io, 3).unwrap_or_else(|e| panic!("{name}: {e}"));
        for &arg in args {
            for bad in [Bad::Len(arg), Bad::Device(arg)] {
                let mut io = Io::new(&s, &other, Some(bad));
                let r = call(&s, &mut io, 3);
                check_failure(&s, &io, name, &format!("{bad:?}"), r, &format!("`{arg}`"));
            }
        }
        // A bad parameter: more rows than the kernels index.
        let mut io = Io::new(&s, &other, None);
        let r = call(&s, &mut io, i32::MAX as usize + 1);
        check_failure(&s, &io, name, "m > i32::MAX", r, "`m`");
        // m = 0 zeroes the weight gradients, but not when another argument is wrong.
        let mut io = Io::rows(&s, &other, Some(Bad::Device("dx")), 0);
        let r = call(&s, &mut io, 0);
        check_failure(&s, &io, name, "m = 0 and dx elsewhere", r, "`dx`");
    }
}

/// Backward plans that do not fit the shape, dtype or device are errors naming the function,
/// the plan and the problem, before any write; every plan of `backward_plans` is accepted.
#[test]
fn bad_backward_plans() {
    let s = sim(Target::Sm90); // wave 32
    let run = |n: usize, p: Plan| {
        let m = 4;
        let (x, dy) = (zeros::<f32>(&s, m * n), zeros::<f32>(&s, m * n));
        let (g, rstd) = (zeros::<f32>(&s, n), zeros::<f32>(&s, m));
        let mut dx = zeros::<f32>(&s, m * n);
        let mut dg = up(&s, &vec![7.0f32; n]);
        let b = BwdBuffers {
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
        let r = norm_bwd_with_plan(&s, Norm::Rms, b, NormBwdArgs::new(m, n), p);
        if r.is_err() {
            assert!(
                dg.to_vec().unwrap().iter().all(|&v| v == 7.0),
                "{p:?} wrote dgamma"
            );
        }
        r
    };
    for n in [1024, 1023] {
        for p in backward_plans(Norm::Rms, 4, n, DType::F32, 32, 4) {
            run(n, p).unwrap_or_else(|e| panic!("n={n} {p:?}: {e}"));
        }
    }
    let lin = |path, grid, block| Plan {
        path,
        cfg: flydsl_rt::LaunchConfig::linear(grid, block),
        lanes: 0,
        keep_l2: false,
    };
    // f32 rows of 1024: 256 vectors.
    for (n, p, want) in [
        (
            1024,
            lin(Path::Fast(3), 4, 128),
            "no rmsnorm backward fast-path kernel with 3 tiles",
        ),
        (
            1024,
            lin(Path::Fast(2), 4, 100),
            "multiple of the wave size 32",
        ),
        (1024, lin(Path::Fast(2), 4, 512), "in 32..=256"),
        (1024, lin(Path::Fast(2), 4, 96), "does not cover a row"),
        (1024, lin(Path::Fast(2), 0, 128), "grid 0"),
        (
            1024,
            lin(Path::Rows(4), 1, 256),
            "the backward has no Rows(4) kernels",
        ),
        (1024, lin(Path::Generic, 4, 128), "exactly 256 threads"),
    ] {
        let e = msg(run(n, p));
        assert!(e.starts_with("fly_norm::norm_bwd_with_plan: `plan`"), "{e}");
        assert!(e.contains(want), "{p:?}: {e}");
    }
    let mut p = lin(Path::Fast(2), 4, 128);
    p.cfg.grid[1] = 2;
    assert!(msg(run(1024, p)).contains("1-D"));
    let mut p = lin(Path::Fast(2), 4, 128);
    p.lanes = 8;
    assert!(msg(run(1024, p)).contains("lanes 8 must be 0"));
}
