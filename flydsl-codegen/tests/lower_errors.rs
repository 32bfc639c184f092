//! Lowering errors name the kernel, the op and the reason, and never panic.

mod common_lower;
use common_lower::*;
use flydsl_codegen::lower;
use flydsl_ir::*;

#[test]
fn value_escaping_its_region_is_an_error_not_bad_ssa() {
    // Values defined inside a region are scoped to it: the verifier (run first by the
    // lowering) refuses the escape, so no invalid SSA is ever emitted.
    let mut b = KB::new("escape", Target::Sm90);
    let (x, _) = b.tensor("x", ScalarType::I32, true);
    let c = b.op(OpKind::Const(Const::Int(1)), Type::s(ScalarType::I1));
    let mut inner = None;
    b.if_(
        c,
        &[],
        |b| {
            inner = Some(b.i32(5));
            vec![]
        },
        |_| vec![],
    );
    let z = b.i32(0);
    b.op0(OpKind::Store {
        ptr: x,
        index: z,
        value: inner.unwrap(),
        flags: MemFlags::default(),
    });
    let k = b.finish();
    assert!(verify(&k).is_err());
    let e = lower(&k).unwrap_err();
    assert_eq!((e.kernel.as_str(), e.op_name.as_str()), ("escape", "Store"));
    assert!(e.reason.contains("outside the region"), "{e}");
}

#[test]
fn verifier_errors_become_lower_errors() {
    let mut b = KB::new("bad_add", Target::Gfx942);
    let a = b.i32(1);
    let f = b.op(OpKind::Const(Const::Float(1.0)), Type::s(ScalarType::F32));
    b.op(OpKind::Binary(BinOp::Add, a, f), Type::s(ScalarType::I32));
    let e = lower(&b.finish()).unwrap_err();
    assert_eq!(
        (e.kernel.as_str(), e.op_name.as_str(), e.op),
        ("bad_add", "Binary", 3)
    );
    assert!(e.to_string().contains("bad_add"));
}

#[test]
fn parameter_value_of_the_wrong_type_is_an_error() {
    let mut b = KB::new("bad_param", Target::Gfx950);
    let wrong = b.val(Type::s(ScalarType::I32));
    let n = b.val(Type::s(ScalarType::I64));
    b.k.params.push(Param {
        name: "x".into(),
        kind: ParamKind::Tensor {
            elem: ScalarType::F32,
            writable: false,
        },
    });
    b.k.param_values.push(vec![wrong, n]);
    let e = lower(&b.finish()).unwrap_err();
    assert_eq!(
        (e.kernel.as_str(), e.op_name.as_str()),
        ("bad_param", "params")
    );
    assert!(e.reason.contains("`x`"), "{e}");
}

#[test]
fn unusual_kernel_names_are_quoted_symbols() {
    let k = Kernel::empty("my kernel\"1", Target::Gfx1201);
    let ir = lower(&k).unwrap();
    assert!(ir.contains("@\"my kernel\\221\""), "{ir}");
}
