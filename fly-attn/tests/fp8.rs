//! fp8 e4m3fn inputs with per-tensor descales (`flash_attn_fp8_fwd`,
//! `flash_attn_varlen_fp8_fwd`) on the Sim of every target (the portable kernel's fp8
//! variants exist on all five) against the f64 reference on the dequantized inputs, with
//! the fp8 tolerances of `flydsl_testutil::attn` (max abs < 5e-2, row cosine > 0.98; LSE as
//! bf16). out and the LSE start as NaN sentinels. Then bad input: nothing is written.

mod common;

use common::Got;
use fly_attn::{
    flash_attn_fp8_fwd, flash_attn_fp8_fwd_with, flash_attn_varlen_fp8_fwd,
    flash_attn_varlen_fp8_fwd_with, AttnArgs, AttnKernel, CuSeqlens, Fp8Descales, VarlenArgs,
};
use flydsl_rt::half::bf16;
use flydsl_rt::sim::fp8::{e4m3fn_to_f32, f32_to_e4m3fn};
use flydsl_rt::{Device, DeviceBuffer, Result, Target, F8E4M3FN};
use flydsl_testutil::attn::{assert_lse, assert_out_dtype, attn_ref, AttnShape};
use flydsl_testutil::compare::widen;
use flydsl_testutil::rng::Rng;

fn on_all(f: impl Fn(&Device)) {
    for t in Target::ALL {
        f(&Device::sim(t));
    }
}

/// One quantized tensor: its codes and descale.
struct Q8 {
    codes: Vec<F8E4M3FN>,
    descale: f32,
}

impl Q8 {
    /// `randn` values quantized per tensor with `descale` (`None`: amax / 448).
    fn randn(r: &mut Rng, n: usize, descale: Option<f32>) -> Q8 {
        let x = r.randn(n);
        let amax = x.iter().fold(0f32, |a, &b| a.max(b.abs()));
        let descale = descale.unwrap_or(if amax > 0.0 { amax / 448.0 } else { 1.0 });
        let codes = x
            .iter()
            .map(|&v| F8E4M3FN(f32_to_e4m3fn(v / descale)))
            .collect();
        Q8 { codes, descale }
    }
    /// The real values (f64: code * descale).
    fn real(&self) -> Vec<f64> {
        self.codes
            .iter()
            .map(|c| f64::from(e4m3fn_to_f32(c.0)) * f64::from(self.descale))
            .collect()
    }
}

struct Inputs {
    q: Q8,
    k: Q8,
    v: Q8,
}

fn inputs(s: &AttnShape, seed: u64, descales: Option<[f32; 3]>) -> Inputs {
    let mut r = Rng::new(seed);
    let d = |i: usize| descales.map(|d| d[i]);
    Inputs {
        q: Q8::randn(&mut r, s.q_len(), d(0)),
        k: Q8::randn(&mut r, s.kv_len(), d(1)),
        v: Q8::randn(&mut r, s.kv_len(), d(2)),
    }
}

/// Run `s` on `dev` (dense or varlen by the shape) on `kernel`; out and LSE start as NaN
/// (an empty `Got::lse` without the LSE, whose sentinel buffer must stay untouched).
fn run(
    dev: &Device,
    s: &AttnShape,
    x: &Inputs,
    splits: Option<usize>,
    kernel: AttnKernel,
    with_lse: bool,
) -> Result<Got> {
    let st = dev.stream()?;
    let up = |q: &Q8| DeviceBuffer::from_slice(dev, &q.codes);
    let (qd, kd, vd) = (up(&x.q)?, up(&x.k)?, up(&x.v)?);
    let sc = |q: &Q8| DeviceBuffer::from_slice(dev, &[q.descale]);
    let (dq, dk, dv) = (sc(&x.q)?, sc(&x.k)?, sc(&x.v)?);
    let d = Fp8Descales {
        q: &dq,
        k: &dk,
        v: &dv,
    };
    let mut out = DeviceBuffer::from_slice(dev, &vec![bf16::NAN; s.q_len()])?;
    let mut lse_buf = DeviceBuffer::from_slice(dev, &vec![f32::NAN; s.lse_len()])?;
    let lse = with_lse.then_some(&mut lse_buf);
    match &s.cu_seqlens {
        None => {
            let a = common::dense_args(s, splits);
            if kernel == AttnKernel::Auto {
                flash_attn_fp8_fwd(&st, &qd, &kd, &vd, d, &mut out, lse, &a)?;
            } else {
                flash_attn_fp8_fwd_with(&st, &qd, &kd, &vd, d, &mut out, lse, &a, kernel)?;
            }
        }
        Some((cq, ck)) => {
            let a = common::varlen_args(s, splits);
            let ckd = DeviceBuffer::from_slice(dev, ck)?;
            let (cq, ck) = (CuSeqlens::Host(cq), CuSeqlens::Device(&ckd));
            if kernel == AttnKernel::Auto {
                flash_attn_varlen_fp8_fwd(&st, &qd, &kd, &vd, d, &mut out, lse, cq, ck, &a)?;
            } else {
                flash_attn_varlen_fp8_fwd_with(
                    &st, &qd, &kd, &vd, d, &mut out, lse, cq, ck, &a, kernel,
                )?;
            }
        }
    }
    let lse = if with_lse {
        lse_buf.to_vec()?.into_iter().map(f64::from).collect()
    } else {
        assert!(lse_buf.to_vec()?.iter().all(|x| x.is_nan()), "LSE written");
        Vec::new()
    };
    Ok(Got {
        out: widen(&out.to_vec()?),
        lse,
    })
}

/// Run and compare with the reference on the dequantized inputs.
fn check_x(dev: &Device, s: &AttnShape, x: &Inputs, splits: Option<usize>, with_lse: bool) -> Got {
    let got = run(dev, s, x, splits, AttnKernel::Auto, with_lse)
        .unwrap_or_else(|e| panic!("{s:?} on {}: {e}", dev.target()));
    let want = attn_ref(s, &x.q.real(), &x.k.real(), &x.v.real());
    let what = format!("fp8 {} {s:?} splits {splits:?}", dev.target());
    assert_out_dtype(&what, "fp8", &got.out, &want.out, s.head_dim);
    if with_lse {
        assert_lse(&what, "fp8", &got.lse, &want.lse);
    }
    got
}

fn check(dev: &Device, s: &AttnShape, splits: Option<usize>, seed: u64) -> Got {
    check_x(dev, s, &inputs(s, seed, None), splits, true)
}

#[test]
fn ragged_lengths_both_ways() {
    let cases = [(1, 1), (17, 65), (65, 17), (129, 33)];
    on_all(|dev| {
        for (i, &(sq, skv)) in cases.iter().enumerate() {
            check(
                dev,
                &AttnShape::dense(1, sq, skv, 1, 1, 64, false),
                Some(1),
                i as u64,
            );
        }
    });
}

#[test]
fn causal_gqa_mqa_and_fully_masked_rows() {
    on_all(|dev| {
        // GQA, causal with Sq > Skv: the first 48 queries see no key (zeros, LSE -inf).
        let s = AttnShape::dense(1, 65, 17, 4, 2, 64, true);
        let got = check(dev, &s, Some(1), 11);
        assert!(got.lse.contains(&f64::NEG_INFINITY));
        assert!(got.out.iter().all(|x| x.is_finite()));
        // MQA at D = 128, causal with Sq < Skv, without the LSE.
        let s = AttnShape::dense(1, 33, 129, 2, 1, 128, true);
        check_x(dev, &s, &inputs(&s, 12, None), Some(1), false);
    });
}

#[test]
fn descales_other_than_one() {
    on_all(|dev| {
        let s = AttnShape::dense(1, 17, 65, 1, 1, 64, false);
        check_x(
            dev,
            &s,
            &inputs(&s, 21, Some([0.03, 7.5, 0.5])),
            Some(1),
            true,
        );
        let s = AttnShape::dense(1, 33, 33, 1, 1, 64, true);
        check_x(
            dev,
            &s,
            &inputs(&s, 22, Some([7.5, 0.03, 7.5])),
            Some(2),
            true,
        );
    });
}

#[test]
fn varlen_zero_length_and_split_k_equals_unsplit() {
    on_all(|dev| {
        let s = AttnShape::varlen(&[17, 0, 65, 1], &[33, 5, 0, 63], 2, 1, 64, false);
        let x = inputs(&s, 31, None);
        let one = check_x(dev, &s, &x, Some(1), true);
        assert!(one.lse.contains(&f64::NEG_INFINITY));
        let three = check_x(dev, &s, &x, Some(3), true);
        let what = format!("{} fp8 varlen splits 3 vs 1", dev.target());
        assert_out_dtype(&what, "fp8", &three.out, &one.out, 64);
        // Dense split-K with the automatic choice (the Sim device splits small shapes).
        check(dev, &AttnShape::dense(1, 17, 257, 1, 1, 64, true), None, 32);
    });
}

#[test]
fn wider_head_dims() {
    // D = 96 (the 128 tile, zero-padded) and D = 256 (two O passes on gfx1201; sm90's LDS
    // without padding).
    check(
        &Device::sim(Target::Gfx942),
        &AttnShape::dense(1, 33, 17, 1, 1, 96, false),
        Some(1),
        41,
    );
    for t in [Target::Gfx1201, Target::Sm90] {
        check(
            &Device::sim(t),
            &AttnShape::dense(1, 17, 33, 1, 1, 256, true),
            Some(1),
            42,
        );
    }
}

#[test]
fn bad_input_writes_nothing() {
    let dev = Device::sim(Target::Sm90);
    let other = Device::new_sim(Target::Sm90);
    let st = dev.stream().unwrap();
    let a = AttnArgs::new(1, 2, 1, 64);
    let x = DeviceBuffer::from_slice(&dev, &[F8E4M3FN::from_bits(0x38); 128]).unwrap();
    let one = DeviceBuffer::from_slice(&dev, &[1.0f32]).unwrap();
    let two = DeviceBuffer::from_slice(&dev, &[1.0f32, 1.0]).unwrap();
    let far = DeviceBuffer::from_slice(&other, &[1.0f32]).unwrap();
    let sentinel = bf16::from_f32(7.0);
    let mut out = DeviceBuffer::from_slice(&dev, &[sentinel; 128]).unwrap();
    let mut lse = DeviceBuffer::from_slice(&dev, &[7.0f32; 2]).unwrap();
    let cases: [(Fp8Descales, AttnKernel, &str); 5] = [
        (
            Fp8Descales {
                q: &two,
                k: &one,
                v: &one,
            },
            AttnKernel::Auto,
            "`descales.q`",
        ),
        (
            Fp8Descales {
                q: &one,
                k: &one,
                v: &two,
            },
            AttnKernel::Portable,
            "`descales.v`",
        ),
        (
            Fp8Descales {
                q: &one,
                k: &far,
                v: &one,
            },
            AttnKernel::Auto,
            "`descales.k`",
        ),
        (
            Fp8Descales {
                q: &one,
                k: &one,
                v: &one,
            },
            AttnKernel::Hopper,
            "16-bit only",
        ),
        (
            Fp8Descales {
                q: &one,
                k: &one,
                v: &one,
            },
            AttnKernel::Hopper,
            "fly_attn::flash_attn_fp8_fwd_with",
        ),
    ];
    for (d, kernel, want) in cases {
        let e = flash_attn_fp8_fwd_with(&st, &x, &x, &x, d, &mut out, Some(&mut lse), &a, kernel)
            .expect_err(want)
            .to_string();
        assert!(e.contains(want), "{e}");
        assert!(out.to_vec().unwrap().iter().all(|&y| y == sentinel), "{e}");
        assert!(lse.to_vec().unwrap().iter().all(|&y| y == 7.0), "{e}");
    }
    // q of the wrong length; varlen with a bad descale, and with Hopper pinned.
    let short = DeviceBuffer::from_slice(&dev, &[F8E4M3FN::from_bits(0x38); 64]).unwrap();
    let d = Fp8Descales {
        q: &one,
        k: &one,
        v: &one,
    };
    let e = flash_attn_fp8_fwd(&st, &short, &x, &x, d, &mut out, None, &a)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fly_attn::flash_attn_fp8_fwd") && e.contains("`q`"),
        "{e}"
    );
    let va = VarlenArgs {
        max_seqlen_q: 2,
        max_seqlen_kv: 2,
        heads_q: 1,
        heads_kv: 1,
        head_dim: 64,
        causal: false,
        softmax_scale: None,
        num_kv_splits: None,
    };
    let cu = [0, 2];
    let bad = Fp8Descales { v: &far, ..d };
    let e = flash_attn_varlen_fp8_fwd(
        &st,
        &x,
        &x,
        &x,
        bad,
        &mut out,
        None,
        CuSeqlens::Host(&cu),
        CuSeqlens::Host(&cu),
        &va,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("fly_attn::flash_attn_varlen_fp8_fwd") && e.contains("`descales.v`"),
        "{e}"
    );
    let e = flash_attn_varlen_fp8_fwd_with(
        &st,
        &x,
        &x,
        &x,
        d,
        &mut out,
        None,
        CuSeqlens::Host(&cu),
        CuSeqlens::Host(&cu),
        &va,
        AttnKernel::Hopper,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("16-bit only"), "{e}");
    assert!(out.to_vec().unwrap().iter().all(|&y| y == sentinel));
}

#[test]
fn the_comparison_catches_a_missing_descale() {
    // Not vacuous: the result against a reference that ignores v's descale fails.
    let dev = Device::sim(Target::Gfx950);
    let s = AttnShape::dense(1, 17, 33, 1, 1, 64, false);
    let x = inputs(&s, 51, Some([0.03, 0.03, 0.5]));
    let got = run(&dev, &s, &x, Some(1), AttnKernel::Auto, false).unwrap();
    let v1: Vec<f64> = x.v.real().iter().map(|y| y / 0.5).collect();
    let want = attn_ref(&s, &x.q.real(), &x.k.real(), &v1);
    let r = flydsl_testutil::attn::check_out(&got.out, &want.out, 64);
    assert!(!r.pass_with(5e-2, 0.98), "{r:?}");
}

#[test]
fn every_e4m3fn_code_converts_exactly() {
    // D = 256 (gfx1250: the integer decode) and 2 heads of D = 128 (the hardware unpack
    // on every AMD target, gfx942's FNUZ one with its fix-ups; the integer decode on sm90).
    let shapes = [
        AttnShape::dense(1, 1, 1, 1, 1, 256, false),
        AttnShape::dense(1, 1, 1, 2, 2, 128, false),
    ];
    on_all(|dev| {
        for s in &shapes {
            codes_pass_exactly(dev, s);
        }
    });
}

/// One query on one key: out = v * v_descale exactly (p = 1). v's 256 values are every
/// code, so every e4m3fn value (subnormals, -0, the NaNs) crosses the kernel's conversion;
/// q and k (every code but the NaNs) only feed the single logit.
fn codes_pass_exactly(dev: &Device, s: &AttnShape) {
    let codes: Vec<F8E4M3FN> = (0..=255u8).map(F8E4M3FN).collect();
    let q8 = |descale, nan: bool| Q8 {
        codes: codes
            .iter()
            .map(|&c| {
                if c.0 & 0x7F == 0x7F && !nan {
                    F8E4M3FN(0)
                } else {
                    c
                }
            })
            .collect(),
        descale,
    };
    let x = Inputs {
        q: q8(1e-3, false),
        k: q8(1e-3, false),
        v: q8(1.0, true),
    };
    let got = run(dev, s, &x, Some(1), AttnKernel::Auto, true).unwrap();
    let t = dev.target();
    for (c, (&g, w)) in got.out.iter().zip(x.v.real()).enumerate() {
        let same = if w.is_nan() { g.is_nan() } else { g == w };
        assert!(same, "{t} {s:?}: code {c:#04x} gave {g}, want {w}");
    }
    assert!(got.lse.iter().all(|l| l.is_finite()), "{t}: {:?}", got.lse);
}
