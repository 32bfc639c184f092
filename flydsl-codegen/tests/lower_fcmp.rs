//! The float compare predicates lower to the LLVM `fcmp` the IR contract names: ordered for
//! `Eq`/`Lt`/`Le`/`Gt`/`Ge` (false on NaN), unordered-or-not-equal for `Ne` (true on NaN),
//! the semantics the Sim implements (flydsl-sim/tests/fcmp_nan.rs).

mod common_lower;
use common_lower::*;
use flydsl_ir::*;

fn cmp_ir(p: CmpPred, elem: ScalarType, target: Target) -> String {
    let mut b = KB::new("fcmp", target);
    let (x, _) = b.tensor("x", elem, false);
    let (out, _) = b.tensor("out", ScalarType::I32, true);
    let tid = b.tid();
    let load = |b: &mut KB, off: i64| {
        let o = b.i32(off);
        let at = b.op(OpKind::Binary(BinOp::Add, tid, o), Type::s(ScalarType::I32));
        b.op(
            OpKind::Load {
                ptr: x,
                index: at,
                flags: MemFlags::default(),
            },
            Type::s(elem),
        )
    };
    let (u, v) = (load(&mut b, 0), load(&mut b, 1024));
    let c = b.op(OpKind::Cmp(p, u, v), Type::s(ScalarType::I1));
    let (one, zero) = (b.i32(1), b.i32(0));
    let r = b.op(OpKind::Select(c, one, zero), Type::s(ScalarType::I32));
    b.op0(OpKind::Store {
        ptr: out,
        index: tid,
        value: r,
        flags: MemFlags::default(),
    });
    let k = b.finish();
    verify(&k).unwrap();
    flydsl_codegen::lower(&k).unwrap()
}

#[test]
fn float_predicates_lower_to_ordered_fcmp_and_une() {
    let table = [
        (CmpPred::Eq, "oeq"),
        (CmpPred::Ne, "une"),
        (CmpPred::Lt, "olt"),
        (CmpPred::Le, "ole"),
        (CmpPred::Gt, "ogt"),
        (CmpPred::Ge, "oge"),
    ];
    for target in Target::ALL {
        for elem in [ScalarType::F32, ScalarType::F16, ScalarType::BF16] {
            for (p, want) in table {
                let ir = cmp_ir(p, elem, target);
                let fcmps: Vec<&str> = ir.lines().filter(|l| l.contains(" fcmp ")).collect();
                assert_eq!(fcmps.len(), 1, "{target} {elem} {p:?}:\n{ir}");
                assert!(
                    fcmps[0].contains(&format!("fcmp {want} ")),
                    "{target} {elem} {p:?}: {}",
                    fcmps[0]
                );
            }
        }
    }
}
