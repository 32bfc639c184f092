//! Property tests (issue 12, item 9) of every public function of fly-softmax on the Sim of a
//! wave64 (gfx942) and two wave32 (gfx1201, sm_90) targets: `softmax`, `softmax_with` (the
//! class default, a named candidate of the class, a named configuration that cannot serve the
//! shape, the tuner), `softmax_array`, and the same four for the backward.
//!
//! Generated: shapes (0, 1, odd, primes, both sides of every class of the configuration table
//! and of its rows-per-block), dtypes, argument mistakes (a wrong length or another device for
//! any one buffer, n = 0, m and n past the limits, a variant that cannot serve the call) and
//! value distributions (normal at several scales, huge, tiny, subnormal, NaN/inf mixes
//! including all -inf rows, constant rows, rows with a large mean).
//!
//! Asserted: no panic; an error exactly when the arguments are invalid; on error every output
//! bit-identical to the sentinel it held; otherwise the output within the testutil softmax
//! tolerances of the f64 reference, non-finite rows propagating (a NaN row gives a NaN row;
//! an all -inf row gives NaN as torch or zeros, whichever the crate documents).
//!
//! Seed and case count: printed at the start of each test; `FUZZ_SEED`, `FUZZ_CASES`.

mod fuzz_common;

use fly_softmax::table::{Kind, CONFIGS};
use fly_softmax::{Dispatch, SoftmaxArgs};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::tune::Tuner;
use flydsl_rt::DeviceBuffer;
use flydsl_testutil::rng::Rng;
use flydsl_testutil::softmax as sref;
use fuzz_common::*;
use proptest::prelude::*;
use proptest::sample::select;
use std::collections::BTreeSet;

/// Most elements per tensor of one case (the Sim runs softmax at about 10^4..10^5 elements a
/// second in a debug build).
const BUDGET: usize = 6_000;
/// Longest row generated: every class boundary up to 8192 and the step into the 16384
/// class. The 16384..65536 classes are left to the fixed-shape tests (a row costs seconds
/// on the Sim).
const N_MAX: usize = 8_200;
/// Multiple of the f32 unit roundoff allowed per unit of `|x - rowmax|` in the exponent.
const COND_K: f64 = 16.0;

/// Row lengths on both sides of every class of the configuration table (and a vector width
/// away), up to [`N_MAX`].
fn n_thresholds() -> Vec<usize> {
    let mut set = BTreeSet::new();
    for c in CONFIGS.iter().filter(|c| !c.path.is_loop()) {
        let k = c.class as usize;
        for d in [-8i64, -4, -1, 0, 1, 4, 8] {
            let n = k as i64 + d;
            if n >= 1 && n as usize <= N_MAX {
                set.insert(n as usize);
            }
        }
    }
    set.into_iter().collect()
}

/// Row counts around every rows-per-block of the table.
fn m_thresholds() -> Vec<usize> {
    let mut set = BTreeSet::new();
    for c in CONFIGS {
        let r = c.rows_per_block() as usize;
        set.extend([r.saturating_sub(1), r, r + 1]);
    }
    set.into_iter().collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry {
    /// `softmax` / `softmax_backward`.
    Plain,
    /// `*_with(Dispatch::Default)`.
    Default,
    /// `*_with(Dispatch::Variant(candidate k of the class))`.
    Candidate(u8),
    /// `*_with(Dispatch::Variant(a configuration that cannot serve the call))`.
    WrongVariant(u8),
    /// `*_with(Dispatch::Tuned(&Tuner::global()))`.
    Tuned,
    /// `softmax_array` / `softmax_backward_array`.
    Array,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mistake {
    None,
    Len {
        slot: u8,
        longer: bool,
    },
    Device {
        slot: u8,
    },
    /// m (or n, `wide_n`) past the limits, buffers sized for the real shape.
    Huge {
        value: usize,
        wide_n: bool,
    },
}

#[derive(Clone, Debug)]
struct Case {
    target: usize,
    dt: u8,
    backward: bool,
    entry: Entry,
    m: usize,
    n: usize,
    dist: Dist,
    dy_dist: Dist,
    mistake: Mistake,
    seed: u64,
}

fn dist_strategy() -> impl Strategy<Value = Dist> {
    prop_oneof![
        4 => (-2i8..=2).prop_map(|log_scale| Dist::Normal { log_scale }),
        1 => Just(Dist::Huge),
        1 => Just(Dist::Tiny),
        1 => Just(Dist::Subnormal),
        1 => Just(Dist::Constant),
        3 => (10u8..=40).prop_map(|log_ratio_x10| Dist::LargeMean { log_ratio_x10 }),
        3 => (0u8..=4).prop_map(|kind| Dist::NonFinite { kind }),
    ]
}

fn strategy() -> impl Strategy<Value = Case> {
    let n = prop_oneof![
        2 => select(vec![0usize, 1, 2, 3, 5, 7, 8, 13, 31, 37, 127, 1021, 4099, 8193]),
        4 => select(n_thresholds()),
        2 => 1usize..=1100,
    ];
    let m = prop_oneof![
        2 => select(vec![0usize, 1, 2, 3, 5, 7, 17, 37]),
        2 => select(m_thresholds()),
        1 => 1usize..=70,
    ];
    let entry = prop_oneof![
        3 => Just(Entry::Plain),
        2 => Just(Entry::Default),
        3 => any::<u8>().prop_map(Entry::Candidate),
        1 => any::<u8>().prop_map(Entry::WrongVariant),
        1 => Just(Entry::Tuned),
        1 => Just(Entry::Array),
    ];
    let mistake = prop_oneof![
        8 => Just(Mistake::None),
        2 => (0u8..3, any::<bool>()).prop_map(|(slot, longer)| Mistake::Len { slot, longer }),
        2 => (0u8..3).prop_map(|slot| Mistake::Device { slot }),
        1 => (
            select(vec![usize::MAX, i32::MAX as usize, i32::MAX as usize - 1023, 1 << 40]),
            any::<bool>()
        )
            .prop_map(|(value, wide_n)| Mistake::Huge { value, wide_n }),
    ];
    (
        (0..TARGETS.len(), 0u8..3, any::<bool>(), entry),
        (m, n),
        (dist_strategy(), dist_strategy(), mistake, any::<u64>()),
    )
        .prop_map(
            |((target, dt, backward, entry), (m, n), (dist, dy_dist, mistake, seed))| {
                let m = if m == 0 {
                    0
                } else {
                    m.min((BUDGET / n.max(1)).max(1))
                };
                let mistake = if entry == Entry::Array {
                    Mistake::None
                } else {
                    mistake
                };
                Case {
                    target,
                    dt,
                    backward,
                    entry,
                    m,
                    n,
                    dist,
                    dy_dist,
                    mistake,
                    seed,
                }
            },
        )
}

// Buffer slots: forward x, y; backward y, dy, dx.
const S_IN0: u8 = 0;
const S_IN1: u8 = 1;
const S_OUT: u8 = 2;

fn kind(c: &Case) -> Kind {
    if c.backward {
        Kind::Backward
    } else {
        Kind::Forward
    }
}

/// The configuration name a `Candidate` / `WrongVariant` entry passes, and whether it can
/// serve the call.
fn variant_name<T: Elem>(c: &Case, d: &Devs) -> Option<(String, bool)> {
    let k = kind(c);
    match c.entry {
        Entry::Candidate(i) if c.n >= 1 => {
            let cands = fly_softmax::plan::candidates::<T>(k, &d.dev, c.n);
            let v = cands[i as usize % cands.len()];
            Some((v.name::<T>(), true))
        }
        Entry::Candidate(_) => Some(("softmax_fwd_f32_ls_t256_g256_e0_w0".into(), true)),
        Entry::WrongVariant(i) => Some(match i % 3 {
            // The other direction's default for this n.
            0 => {
                let other = if c.backward {
                    Kind::Forward
                } else {
                    Kind::Backward
                };
                let v = fly_softmax::plan::candidates::<T>(other, &d.dev, c.n.max(1))[0];
                (v.name::<T>(), false)
            }
            // A register-resident configuration too small for n (when one exists).
            1 => {
                let small = fly_softmax::plan::all(k)
                    .into_iter()
                    .find(|v| !v.config.path.is_loop() && !v.supports::<T>(c.n));
                match small {
                    Some(v) => (v.name::<T>(), false),
                    None => ("no_such_kernel".into(), false),
                }
            }
            _ => ("softmax_no_such_kernel".into(), false),
        }),
        _ => None,
    }
}

fn valid(c: &Case, d: &Devs, place_hits: bool, variant_ok: bool) -> bool {
    let _ = d;
    let shape_ok = c.n >= 1 && !matches!(c.mistake, Mistake::Huge { .. });
    // With m = 0 nothing is dispatched, so the named configuration is not consulted.
    shape_ok && !place_hits && (variant_ok || c.m == 0)
}

fn one<T: Elem>(c: &Case, d: &Devs) -> Result<(), String> {
    let (m, n) = (c.m, c.n);
    let mut rng = Rng::new(c.seed);
    let x: Vec<T> = values(c.dist, &mut rng, m, n);
    // Backward: y is a softmax output (rounded to T) of x, dy from its own distribution.
    let (in0, in1): (Vec<T>, Vec<T>) = if c.backward {
        let y = sref::forward(&wide(&x), m, n);
        let y: Vec<T> = y.iter().map(|&v| T::from_f64(v)).collect();
        (y, values(c.dy_dist, &mut rng, m, n))
    } else {
        (x, vec![])
    };
    let variant = variant_name::<T>(c, d);
    let variant_ok = variant.as_ref().is_none_or(|v| v.1);
    let used: &[u8] = if c.backward {
        &[S_IN0, S_IN1, S_OUT]
    } else {
        &[S_IN0, S_OUT]
    };
    let hits = match c.mistake {
        Mistake::Len { slot, .. } | Mistake::Device { slot } => used.contains(&slot),
        _ => false,
    };
    let valid = valid(c, d, hits, variant_ok);
    let dev_of = |slot: u8| match c.mistake {
        Mistake::Device { slot: s } if s == slot => &d.other,
        _ => &d.dev,
    };
    let len_of = |slot: u8, len: usize| match c.mistake {
        Mistake::Len { slot: s, longer } if s == slot => {
            if longer || len == 0 {
                len + 1
            } else {
                len - 1
            }
        }
        _ => len,
    };
    let args = match c.mistake {
        Mistake::Huge {
            value,
            wide_n: false,
        } => SoftmaxArgs { m: value, n },
        Mistake::Huge {
            value,
            wide_n: true,
        } => SoftmaxArgs { m, n: value },
        _ => SoftmaxArgs { m, n },
    };
    let s = &d.stream;

    if c.entry == Entry::Array {
        let a0 = ndarray::Array2::from_shape_vec((m, n), in0.clone()).map_err(|e| e.to_string())?;
        let r = if c.backward {
            let a1 =
                ndarray::Array2::from_shape_vec((m, n), in1.clone()).map_err(|e| e.to_string())?;
            fly_softmax::softmax_backward_array(s, a0.view(), a1.view())
        } else {
            fly_softmax::softmax_array(s, a0.view())
        };
        return match (r, valid) {
            (Ok(out), true) => compare(c, &in0, &in1, &out.iter().copied().collect::<Vec<T>>()),
            (Ok(_), false) => Err("invalid arguments were accepted".into()),
            (Err(e), true) => Err(format!("valid arguments were rejected: {e}")),
            (Err(_), false) => Ok(()),
        };
    }

    let mk = |slot: u8, v: &[T]| -> DeviceBuffer<T> {
        let mut v = v.to_vec();
        v.resize(len_of(slot, v.len()), T::from_f64(0.0));
        up(dev_of(slot), &v)
    };
    let b0 = mk(S_IN0, &in0);
    let b1 = mk(S_IN1, if c.backward { &in1 } else { &in0 });
    let mut out = Out::<T>::new(dev_of(S_OUT), len_of(S_OUT, m * n), 0xC0FFEE);
    let tuner = Tuner::global();
    let dispatch = match (&c.entry, &variant) {
        (_, Some((name, _))) => Dispatch::Variant(name.as_str()),
        (Entry::Tuned, _) => Dispatch::Tuned(tuner),
        _ => Dispatch::Default,
    };
    let r = match (c.backward, c.entry) {
        (false, Entry::Plain) => fly_softmax::softmax(s, &b0, &mut out.buf, args),
        (false, _) => fly_softmax::softmax_with(s, &b0, &mut out.buf, args, dispatch),
        (true, Entry::Plain) => fly_softmax::softmax_backward(s, &b0, &b1, &mut out.buf, args),
        (true, _) => fly_softmax::softmax_backward_with(s, &b0, &b1, &mut out.buf, args, dispatch),
    };
    match (r, valid) {
        (Ok(()), true) => compare(c, &in0, &in1, &out.read()),
        (Ok(()), false) => Err("invalid arguments were accepted".into()),
        (Err(e), true) => Err(format!("valid arguments were rejected: {e}")),
        (Err(_), false) => out.untouched(if c.backward { "dx" } else { "y" }),
    }
}

/// Compare a successful call's output with the f64 reference.
fn compare<T: Elem>(c: &Case, in0: &[T], in1: &[T], out: &[T]) -> Result<(), String> {
    let (m, n) = (c.m, c.n);
    let t = sref::tolerance(T::NAME);
    let got = wide(out);
    let a = wide(in0);
    if !c.backward {
        let want = sref::forward(&a, m, n);
        // An all -inf row: NaN (as torch) or zeros, whichever is documented; either is a
        // visible, not a silently wrong, answer.
        let mut want = want;
        for i in 0..m {
            let row = &a[i * n..(i + 1) * n];
            if row.iter().all(|&v| v == f64::NEG_INFINITY)
                && got[i * n..(i + 1) * n].iter().all(|&v| v == 0.0)
            {
                want[i * n..(i + 1) * n].iter_mut().for_each(|v| *v = 0.0);
            }
        }
        check_rows(
            "y",
            &got,
            &want,
            m,
            n,
            |_| false,
            |i, j, w| {
                let row = &a[i * n..(i + 1) * n];
                let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let rowmax = want[i * n..(i + 1) * n]
                    .iter()
                    .copied()
                    .filter(|v| v.is_finite())
                    .fold(0.0, f64::max);
                let d = (row[j] - mx).abs();
                let d = if d.is_finite() { d } else { 0.0 };
                t.max_abs.min(t.rtol * (w.abs() + rowmax))
                    + COND_K * U32 * (1.0 + d) * w.abs()
                    + T::TINY
            },
        )?;
        // Row sums of finite rows.
        for i in 0..m {
            let w = &want[i * n..(i + 1) * n];
            if w.iter().all(|v| v.is_finite()) {
                let s: f64 = got[i * n..(i + 1) * n].iter().sum();
                if (s - 1.0).abs() > t.row_sum + n as f64 * round_rel::<T>() {
                    return Err(format!("y row {i} sums to {s}, not 1"));
                }
            }
        }
        Ok(())
    } else {
        let dy = wide(in1);
        let want = sref::backward(&a, &dy, m, n);
        check_rows(
            "dx",
            &got,
            &want,
            m,
            n,
            |_| false,
            |i, _, w| {
                let (ys, ds) = (&a[i * n..(i + 1) * n], &dy[i * n..(i + 1) * n]);
                let dot: f64 = ys.iter().zip(ds).map(|(p, q)| p * q).sum();
                // The row's scale: max |y| * (|dy| + |dot|) (cancellation in dy - dot).
                let scale = ys
                    .iter()
                    .zip(ds)
                    .map(|(p, q)| p.abs() * (q.abs() + dot.abs()))
                    .filter(|v| v.is_finite())
                    .fold(0.0, f64::max);
                2.0 * t.bwd_rel * scale + round_rel::<T>() * w.abs() + T::TINY
            },
        )
    }
}

/// Half an ulp of `T`, relative.
fn round_rel<T: Elem>() -> f64 {
    match T::NAME {
        "f32" => 1.0 / 16_777_216.0,
        "f16" => 1.0 / 2048.0,
        _ => 1.0 / 256.0,
    }
}

fn dispatch_dt(c: &Case, d: &Devs) -> Result<(), String> {
    match c.dt {
        0 => one::<f32>(c, d),
        1 => one::<f16>(c, d),
        _ => one::<bf16>(c, d),
    }
}

#[test]
fn fuzz_softmax_forward() {
    let devs = devices();
    run(
        "fuzz_softmax_forward",
        150,
        strategy().prop_map(|c| Case {
            backward: false,
            ..c
        }),
        |c| dispatch_dt(&c, &devs[c.target]),
    );
}

#[test]
fn fuzz_softmax_backward() {
    let devs = devices();
    run(
        "fuzz_softmax_backward",
        150,
        strategy().prop_map(|c| Case {
            backward: true,
            ..c
        }),
        |c| dispatch_dt(&c, &devs[c.target]),
    );
}

/// The n thresholds include both sides of every register-resident class.
#[test]
fn thresholds_cover_every_class() {
    let t = n_thresholds();
    for c in CONFIGS.iter().filter(|c| !c.path.is_loop()) {
        let k = c.class as usize;
        if k < N_MAX {
            assert!(t.contains(&k) && t.contains(&(k + 1)), "class {k}");
        }
    }
}
