//! The sm90 kernels on an H200 (CUDA) against the f64 reference: the portable kernel at
//! the Sim's `sim.rs` spot checks, the Hopper kernel (`AttnKernel::Hopper`) at the cases of
//! `hopper_sim.rs` and at longer sequences (many KV tiles, every stage wrapping, several
//! query tiles per head); skipped with a printed reason without a GPU or sm90 code
//! objects (fails instead where `FLYDSL_REQUIRE_GPU` is set).

mod common;

use common::{check, check_with, cuda_sm90_device, inputs, run_with};
use fly_attn::dispatch::AUTO_TAKES_HOPPER;
use fly_attn::AttnKernel;
use flydsl_rt::half::{bf16, f16};
use flydsl_testutil::attn::{assert_lse, assert_out, AttnShape};

const HOPPER: AttnKernel = AttnKernel::Hopper;

#[test]
fn h200_matches_the_reference() {
    let Some(dev) = cuda_sm90_device() else {
        return;
    };
    for d in (32..=256).step_by(32) {
        check::<bf16>(
            &dev,
            &AttnShape::dense(2, 129, 127, 4, 2, d, false),
            Some(1),
            d as u64,
        );
        check::<f16>(
            &dev,
            &AttnShape::dense(1, 127, 65, 4, 1, d, true),
            Some(1),
            d as u64 + 1,
        );
    }
    check::<bf16>(
        &dev,
        &AttnShape::dense(2, 1000, 1500, 8, 2, 128, true),
        None,
        3,
    );
    check::<f16>(
        &dev,
        &AttnShape::dense(1, 1, 4096, 8, 8, 64, false),
        Some(8),
        4,
    );
    check::<bf16>(
        &dev,
        &AttnShape::dense(4, 65, 17, 2, 1, 64, true),
        Some(1),
        5,
    );
    let s = AttnShape::varlen(&[17, 0, 300, 1], &[33, 5, 0, 700], 4, 2, 128, true);
    check::<bf16>(&dev, &s, Some(1), 6);
    check::<f16>(&dev, &s, Some(4), 7);
}

#[test]
fn h200_hopper_kernel_matches_the_reference_at_ragged_shapes() {
    let Some(dev) = cuda_sm90_device() else {
        return;
    };
    let mut seed = 100;
    // Not causal: ragged lengths on both sides, GQA, every head dim.
    for &(sq, skv) in &[
        (1, 17),
        (17, 1),
        (65, 129),
        (129, 64),
        (33, 300),
        (17, 650),
        (130, 130),
    ] {
        for d in [64, 128, 256] {
            seed += 1;
            let s = AttnShape::dense(1, sq, skv, 2, 1, d, false);
            check_with::<bf16>(&dev, &s, None, seed, HOPPER);
            let s = AttnShape::dense(2, sq, skv, 2, 2, d, false);
            check_with::<f16>(&dev, &s, None, seed + 1000, HOPPER);
        }
    }
    // Causal, bottom-right: Sq > Skv (fully masked rows, whole workgroups without a KV
    // tile) and Sq < Skv; GQA and MQA.
    for &(sq, skv) in &[
        (17, 17),
        (129, 65),
        (65, 129),
        (64, 200),
        (1, 17),
        (140, 3),
        (400, 17),
        (40, 700),
        (250, 260),
    ] {
        for d in [64, 128, 256] {
            seed += 1;
            let s = AttnShape::dense(1, sq, skv, 4, 2, d, true);
            check_with::<bf16>(&dev, &s, None, seed, HOPPER);
            let s = AttnShape::dense(1, sq, skv, 4, 1, d, true);
            check_with::<f16>(&dev, &s, None, seed + 1000, HOPPER);
        }
    }
}

#[test]
fn h200_hopper_kernel_matches_the_reference_at_longer_sequences() {
    let Some(dev) = cuda_sm90_device() else {
        return;
    };
    for causal in [false, true] {
        for d in [64, 128, 256] {
            let s = AttnShape::dense(2, 1000, 1531, 8, 2, d, causal);
            check_with::<bf16>(&dev, &s, None, 7, HOPPER);
            let s = AttnShape::dense(1, 2049, 777, 4, 4, d, causal);
            check_with::<f16>(&dev, &s, None, 8, HOPPER);
        }
    }
    // A softmax scale with wide logits, and no LSE (the LSE buffer stays untouched).
    let mut s = AttnShape::dense(1, 300, 900, 2, 1, 128, true);
    s.scale = Some(2.0);
    let with = check_with::<bf16>(&dev, &s, None, 9, HOPPER);
    let (q, k, v) = inputs::<bf16>(&s, 9, 1.0);
    let without = run_with(&dev, &s, &q, &k, &v, Some(1), HOPPER, false).unwrap();
    assert_eq!(with.out, without.out);
}

#[test]
fn h200_hopper_and_portable_kernels_agree() {
    let Some(dev) = cuda_sm90_device() else {
        return;
    };
    for (i, &(b, sq, skv, hq, hkv, d, causal)) in [
        (2, 1024, 1024, 16, 16, 64, true),
        (1, 777, 2049, 8, 2, 128, false),
        (1, 513, 513, 4, 1, 256, true),
    ]
    .iter()
    .enumerate()
    {
        let s = AttnShape::dense(b, sq, skv, hq, hkv, d, causal);
        let (q, k, v) = inputs::<bf16>(&s, 20 + i as u64, 1.0);
        let run = |kernel| run_with(&dev, &s, &q, &k, &v, Some(1), kernel, true).unwrap();
        let (port, hop) = (run(AttnKernel::Portable), run(HOPPER));
        let auto = run(AttnKernel::Auto);
        // Auto is one of the two, bit for bit: the portable kernel until the default flips.
        let auto_is = |x: &common::Got| auto.out == x.out && auto.lse == x.lse;
        assert!(
            auto_is(&port) || (AUTO_TAKES_HOPPER && auto_is(&hop)),
            "{s:?}: Auto is neither kernel"
        );
        let what = format!("Hopper vs portable {s:?}");
        assert_out(&what, &hop.out, &port.out, d);
        assert_lse(&what, "bf16", &hop.lse, &port.lse);
    }
}

#[test]
fn h200_decode_kernel_matches_the_reference_and_the_portable_kernel() {
    let Some(dev) = cuda_sm90_device() else {
        return;
    };
    const DEC: AttnKernel = AttnKernel::Decode;
    // Every head dim, GQA 32/8, MQA 8/1, MHA, Sq 1 and causal 2-4, splits automatic and
    // pinned 1 / 3 / 64, key counts around the steps and long ones.
    for (i, d) in (32..=256).step_by(32).enumerate() {
        let s = AttnShape::dense(2, 1, 1031, 32, 8, d, false);
        check_with::<bf16>(&dev, &s, None, 300 + i as u64, DEC);
        let s = AttnShape::dense(1, 1 + i % 4, 129, 8, 1, d, true);
        check_with::<f16>(&dev, &s, Some(3), 310 + i as u64, DEC);
    }
    for (i, &skv) in [1usize, 17, 63, 65, 129, 4099, 40_001].iter().enumerate() {
        for splits in [None, Some(1), Some(64)] {
            let s = AttnShape::dense(3, 1, skv, 16, 16, 128, false);
            check_with::<bf16>(&dev, &s, splits, 320 + i as u64, DEC);
        }
    }
    let var = AttnShape::varlen(&[1, 0, 2, 1], &[3000, 5, 0, 777], 32, 8, 64, true);
    check_with::<bf16>(&dev, &var, None, 330, DEC);
    // Auto takes it at decode shapes: the same bits as the pinned kernel; and it agrees
    // with the portable kernel.
    let s = AttnShape::dense(4, 1, 8191, 64, 8, 64, false);
    let (q, k, v) = inputs::<bf16>(&s, 340, 1.0);
    let dec = run_with(&dev, &s, &q, &k, &v, None, DEC, true).unwrap();
    let auto = run_with(&dev, &s, &q, &k, &v, None, AttnKernel::Auto, true).unwrap();
    let port = run_with(&dev, &s, &q, &k, &v, None, AttnKernel::Portable, true).unwrap();
    assert_eq!(dec.out, auto.out);
    assert_out("H200 decode vs portable", &dec.out, &port.out, 64);
    assert_lse("H200 decode vs portable", "bf16", &dec.lse, &port.lse);
}
