//! Float compares with NaN operands: the ordered predicates (`Eq`, `Lt`, `Le`, `Gt`, `Ge`)
//! are false when either operand is NaN, `Ne` is true (LLVM `fcmp oeq/olt/ole/ogt/oge/une`,
//! what the lowering emits), in f32 and f16.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, SimMemory, SimOptions};
use std::cmp::Ordering;

const PREDS: [CmpPred; 6] = [
    CmpPred::Eq,
    CmpPred::Ne,
    CmpPred::Lt,
    CmpPred::Le,
    CmpPred::Gt,
    CmpPred::Ge,
];

/// out[p * n + i] = cmp(PREDS[p], x[i], y[i]) as i32, compared in `elem` (converted from f32).
fn cmp_kernel(elem: ScalarType) -> Kernel {
    let mut b = B::new(&format!("fcmp_{elem}"), Target::Gfx1201);
    let (px, _) = b.tensor("x", ScalarType::F32);
    let (py, _) = b.tensor("y", ScalarType::F32);
    let (po, _) = b.tensor("out", ScalarType::I32);
    let n = b.scalar("n", ScalarType::I32);
    let i = b.gid();
    let in_range = b.cmp(CmpPred::Lt, i, n);
    b.when(in_range, |b| {
        let mut x = b.load(px, i, F32);
        let mut y = b.load(py, i, F32);
        if elem != ScalarType::F32 {
            x = b.cast(CastKind::Convert, x, Type::s(elem));
            y = b.cast(CastKind::Convert, y, Type::s(elem));
        }
        let (one, zero) = (b.i32(1), b.i32(0));
        for (k, p) in PREDS.into_iter().enumerate() {
            let c = b.cmp(p, x, y);
            let v = b.select(c, one, zero);
            let kn = b.i32(k as i32);
            let off = b.bin(BinOp::Mul, kn, n);
            let at = b.bin(BinOp::Add, off, i);
            b.store(po, at, v);
        }
    });
    b.finish()
}

/// The IEEE result, from `partial_cmp` (None = unordered).
fn reference(p: CmpPred, x: f32, y: f32) -> bool {
    match x.partial_cmp(&y) {
        None => p == CmpPred::Ne,
        Some(o) => match p {
            CmpPred::Eq => o == Ordering::Equal,
            CmpPred::Ne => o != Ordering::Equal,
            CmpPred::Lt => o == Ordering::Less,
            CmpPred::Le => o != Ordering::Greater,
            CmpPred::Gt => o == Ordering::Greater,
            CmpPred::Ge => o != Ordering::Less,
            _ => unreachable!("unsigned predicates are integer-only"),
        },
    }
}

#[test]
fn every_float_predicate_handles_nan_like_llvm_fcmp() {
    let vals = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fa0_0000), // a signalling NaN
        1.0,
        -2.5,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let (xs, ys): (Vec<f32>, Vec<f32>) = vals
        .iter()
        .flat_map(|&x| vals.iter().map(move |&y| (x, y)))
        .unzip();
    let n = xs.len();
    for elem in [ScalarType::F32, ScalarType::F16, ScalarType::BF16] {
        let k = cmp_kernel(elem);
        let mem = SimMemory::new();
        let (dx, dy) = (upload_f32(&mem, &xs), upload_f32(&mem, &ys));
        let dout = upload_u32(&mem, &vec![7; n * PREDS.len()]);
        let args = pack(
            &k,
            &[
                Arg::Tensor(dx, n as i64),
                Arg::Tensor(dy, n as i64),
                Arg::Tensor(dout, (n * PREDS.len()) as i64),
                Arg::I32(n as i32),
            ],
        );
        launch(
            &k,
            [1, 1, 1],
            [128, 1, 1],
            &args,
            &mem,
            &SimOptions::default(),
        )
        .unwrap();
        let out = download_u32(&mem, dout, n * PREDS.len());
        let mut nan_cases = 0;
        for (pi, p) in PREDS.into_iter().enumerate() {
            for i in 0..n {
                // Every value above is exact in f16 and bf16, and NaN stays NaN.
                let want = reference(p, xs[i], ys[i]);
                nan_cases += usize::from(xs[i].is_nan() || ys[i].is_nan());
                assert_eq!(
                    out[pi * n + i],
                    u32::from(want),
                    "{elem} {p:?}({}, {})",
                    xs[i],
                    ys[i]
                );
            }
        }
        assert!(nan_cases > 0);
    }
}
