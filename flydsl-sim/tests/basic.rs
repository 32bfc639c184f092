//! Elementwise kernels, structured control flow under divergence, arithmetic faults.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, launch_report, SimError, SimMemory, SimOptions};

/// y[i] = a[i] + b[i] for i < n, one element per thread.
fn vector_add(target: Target) -> Kernel {
    let mut b = B::new("vadd", target);
    let (pa, _) = b.tensor("a", ScalarType::F32);
    let (pb, _) = b.tensor("b", ScalarType::F32);
    let (py, _) = b.tensor("y", ScalarType::F32);
    let n = b.scalar("n", ScalarType::I32);
    let i = b.gid();
    let inb = b.cmp(CmpPred::Lt, i, n);
    b.when(inb, |b| {
        let x = b.load(pa, i, F32);
        let y = b.load(pb, i, F32);
        let s = b.bin(BinOp::Add, x, y);
        b.store(py, i, s);
    });
    b.finish()
}

#[test]
fn vector_add_with_tail_guard_on_several_sizes() {
    for target in [Target::Gfx942, Target::Gfx1201, Target::Sm90] {
        let k = vector_add(target);
        for n in [1usize, 7, 64, 255, 256, 1000, 4099] {
            let mem = SimMemory::new();
            let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
            let bv: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
            let (da, db) = (upload_f32(&mem, &a), upload_f32(&mem, &bv));
            let dy = upload_f32(&mem, &vec![-1.0; n]);
            let args = [
                Arg::Tensor(da, n as i64),
                Arg::Tensor(db, n as i64),
                Arg::Tensor(dy, n as i64),
                Arg::I32(n as i32),
            ];
            let grid = (n as u32).div_ceil(128);
            launch(
                &k,
                [grid, 1, 1],
                [128, 1, 1],
                &pack(&k, &args),
                &mem,
                &SimOptions::default(),
            )
            .unwrap();
            let y = download_f32(&mem, dy, n);
            for i in 0..n {
                assert_eq!(y[i], a[i] + bv[i], "target {target} n {n} i {i}");
            }
        }
    }
}

#[test]
fn for_loop_with_divergent_trip_counts_and_carried_values() {
    // Thread t sums j for j in (t%5 .. 3*t) step (t%3 + 1), and counts iterations.
    let mut b = B::new("loop", Target::Gfx942);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let t = b.tid();
    let c5 = b.i32(5);
    let c3 = b.i32(3);
    let c1 = b.i32(1);
    let c0 = b.i32(0);
    let lb = b.bin(BinOp::Rem, t, c5);
    let ub = b.bin(BinOp::Mul, t, c3);
    let m3 = b.bin(BinOp::Rem, t, c3);
    let step = b.bin(BinOp::Add, m3, c1);
    let res = b.for_(lb, ub, step, vec![c0, c0], |b, iv, c| {
        let s = b.bin(BinOp::Add, c[0], iv);
        let one = b.i32(1);
        let n = b.bin(BinOp::Add, c[1], one);
        vec![s, n]
    });
    let two = b.i32(2);
    let t2 = b.bin(BinOp::Mul, t, two);
    b.store(py, t2, res[0]);
    let t21 = b.bin(BinOp::Add, t2, c1);
    b.store(py, t21, res[1]);
    let k = b.finish();
    let nt = 100usize;
    let mem = SimMemory::new();
    let dy = upload_u32(&mem, &vec![0; 2 * nt]);
    launch(
        &k,
        [1, 1, 1],
        [nt as u32, 1, 1],
        &pack(&k, &[Arg::Tensor(dy, 200)]),
        &mem,
        &Default::default(),
    )
    .unwrap();
    let y = download_u32(&mem, dy, 2 * nt);
    for t in 0..nt as i32 {
        let (mut s, mut c) = (0i32, 0i32);
        let mut j = t % 5;
        while j < 3 * t {
            s += j;
            c += 1;
            j += t % 3 + 1;
        }
        assert_eq!(
            (y[2 * t as usize] as i32, y[2 * t as usize + 1] as i32),
            (s, c),
            "thread {t}"
        );
    }
}

#[test]
fn if_with_yielded_values_under_divergence() {
    // y[t] = if t % 3 == 0 { t * 10 } else if odd { -t } else { t + 1000 } (nested ifs).
    let mut b = B::new("ifs", Target::Gfx1201);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let t = b.tid();
    let c3 = b.i32(3);
    let c0 = b.i32(0);
    let m = b.bin(BinOp::Rem, t, c3);
    let is0 = b.cmp(CmpPred::Eq, m, c0);
    let r = b.if_(
        is0,
        &[I32],
        |b| {
            let ten = b.i32(10);
            vec![b.bin(BinOp::Mul, t, ten)]
        },
        |b| {
            let one = b.i32(1);
            let low = b.bin(BinOp::And, t, one);
            let odd = b.cmp(CmpPred::Eq, low, one);
            b.if_(
                odd,
                &[I32],
                |b| vec![b.un(UnOp::Neg, t)],
                |b| {
                    let k = b.i32(1000);
                    vec![b.bin(BinOp::Add, t, k)]
                },
            )
        },
    );
    b.store(py, t, r[0]);
    let k = b.finish();
    let mem = SimMemory::new();
    let dy = upload_u32(&mem, &[0; 70]);
    launch(
        &k,
        [1, 1, 1],
        [70, 1, 1],
        &pack(&k, &[Arg::Tensor(dy, 70)]),
        &mem,
        &Default::default(),
    )
    .unwrap();
    let y = download_u32(&mem, dy, 70);
    for t in 0..70i32 {
        let want = if t % 3 == 0 {
            t * 10
        } else if t % 2 == 1 {
            -t
        } else {
            t + 1000
        };
        assert_eq!(y[t as usize] as i32, want, "thread {t}");
    }
}

#[test]
fn integer_semantics_wrap_shift_and_division_faults() {
    // y[0..6] = [a+b (wrap), a<<33 (amount mod 32), a>>1 arithmetic, udiv, i8 wrap, ...]
    let mut b = B::new("ints", Target::Gfx942);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let d = b.scalar("d", ScalarType::I32);
    let a = b.i32(i32::MAX);
    let one = b.i32(1);
    let s0 = b.bin(BinOp::Add, a, one);
    let neg8 = b.i32(-8);
    let c33 = b.i32(33);
    let s1 = b.bin(BinOp::Shl, neg8, c33);
    let s2 = b.bin(BinOp::AShr, neg8, one);
    let s3 = b.bin(BinOp::LShr, neg8, one);
    let s4 = b.bin(BinOp::Div, neg8, d);
    let i8t = Type::Scalar(ScalarType::I8);
    let x8 = b.ci(127, i8t);
    let one8 = b.ci(1, i8t);
    let w8 = b.bin(BinOp::Add, x8, one8);
    let s5 = b.cast(CastKind::Convert, w8, I32);
    for (i, v) in [s0, s1, s2, s3, s4, s5].into_iter().enumerate() {
        let idx = b.i32(i as i32);
        b.store(py, idx, v);
    }
    let k = b.finish();
    let mem = SimMemory::new();
    let dy = upload_u32(&mem, &[0; 6]);
    launch(
        &k,
        [1, 1, 1],
        [1, 1, 1],
        &pack(&k, &[Arg::Tensor(dy, 6), Arg::I32(3)]),
        &mem,
        &Default::default(),
    )
    .unwrap();
    let y: Vec<i32> = download_u32(&mem, dy, 6)
        .into_iter()
        .map(|v| v as i32)
        .collect();
    assert_eq!(
        y,
        vec![i32::MIN, -16, -4, (0xFFFF_FFF8u32 >> 1) as i32, -2, -128]
    );
    // Division by zero is a fault naming the op, not a panic.
    let err = launch(
        &k,
        [1, 1, 1],
        [1, 1, 1],
        &pack(&k, &[Arg::Tensor(dy, 6), Arg::I32(0)]),
        &mem,
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, SimError::Fault { ref op, .. } if op == "Div"),
        "{err}"
    );
}

#[test]
fn shuffles_follow_wave_semantics() {
    // y[4t..4t+4] = [xor 1, idx (t+3) wrapped, down 5, readfirstlane] of value 100 + t;
    // threads with t % 7 == 6 are inactive (they skip the shuffles).
    for target in [Target::Gfx942, Target::Gfx1250] {
        let ws = target.wave_size() as i32;
        let mut b = B::new("shfl", target);
        let (py, _) = b.tensor("y", ScalarType::I32);
        let t = b.tid();
        let c100 = b.i32(100);
        let v = b.bin(BinOp::Add, t, c100);
        let c7 = b.i32(7);
        let c6 = b.i32(6);
        let m = b.bin(BinOp::Rem, t, c7);
        let act = b.cmp(CmpPred::Ne, m, c6);
        b.when(act, |b| {
            let one = b.i32(1);
            let x = b.shuffle(ShuffleMode::Xor, v, one);
            let c3 = b.i32(3);
            let l = b.bin(BinOp::Add, t, c3);
            let i = b.shuffle(ShuffleMode::Idx, v, l);
            let c5 = b.i32(5);
            let d = b.shuffle(ShuffleMode::Down, v, c5);
            let r = b.op(OpKind::ReadFirstLane(v), I32);
            let c4 = b.i32(4);
            let base = b.bin(BinOp::Mul, t, c4);
            for (j, val) in [x, i, d, r].into_iter().enumerate() {
                let cj = b.i32(j as i32);
                let idx = b.bin(BinOp::Add, base, cj);
                b.store(py, idx, val);
            }
        });
        let k = b.finish();
        let nt = 2 * ws;
        let mem = SimMemory::new();
        let dy = upload_u32(&mem, &vec![0xDEAD; 4 * nt as usize]);
        launch(
            &k,
            [1, 1, 1],
            [nt as u32, 1, 1],
            &pack(&k, &[Arg::Tensor(dy, 4 * nt as i64)]),
            &mem,
            &Default::default(),
        )
        .unwrap();
        let y = download_u32(&mem, dy, 4 * nt as usize);
        let active = |t: i32| t % 7 != 6;
        let val = |t: i32| if active(t) { 100 + t } else { 0 };
        for t in 0..nt {
            let got = &y[4 * t as usize..4 * t as usize + 4];
            if !active(t) {
                assert_eq!(got, [0xDEAD; 4]);
                continue;
            }
            let (w, l) = (t / ws * ws, t % ws);
            let xor = val(w + (l ^ 1));
            let idx = val(w + (t + 3) % ws);
            let down = if l + 5 < ws { val(t + 5) } else { 100 + t };
            let first = (w..w + ws).find(|&x| active(x)).unwrap() + 100;
            assert_eq!(
                got,
                [xor as u32, idx as u32, down as u32, first as u32],
                "{target} t {t}"
            );
        }
    }
}

#[test]
fn launch_validation_errors() {
    let k = vector_add(Target::Gfx942);
    let mem = SimMemory::new();
    let opts = SimOptions::default();
    // kernarg too short
    let e = launch(&k, [1, 1, 1], [64, 1, 1], &[0u8; 10], &mem, &opts).unwrap_err();
    assert!(matches!(e, SimError::InvalidLaunch { .. }), "{e}");
    let args = pack(
        &k,
        &[
            Arg::Tensor(0, 0),
            Arg::Tensor(0, 0),
            Arg::Tensor(0, 0),
            Arg::I32(0),
        ],
    );
    // block too large
    let e = launch(&k, [1, 1, 1], [1025, 1, 1], &args, &mem, &opts).unwrap_err();
    assert!(matches!(e, SimError::InvalidLaunch { .. }), "{e}");
    let e = launch(&k, [1, 1, 1], [0, 1, 1], &args, &mem, &opts).unwrap_err();
    assert!(matches!(e, SimError::InvalidLaunch { .. }), "{e}");
    // zero grid: no-op
    let r = launch_report(&k, [0, 1, 1], [64, 1, 1], &args, &mem, &opts).unwrap();
    assert_eq!(r.ops_executed, 0);
    // invalid IR is reported by the verifier
    let mut bad = k.clone();
    bad.body.ops.push(Op {
        results: vec![],
        kind: OpKind::Yield(vec![]),
    });
    bad.body.ops.push(Op {
        results: vec![],
        kind: OpKind::Barrier,
    });
    let e = launch(&bad, [1, 1, 1], [64, 1, 1], &args, &mem, &opts).unwrap_err();
    assert!(matches!(e, SimError::Verify(_)), "{e}");
}
