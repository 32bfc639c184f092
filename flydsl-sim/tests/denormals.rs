//! f32 denormals per target: flushed (inputs and results, sign kept) by AMD f32 and bf16
//! arithmetic, kept on sm_90; f32 atomic adds flush everywhere.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, SimMemory, SimOptions};

const BF16: Type = Type::Scalar(ScalarType::BF16);
const NOPS: usize = 8;

/// Thread t: a = x[2t], b = x[2t + 1]; out[8t..8t + 8] = a+b, a-b, a*b, a/b, max(a,b),
/// fma(a,b,a), sqrt(a), bf16(a) + bf16(b) (as f32).
fn ops_kernel(target: Target) -> Kernel {
    let mut b = B::new("denorm_ops", target);
    let (x, _) = b.tensor("x", ScalarType::F32);
    let (out, _) = b.tensor("out", ScalarType::F32);
    let t = b.tid();
    let c1 = b.i32(1);
    let c2 = b.i32(2);
    let c8 = b.i32(NOPS as i32);
    let ia = b.bin(BinOp::Mul, t, c2);
    let ib = b.bin(BinOp::Add, ia, c1);
    let xa = b.load(x, ia, F32);
    let xb = b.load(x, ib, F32);
    let mut rs = vec![];
    for op in [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Max] {
        rs.push(b.bin(op, xa, xb));
    }
    rs.push(b.op(OpKind::Fma(xa, xb, xa), F32));
    rs.push(b.un(UnOp::Sqrt, xa));
    let ha = b.cast(CastKind::Convert, xa, BF16);
    let hb = b.cast(CastKind::Convert, xb, BF16);
    let hs = b.bin(BinOp::Add, ha, hb);
    rs.push(b.cast(CastKind::Convert, hs, F32));
    let base = b.bin(BinOp::Mul, t, c8);
    for (k, r) in rs.into_iter().enumerate() {
        let ck = b.i32(k as i32);
        let i = b.bin(BinOp::Add, base, ck);
        b.store(out, i, r);
    }
    b.finish()
}

fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

fn bf16(x: f32) -> f32 {
    half::bf16::from_f32(x).to_f32()
}

/// The documented rule: `flush` flushes f32 inputs and results, `flush_bf16` the f32
/// arithmetic bf16 is computed in.
fn expected(a: f32, b: f32, flush: bool, flush_bf16: bool) -> [f32; NOPS] {
    let d = |x: f32| if flush { ftz(x) } else { x };
    let (fa, fb) = (d(a), d(b));
    let e = |x: f32| if flush_bf16 { ftz(x) } else { x };
    [
        d(fa + fb),
        d(fa - fb),
        d(fa * fb),
        d(fa / fb),
        d(fa.max(fb)),
        d(fa.mul_add(fb, fa)),
        fa.sqrt(),
        bf16(e(e(bf16(a)) + e(bf16(b)))),
    ]
}

#[test]
fn amd_flushes_f32_denormals_sm90_keeps_them() {
    let tiny = f32::MIN_POSITIVE;
    let pairs = [
        (1e-39f32, 0.0f32),
        (-1e-39, 0.0),
        (1e-20, 1e-20),
        (tiny, -tiny * 0.5),
        (-3e-39, 1.0),
        (1.5, 2.25),
        (tiny * 3.0, 4.0),
        (-2e-39, -1e-39),
    ];
    let xs: Vec<f32> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let mut add_of_first = vec![];
    for target in Target::ALL {
        let k = ops_kernel(target);
        let mem = SimMemory::new();
        let dx = upload_f32(&mem, &xs);
        let n = pairs.len() * NOPS;
        let dout = upload_f32(&mem, &vec![0.0; n]);
        let args = pack(
            &k,
            &[
                Arg::Tensor(dx, xs.len() as i64),
                Arg::Tensor(dout, n as i64),
            ],
        );
        let block = [pairs.len() as u32, 1, 1];
        launch(&k, [1, 1, 1], block, &args, &mem, &SimOptions::default()).unwrap();
        let got = download_f32(&mem, dout, n);
        let flush = target.is_amd();
        let flush_bf16 = flush && target != Target::Gfx1250;
        for (p, &(a, b)) in pairs.iter().enumerate() {
            let want = expected(a, b, flush, flush_bf16);
            for k in 0..NOPS {
                let g = got[p * NOPS + k];
                assert!(
                    g.to_bits() == want[k].to_bits() || (g.is_nan() && want[k].is_nan()),
                    "{target}: op {k} of ({a:e}, {b:e}): got {g:e}, want {:e}",
                    want[k]
                );
            }
        }
        add_of_first.push((target, got[0]));
    }
    // The targets really differ on a denormal sum.
    for (t, v) in add_of_first {
        assert_eq!(v == 0.0, t.is_amd(), "{t}: 1e-39 + 0 = {v:e}");
    }
}

#[test]
fn f32_atomic_add_flushes_on_every_target() {
    for target in Target::ALL {
        let mut b = B::new("denorm_atomic", target);
        let (x, _) = b.tensor("x", ScalarType::F32);
        let (acc, _) = b.tensor("acc", ScalarType::F32);
        let z = b.i32(0);
        let v = b.load(x, z, F32);
        b.op(
            OpKind::AtomicAdd {
                ptr: acc,
                index: z,
                value: v,
            },
            F32,
        );
        let k = b.finish();
        for (start, add) in [(1e-39f32, 2e-39f32), (1.0, 1e-39), (-1e-39, 3.0)] {
            let mem = SimMemory::new();
            let dx = upload_f32(&mem, &[add]);
            let dacc = upload_f32(&mem, &[start]);
            let args = pack(&k, &[Arg::Tensor(dx, 1), Arg::Tensor(dacc, 1)]);
            launch(
                &k,
                [1, 1, 1],
                [1, 1, 1],
                &args,
                &mem,
                &SimOptions::default(),
            )
            .unwrap();
            let got = download_f32(&mem, dacc, 1)[0];
            assert_eq!(
                got.to_bits(),
                ftz(ftz(start) + ftz(add)).to_bits(),
                "{target}: {start:e} + {add:e}"
            );
        }
    }
}
