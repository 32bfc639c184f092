//! `KernelAttrs::max_registers` on AMD: the code object's VGPRs per lane (metadata
//! `.vgpr_count`, architectural plus accumulation) stay within the cap, for kernels that use
//! more without it. Compiled with llc-22.

mod common_lower;
use common_lower::*;
use flydsl_ir::*;

const AMD: [Target; 4] = [
    Target::Gfx942,
    Target::Gfx950,
    Target::Gfx1201,
    Target::Gfx1250,
];

fn load(b: &mut KB, ptr: ValueId, index: ValueId, t: Type) -> ValueId {
    b.op(
        OpKind::Load {
            ptr,
            index,
            flags: MemFlags {
                align: t.size_bytes(),
                ..MemFlags::default()
            },
        },
        t,
    )
}

/// 48 independent `<4 x f32>` loads multiplied together: the scheduler issues the loads early,
/// so the uncapped kernel holds many of them in registers at once.
fn many_loads(target: Target, cap: Option<u32>) -> Kernel {
    let mut b = KB::new("many_loads", target);
    b.k.attrs.max_registers = cap;
    let v4 = Type::vec(ScalarType::F32, 4);
    let (x, _) = b.tensor("x", ScalarType::F32, false);
    let (y, _) = b.tensor("y", ScalarType::F32, true);
    let tid = b.tid();
    let four = b.i32(4);
    let base = b.op(
        OpKind::Binary(BinOp::Mul, tid, four),
        Type::s(ScalarType::I32),
    );
    let mut acc = None;
    for i in 0..48 {
        let off = b.i32(i * 4096);
        let at = b.op(
            OpKind::Binary(BinOp::Add, base, off),
            Type::s(ScalarType::I32),
        );
        let v = load(&mut b, x, at, v4);
        acc = Some(match acc {
            None => v,
            Some(a) => b.op(OpKind::Binary(BinOp::Mul, a, v), v4),
        });
    }
    b.op0(OpKind::Store {
        ptr: y,
        index: base,
        value: acc.unwrap(),
        flags: MemFlags {
            align: 16,
            ..MemFlags::default()
        },
    });
    b.finish()
}

/// Eight 32x32x8 MFMA accumulators (128 registers) updated four times from distinct operands:
/// on gfx942/gfx950 they live in accumulation VGPRs, which `.vgpr_count` adds to the
/// architectural ones.
fn many_accumulators(target: Target, cap: Option<u32>) -> Kernel {
    let mut b = KB::new("many_accumulators", target);
    b.k.attrs.max_registers = cap;
    let (x, _) = b.tensor("x", ScalarType::F16, false);
    let (c, _) = b.tensor("c", ScalarType::F32, true);
    let t16 = Type::vec(ScalarType::F16, 4);
    let t32 = Type::vec(ScalarType::F32, 16);
    let i32t = Type::s(ScalarType::I32);
    let tid = b.tid();
    let four = b.i32(4);
    let sixteen = b.i32(16);
    let ia = b.op(OpKind::Binary(BinOp::Mul, tid, four), i32t);
    let ops: Vec<ValueId> = (0..8)
        .map(|i| {
            let off = b.i32(i * 4096);
            let j = b.op(OpKind::Binary(BinOp::Add, ia, off), i32t);
            load(&mut b, x, j, t16)
        })
        .collect();
    let zero = b.op(OpKind::Const(Const::Float(0.0)), t32);
    let mut accs = vec![zero; 8];
    for step in 0..4 {
        for (i, acc) in accs.iter_mut().enumerate() {
            let (p, q) = (ops[i], ops[(i + step + 1) % 8]);
            *acc = b.op(OpKind::Mma(MmaAtom::Mfma32x32x8F16, p, q, *acc), t32);
        }
    }
    let ic = b.op(OpKind::Binary(BinOp::Mul, tid, sixteen), i32t);
    for (i, acc) in accs.into_iter().enumerate() {
        for chunk in 0..4 {
            let part = b.op(OpKind::Slice(acc, chunk * 4), Type::vec(ScalarType::F32, 4));
            let off = b.i32(i as i64 * 65536 + chunk as i64 * 4);
            let j = b.op(OpKind::Binary(BinOp::Add, ic, off), i32t);
            b.op0(OpKind::Store {
                ptr: c,
                index: j,
                value: part,
                flags: MemFlags::default(),
            });
        }
    }
    b.finish()
}

fn vgprs(t: &Tools, k: &Kernel) -> (u32, Compiled) {
    verify(k).unwrap_or_else(|e| panic!("{e}"));
    let c = compile(t, k);
    let n = note_value(&c.notes, ".vgpr_count")
        .unwrap_or_else(|| panic!("no .vgpr_count in\n{}", c.notes))
        .parse()
        .unwrap();
    (n, c)
}

#[test]
fn max_registers_bounds_the_vgpr_count_on_every_amd_target() {
    let Some(t) = tools() else { return };
    for target in AMD {
        let (free, c) = vgprs(&t, &many_loads(target, None));
        assert!(!c.ir.contains("amdgpu-num-vgpr"), "{target}");
        let cap = 40;
        assert!(
            free > cap,
            "{target}: the uncapped kernel uses {free} VGPRs, not more than the cap {cap}: the \
             test kernel no longer exercises the cap"
        );
        let (capped, c) = vgprs(&t, &many_loads(target, Some(cap)));
        assert!(c.ir.contains("\"amdgpu-num-vgpr\""), "{target}:\n{}", c.ir);
        assert!(
            capped <= cap,
            "{target}: {capped} VGPRs with max_registers = {cap}"
        );
        assert_eq!(
            note_value(&c.notes, ".private_segment_fixed_size").as_deref(),
            Some("0"),
            "{target}: the cap made the kernel spill"
        );
    }
}

#[test]
fn max_registers_counts_accumulation_vgprs_on_gfx942_and_gfx950() {
    let Some(t) = tools() else { return };
    for target in [Target::Gfx942, Target::Gfx950] {
        let (free, c) = vgprs(&t, &many_accumulators(target, None));
        let agpr: u32 = note_value(&c.notes, ".agpr_count")
            .unwrap()
            .parse()
            .unwrap();
        assert!(agpr > 0, "{target}: no accumulation VGPRs used");
        let cap = 128;
        assert!(free > cap, "{target}: uncapped {free} VGPRs");
        let (capped, _) = vgprs(&t, &many_accumulators(target, Some(cap)));
        assert!(
            capped <= cap,
            "{target}: {capped} VGPRs (architectural + accumulation) with max_registers = {cap}"
        );
    }
}
