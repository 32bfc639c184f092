//! Source locations: every op the DSL records remembers the kernel-source line that wrote
//! it; verifier errors start with that `file:line:col`; the locations never reach the
//! serialized IR or the lowered LLVM IR.

use flydsl_dsl::ir::{self, ScalarType::*, Target};
use flydsl_dsl::*;
use std::cell::RefCell;

/// The ops of `b` in the verifier's pre-order numbering (op #1 first).
fn pre_order(b: &ir::Block, out: &mut Vec<ir::Op>) {
    for op in &b.ops {
        out.push(op.clone());
        match &op.kind {
            ir::OpKind::If {
                then_block,
                else_block,
                ..
            } => {
                pre_order(then_block, out);
                pre_order(else_block, out);
            }
            ir::OpKind::For { body, .. } => pre_order(body, out),
            _ => {}
        }
    }
}

/// A deliberate type error (f32 + i32) is reported at the line of this file that wrote it.
#[test]
fn a_type_error_names_the_kernel_source_line() {
    let line = RefCell::new(0);
    let e = KernelBuilder::new("bad_add", Target::Gfx942, 64)
        .build(|k| {
            let out = k.tensor_mut("out", F32);
            let f = c_f32(1.0);
            let i = thread_id_x();
            *line.borrow_mut() = line!() + 1;
            let bad = f + i;
            out.store(0, bad);
        })
        .unwrap_err();
    let BuildError::Verify(v) = &e else {
        panic!("expected a verifier error, got {e}")
    };
    let loc = v.loc.expect("the op has a location");
    assert_eq!((loc.file(), loc.line()), (file!(), *line.borrow()), "{e}");
    assert_eq!(loc.col(), 23, "{e}"); // the column of `f + i`
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "{}:{}:23: kernel `bad_add`",
            file!(),
            line.borrow()
        )),
        "{msg}"
    );
    assert!(msg.contains("Binary") && msg.contains("f32"), "{msg}");
}

/// Every op of a kernel using loops, branches, memory, wave ops and typed values is
/// attributed to a line of this file, in the verifier's numbering.
#[test]
fn every_op_is_attributed_to_the_line_that_wrote_it() {
    let lines = RefCell::new(Vec::<(u32, &'static str)>::new());
    let mark = |l: u32, what: &'static str| lines.borrow_mut().push((l, what));
    let k = KernelBuilder::new("all", Target::Gfx942, 64)
        .build(|k| {
            let x = k.tensor("x", F32);
            let n = k.scalar("n", I32);
            let out = k.tensor_mut("out", F32);
            let red = k.lds("red", F32, 1);
            let t = thread_id_x();
            mark(line!() + 1, "For");
            let s = for_range_with(0, n, 1, (c_f32(0.0), Typed::<i32>::lit(0)), |i, (a, c)| {
                mark(line!() + 1, "Load");
                let v = x.load(i);
                (a + v, c + 1)
            });
            mark(line!() + 1, "If");
            let v = if_then_else(t.lt(3), || s.0 * 2.0, || wave_reduce_sum(s.0));
            red.store(0, v);
            block_reduce(v, 64, red, 0.0, |a, b| a.max(b));
            out.rsrc().store(t, v + s.1.cast::<f32>().val());
        })
        .unwrap();
    let mut ops = vec![];
    pre_order(&k.body, &mut ops);
    assert_eq!(k.src_locs.len(), ops.len());
    let here = file!();
    for (n, op) in ops.iter().enumerate() {
        let loc = k
            .src_locs
            .op(n + 1)
            .unwrap_or_else(|| panic!("op #{} {:?} has no location", n + 1, op.kind));
        // block_reduce's internal LDS store sits in a closure inside the DSL; everything
        // else comes from this file.
        let inside_block_reduce =
            matches!(op.kind, ir::OpKind::Store { .. }) && loc.file().ends_with("reduce.rs");
        assert!(
            loc.file() == here || inside_block_reduce,
            "op #{} {:?} attributed to {loc}",
            n + 1,
            op.kind
        );
    }
    // The marked ops are numbered as the verifier numbers them.
    let line_of = |pred: &dyn Fn(&ir::OpKind) -> bool| {
        let i = ops.iter().position(|o| pred(&o.kind)).unwrap();
        k.src_locs.op(i + 1).unwrap().line()
    };
    for &(l, what) in lines.borrow().iter() {
        let got = match what {
            "For" => line_of(&|o| matches!(o, ir::OpKind::For { .. })),
            "Load" => line_of(&|o| matches!(o, ir::OpKind::Load { .. })),
            "If" => line_of(&|o| matches!(o, ir::OpKind::If { .. })),
            _ => unreachable!(),
        };
        assert_eq!(got, l, "{what}");
    }
    // A region's yield is attributed to the loop or branch that owns it.
    let for_at = ops
        .iter()
        .position(|o| matches!(o.kind, ir::OpKind::For { .. }))
        .unwrap();
    let yield_at = ops[for_at..]
        .iter()
        .position(|o| matches!(o.kind, ir::OpKind::Yield(_)))
        .unwrap()
        + for_at;
    assert_eq!(
        k.src_locs.op(yield_at + 1).unwrap(),
        k.src_locs.op(for_at + 1).unwrap()
    );
}

/// The same kernel written on different lines: equal kernels, identical serialized IR and
/// identical LLVM IR (so the build cache key does not change), different locations.
#[test]
fn locations_reach_neither_the_serialized_ir_nor_the_lowered_text() {
    let a = KernelBuilder::new("k", Target::Sm90, 32)
        .build(|k| {
            let x = k.tensor_mut("x", F32);
            let i = thread_id_x();
            x.store(i, x.load(i) * 2.0);
        })
        .unwrap();
    let b = KernelBuilder::new("k", Target::Sm90, 32)
        .build(|k| {
            let x = k.tensor_mut("x", F32);

            let i = thread_id_x();
            let v = x.load(i);
            let w = v * 2.0;
            x.store(i, w);
        })
        .unwrap();
    assert_ne!(k_lines(&a), k_lines(&b));
    assert_eq!(a, b);
    assert_eq!(ir::to_bytes(&a), ir::to_bytes(&b));
    assert_eq!(
        ir::to_bytes(&a).len(),
        ir::to_bytes(&ir::Kernel {
            src_locs: Default::default(),
            ..a.clone()
        })
        .len()
    );
    assert_eq!(
        flydsl_codegen::lower(&a).unwrap(),
        flydsl_codegen::lower(&b).unwrap()
    );
    // Decoded IR has no locations.
    assert!(ir::from_bytes(&ir::to_bytes(&a))
        .unwrap()
        .src_locs
        .is_empty());
}

fn k_lines(k: &ir::Kernel) -> Vec<u32> {
    (1..=k.src_locs.len())
        .map(|i| k.src_locs.op(i).map_or(0, |l| l.line()))
        .collect()
}

/// A lowering error names the op's source line too: a kernel with an MFMA built for gfx942,
/// then lowered for gfx1201 (which has no MFMA); the op sits inside a loop, so the
/// pre-order numbering of nested ops counts.
#[test]
fn a_lowering_error_names_the_kernel_source_line() {
    let line = RefCell::new(0);
    let mut k = KernelBuilder::new("retargeted", Target::Gfx942, 64)
        .build(|k| {
            let n = k.scalar("n", I32);
            let out = k.tensor_mut("out", F32);
            let a = splat(cnst(ir::Type::s(F16), ir::Const::Float(1.0)), 4);
            let c0 = splat(c_f32(0.0), 4);
            let c = for_range_with(0, n, 1, c0, |_, c| {
                *line.borrow_mut() = line!() + 1;
                mma(ir::MmaAtom::Mfma16x16x16F16, a, a, c)
            });
            out.store(0, c.at(0));
        })
        .unwrap();
    assert!(flydsl_codegen::lower(&k).is_ok());
    k.target = Target::Gfx1201;
    let e = flydsl_codegen::lower(&k).unwrap_err();
    let loc = e.loc.expect("the op has a location");
    assert_eq!((loc.file(), loc.line()), (file!(), *line.borrow()), "{e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{loc}: cannot lower kernel `retargeted`")) && msg.contains("Mma"),
        "{msg}"
    );
}
