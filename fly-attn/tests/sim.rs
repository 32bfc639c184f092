//! The portable kernel on the Sim of every target (wave64 gfx942/gfx950, wave32
//! gfx1201/gfx1250, sm90; memcheck, racecheck and initcheck on by default) against the f64
//! reference with the kernels.md tolerances, at small ragged shapes.

mod common;

use common::{check, inputs, run, Dt};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, Target};
use flydsl_testutil::attn::{assert_out, attn_ref, AttnShape};
use flydsl_testutil::compare::widen;

fn on_all(f: impl Fn(&Device)) {
    for t in Target::ALL {
        f(&Device::sim(t));
    }
}

#[test]
fn ragged_lengths_both_dtypes() {
    // Sequence lengths around the 32-key and 64-query tiles; Sq != Skv both ways.
    let cases = [
        (1, 1),
        (17, 33),
        (33, 17),
        (63, 65),
        (65, 63),
        (127, 129),
        (129, 1),
    ];
    on_all(|dev| {
        for (i, &(sq, skv)) in cases.iter().enumerate() {
            let s = AttnShape::dense(1, sq, skv, 2, 2, 64, false);
            if i % 2 == 0 {
                check::<bf16>(dev, &s, Some(1), i as u64);
            } else {
                check::<f16>(dev, &s, Some(1), i as u64);
            }
        }
    });
}

#[test]
fn causal_bottom_right_including_fully_masked_rows() {
    on_all(|dev| {
        // Sq > Skv: the first Sq - Skv queries see no key (zeros, LSE -inf).
        let s = AttnShape::dense(2, 65, 17, 2, 1, 64, true);
        let got = check::<bf16>(dev, &s, Some(1), 11);
        assert!(got.lse.contains(&f64::NEG_INFINITY));
        assert!(got.out.iter().all(|x| x.is_finite()));
        check::<f16>(
            dev,
            &AttnShape::dense(1, 33, 129, 2, 2, 64, true),
            Some(1),
            12,
        );
        check::<bf16>(
            dev,
            &AttnShape::dense(1, 63, 63, 1, 1, 128, true),
            Some(1),
            13,
        );
    });
}

#[test]
fn gqa_and_mqa() {
    on_all(|dev| {
        check::<bf16>(
            dev,
            &AttnShape::dense(2, 17, 33, 4, 2, 64, false),
            Some(1),
            21,
        );
        check::<f16>(
            dev,
            &AttnShape::dense(1, 33, 65, 4, 1, 64, true),
            Some(1),
            22,
        );
    });
}

#[test]
fn every_head_dim() {
    // Every multiple of 32 up to 256 (the tiles 64/128/256 and the zero-padded dims).
    on_all(|dev| {
        for (i, d) in (32..=256).step_by(32).enumerate() {
            let s = AttnShape::dense(1, 17, 33, 1, 1, d, i % 2 == 1);
            check::<bf16>(dev, &s, Some(1), 30 + i as u64);
        }
    });
}

#[test]
fn softmax_scale_and_wide_logits() {
    on_all(|dev| {
        // A large scale makes logits span hundreds: exact online rescaling, no NaN.
        let mut s = AttnShape::dense(1, 33, 65, 1, 1, 64, false);
        s.scale = Some(2.0);
        check::<bf16>(dev, &s, Some(1), 41);
        s.causal = true;
        check::<f16>(dev, &s, Some(2), 42);
    });
}

#[test]
fn split_k_equals_unsplit() {
    on_all(|dev| {
        let s = AttnShape::dense(1, 33, 129, 2, 1, 64, false);
        let one = check::<bf16>(dev, &s, Some(1), 51);
        for n in [2, 3, 5] {
            let got = check::<bf16>(dev, &s, Some(n), 51);
            assert_out(
                &format!("{} splits {n} vs 1", dev.target()),
                &got.out,
                &one.out,
                64,
            );
        }
        // Causal with more splits than some q tiles have key tiles: empty splits combine.
        check::<f16>(
            dev,
            &AttnShape::dense(1, 65, 65, 1, 1, 64, true),
            Some(4),
            52,
        );
        // Automatic choice (the Sim device reports the product's CU count: small shapes split).
        check::<bf16>(dev, &AttnShape::dense(1, 17, 257, 1, 1, 64, true), None, 53);
    });
}

#[test]
fn varlen_with_zero_length_sequences() {
    on_all(|dev| {
        let s = AttnShape::varlen(&[17, 0, 65, 1], &[33, 5, 0, 63], 2, 1, 64, false);
        let got = check::<bf16>(dev, &s, Some(1), 61);
        // Sequence 2 has queries but no keys: zeros and LSE -inf.
        assert!(got.lse.contains(&f64::NEG_INFINITY));
        let s = AttnShape::varlen(&[17, 0, 65, 1], &[33, 5, 0, 63], 2, 2, 64, true);
        check::<f16>(dev, &s, Some(3), 62);
    });
}

#[test]
fn results_do_not_depend_on_the_device_layout_of_inputs() {
    // Dense call == varlen call with uniform lengths (same packed memory), LSE re-indexed.
    let dev = Device::sim(Target::Gfx942);
    let dense = AttnShape::dense(2, 17, 33, 2, 1, 64, true);
    let var = AttnShape::varlen(&[17, 17], &[33, 33], 2, 1, 64, true);
    let (q, k, v) = inputs::<bf16>(&dense, 71, 1.0);
    let a = run(&dev, &dense, &q, &k, &v, Some(1)).unwrap();
    let b = run(&dev, &var, &q, &k, &v, Some(1)).unwrap();
    assert_eq!(a.out, b.out);
    for bi in 0..2 {
        for h in 0..2 {
            for i in 0..17 {
                assert_eq!(
                    a.lse[dense.lse_index(bi, h, i)],
                    b.lse[var.lse_index(bi, h, i)]
                );
            }
        }
    }
}

#[test]
fn the_comparison_catches_a_wrong_mask() {
    // The check is not vacuous: a causal result compared against the non-causal reference
    // fails.
    fn wrong<T: Dt>(dev: &Device) -> bool {
        let s = AttnShape::dense(1, 33, 33, 1, 1, 64, true);
        let (q, k, v) = inputs::<T>(&s, 81, 1.0);
        let got = run(dev, &s, &q, &k, &v, Some(1)).unwrap();
        let mut nc = s.clone();
        nc.causal = false;
        let want = attn_ref(&nc, &widen(&q), &widen(&k), &widen(&v));
        !flydsl_testutil::attn::check_out(&got.out, &want.out, 64).pass()
    }
    assert!(wrong::<bf16>(&Device::sim(Target::Sm90)));
    assert!(wrong::<f16>(&Device::sim(Target::Gfx1201)));
}

#[test]
fn unchecked_entry_points_match_the_checked_ones() {
    use fly_attn::{
        flash_attn_fwd_unchecked, flash_attn_varlen_fwd_unchecked, AttnArgs, CuSeqlens, VarlenArgs,
    };
    use flydsl_rt::DeviceBuffer;
    let dev = Device::sim(Target::Gfx950);
    let st = dev.stream().unwrap();
    let var = AttnShape::varlen(&[17, 0, 40], &[5, 9, 33], 2, 1, 64, true);
    let (q, k, v) = inputs::<bf16>(&var, 91, 1.0);
    let safe = run(&dev, &var, &q, &k, &v, Some(2)).unwrap();
    let up = |x: &[bf16]| DeviceBuffer::from_slice(&dev, x).unwrap();
    let (qd, kd, vd) = (up(&q), up(&k), up(&v));
    let (cq, ck) = var.cu_seqlens.clone().unwrap();
    let (cqd, ckd) = (
        DeviceBuffer::from_slice(&dev, &cq).unwrap(),
        DeviceBuffer::from_slice(&dev, &ck).unwrap(),
    );
    let mut out = DeviceBuffer::<bf16>::zeroed(&dev, var.q_len()).unwrap();
    let mut lse = DeviceBuffer::<f32>::zeroed(&dev, var.lse_len()).unwrap();
    let a = VarlenArgs {
        max_seqlen_q: 40,
        max_seqlen_kv: 33,
        heads_q: 2,
        heads_kv: 1,
        head_dim: 64,
        causal: true,
        softmax_scale: None,
        num_kv_splits: Some(2),
    };
    // SAFETY: the buffers and offsets describe `var` exactly.
    unsafe {
        flash_attn_varlen_fwd_unchecked(
            &st,
            &qd,
            &kd,
            &vd,
            &mut out,
            Some(&mut lse),
            CuSeqlens::Device(&cqd),
            CuSeqlens::Device(&ckd),
            &a,
        )
        .unwrap()
    };
    assert_eq!(widen(&out.to_vec().unwrap()), safe.out);
    let lse: Vec<f64> = lse.to_vec().unwrap().into_iter().map(f64::from).collect();
    assert_eq!(lse, safe.lse);

    let dense = AttnShape::dense(2, 33, 17, 2, 2, 128, false);
    let (q, k, v) = inputs::<f16>(&dense, 92, 1.0);
    let safe = run(&dev, &dense, &q, &k, &v, Some(1)).unwrap();
    let up = |x: &[f16]| DeviceBuffer::from_slice(&dev, x).unwrap();
    let mut out = DeviceBuffer::<f16>::zeroed(&dev, dense.q_len()).unwrap();
    let a = AttnArgs {
        seqlen_q: 33,
        seqlen_kv: 17,
        num_kv_splits: Some(1),
        ..AttnArgs::new(2, 33, 2, 128)
    };
    // SAFETY: the buffers hold the shapes' elements.
    unsafe {
        flash_attn_fwd_unchecked(&st, &up(&q), &up(&k), &up(&v), &mut out, None, &a).unwrap()
    };
    assert_eq!(widen(&out.to_vec().unwrap()), safe.out);
}

#[test]
fn ndarray_convenience_takes_any_layout() {
    use fly_attn::{flash_attn_array, AttnOptions};
    use ndarray::{Array4, ShapeBuilder};
    let dev = Device::sim(Target::Gfx1250);
    let st = dev.stream().unwrap();
    let s = AttnShape::dense(2, 17, 33, 2, 1, 64, true);
    let (q, k, v) = inputs::<bf16>(&s, 101, 1.0);
    let want = run(&dev, &s, &q, &k, &v, Some(1)).unwrap();
    // q as a column-major array: a non-contiguous (for row-major) view of the same values.
    let qa = Array4::from_shape_vec((2, 17, 2, 64), q.clone()).unwrap();
    let mut qf = Array4::from_elem((2, 17, 2, 64).f(), bf16::ZERO);
    qf.assign(&qa);
    let ka = Array4::from_shape_vec((2, 33, 1, 64), k).unwrap();
    let va = Array4::from_shape_vec((2, 33, 1, 64), v).unwrap();
    let opts = AttnOptions {
        causal: true,
        num_kv_splits: Some(1),
        ..AttnOptions::default()
    };
    let (out, lse) = flash_attn_array(&st, qf.view(), ka.view(), va.view(), opts).unwrap();
    assert_eq!(widen(&out.iter().copied().collect::<Vec<_>>()), want.out);
    assert_eq!(
        lse.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(),
        want.lse
    );
    let e = flash_attn_array(&st, qf.view(), ka.view(), qf.view(), opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fly_attn::flash_attn_array") && e.contains("`v`"),
        "{e}"
    );
}
