//! The Hopper family (`kernels/wgmma.rs`: TMA, mbarrier K/V stages, SS and register-A
//! wgmma) through the public API with `AttnKernel::Hopper` on the sm90 Sim (memcheck,
//! racecheck and initcheck on, the Sim's default), against the f64 reference of
//! `flydsl_testutil::attn` with its tolerances; out and LSE start as NaN. Also: `Auto` and
//! `Portable` give identical results, the Hopper kernel agrees with the portable one, and
//! pinning `Hopper` where it does not apply is an error that writes nothing.
//!
//! Tiles: 128 keys x 3 stages for D = 64 and 128 (192 and 128 query rows), 64 keys x 2
//! stages for D = 256 (128 query rows); so 129 and 130 keys are two KV tiles (three at
//! D = 256: a stage wrap) and 400 keys are four (a stage wrap at D = 64 and 128).

mod common;

use common::{check_with, inputs, run_with, Dt};
use fly_attn::dispatch::AUTO_TAKES_HOPPER;
use fly_attn::{
    flash_attn_fwd_with, flash_attn_varlen_fwd_with, AttnArgs, AttnKernel, CuSeqlens, VarlenArgs,
};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, DeviceBuffer, Target};
use flydsl_testutil::attn::{assert_lse, assert_out, AttnShape};

const HOPPER: AttnKernel = AttnKernel::Hopper;

fn sm90() -> Device {
    Device::sim(Target::Sm90)
}

/// Both dtypes on one shape (the seed differs per dtype).
fn both(dev: &Device, s: &AttnShape, seed: u64) {
    check_with::<bf16>(dev, s, None, seed, HOPPER);
    check_with::<f16>(dev, s, None, seed + 1000, HOPPER);
}

#[test]
fn ragged_lengths_more_than_one_kv_tile_and_stage_wraps() {
    let dev = sm90();
    // Key counts around the tiles, Sq != Skv both ways (each Sq from the same list).
    let keys = [1, 17, 65, 129, 130];
    for (di, d) in [64, 128, 256].into_iter().enumerate() {
        for (i, &skv) in keys.iter().enumerate() {
            let sq = keys[(i + 2 + di) % keys.len()];
            let (hq, hkv) = if i % 2 == 0 { (2, 1) } else { (2, 2) };
            let s = AttnShape::dense(1 + i % 2, sq, skv, hq, hkv, d, false);
            let seed = (100 * di + i) as u64;
            if (i + di) % 2 == 0 {
                check_with::<bf16>(&dev, &s, None, seed, HOPPER);
            } else {
                check_with::<f16>(&dev, &s, None, seed, HOPPER);
            }
        }
    }
    // Four KV tiles through three stages (D = 64 and 128).
    check_with::<bf16>(
        &dev,
        &AttnShape::dense(1, 33, 400, 2, 1, 64, false),
        None,
        7,
        HOPPER,
    );
    check_with::<f16>(
        &dev,
        &AttnShape::dense(1, 17, 400, 1, 1, 128, false),
        None,
        8,
        HOPPER,
    );
}

#[test]
fn causal_bottom_right_including_fully_masked_rows() {
    let dev = sm90();
    // Sq > Skv: the first Sq - Skv rows see no key (zeros, LSE -inf); at (400, 17) with
    // D = 64 the whole first workgroup (192 rows) visits no KV tile.
    for (i, &(sq, skv, d)) in [(130, 17, 64), (400, 17, 64), (129, 65, 128), (130, 65, 256)]
        .iter()
        .enumerate()
    {
        let s = AttnShape::dense(1, sq, skv, 2, 1, d, true);
        let got = if i % 2 == 0 {
            check_with::<bf16>(&dev, &s, None, 20 + i as u64, HOPPER)
        } else {
            check_with::<f16>(&dev, &s, None, 20 + i as u64, HOPPER)
        };
        assert!(got.lse.contains(&f64::NEG_INFINITY), "{s:?}: no masked row");
        assert!(
            got.out.iter().all(|x| x.is_finite()),
            "{s:?}: non-finite output"
        );
        // Row 0 sees no key: exactly zero.
        assert!(
            got.out[..d].iter().all(|&x| x == 0.0),
            "{s:?}: masked row not zero"
        );
    }
    // Sq <= Skv: the diagonal crosses tiles; several KV tiles and a stage wrap.
    both(&dev, &AttnShape::dense(1, 17, 130, 2, 2, 64, true), 30);
    both(&dev, &AttnShape::dense(2, 65, 400, 2, 1, 128, true), 32);
    both(&dev, &AttnShape::dense(1, 129, 130, 1, 1, 256, true), 34);
}

#[test]
fn gqa_and_mqa() {
    let dev = sm90();
    // GQA 4 / 2 and MQA 4 / 1, batch 2 (the TMA batch coordinate), both masks.
    check_with::<bf16>(
        &dev,
        &AttnShape::dense(2, 65, 33, 4, 2, 64, false),
        None,
        41,
        HOPPER,
    );
    check_with::<f16>(
        &dev,
        &AttnShape::dense(2, 33, 65, 4, 1, 128, true),
        None,
        42,
        HOPPER,
    );
    check_with::<bf16>(
        &dev,
        &AttnShape::dense(2, 17, 65, 4, 1, 256, false),
        None,
        43,
        HOPPER,
    );
}

#[test]
fn lse_on_and_off_and_the_softmax_scale() {
    let dev = sm90();
    let mut s = AttnShape::dense(1, 65, 129, 2, 1, 64, true);
    // A large scale makes logits span hundreds: exact online rescaling, no NaN.
    s.scale = Some(2.0);
    let with = check_with::<bf16>(&dev, &s, None, 51, HOPPER);
    let (q, k, v) = inputs::<bf16>(&s, 51, 1.0);
    let without = run_with(&dev, &s, &q, &k, &v, Some(1), HOPPER, false).unwrap();
    assert_eq!(with.out, without.out, "the LSE changed the output");
    let s = AttnShape::dense(1, 17, 33, 1, 1, 128, false);
    let (q, k, v) = inputs::<f16>(&s, 52, 1.0);
    let without = run_with(&dev, &s, &q, &k, &v, None, HOPPER, false).unwrap();
    let with = check_with::<f16>(&dev, &s, None, 52, HOPPER);
    assert_eq!(with.out, without.out);
}

/// One shape on Auto, Portable and Hopper: Auto is the portable kernel today
/// (bit-identical; one of the two once `AUTO_TAKES_HOPPER` flips), Hopper agrees within the
/// tolerances.
fn three_ways<T: Dt>(s: &AttnShape, seed: u64) {
    let dev = sm90();
    let (q, k, v) = inputs::<T>(s, seed, 1.0);
    let run = |kernel| run_with(&dev, s, &q, &k, &v, None, kernel, true).unwrap();
    let (auto, port, hop) = (
        run(AttnKernel::Auto),
        run(AttnKernel::Portable),
        run(HOPPER),
    );
    let auto_is = |x: &common::Got| auto.out == x.out && auto.lse == x.lse;
    if AUTO_TAKES_HOPPER {
        assert!(
            auto_is(&port) || auto_is(&hop),
            "{s:?}: Auto is neither kernel"
        );
    } else {
        assert!(auto_is(&port), "{s:?}: Auto != Portable");
    }
    let what = format!("{} Hopper vs portable {s:?}", T::DTYPE);
    assert_out(&what, &hop.out, &port.out, s.head_dim);
    assert_lse(&what, T::DTYPE.name(), &hop.lse, &port.lse);
}

#[test]
fn auto_and_portable_are_identical_and_hopper_agrees() {
    three_ways::<bf16>(&AttnShape::dense(2, 65, 129, 4, 2, 64, true), 61);
    three_ways::<f16>(&AttnShape::dense(1, 33, 17, 2, 2, 128, false), 62);
    // Off sm90 Auto is always the portable kernel.
    let dev = Device::sim(Target::Gfx942);
    let s = AttnShape::dense(1, 17, 33, 2, 1, 64, false);
    let (q, k, v) = inputs::<bf16>(&s, 63, 1.0);
    let a = run_with(&dev, &s, &q, &k, &v, None, AttnKernel::Auto, true).unwrap();
    let p = run_with(&dev, &s, &q, &k, &v, None, AttnKernel::Portable, true).unwrap();
    assert_eq!((a.out, a.lse), (p.out, p.lse));
}

const SENTINEL: f32 = 7.0;

/// A dense call pinned to Hopper on `dev` must fail and leave out and LSE untouched;
/// returns the message.
fn dense_refused(dev: &Device, a: &AttnArgs) -> String {
    let s = dev.stream().unwrap();
    let nq = a.batch * a.seqlen_q * a.heads_q * a.head_dim;
    let nkv = a.batch * a.seqlen_kv * a.heads_kv * a.head_dim;
    let q = DeviceBuffer::from_slice(dev, &vec![bf16::ONE; nq]).unwrap();
    let k = DeviceBuffer::from_slice(dev, &vec![bf16::ONE; nkv]).unwrap();
    let mut out = DeviceBuffer::from_slice(dev, &vec![bf16::from_f32(SENTINEL); nq]).unwrap();
    let mut lse =
        DeviceBuffer::from_slice(dev, &vec![SENTINEL; a.batch * a.heads_q * a.seqlen_q]).unwrap();
    let e = flash_attn_fwd_with(&s, &q, &k, &k, &mut out, Some(&mut lse), a, HOPPER)
        .expect_err("pinning Hopper must fail here")
        .to_string();
    assert!(
        out.to_vec().unwrap().iter().all(|x| x.to_f32() == SENTINEL),
        "out written: {e}"
    );
    assert!(
        lse.to_vec().unwrap().iter().all(|&x| x == SENTINEL),
        "lse written: {e}"
    );
    assert!(e.starts_with("fly_attn::flash_attn_fwd_with: "), "{e}");
    e
}

/// [`dense_refused`] for a Hopper-only rule: the fix names the other kernels.
fn hopper_refused(dev: &Device, a: &AttnArgs) -> String {
    let e = dense_refused(dev, a);
    assert!(
        e.contains("AttnKernel::Auto or AttnKernel::Portable"),
        "no fix: {e}"
    );
    e
}

#[test]
fn pinning_hopper_where_it_does_not_apply_is_an_error_that_writes_nothing() {
    let a = AttnArgs::new(1, 17, 2, 64);
    // Not an sm90 device.
    for t in [Target::Gfx942, Target::Gfx1201] {
        let e = hopper_refused(&Device::sim(t), &a);
        assert!(
            e.contains("`stream` =") && e.contains(&t.to_string()),
            "{e}"
        );
        assert!(e.contains("sm90 only"), "{e}");
    }
    // D = 96 (the portable kernel runs it in the 128 tile).
    let e = hopper_refused(&sm90(), &AttnArgs { head_dim: 96, ..a });
    assert!(
        e.contains("`head_dim` = 96") && e.contains("64, 128, 256"),
        "{e}"
    );
    // Split-K.
    let e = hopper_refused(
        &sm90(),
        &AttnArgs {
            num_kv_splits: Some(2),
            ..a
        },
    );
    assert!(
        e.contains("`num_kv_splits` = 2") && e.contains("one pass"),
        "{e}"
    );
    // q, k and v at an address TMA cannot take (a slice one element into a buffer).
    let dev = sm90();
    let st = dev.stream().unwrap();
    let n = 17 * 2 * 64;
    let big = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; n + 1]).unwrap();
    let q = big.slice(1..n + 1).unwrap();
    let mut out = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(SENTINEL); n]).unwrap();
    let e = flash_attn_fwd_with(&st, &q, &q, &q, &mut out, None, &a, HOPPER)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`q, k, v` =") && e.contains("16-byte aligned"),
        "{e}"
    );
    assert!(out.to_vec().unwrap().iter().all(|x| x.to_f32() == SENTINEL));
    // Every kernel reads 16-byte vectors: the portable one and the dispatcher refuse the
    // slice too (a misaligned vector load faults on NVIDIA GPUs), and an aligned slice runs.
    for kernel in [AttnKernel::Portable, AttnKernel::Auto] {
        let e = flash_attn_fwd_with(&st, &q, &q, &q, &mut out, None, &a, kernel)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`q` =") && e.contains("multiple of 8 elements"),
            "{kernel:?}: {e}"
        );
        assert!(out.to_vec().unwrap().iter().all(|x| x.to_f32() == SENTINEL));
    }
    let big8 = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; n + 8]).unwrap();
    let q8 = big8.slice(8..n + 8).unwrap();
    flash_attn_fwd_with(&st, &q8, &q8, &q8, &mut out, None, &a, AttnKernel::Portable).unwrap();
    assert!(out.to_vec().unwrap().iter().all(|x| x.to_f32() == 1.0));
    // The shared checks come first and name the Hopper entry point too.
    let e = dense_refused(&sm90(), &AttnArgs { head_dim: 48, ..a });
    assert!(e.contains("multiple of 32"), "{e}");

    // Varlen.
    let dev = sm90();
    let s = dev.stream().unwrap();
    let x = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; 3 * 64]).unwrap();
    let mut out = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(SENTINEL); 3 * 64]).unwrap();
    let mut lse = DeviceBuffer::from_slice(&dev, &[SENTINEL; 3]).unwrap();
    let va = VarlenArgs {
        max_seqlen_q: 2,
        max_seqlen_kv: 2,
        heads_q: 1,
        heads_kv: 1,
        head_dim: 64,
        causal: false,
        softmax_scale: None,
        num_kv_splits: Some(1),
    };
    let cu = [0, 1, 3];
    let e = flash_attn_varlen_fwd_with(
        &s,
        &x,
        &x,
        &x,
        &mut out,
        Some(&mut lse),
        CuSeqlens::Host(&cu),
        CuSeqlens::Host(&cu),
        &va,
        HOPPER,
    )
    .expect_err("varlen on Hopper")
    .to_string();
    assert!(
        e.starts_with("fly_attn::flash_attn_varlen_fwd_with: `kernel` ="),
        "{e}"
    );
    assert!(
        e.contains("dense BSHD") && e.contains("AttnKernel::Portable"),
        "{e}"
    );
    assert!(out.to_vec().unwrap().iter().all(|x| x.to_f32() == SENTINEL));
    assert!(lse.to_vec().unwrap().iter().all(|&x| x == SENTINEL));
    // The same call on the portable kernel runs.
    flash_attn_varlen_fwd_with(
        &s,
        &x,
        &x,
        &x,
        &mut out,
        Some(&mut lse),
        CuSeqlens::Host(&cu),
        CuSeqlens::Host(&cu),
        &va,
        AttnKernel::Portable,
    )
    .unwrap();
    assert!(out.to_vec().unwrap().iter().all(|x| x.to_f32() == 1.0));
}
