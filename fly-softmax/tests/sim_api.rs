//! The public API on the Sim backend: dispatch over odd shapes on every target, long rows,
//! special values, determinism, argument errors, and the ndarray conveniences.

mod common;

use common::{backward_raw, check_bwd, check_fwd, forward, Dt};
use fly_softmax::plan::{candidates, path_for};
use fly_softmax::table::{Kind, Path};
use fly_softmax::{
    softmax, softmax_array, softmax_backward_array, softmax_backward_with, softmax_with, Dispatch,
    SoftmaxArgs,
};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, DeviceBuffer, Target};
use flydsl_testutil::compare::{cast_vec, widen};
use flydsl_testutil::softmax as reference;

const ODD_N: [usize; 8] = [1, 2, 3, 7, 8, 64, 127, 1021];
const ODD_M: [usize; 3] = [0, 1, 37];

fn odd_shapes<T: Dt>() {
    for t in Target::ALL {
        let dev = Device::sim(t);
        for n in ODD_N {
            for m in ODD_M {
                let what = format!("{} {m}x{n} on {t}", T::DTYPE.name());
                check_fwd::<T>(&format!("fwd {what}"), &dev, m, n, Dispatch::Default);
                check_bwd::<T>(&format!("bwd {what}"), &dev, m, n, Dispatch::Default);
            }
        }
    }
}

#[test]
fn odd_shapes_f32_every_target() {
    odd_shapes::<f32>();
}

#[test]
fn odd_shapes_f16_every_target() {
    odd_shapes::<f16>();
}

#[test]
fn odd_shapes_bf16_every_target() {
    odd_shapes::<bf16>();
}

/// The fast path at a large row, once per dtype on different targets (wave64, wave32, warp32).
#[test]
fn big_rows_fast_path() {
    assert_eq!(path_for::<f32>(Kind::Forward, 8192), Path::Vector);
    check_fwd::<f32>(
        "f32 3x8192 gfx942",
        &Device::sim(Target::Gfx942),
        3,
        8192,
        Dispatch::Default,
    );
    check_fwd::<f16>(
        "f16 3x8192 gfx1201",
        &Device::sim(Target::Gfx1201),
        3,
        8192,
        Dispatch::Default,
    );
    check_fwd::<bf16>(
        "bf16 3x8192 sm90",
        &Device::sim(Target::Sm90),
        3,
        8192,
        Dispatch::Default,
    );
    check_bwd::<bf16>(
        "bwd bf16 3x8192 gfx950",
        &Device::sim(Target::Gfx950),
        3,
        8192,
        Dispatch::Default,
    );
    check_bwd::<f32>(
        "bwd f32 2x16384 sm90",
        &Device::sim(Target::Sm90),
        2,
        16384,
        Dispatch::Default,
    );
    // Only y resident (4 units of traffic).
    check_bwd::<bf16>(
        "bwd bf16 2x32768 gfx1250",
        &Device::sim(Target::Gfx1250),
        2,
        32768,
        Dispatch::Default,
    );
}

/// Rows longer than any resident class take the looped paths through the dispatcher.
#[test]
fn long_rows_loop_paths() {
    assert_eq!(path_for::<f32>(Kind::Forward, 33000), Path::LoopVector);
    assert_eq!(path_for::<bf16>(Kind::Forward, 16411), Path::Ragged);
    assert_eq!(path_for::<bf16>(Kind::Forward, 40003), Path::LoopRagged);
    assert_eq!(path_for::<bf16>(Kind::Backward, 65544), Path::LoopVector);
    assert_eq!(path_for::<f32>(Kind::Backward, 40000), Path::LoopVector);
    // Up to 65536 2-byte elements the backward row stays resident (packed y, class 65536).
    assert_eq!(path_for::<bf16>(Kind::Backward, 40000), Path::Vector);
    check_fwd::<f32>(
        "f32 2x33000",
        &Device::sim(Target::Gfx942),
        2,
        33000,
        Dispatch::Default,
    );
    check_fwd::<bf16>(
        "bf16 2x16411",
        &Device::sim(Target::Gfx1201),
        2,
        16411,
        Dispatch::Default,
    );
    check_fwd::<bf16>(
        "bf16 2x40003",
        &Device::sim(Target::Gfx942),
        2,
        40003,
        Dispatch::Default,
    );
    check_bwd::<bf16>(
        "bwd bf16 2x40000",
        &Device::sim(Target::Sm90),
        2,
        40000,
        Dispatch::Default,
    );
    check_bwd::<bf16>(
        "bwd bf16 1x65544",
        &Device::sim(Target::Sm90),
        1,
        65544,
        Dispatch::Default,
    );
    check_bwd::<f32>(
        "bwd f32 1x40000",
        &Device::sim(Target::Gfx942),
        1,
        40000,
        Dispatch::Default,
    );
    check_bwd::<f16>(
        "bwd f16 1x16411",
        &Device::sim(Target::Gfx950),
        1,
        16411,
        Dispatch::Default,
    );
}

/// Rows of NaN, +inf, all -inf, some -inf, and huge spreads, on every path kind.
fn special_values<T: Dt>(t: Target, n: usize, dispatch: Dispatch<'_>) {
    let inf = f32::INFINITY;
    let mut rows: Vec<Vec<f32>> = Vec::new();
    let base: Vec<f32> = (0..n).map(|i| ((i * 37) % 11) as f32 * 0.5 - 2.0).collect();
    let with = |i: usize, v: f32| {
        let mut r = base.clone();
        r[i % n] = v;
        r
    };
    rows.push(base.clone());
    rows.push(with(n / 2, f32::NAN));
    rows.push(with(n - 1, inf));
    rows.push(vec![-inf; n]);
    rows.push(with(0, -inf));
    rows.push(
        base.iter()
            .enumerate()
            .map(|(i, &v)| if i % 3 == 0 { -inf } else { v })
            .collect(),
    );
    rows.push(base.iter().map(|v| v * 1e4).collect());
    let m = rows.len();
    let x: Vec<T> = cast_vec(&rows.concat());
    let dev = Device::sim(t);
    let got = forward(&dev, &x, m, n, dispatch).unwrap();
    let want = reference::forward(&widen(&x), m, n);
    let what = format!("special values {} n={n} on {t}", T::DTYPE.name());
    reference::check_forward(
        &what,
        &got,
        &want,
        m,
        n,
        &reference::tolerance(T::DTYPE.name()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn nan_inf_inputs() {
    for t in [Target::Gfx942, Target::Gfx1201, Target::Sm90] {
        for n in [1, 64, 67, 2048] {
            special_values::<f32>(t, n, Dispatch::Default);
            special_values::<bf16>(t, n, Dispatch::Default);
            special_values::<f16>(t, n, Dispatch::Default);
        }
        special_values::<f32>(
            t,
            1000,
            Dispatch::Variant("softmax_fwd_f32_lv_t256_g256_e0_w0"),
        );
        special_values::<bf16>(
            t,
            1001,
            Dispatch::Variant("softmax_fwd_bf16_ls_t256_g256_e0_w0"),
        );
    }
}

#[test]
fn backward_is_deterministic() {
    let cases: [(Target, usize, usize, Dispatch<'static>); 3] = [
        (Target::Gfx942, 4, 8192, Dispatch::Default),
        (
            Target::Gfx1201,
            3,
            2000,
            Dispatch::Variant("softmax_bwd_bf16_lv_t512_g512_e0_w0"),
        ),
        (Target::Sm90, 37, 127, Dispatch::Default),
    ];
    for (t, m, n, d) in cases {
        let dev = Device::sim(t);
        let y: Vec<bf16> = common::inputs(1, m * n, 0.1);
        let dy: Vec<bf16> = common::inputs(2, m * n, 1.0);
        let a = backward_raw(&dev, &y, &dy, m, n, d).unwrap();
        let b = backward_raw(&dev, &y, &dy, m, n, d).unwrap();
        let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&a),
            bits(&b),
            "backward {m}x{n} on {t} differs between two runs"
        );
    }
}

#[test]
fn empty_batch_is_a_noop() {
    let dev = Device::sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let x = DeviceBuffer::<f32>::zeroed(&dev, 0).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&dev, 0).unwrap();
    softmax_with(
        &s,
        &x,
        &mut y,
        SoftmaxArgs { m: 0, n: 5 },
        Dispatch::Default,
    )
    .unwrap();
    let mut dx = DeviceBuffer::<f32>::zeroed(&dev, 0).unwrap();
    softmax_backward_with(
        &s,
        &x,
        &y,
        &mut dx,
        SoftmaxArgs { m: 0, n: 5 },
        Dispatch::Default,
    )
    .unwrap();
}

fn expect_err(r: flydsl_rt::Result<()>, needles: &[&str]) {
    let e = r.expect_err("the call should have been rejected");
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "error `{msg}` should mention `{n}`");
    }
}

#[test]
fn argument_errors_name_the_value_and_the_fix() {
    let dev = Device::sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let x = DeviceBuffer::<f32>::zeroed(&dev, 12).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&dev, 12).unwrap();
    let mut short = DeviceBuffer::<f32>::zeroed(&dev, 11).unwrap();
    let d = Dispatch::Default;
    expect_err(
        softmax_with(&s, &x, &mut y, SoftmaxArgs { m: 3, n: 0 }, d),
        &["fly_softmax::softmax_with: `n` = 0", "n >= 1"],
    );
    expect_err(
        softmax_with(&s, &x, &mut short, SoftmaxArgs { m: 3, n: 4 }, d),
        &["`y`", "11", "12"],
    );
    expect_err(
        softmax_with(&s, &short, &mut y, SoftmaxArgs { m: 3, n: 4 }, d),
        &["`x`", "11"],
    );
    expect_err(
        softmax_with(&s, &x, &mut y, SoftmaxArgs { m: 0, n: 4 }, d),
        &["m * n"],
    );
    expect_err(
        softmax_with(&s, &x, &mut y, SoftmaxArgs { m: 1, n: 1 << 31 }, d),
        &["`n` = 2147483648", "at most"],
    );
    expect_err(
        softmax_with(
            &s,
            &x,
            &mut y,
            SoftmaxArgs { m: 3, n: 4 },
            Dispatch::Variant("nope"),
        ),
        &["`dispatch` = Dispatch::Variant(\"nope\")", "plan::all"],
    );
    expect_err(
        softmax_with(
            &s,
            &x,
            &mut y,
            SoftmaxArgs { m: 3, n: 4 },
            Dispatch::Variant("softmax_bwd_f32_ls_t256_g256_e0_w0"),
        ),
        &["backward"],
    );
    expect_err(
        softmax_with(
            &s,
            &x,
            &mut y,
            SoftmaxArgs { m: 2, n: 6 },
            Dispatch::Variant("softmax_fwd_f32_v64_t256_g8_e8_w0"),
        ),
        &["n = 6", "multiple of 4"],
    );
    let (a, b) = (
        DeviceBuffer::<f32>::zeroed(&dev, 12).unwrap(),
        DeviceBuffer::<f32>::zeroed(&dev, 12).unwrap(),
    );
    expect_err(
        softmax_backward_with(&s, &a, &b, &mut short, SoftmaxArgs { m: 3, n: 4 }, d),
        &["`dx`"],
    );
    // Buffers of another device.
    let other = Device::new_sim(Target::Gfx942);
    let xo = DeviceBuffer::<f32>::zeroed(&other, 12).unwrap();
    let r = softmax_with(&s, &xo, &mut y, SoftmaxArgs { m: 3, n: 4 }, d);
    // Checked before the launch, naming both devices (ids tell two Sim devices apart).
    let (a, b) = (other.id().to_string(), dev.id().to_string());
    expect_err(
        r,
        &[
            "fly_softmax::softmax_with: `x` lives on Sim device 0",
            &a,
            &b,
        ],
    );
}

#[test]
fn global_entry_points_and_arrays() {
    let dev = Device::sim(Target::Gfx1250);
    let s = dev.stream().unwrap();
    let (m, n) = (5, 48);
    let x: Vec<f32> = common::inputs(9, m * n, 1.0);
    let xd = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut yd = DeviceBuffer::<f32>::zeroed(&dev, m * n).unwrap();
    softmax(&s, &xd, &mut yd, SoftmaxArgs { m, n }).unwrap();
    let want = reference::forward(&widen(&x), m, n);
    reference::check_forward(
        "softmax()",
        &widen(&yd.to_vec().unwrap()),
        &want,
        m,
        n,
        &reference::tolerance("f32"),
    )
    .unwrap();

    let xa = ndarray::Array2::from_shape_vec((m, n), x.clone()).unwrap();
    // A transposed (non-contiguous) view is gathered on the host first.
    let ya = softmax_array(&s, xa.t().t()).unwrap();
    assert_eq!(ya.as_slice().unwrap(), yd.to_vec().unwrap().as_slice());
    let dyv: Vec<f32> = (0..m * n).map(|i| (i % 13) as f32 - 6.0).collect();
    let dy = ndarray::Array2::from_shape_vec((m, n), dyv.clone()).unwrap();
    let dx = softmax_backward_array(&s, ya.view(), dy.view()).unwrap();
    let want = reference::backward(&widen(ya.as_slice().unwrap()), &widen(&dyv), m, n);
    reference::check_backward(
        "array bwd",
        &widen(dx.as_slice().unwrap()),
        &want,
        &reference::tolerance("f32"),
    )
    .unwrap();
    let bad = ndarray::Array2::from_elem((m, n + 1), 1.0f32);
    assert!(softmax_backward_array(&s, ya.view(), bad.view()).is_err());
}

#[test]
fn candidates_start_with_the_default_and_share_a_class() {
    for t in Target::ALL {
        let dev = Device::sim(t);
        for n in [1, 100, 1021, 1024, 5120, 8192, 14336, 32768, 40003, 100000] {
            for kind in [Kind::Forward, Kind::Backward] {
                let c = candidates::<bf16>(kind, &dev, n);
                assert!(
                    c[0].config.default,
                    "{n}: first candidate is not the default"
                );
                // One class of the dispatched path; a ragged path adds the masked scalar
                // path's class as alternatives.
                let scalar = match c[0].config.path {
                    Path::Ragged => Some(Path::Scalar),
                    Path::LoopRagged => Some(Path::LoopScalar),
                    _ => None,
                };
                assert!(c.iter().all(|v| v.supports::<bf16>(n)));
                assert!(c.iter().all(|v| {
                    let same = v.config.path == c[0].config.path;
                    (same && v.config.class == c[0].config.class) || (Some(v.config.path) == scalar)
                }));
                if scalar.is_some() && n <= 16384 {
                    assert!(c.iter().any(|v| Some(v.config.path) == scalar), "{n}");
                }
                assert!(c.iter().all(|v| !v.config.amd_only() || t.is_amd()));
            }
        }
    }
}
