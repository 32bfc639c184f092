//! Verifier rules: `For` bound types, unsigned compares on floats, vector lane counts.

use flydsl_ir::*;

const I32: Type = Type::Scalar(ScalarType::I32);
const I64: Type = Type::Scalar(ScalarType::I64);
const F32: Type = Type::Scalar(ScalarType::F32);

fn val(k: &mut Kernel, t: Type) -> ValueId {
    k.values.push(t);
    ValueId(k.values.len() as u32 - 1)
}

fn konst(k: &mut Kernel, t: Type, c: Const) -> ValueId {
    let r = val(k, t);
    k.body.ops.push(Op {
        results: vec![r],
        kind: OpKind::Const(c),
    });
    r
}

/// A kernel with one empty `for` loop over bounds of types `lb`, `ub`, `step`, iv `iv`.
fn for_kernel(lb: Type, ub: Type, step: Type, iv: Type) -> Kernel {
    let mut k = Kernel::empty("for", Target::Gfx942);
    let l = konst(&mut k, lb, Const::Int(0));
    let u = konst(&mut k, ub, Const::Int(10));
    let s = konst(&mut k, step, Const::Int(1));
    let iv = val(&mut k, iv);
    k.body.ops.push(Op {
        results: vec![],
        kind: OpKind::For {
            lb: l,
            ub: u,
            step: s,
            init: vec![],
            body: Block {
                args: vec![iv],
                ops: vec![Op {
                    results: vec![],
                    kind: OpKind::Yield(vec![]),
                }],
            },
        },
    });
    k
}

#[test]
fn for_bounds_are_all_i32_or_all_i64() {
    verify(&for_kernel(I32, I32, I32, I32)).unwrap();
    verify(&for_kernel(I64, I64, I64, I64)).unwrap();
    for (l, u, s, iv) in [
        (I32, I64, I32, I32),
        (I64, I64, I32, I64),
        (I64, I64, I64, I32),
        (
            Type::Scalar(ScalarType::I16),
            Type::Scalar(ScalarType::I16),
            Type::Scalar(ScalarType::I16),
            Type::Scalar(ScalarType::I16),
        ),
    ] {
        let e = verify(&for_kernel(l, u, s, iv)).unwrap_err();
        assert_eq!(e.op_name, "For", "{e}");
    }
}

fn cmp_kernel(p: CmpPred, t: Type, c: Const) -> Kernel {
    let mut k = Kernel::empty("cmp", Target::Sm90);
    let a = konst(&mut k, t, c);
    let r = val(&mut k, Type::Scalar(ScalarType::I1));
    k.body.ops.push(Op {
        results: vec![r],
        kind: OpKind::Cmp(p, a, a),
    });
    k
}

#[test]
fn unsigned_compares_are_integer_only() {
    use CmpPred::*;
    for p in [ULt, ULe, UGt, UGe] {
        verify(&cmp_kernel(p, I32, Const::Int(1))).unwrap();
        let e = verify(&cmp_kernel(p, F32, Const::Float(1.0))).unwrap_err();
        assert!(e.reason.contains("unsigned integer compare"), "{e}");
    }
    for p in [Eq, Ne, Lt, Le, Gt, Ge] {
        verify(&cmp_kernel(p, F32, Const::Float(1.0))).unwrap();
    }
}

#[test]
fn vector_lane_counts_are_checked() {
    assert_eq!(Type::vec(ScalarType::I8, 255).lanes(), 255);
    let e = Type::try_vec(ScalarType::I8, 256).unwrap_err();
    assert_eq!((e.elem, e.lanes), (ScalarType::I8, 256));
    assert!(e.to_string().contains("Type::vec: lanes = 256"), "{e}");
    assert!(std::panic::catch_unwind(|| Type::vec(ScalarType::F32, 300)).is_err());
    // A one-lane vector built by hand is rejected by the verifier.
    let mut k = Kernel::empty("v1", Target::Gfx1201);
    konst(&mut k, Type::Vector(ScalarType::F32, 1), Const::Float(0.0));
    let e = verify(&k).unwrap_err();
    assert!(e.reason.contains("2..=255 lanes"), "{e}");
}
