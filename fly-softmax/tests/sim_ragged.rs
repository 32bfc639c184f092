//! The ragged paths (rows whose length is not a multiple of the 128-bit vector width, so row
//! starts are off the 16-byte grid) on the Sim against the f64 reference: the dispatcher's
//! choice, every ragged configuration with rows at every misalignment, and long rows through
//! the looped ragged kernels, forward and backward, f32/f16/bf16, wave64 and wave32.

mod common;

use common::{check_bwd, check_fwd, Dt};
use fly_softmax::plan::{all, candidates, path_for};
use fly_softmax::table::{Kind, Path};
use fly_softmax::{Dispatch, Element};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, Target};

/// Odd row lengths that stay register-resident.
const ODD_N: [usize; 6] = [1, 3, 7, 127, 129, 1021];
/// Wave64 (gfx942), wave32 (gfx1201) and warp32 (sm90).
const TARGETS: [Target; 3] = [Target::Gfx942, Target::Gfx1201, Target::Sm90];

/// `m = 9` rows of an odd `n` start at 9 consecutive residues modulo the vector width (8 at
/// most), so every head length from 0 to `width - 1` occurs; `m = 1` is a row alone.
fn dispatch_odd_n<T: Dt>() {
    let vec = T::DTYPE.vec() as usize;
    for t in TARGETS {
        let dev = Device::sim(t);
        for n in ODD_N {
            let want = if n % vec == 0 {
                Path::Vector
            } else {
                Path::Ragged
            };
            for kind in [Kind::Forward, Kind::Backward] {
                assert_eq!(path_for::<T>(kind, n), want, "{} n = {n}", T::DTYPE);
                assert_eq!(candidates::<T>(kind, &dev, n)[0].config.path, want);
            }
            for m in [1, 9] {
                let what = format!("{} {m}x{n} on {t}", T::DTYPE.name());
                check_fwd::<T>(&format!("fwd {what}"), &dev, m, n, Dispatch::Default);
                check_bwd::<T>(&format!("bwd {what}"), &dev, m, n, Dispatch::Default);
            }
        }
    }
}

#[test]
fn dispatch_odd_n_f32() {
    dispatch_odd_n::<f32>();
}

#[test]
fn dispatch_odd_n_f16() {
    dispatch_odd_n::<f16>();
}

#[test]
fn dispatch_odd_n_bf16() {
    dispatch_odd_n::<bf16>();
}

/// Every ragged configuration (resident and looped) at a row one short of its class (a
/// looped one: a few block strides plus an odd remainder), rows at every misalignment, on a
/// wave64 and a wave32 target (large classes on one target per dtype, rotating).
fn every_ragged_variant<T: Dt>(kind: Kind, rotate: usize) {
    let vec = T::DTYPE.vec() as usize;
    let mut checked = 0;
    for v in all(kind) {
        let c = v.config;
        if !c.path.is_ragged() || !c.serves(T::DTYPE) {
            continue;
        }
        let n = match c.path {
            Path::Ragged => c.class as usize - 1,
            _ => 2 * c.threads as usize * vec + 3 * vec + 5,
        };
        assert!(v.supports::<T>(n) && n % vec != 0);
        let (m, targets) = if n > 4096 {
            (vec + 1, vec![TARGETS[(rotate + checked) % TARGETS.len()]])
        } else {
            (vec + 1, vec![Target::Gfx942, Target::Gfx1201])
        };
        let name = v.name::<T>();
        for t in targets {
            let what = format!("{name} on {t} ({m}x{n})");
            let dev = Device::sim(t);
            match kind {
                Kind::Forward => check_fwd::<T>(&what, &dev, m, n, Dispatch::Variant(&name)),
                Kind::Backward => check_bwd::<T>(&what, &dev, m, n, Dispatch::Variant(&name)),
            }
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} ragged {kind:?} variants");
}

#[test]
fn every_ragged_forward_variant_f32() {
    every_ragged_variant::<f32>(Kind::Forward, 0);
}

#[test]
fn every_ragged_forward_variant_bf16() {
    every_ragged_variant::<bf16>(Kind::Forward, 1);
}

#[test]
fn every_ragged_forward_variant_f16() {
    every_ragged_variant::<f16>(Kind::Forward, 2);
}

#[test]
fn every_ragged_backward_variant_f32() {
    every_ragged_variant::<f32>(Kind::Backward, 1);
}

#[test]
fn every_ragged_backward_variant_bf16() {
    every_ragged_variant::<bf16>(Kind::Backward, 2);
}

#[test]
fn every_ragged_backward_variant_f16() {
    every_ragged_variant::<f16>(Kind::Backward, 0);
}

/// Long odd rows through the dispatcher: just below and above the largest resident ragged
/// class (32768), and a vocabulary-sized row (150001) on the looped ragged path.
#[test]
fn long_odd_rows() {
    assert_eq!(path_for::<bf16>(Kind::Forward, 32767), Path::Ragged);
    assert_eq!(path_for::<bf16>(Kind::Forward, 32769), Path::LoopRagged);
    assert_eq!(path_for::<f32>(Kind::Backward, 150_001), Path::LoopRagged);
    for (i, &(m, n)) in [(2, 32767), (3, 32769), (2, 150_001)].iter().enumerate() {
        let t = |k: usize| Device::sim(TARGETS[(i + k) % TARGETS.len()]);
        check_fwd::<bf16>(&format!("fwd bf16 {m}x{n}"), &t(0), m, n, Dispatch::Default);
        check_fwd::<f32>(&format!("fwd f32 {m}x{n}"), &t(1), m, n, Dispatch::Default);
        check_bwd::<f16>(&format!("bwd f16 {m}x{n}"), &t(2), m, n, Dispatch::Default);
        check_bwd::<f32>(&format!("bwd f32 {m}x{n}"), &t(0), m, n, Dispatch::Default);
    }
}

/// A ragged row's head and tail are each fewer than a vector (at most 7 elements) and owned
/// one element per lane, so every ragged configuration needs at least 8 threads per row.
#[test]
fn ragged_rows_have_a_lane_per_edge_element() {
    let widest = [f32::DTYPE, f16::DTYPE, bf16::DTYPE]
        .iter()
        .map(|d| d.vec())
        .max()
        .unwrap();
    for kind in [Kind::Forward, Kind::Backward] {
        let ragged: Vec<_> = all(kind)
            .into_iter()
            .filter(|v| v.config.path.is_ragged())
            .collect();
        assert!(!ragged.is_empty());
        for v in ragged {
            assert!(v.config.group >= widest, "{:?}", v.config);
        }
    }
}
