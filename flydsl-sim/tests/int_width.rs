//! Integers at their IR width (i32/i16/i8 wrap as on the GPU), `For` loops at their bounds'
//! width with the overflow-free exit test, and the index check.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, SimError, SimMemory, SimOptions};

const I16: Type = Type::Scalar(ScalarType::I16);
const I8: Type = Type::Scalar(ScalarType::I8);

const OPS: [BinOp; 13] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Shl,
    BinOp::AShr,
    BinOp::LShr,
    BinOp::Div,
    BinOp::Rem,
    BinOp::UDiv,
    BinOp::URem,
    BinOp::Min,
    BinOp::UMax,
    BinOp::Xor,
];

/// Host reference of `op` at `bits` (8, 16 or 32) on sign-extended operands, returned
/// sign-extended to i32 (what the kernel stores after a signed widening).
fn reference(op: BinOp, a: i32, b: i32, bits: u32) -> i32 {
    let sh = 32 - bits;
    let narrow = |x: i32| (x << sh) >> sh;
    let unsigned = |x: i32| (x as u32) & (u32::MAX >> sh);
    let (a, b) = (narrow(a), narrow(b));
    let amt = unsigned(b) % bits;
    narrow(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Shl => a << amt,
        BinOp::AShr => a >> amt,
        BinOp::LShr => (unsigned(a) >> amt) as i32,
        BinOp::Div => a.wrapping_div(b),
        BinOp::Rem => a.wrapping_rem(b),
        BinOp::UDiv => (unsigned(a) / unsigned(b)) as i32,
        BinOp::URem => (unsigned(a) % unsigned(b)) as i32,
        BinOp::Min => a.min(b),
        BinOp::UMax => unsigned(a).max(unsigned(b)) as i32,
        BinOp::Xor => a ^ b,
        _ => unreachable!(),
    })
}

/// `out[k] = sext(op_k(trunc(a), trunc(b)))` for every op of [`OPS`] at `t`.
fn ops_kernel(t: Type) -> Kernel {
    let mut b = B::new("int_ops", Target::Gfx942);
    let (out, _) = b.tensor("out", ScalarType::I32);
    let pa = b.scalar("a", ScalarType::I32);
    let pb = b.scalar("b", ScalarType::I32);
    let (x, y) = if t == I32 {
        (pa, pb)
    } else {
        (
            b.cast(CastKind::Convert, pa, t),
            b.cast(CastKind::Convert, pb, t),
        )
    };
    for (k, op) in OPS.iter().enumerate() {
        let r = b.bin(*op, x, y);
        let r = if t == I32 {
            r
        } else {
            b.cast(CastKind::Convert, r, I32)
        };
        let i = b.i32(k as i32);
        b.store(out, i, r);
    }
    b.finish()
}

#[test]
fn narrow_integer_ops_wrap_at_their_width() {
    let pairs = [
        (i32::MAX, 1),
        (i32::MAX, i32::MAX),
        (i32::MIN, 3),
        (0x10000, 0x10000),
        (46341, 46341),
        (-7, 2),
        (7, -2),
        (300, 200),
        (127, 1),
        (-128, 7),
        (0x7FFF, 2),
        (1, 31),
        (-1, 33),
        (123456789, 987654321),
    ];
    let mem = SimMemory::new();
    let out = mem.alloc(4 * OPS.len() as u64).unwrap();
    for (t, bits) in [(I32, 32), (I16, 16), (I8, 8)] {
        let k = ops_kernel(t);
        for &(a, bv) in &pairs {
            let args = pack(
                &k,
                &[
                    Arg::Tensor(out, OPS.len() as i64),
                    Arg::I32(a),
                    Arg::I32(bv),
                ],
            );
            let r = launch(
                &k,
                [1, 1, 1],
                [1, 1, 1],
                &args,
                &mem,
                &SimOptions::default(),
            );
            // Signed division by zero or MIN / -1 at this width is a fault (next test).
            let sh = 32 - bits;
            let (na, nb) = ((a << sh) >> sh, (bv << sh) >> sh);
            if nb == 0 || (na == i32::MIN >> sh && nb == -1) {
                assert!(
                    matches!(r, Err(SimError::Fault { .. })),
                    "i{bits} {a}, {bv}"
                );
                continue;
            }
            r.unwrap_or_else(|e| panic!("i{bits} {a}, {bv}: {e}"));
            let got = download_u32(&mem, out, OPS.len());
            for (k, op) in OPS.iter().enumerate() {
                assert_eq!(
                    got[k] as i32,
                    reference(*op, a, bv, bits),
                    "i{bits} {op:?}({a}, {bv})"
                );
            }
        }
    }
    // The wraps the GPU shows are really exercised.
    assert_eq!(reference(BinOp::Add, i32::MAX, 1, 32), i32::MIN);
    assert_eq!(reference(BinOp::Mul, 0x10000, 0x10000, 32), 0);
    assert_eq!(reference(BinOp::Add, 127, 1, 8), -128);
}

#[test]
fn signed_division_faults_where_the_ir_leaves_it_undefined() {
    let k = ops_kernel(I32);
    let mem = SimMemory::new();
    let out = mem.alloc(4 * OPS.len() as u64).unwrap();
    for (a, bv) in [(5, 0), (i32::MIN, -1)] {
        let args = pack(
            &k,
            &[
                Arg::Tensor(out, OPS.len() as i64),
                Arg::I32(a),
                Arg::I32(bv),
            ],
        );
        let e = launch(
            &k,
            [1, 1, 1],
            [1, 1, 1],
            &args,
            &mem,
            &SimOptions::default(),
        )
        .unwrap_err();
        assert!(
            matches!(e, SimError::Fault { ref op, .. } if op == "Div"),
            "{e}"
        );
    }
}

/// `out[tid] = (iterations, last iv)` of `for iv in (lb..ub).step_by(step)` at type `t`,
/// with every bound a scalar parameter.
fn count_kernel(target: Target, t: Type) -> Kernel {
    let mut b = B::new("count", target);
    let (out, _) = b.tensor("out", ScalarType::I64);
    let st = t.value_elem().unwrap();
    let lb = b.scalar("lb", st);
    let ub = b.scalar("ub", st);
    let step = b.scalar("step", st);
    let zero = b.ci(0, I64);
    let one = b.ci(1, I64);
    let res = b.for_(lb, ub, step, vec![zero, zero], |b, iv, c| {
        let n = b.bin(BinOp::Add, c[0], one);
        let last = if t == I64 {
            iv
        } else {
            b.cast(CastKind::Convert, iv, I64)
        };
        vec![n, last]
    });
    let i0 = b.i32(0);
    let i1 = b.i32(1);
    b.store(out, i0, res[0]);
    b.store(out, i1, res[1]);
    b.finish()
}

/// Iterations and last iv by exact arithmetic.
fn count_ref(lb: i64, ub: i64, step: i64) -> (i64, i64) {
    let (mut i, mut n, mut last) = (lb as i128, 0, 0);
    while i < ub as i128 {
        n += 1;
        last = i as i64;
        i += step as i128;
    }
    (n, last)
}

fn run_count(k: &Kernel, args: &[Arg]) -> (i64, i64) {
    let mem = SimMemory::new();
    let out = upload_bytes(&mem, &[0u8; 16]);
    let mut a = vec![Arg::Tensor(out, 2)];
    a.extend_from_slice(args);
    launch(
        k,
        [1, 1, 1],
        [1, 1, 1],
        &pack(k, &a),
        &mem,
        &SimOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let mut b = [0u8; 16];
    mem.read(out, &mut b).unwrap();
    (
        i64::from_le_bytes(b[..8].try_into().unwrap()),
        i64::from_le_bytes(b[8..].try_into().unwrap()),
    )
}

#[test]
fn i32_loop_near_max_ends() {
    let m = i32::MAX;
    let cases = [
        (m - 10, m, 4),
        (m - 1, m, 1),
        (m - 3, m, 1),
        (0, m, 1 << 30),
        (i32::MIN, m, m),
        (i32::MIN, i32::MIN + 5, 2),
        (m - 100, m, 7),
        (-5, 5, 3),
        (5, 5, 1),
        (6, 5, 1),
    ];
    for target in Target::ALL {
        let k = count_kernel(target, I32);
        for (lb, ub, step) in cases {
            let got = run_count(&k, &[Arg::I32(lb), Arg::I32(ub), Arg::I32(step)]);
            let want = count_ref(lb as i64, ub as i64, step as i64);
            assert_eq!(got, want, "{target}: for {lb}..{ub} step {step}");
        }
    }
    // The case the brief names: INT_MAX-10 .. INT_MAX by 4 runs 3 times.
    assert_eq!(count_ref(m as i64 - 10, m as i64, 4), (3, m as i64 - 2));
}

#[test]
fn i64_loop_near_max_ends() {
    let m = i64::MAX;
    let k = count_kernel(Target::Sm90, I64);
    for (lb, ub, step) in [
        (m - 10, m, 4),
        (i32::MAX as i64 - 10, i32::MAX as i64 + 10, 4),
        (0, m, 1 << 62),
        (i64::MIN, m, m),
    ] {
        let got = run_count(&k, &[Arg::I64(lb), Arg::I64(ub), Arg::I64(step)]);
        assert_eq!(got, count_ref(lb, ub, step), "for {lb}..{ub} step {step}");
    }
}

#[test]
fn nonpositive_loop_step_is_a_fault() {
    let k = count_kernel(Target::Gfx942, I32);
    let mem = SimMemory::new();
    let out = upload_bytes(&mem, &[0u8; 16]);
    for step in [0, -1] {
        let args = pack(
            &k,
            &[
                Arg::Tensor(out, 2),
                Arg::I32(0),
                Arg::I32(10),
                Arg::I32(step),
            ],
        );
        let e = launch(
            &k,
            [1, 1, 1],
            [1, 1, 1],
            &args,
            &mem,
            &SimOptions::default(),
        )
        .unwrap_err();
        assert!(
            matches!(e, SimError::Fault { ref op, .. } if op == "For"),
            "{e}"
        );
    }
}

/// `y[tid] = x[row * n + tid]` with `row = tid + r0`, all i32.
fn row_index_kernel() -> Kernel {
    let mut b = B::new("row_index", Target::Gfx942);
    let (x, _) = b.tensor("x", ScalarType::F32);
    let (y, _) = b.tensor("y", ScalarType::F32);
    let r0 = b.scalar("r0", ScalarType::I32);
    let n = b.scalar("n", ScalarType::I32);
    let t = b.tid();
    let row = b.bin(BinOp::Add, t, r0);
    let base = b.bin(BinOp::Mul, row, n);
    let idx = b.bin(BinOp::Add, base, t);
    let v = b.load(x, idx, F32);
    b.store(y, t, v);
    b.finish()
}

#[test]
fn index_overflow_is_reported_with_the_op_and_the_access() {
    let k = row_index_kernel();
    let mem = SimMemory::new();
    let xs: Vec<f32> = (0..64).map(|i| i as f32 + 1.0).collect();
    let x = upload_f32(&mem, &xs);
    let y = upload_f32(&mem, &[0.0; 4]);
    let args = |r0: i32, n: i32| {
        pack(
            &k,
            &[
                Arg::Tensor(x, 64),
                Arg::Tensor(y, 4),
                Arg::I32(r0),
                Arg::I32(n),
            ],
        )
    };
    // In range: runs.
    launch(
        &k,
        [1, 1, 1],
        [4, 1, 1],
        &args(0, 8),
        &mem,
        &SimOptions::default(),
    )
    .unwrap();
    // row * n = 65536 * 65536 wraps to 0 in i32: on the GPU this would silently read x[0..4].
    let e = launch(
        &k,
        [1, 1, 1],
        [4, 1, 1],
        &args(65536, 65536),
        &mem,
        &SimOptions::default(),
    )
    .unwrap_err();
    let SimError::IndexOverflow {
        ref op,
        ref expr,
        ref sink,
        at,
        ..
    } = e
    else {
        panic!("expected an index overflow, got {e}");
    };
    assert!(op.starts_with("Mul (op #"), "{e}");
    assert!(
        expr.contains("65536 * 65536 = 4294967296") && expr.contains("i32"),
        "{e}"
    );
    assert!(sink.starts_with("index of Load (op #"), "{e}");
    assert_eq!(at.thread, [0, 0, 0]);
    // With the check off, the wrapped index is what the GPU would use: x[0] is read.
    let off = SimOptions {
        indexcheck: false,
        ..Default::default()
    };
    launch(&k, [1, 1, 1], [1, 1, 1], &args(65536, 65536), &mem, &off).unwrap();
    assert_eq!(download_f32(&mem, y, 1), vec![xs[0]]);
}

#[test]
fn masked_hashes_and_loop_carried_indices() {
    // Hashing that wraps on purpose and is then masked is not an index overflow.
    let mut b = B::new("hash_index", Target::Sm90);
    let (x, _) = b.tensor("x", ScalarType::F32);
    let (y, _) = b.tensor("y", ScalarType::F32);
    let t = b.tid();
    let golden = b.i32(0x9E37_79B1_u32 as i32);
    let h = b.bin(BinOp::Mul, t, golden);
    let h = b.bin(BinOp::Add, h, golden);
    let mask = b.i32(63);
    let i = b.bin(BinOp::And, h, mask);
    let v = b.load(x, i, F32);
    b.store(y, t, v);
    let k = b.finish();
    let mem = SimMemory::new();
    let xs: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let dx = upload_f32(&mem, &xs);
    let dy = upload_f32(&mem, &[0.0; 64]);
    let args = pack(&k, &[Arg::Tensor(dx, 64), Arg::Tensor(dy, 64)]);
    launch(
        &k,
        [1, 1, 1],
        [64, 1, 1],
        &args,
        &mem,
        &SimOptions::default(),
    )
    .unwrap();
    let want: Vec<f32> = (0..64u32)
        .map(|t| (t.wrapping_mul(0x9E37_79B1).wrapping_add(0x9E37_79B1) & 63) as f32)
        .collect();
    assert_eq!(download_f32(&mem, dy, 64), want);

    // An index carried through a loop (`i += stride`) that wraps is reported.
    let mut b = B::new("carried_index", Target::Gfx1201);
    let (x, _) = b.tensor("x", ScalarType::F32);
    let stride = b.scalar("stride", ScalarType::I32);
    let c0 = b.i32(0);
    let c1 = b.i32(1);
    let c4 = b.i32(4);
    let zero = b.f32(0.0);
    let c64 = b.i32(64);
    b.for_(c0, c4, c1, vec![c0, zero], |b, _, c| {
        // Loads stay in bounds (`i < 64 ? i : 0`) until `i` wraps negative.
        let ok = b.cmp(CmpPred::Lt, c[0], c64);
        let i = b.select(ok, c[0], c0);
        let v = b.load(x, i, F32);
        let s = b.bin(BinOp::Add, c[1], v);
        let next = b.bin(BinOp::Add, c[0], stride);
        vec![next, s]
    });
    let k = b.finish();
    let dx = upload_f32(&mem, &[1.0; 64]);
    let run = |s: i32| {
        let args = pack(&k, &[Arg::Tensor(dx, 64), Arg::I32(s)]);
        launch(
            &k,
            [1, 1, 1],
            [1, 1, 1],
            &args,
            &mem,
            &SimOptions::default(),
        )
    };
    run(16).unwrap();
    let e = run(i32::MAX / 2 + 1).unwrap_err();
    assert!(
        matches!(e, SimError::IndexOverflow { ref op, .. } if op.starts_with("Add")),
        "{e}"
    );
}

/// A buffer load of f32 element `idx` through a resource claiming `n` elements.
fn buffer_kernel(target: Target) -> Kernel {
    let mut b = B::new("buffer_far", target);
    let (x, _) = b.tensor("x", ScalarType::F32);
    let (y, _) = b.tensor("y", ScalarType::F32);
    let n = b.scalar("n", ScalarType::I32);
    let idx = b.scalar("idx", ScalarType::I32);
    let n64 = b.cast(CastKind::Convert, n, I64);
    let r = b.op(
        OpKind::MakeRsrc {
            ptr: x,
            num_elems: n64,
        },
        Type::BufferRsrc(ScalarType::F32),
    );
    let v = b.op(
        OpKind::BufferLoad {
            rsrc: r,
            index: idx,
            flags: MemFlags::default(),
        },
        F32,
    );
    let z = b.i32(0);
    b.store(y, z, v);
    b.finish()
}

#[test]
fn amd_buffer_offsets_past_32_bits_are_reported() {
    let mem = SimMemory::new();
    let x = upload_f32(&mem, &[2.0; 16]);
    let y = upload_f32(&mem, &[0.0]);
    let idx = 1 << 30; // byte offset 2^32: wraps to byte 0 in the AMD code.
    for target in [Target::Gfx942, Target::Sm90] {
        let k = buffer_kernel(target);
        let args = pack(
            &k,
            &[
                Arg::Tensor(x, 16),
                Arg::Tensor(y, 1),
                Arg::I32(i32::MAX),
                Arg::I32(idx),
            ],
        );
        let e = launch(
            &k,
            [1, 1, 1],
            [1, 1, 1],
            &args,
            &mem,
            &SimOptions::default(),
        )
        .unwrap_err();
        if target.is_amd() {
            assert!(
                matches!(e, SimError::Fault { ref reason, .. } if reason.contains("32-bit buffer offset")),
                "{e}"
            );
        } else {
            // NVIDIA emulates buffers with 64-bit addresses: a plain out-of-bounds access.
            assert!(matches!(e, SimError::OutOfBounds { .. }), "{e}");
        }
        // In reach of 32 bits: a normal access.
        let args = pack(
            &k,
            &[
                Arg::Tensor(x, 16),
                Arg::Tensor(y, 1),
                Arg::I32(16),
                Arg::I32(3),
            ],
        );
        launch(
            &k,
            [1, 1, 1],
            [1, 1, 1],
            &args,
            &mem,
            &SimOptions::default(),
        )
        .unwrap();
        assert_eq!(download_f32(&mem, y, 1), vec![2.0]);
    }
}
