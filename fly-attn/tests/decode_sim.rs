//! The split-KV decode kernel (`AttnKernel::Decode`, and `Auto` where it takes it) on the
//! Sim of a wave64 target (gfx942) and wave32 targets (gfx1201, sm90; a spot check on every
//! target), memcheck, racecheck and initcheck on, against the f64 reference with the
//! kernels.md tolerances and against the portable kernel.

mod common;

use common::{check_with, inputs, run_with};
use fly_attn::dispatch::{family, Family};
use fly_attn::AttnKernel;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, Target};
use flydsl_testutil::attn::{assert_out, AttnShape};

const DEC: AttnKernel = AttnKernel::Decode;

/// The wave64 target and a wave32 one.
fn on_both(f: impl Fn(&Device)) {
    for t in [Target::Gfx942, Target::Gfx1201] {
        f(&Device::sim(t));
    }
}

#[test]
fn key_lengths_around_every_step_gqa_32_8() {
    // Sq = 1, GQA 32/8 (4 rows per kv head), D 128: key counts around the slots, waves,
    // unrolled steps and the automatic split.
    on_both(|dev| {
        // The automatic split count does split the longest one (4 splits of 258 keys).
        let a = common::dense_args(&AttnShape::dense(1, 1, 1031, 32, 8, 128, false), None);
        let st = dev.stream().unwrap();
        let (f, n) = fly_attn::dense_family::<bf16>(&st, &a, AttnKernel::Auto).unwrap();
        assert!(matches!(f, Family::Decode { .. }) && n == 4, "{f:?} {n}");
        for (i, skv) in [1usize, 17, 63, 65, 129, 1031].into_iter().enumerate() {
            let s = AttnShape::dense(1, 1, skv, 32, 8, 128, false);
            if i % 2 == 0 {
                check_with::<bf16>(dev, &s, None, 100 + i as u64, DEC);
            } else {
                check_with::<f16>(dev, &s, None, 100 + i as u64, DEC);
            }
        }
    });
}

#[test]
fn mqa_mha_and_every_row_block() {
    // MQA 8/1 (8 rows), MHA (1 row), G = 2 (row block 4 with 2 rows), MQA 20/1 (three row
    // groups of 8).
    on_both(|dev| {
        let cases = [(8, 1, 65), (2, 2, 129), (4, 2, 63), (20, 1, 33)];
        for (i, (hq, hkv, skv)) in cases.into_iter().enumerate() {
            let s = AttnShape::dense(2, 1, skv, hq, hkv, 64, false);
            check_with::<bf16>(dev, &s, Some(1), 110 + i as u64, DEC);
        }
    });
}

#[test]
fn causal_few_query_rows_and_fully_masked_rows() {
    on_both(|dev| {
        for (i, sq) in [2usize, 3, 4].into_iter().enumerate() {
            let s = AttnShape::dense(2, sq, 65, 8, 2, 64, true);
            check_with::<f16>(dev, &s, Some(3), 120 + i as u64, DEC);
        }
        // Sq > Skv: the first queries see no key: zeros and LSE -inf, no NaN.
        let s = AttnShape::dense(1, 4, 1, 4, 1, 64, true);
        let got = check_with::<bf16>(dev, &s, Some(1), 125, DEC);
        assert!(got.lse.contains(&f64::NEG_INFINITY));
        assert!(got.out.iter().all(|x| x.is_finite()));
        // The same with splits: the empty splits' partials combine to the same result.
        check_with::<bf16>(dev, &s, Some(3), 125, DEC);
    });
}

#[test]
fn every_head_dim() {
    // 32 .. 256 in steps of 32: the tiles 64/128/256 and the zero-padded chunks.
    on_both(|dev| {
        for (i, d) in (32..=256).step_by(32).enumerate() {
            let s = AttnShape::dense(1, 1, 67, 4, 1, d, false);
            check_with::<bf16>(dev, &s, Some(2), 130 + i as u64, DEC);
        }
    });
    // D = 256 on sm90 (wave32: one key per warp per step).
    let s = AttnShape::dense(1, 2, 129, 4, 2, 256, true);
    check_with::<f16>(&Device::sim(Target::Sm90), &s, Some(3), 139, DEC);
}

#[test]
fn pinned_splits_equal_one_split() {
    on_both(|dev| {
        let s = AttnShape::dense(1, 1, 1031, 8, 2, 96, false);
        let one = check_with::<bf16>(dev, &s, Some(1), 140, DEC);
        for n in [3, 64] {
            let got = check_with::<bf16>(dev, &s, Some(n), 140, DEC);
            let what = format!("{} decode splits {n} vs 1", dev.target());
            assert_out(&what, &got.out, &one.out, 96);
        }
    });
}

#[test]
fn wide_logits_are_exact() {
    // A large scale makes logits span hundreds: the online rescaling must be exact.
    on_both(|dev| {
        let mut s = AttnShape::dense(1, 1, 300, 8, 2, 64, false);
        s.scale = Some(4.0);
        check_with::<bf16>(dev, &s, Some(1), 150, DEC);
        s.causal = true;
        s.seqlen_q = 3;
        check_with::<f16>(dev, &s, Some(5), 151, DEC);
    });
}

#[test]
fn varlen_with_zero_length_sequences() {
    on_both(|dev| {
        let s = AttnShape::varlen(&[1, 0, 2, 1], &[33, 5, 0, 300], 8, 2, 64, true);
        let got = check_with::<bf16>(dev, &s, Some(1), 160, DEC);
        // Sequence 2 has queries but no keys: zeros and LSE -inf.
        assert!(got.lse.contains(&f64::NEG_INFINITY));
        check_with::<f16>(dev, &s, Some(4), 161, DEC);
        check_with::<bf16>(dev, &s, None, 162, AttnKernel::Auto);
    });
}

#[test]
fn equal_to_the_portable_kernel_and_taken_by_auto() {
    on_both(|dev| {
        let s = AttnShape::dense(2, 1, 257, 32, 8, 128, false);
        let (q, k, v) = inputs::<bf16>(&s, 170, 1.0);
        let dec = run_with(dev, &s, &q, &k, &v, Some(3), DEC, true).unwrap();
        let auto = run_with(dev, &s, &q, &k, &v, Some(3), AttnKernel::Auto, true).unwrap();
        let port = run_with(dev, &s, &q, &k, &v, Some(3), AttnKernel::Portable, true).unwrap();
        // Auto took the decode kernel: the same bits.
        assert_eq!(dec.out, auto.out);
        assert_eq!(dec.lse, auto.lse);
        assert_out(
            &format!("{} decode vs portable", dev.target()),
            &dec.out,
            &port.out,
            128,
        );
        let lse_err = dec
            .lse
            .iter()
            .zip(&port.lse)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(lse_err < 8e-3, "LSE decode vs portable: {lse_err}");
        // Without the LSE: the same output, the LSE buffer untouched (run_with checks).
        let no_lse = run_with(dev, &s, &q, &k, &v, Some(3), DEC, false).unwrap();
        assert_eq!(no_lse.out, dec.out);
    });
}

#[test]
fn the_comparison_catches_a_wrong_mask() {
    // Not vacuous: the causal decode result against the non-causal reference fails.
    let dev = Device::sim(Target::Gfx942);
    let s = AttnShape::dense(1, 4, 40, 4, 1, 64, true);
    let (q, k, v) = inputs::<bf16>(&s, 180, 1.0);
    let got = run_with(&dev, &s, &q, &k, &v, Some(1), DEC, true).unwrap();
    let mut nc = s.clone();
    nc.causal = false;
    let w = |x: &[bf16]| flydsl_testutil::compare::widen(x);
    let want = flydsl_testutil::attn::attn_ref(&nc, &w(&q), &w(&k), &w(&v));
    assert!(!flydsl_testutil::attn::check_out(&got.out, &want.out, 64).pass());
}

#[test]
fn the_dispatcher_rule() {
    use fly_attn::dispatch::Problem;
    let p = Problem {
        target: Target::Sm90,
        dtype: fly_attn::DType::BF16,
        fp8: false,
        batch: 8,
        seqlen_q: 1,
        seqlen_kv: 8192,
        heads_q: 32,
        heads_kv: 8,
        head_dim: 128,
        varlen: false,
        splits: None,
        auto_splits: 2,
        decode_splits: 9,
        tma_aligned: true,
    };
    let is_decode =
        |p: &Problem| matches!(family(p, AttnKernel::Auto), Ok((Family::Decode { .. }, _)));
    // Rows per kv head = seqlen_q * 4: decode up to 16 rows, and always at seqlen_q = 1.
    for sq in 1..=8 {
        let q = Problem { seqlen_q: sq, ..p };
        assert_eq!(is_decode(&q), sq * 4 <= 16, "seqlen_q {sq}");
    }
    assert!(is_decode(&Problem { heads_kv: 1, ..p }));
    assert!(!is_decode(&Problem {
        heads_kv: 1,
        seqlen_q: 2,
        ..p
    }));
    assert!(is_decode(&Problem { varlen: true, ..p }));
    assert!(is_decode(&Problem {
        target: Target::Gfx1250,
        dtype: fly_attn::DType::F16,
        ..p
    }));
    // fp8 and unaligned bases stay on the other kernels.
    assert!(!is_decode(&Problem { fp8: true, ..p }));
    assert!(!is_decode(&Problem {
        tma_aligned: false,
        ..p
    }));
    // The split count: automatic, or as asked.
    assert_eq!(
        family(&p, AttnKernel::Auto),
        Ok((
            Family::Decode {
                head_tile: 128,
                rows: 4,
                row_groups: 1
            },
            9
        ))
    );
    let pinned = Problem {
        splits: Some(64),
        seqlen_q: 5,
        ..p
    };
    assert_eq!(
        family(&pinned, AttnKernel::Decode),
        Ok((
            Family::Decode {
                head_tile: 128,
                rows: 8,
                row_groups: 3
            },
            64
        ))
    );
}

#[test]
fn pinned_decode_errors_name_the_argument() {
    use fly_attn::{flash_attn_fwd_with, AttnArgs};
    use flydsl_rt::DeviceBuffer;
    let dev = Device::sim(Target::Gfx942);
    let st = dev.stream().unwrap();
    let a = AttnArgs::new(1, 1, 1, 64);
    let buf = DeviceBuffer::from_slice(&dev, &[bf16::ONE; 72]).unwrap();
    // A slice at element 1 is not 16-byte aligned.
    let q = buf.slice(1..65).unwrap();
    let x = DeviceBuffer::from_slice(&dev, &[bf16::ONE; 64]).unwrap();
    let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 64).unwrap();
    let e = flash_attn_fwd_with(&st, &q, &x, &x, &mut out, None, &a, DEC)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fly_attn::flash_attn_fwd_with") && e.contains("16-byte"),
        "{e}"
    );
    // Auto refuses it too (every kernel reads 16-byte vectors), writing nothing.
    let e = flash_attn_fwd_with(&st, &q, &x, &x, &mut out, None, &a, AttnKernel::Auto)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`q` =") && e.contains("16-byte"), "{e}");
    assert!(out.to_vec().unwrap().iter().all(|v| v.to_f32() == 0.0));
}

#[test]
fn every_target_spot_check() {
    // gfx950 and gfx1250 too: one GQA causal call with splits, every row block.
    for t in Target::ALL {
        let dev = Device::sim(t);
        check_with::<bf16>(
            &dev,
            &AttnShape::dense(1, 2, 300, 8, 2, 128, true),
            Some(3),
            190,
            DEC,
        );
        check_with::<f16>(
            &dev,
            &AttnShape::dense(2, 1, 77, 8, 1, 256, false),
            None,
            191,
            DEC,
        );
        check_with::<bf16>(
            &dev,
            &AttnShape::dense(1, 1, 65, 2, 2, 64, false),
            Some(1),
            192,
            DEC,
        );
    }
}
