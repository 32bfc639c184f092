//! Bad input: every mistake is an error naming the function, the argument, its value and
//! the fix, and nothing is written.

use fly_attn::{flash_attn_fwd, flash_attn_varlen_fwd, AttnArgs, CuSeqlens, VarlenArgs};
use flydsl_rt::half::bf16;
use flydsl_rt::{Device, DeviceBuffer, Target};

const SENTINEL: f32 = 7.0;

fn dense_err(a: AttnArgs, lens: (usize, usize, usize, usize)) -> String {
    let dev = Device::sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let q = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; lens.0]).unwrap();
    let k = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; lens.1]).unwrap();
    let v = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; lens.1]).unwrap();
    let mut out = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(SENTINEL); lens.2]).unwrap();
    let mut lse = DeviceBuffer::from_slice(&dev, &vec![SENTINEL; lens.3]).unwrap();
    let e = flash_attn_fwd(&s, &q, &k, &v, &mut out, Some(&mut lse), &a)
        .expect_err("must fail")
        .to_string();
    assert!(
        out.to_vec().unwrap().iter().all(|x| x.to_f32() == SENTINEL),
        "out written: {e}"
    );
    assert!(
        lse.to_vec().unwrap().iter().all(|&x| x == SENTINEL),
        "lse written: {e}"
    );
    assert!(e.starts_with("fly_attn::flash_attn_fwd"), "{e}");
    e
}

fn ok_lens(a: &AttnArgs) -> (usize, usize, usize, usize) {
    let nq = a.batch * a.seqlen_q * a.heads_q * a.head_dim;
    let nkv = a.batch * a.seqlen_kv * a.heads_kv * a.head_dim;
    (nq, nkv, nq, a.batch * a.heads_q * a.seqlen_q)
}

#[test]
fn dense_mistakes() {
    let base = AttnArgs {
        heads_kv: 2,
        ..AttnArgs::new(2, 5, 4, 64)
    };
    let l = ok_lens(&base);
    let e = dense_err(base, (l.0 - 1, l.1, l.2, l.3));
    assert!(e.contains("`q` has") && e.contains("pass a buffer"), "{e}");
    let e = dense_err(base, (l.0, l.1 + 1, l.2, l.3));
    assert!(e.contains("`k` has"), "{e}");
    let e = dense_err(base, (l.0, l.1, l.2, l.3 - 1));
    assert!(e.contains("`lse` has"), "{e}");
    let a = AttnArgs {
        heads_kv: 3,
        ..base
    };
    let e = dense_err(a, ok_lens(&a));
    assert!(
        e.contains("heads_q % heads_kv == 0") && e.contains("4, 3"),
        "{e}"
    );
    for d in [48, 288, 0] {
        let a = AttnArgs {
            head_dim: d,
            ..base
        };
        let e = dense_err(a, ok_lens(&a));
        assert!(
            e.contains("`head_dim` =") && e.contains("multiple of 32"),
            "{e}"
        );
    }
    // A head dim so large that heads_q * head_dim overflows: still the head-dim error.
    let a = AttnArgs {
        head_dim: 1 << 62,
        ..base
    };
    let e = dense_err(a, (64, 64, 64, 8));
    assert!(
        e.contains("`head_dim` =") && e.contains("multiple of 32"),
        "{e}"
    );
    for sc in [f32::NAN, -1.0, 0.0] {
        let a = AttnArgs {
            softmax_scale: Some(sc),
            ..base
        };
        let e = dense_err(a, ok_lens(&a));
        assert!(e.contains("`softmax_scale`"), "{e}");
    }
    for n in [0, 65] {
        let a = AttnArgs {
            num_kv_splits: Some(n),
            ..base
        };
        let e = dense_err(a, ok_lens(&a));
        assert!(e.contains("`num_kv_splits` ="), "{e}");
    }
    let a = AttnArgs {
        seqlen_kv: 0,
        ..base
    };
    let e = dense_err(a, ok_lens(&a));
    assert!(e.contains("`seqlen_kv` = 0"), "{e}");
}

#[test]
fn f32_has_no_kernel() {
    let dev = Device::sim(Target::Sm90);
    let s = dev.stream().unwrap();
    let x = DeviceBuffer::<f32>::zeroed(&dev, 64).unwrap();
    let mut out = DeviceBuffer::from_slice(&dev, &[SENTINEL; 64]).unwrap();
    let e = flash_attn_fwd(&s, &x, &x, &x, &mut out, None, &AttnArgs::new(1, 1, 1, 64))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bf16 and f16"), "{e}");
    assert!(out.to_vec().unwrap().iter().all(|&x| x == SENTINEL));
}

#[test]
fn buffers_on_another_device() {
    let dev = Device::sim(Target::Gfx950);
    let other = Device::new_sim(Target::Gfx950);
    let s = dev.stream().unwrap();
    let a = AttnArgs::new(1, 2, 1, 64);
    let q = DeviceBuffer::<bf16>::zeroed(&dev, 128).unwrap();
    let k = DeviceBuffer::<bf16>::zeroed(&other, 128).unwrap();
    let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 128).unwrap();
    let e = flash_attn_fwd(&s, &q, &k, &q, &mut out, None, &a)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`k` lives on"), "{e}");
}

fn varlen_err(cq: &[i32], ck: &[i32], rows_q: usize, rows_kv: usize, max: usize) -> String {
    let dev = Device::sim(Target::Gfx1250);
    let s = dev.stream().unwrap();
    let d = 32;
    let q = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; rows_q * d]).unwrap();
    let k = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; rows_kv * d]).unwrap();
    let mut out =
        DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(SENTINEL); rows_q * d]).unwrap();
    let a = VarlenArgs {
        max_seqlen_q: max,
        max_seqlen_kv: max,
        heads_q: 1,
        heads_kv: 1,
        head_dim: d,
        causal: false,
        softmax_scale: None,
        num_kv_splits: None,
    };
    let e = flash_attn_varlen_fwd(
        &s,
        &q,
        &k,
        &k,
        &mut out,
        None,
        CuSeqlens::Host(cq),
        CuSeqlens::Host(ck),
        &a,
    )
    .expect_err("must fail")
    .to_string();
    assert!(
        out.to_vec().unwrap().iter().all(|x| x.to_f32() == SENTINEL),
        "written: {e}"
    );
    assert!(e.starts_with("fly_attn::flash_attn_varlen_fwd"), "{e}");
    e
}

#[test]
fn varlen_mistakes() {
    let e = varlen_err(&[0, 3, 2], &[0, 1, 2], 2, 2, 8);
    assert!(
        e.contains("`cu_seqlens_q`") && e.contains("must not decrease"),
        "{e}"
    );
    let e = varlen_err(&[1, 2], &[0, 2], 2, 2, 8);
    assert!(e.contains("first offset must be 0"), "{e}");
    let e = varlen_err(&[0, 2], &[0, 3], 2, 2, 8);
    assert!(e.contains("`cu_seqlens_kv`") && e.contains("2 rows"), "{e}");
    let e = varlen_err(&[0, 2], &[0, 2], 2, 2, 1);
    assert!(e.contains("longer than the max length 1"), "{e}");
    let e = varlen_err(&[0, 1, 2], &[0, 2], 2, 2, 8);
    assert!(e.contains("`cu_seqlens_q, cu_seqlens_kv`"), "{e}");
    let e = varlen_err(&[0], &[0], 0, 0, 8);
    assert!(e.contains("batch + 1 >= 2"), "{e}");
}

#[test]
fn huge_head_counts_and_batches_are_errors_not_overflows() {
    // heads_q * head_dim and batch * seqlen_q past usize: errors (they panicked on an
    // overflowing multiplication in debug builds and wrapped in release ones).
    let base = AttnArgs::new(1, 1, 1, 64);
    let a = AttnArgs {
        heads_q: 1 << 60,
        ..base
    };
    let e = dense_err(a, (64, 64, 64, 1));
    assert!(e.contains("`heads_q * head_dim`"), "{e}");
    let a = AttnArgs {
        batch: usize::MAX,
        seqlen_q: 2,
        seqlen_kv: 0,
        ..base
    };
    let e = dense_err(a, (64, 64, 64, 1));
    assert!(e.contains("`seqlen_kv` = 0"), "{e}");
    let dev = Device::sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let x = DeviceBuffer::from_slice(&dev, &[bf16::ONE; 64]).unwrap();
    let mut out = DeviceBuffer::from_slice(&dev, &[bf16::from_f32(SENTINEL); 64]).unwrap();
    let a = VarlenArgs {
        max_seqlen_q: 1,
        max_seqlen_kv: 1,
        heads_q: usize::MAX,
        heads_kv: 1,
        head_dim: 64,
        causal: false,
        softmax_scale: None,
        num_kv_splits: None,
    };
    let (c0, c1) = ([0, 1], [0, 1]);
    let e = flash_attn_varlen_fwd(
        &s,
        &x,
        &x,
        &x,
        &mut out,
        None,
        CuSeqlens::Host(&c0),
        CuSeqlens::Host(&c1),
        &a,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("fly_attn::flash_attn_varlen_fwd"), "{e}");
    assert!(out.to_vec().unwrap().iter().all(|x| x.to_f32() == SENTINEL));
}
