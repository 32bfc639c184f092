//! Split rows (`Path::Split`: few long rows cut into chunks over several blocks, two kernels
//! and an f32 workspace) on the Sim against the f64 reference: the dispatcher's rule at its
//! thresholds, the split kernels at ragged and aligned row lengths around the chunking
//! thresholds, a row alone, forward and backward, f32/f16/bf16, wave64 and wave32.

mod common;

use common::{check_bwd, check_fwd, Dt};
use fly_softmax::plan::{candidates_for, split_variant, MIN_CHUNK, SPLIT_ROWS_PER_CU};
use fly_softmax::split::SplitPlan;
use fly_softmax::table::{Kind, Path};
use fly_softmax::Dispatch;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, Target};

const TARGETS: [Target; 3] = [Target::Gfx942, Target::Gfx1201, Target::Sm90];

/// Row lengths: tiny and odd (one chunk with a head and a tail and no body, or a short
/// body), around one and two [`MIN_CHUNK`]s (the chunk count steps there), a ragged row of a
/// few chunks and a vocabulary-sized one.
const N: [usize; 12] = [
    1, 3, 7, 127, 129, 1021, 8191, 16383, 16384, 16385, 32769, 150_001,
];

fn split_kernels<T: Dt>(rotate: usize) {
    for kind in [Kind::Forward, Kind::Backward] {
        let v = split_variant(kind);
        let name = v.name::<T>();
        for (i, n) in N.into_iter().enumerate() {
            let ms: &[usize] = if n > 20_000 { &[1, 2] } else { &[1, 2, 9] };
            let t = TARGETS[(i + rotate) % TARGETS.len()];
            let dev = Device::sim(t);
            let plan = SplitPlan::new::<T>(&v, dev.compute_units(), 1, n);
            if n >= 2 * MIN_CHUNK {
                assert!(plan.chunks >= 2, "{n}: {plan:?}");
            }
            for &m in ms {
                let what = format!("{name} on {t} ({m}x{n}, {plan:?})");
                match kind {
                    Kind::Forward => check_fwd::<T>(&what, &dev, m, n, Dispatch::Variant(&name)),
                    Kind::Backward => check_bwd::<T>(&what, &dev, m, n, Dispatch::Variant(&name)),
                }
            }
        }
    }
}

#[test]
fn split_kernels_f32() {
    split_kernels::<f32>(0);
}

#[test]
fn split_kernels_f16() {
    split_kernels::<f16>(1);
}

#[test]
fn split_kernels_bf16() {
    split_kernels::<bf16>(2);
}

/// The dispatcher splits few rows too long for registers, up to `SPLIT_ROWS_PER_CU` rows per
/// compute unit, and keeps split rows as the tuner's last candidate where the rows fit in
/// registers.
#[test]
fn dispatch_rule_at_its_thresholds() {
    for t in TARGETS {
        let dev = Device::sim(t);
        let limit = SPLIT_ROWS_PER_CU * dev.compute_units() as usize;
        let path = |kind, m, n| candidates_for::<bf16>(kind, &dev, m, n)[0].config.path;
        for kind in [Kind::Forward, Kind::Backward] {
            assert_eq!(path(kind, 1, 150_001), Path::Split);
            assert_eq!(path(kind, limit - 1, 150_001), Path::Split);
            assert_eq!(path(kind, limit, 150_001), Path::LoopRagged);
            assert_eq!(path(kind, 1, 200_000), Path::Split);
            assert_eq!(path(kind, limit, 200_000), Path::LoopVector);
            // Rows that fit in registers: split only as the last alternative.
            let c = candidates_for::<bf16>(kind, &dev, 2, 16_385);
            assert_eq!(c[0].config.path, Path::Ragged);
            assert_eq!(c.last().unwrap().config.path, Path::Split);
            // Rows too short for two chunks never split.
            assert!(candidates_for::<bf16>(kind, &dev, 2, 2 * MIN_CHUNK - 1)
                .iter()
                .all(|v| v.config.path != Path::Split));
        }
    }
}

/// Through the default dispatch: split rows at one and two rows, and just below the row
/// threshold on the target with the fewest compute units (gfx1201: 64, so 127 rows).
#[test]
fn default_dispatch_splits_few_long_rows() {
    let dev = Device::sim(Target::Gfx942);
    for m in [1, 2] {
        check_fwd::<bf16>(
            &format!("fwd bf16 {m}x40003"),
            &dev,
            m,
            40_003,
            Dispatch::Default,
        );
        check_fwd::<f32>(
            &format!("fwd f32 {m}x40000"),
            &dev,
            m,
            40_000,
            Dispatch::Default,
        );
        check_bwd::<bf16>(
            &format!("bwd bf16 {m}x65537"),
            &dev,
            m,
            65_537,
            Dispatch::Default,
        );
        check_bwd::<f32>(
            &format!("bwd f32 {m}x40001"),
            &dev,
            m,
            40_001,
            Dispatch::Default,
        );
    }
    let dev = Device::sim(Target::Gfx1201);
    let m = SPLIT_ROWS_PER_CU * dev.compute_units() as usize - 1;
    let n = 40_001;
    for kind in [Kind::Forward, Kind::Backward] {
        let path = candidates_for::<f32>(kind, &dev, m, n)[0].config.path;
        assert_eq!(path, Path::Split);
    }
    check_fwd::<f16>(&format!("fwd f16 {m}x{n}"), &dev, m, n, Dispatch::Default);
    check_bwd::<f32>(&format!("bwd f32 {m}x{n}"), &dev, m, n, Dispatch::Default);
}

/// Rows far below zero: a chunk's last loop step reaches past the row's body, and those
/// tiles (read as 0) must not raise the running max (exp of every element would underflow).
#[test]
fn rows_far_below_zero() {
    use flydsl_testutil::compare::widen;
    use flydsl_testutil::softmax as reference;
    let dev = Device::sim(Target::Gfx1201);
    let name = split_variant(Kind::Forward).name::<f32>();
    for n in [2 * MIN_CHUNK + 5, 3 * MIN_CHUNK - 1000] {
        let m = 2;
        let x: Vec<f32> = common::inputs::<f32>(n as u64, m * n, 1.0)
            .into_iter()
            .map(|v| v - 1000.0)
            .collect();
        let got = common::forward(&dev, &x, m, n, Dispatch::Variant(&name)).unwrap();
        let want = reference::forward(&widen(&x), m, n);
        let tol = reference::tolerance("f32");
        reference::check_forward(&format!("{name} {m}x{n}"), &got, &want, m, n, &tol).unwrap();
    }
}
