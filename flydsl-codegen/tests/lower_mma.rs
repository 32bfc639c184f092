//! Every matrix atom lowered on every target that has it, compiled with llc-22, and the
//! expected instruction found; an atom on a target without it is a LowerError.

mod common_lower;
use common_lower::*;
use flydsl_ir::*;

/// The unscaled atoms (used through `OpKind::Mma`); the scaled one is tested below.
fn atoms() -> impl Iterator<Item = MmaAtom> {
    MmaAtom::ALL.into_iter().filter(|a| !a.is_scaled())
}

/// The mnemonic each atom must produce.
fn mnemonic(atom: MmaAtom) -> &'static str {
    use MmaAtom::*;
    match atom {
        Mfma16x16x16F16 => "v_mfma_f32_16x16x16_f16",
        Mfma16x16x16Bf16 => "v_mfma_f32_16x16x16_bf16",
        Mfma32x32x8F16 => "v_mfma_f32_32x32x8_f16",
        Mfma32x32x8Bf16 => "v_mfma_f32_32x32x8_bf16",
        Mfma16x16x32Fp8 => "v_mfma_f32_16x16x32_fp8_fp8",
        Mfma16x16x32I8 => "v_mfma_i32_16x16x32_i8",
        Mfma16x16x32F16 => "v_mfma_f32_16x16x32_f16",
        Mfma16x16x32Bf16 => "v_mfma_f32_16x16x32_bf16",
        Wmma16x16x16F16 => "v_wmma_f32_16x16x16_f16",
        Wmma16x16x16Bf16 => "v_wmma_f32_16x16x16_bf16",
        Wmma16x16x32F16 => "v_wmma_f32_16x16x32_f16",
        Wmma16x16x32Bf16 => "v_wmma_f32_16x16x32_bf16",
        Wmma16x16x64Fp8 => "v_wmma_f32_16x16x64_fp8_fp8",
        Wmma16x16x128Fp8 => "v_wmma_f32_16x16x128_fp8_fp8",
        MfmaScale16x16x128Fp8 => "v_mfma_scale_f32_16x16x128_f8f6f4",
        MmaM16N8K16F16 => "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        MmaM16N8K16Bf16 => "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        Mfma32x32x16F16 => "v_mfma_f32_32x32x16_f16",
        Mfma32x32x16Bf16 => "v_mfma_f32_32x32x16_bf16",
        Mfma32x32x16Fp8 => "v_mfma_f32_32x32x16_fp8_fp8",
        Mfma16x16x64I8 => "v_mfma_i32_16x16x64_i8",
        Wmma16x16x16Fp8 => "v_wmma_f32_16x16x16_fp8_fp8",
        // neg_lo bits 0 and 1 mark A and B signed.
        Wmma16x16x16I8 => "v_wmma_i32_16x16x16_iu8",
        Wmma16x16x64I8 => "v_wmma_i32_16x16x64_iu8",
        MmaM16N8K32E4M3 => "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
        MmaM16N8K32E5M2 => "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
        MmaM16N8K32S8 => "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
    }
}

/// Load a fragment of type `t` at element `idx`, in pieces of at most 16 bytes.
fn load_frag(b: &mut KB, ptr: ValueId, idx: ValueId, t: Type) -> ValueId {
    let e = t.value_elem().unwrap();
    if t.size_bytes() <= 16 {
        let flags = MemFlags {
            align: t.size_bytes(),
            nontemporal: false,
            keep_l2: false,
        };
        return b.op(
            OpKind::Load {
                ptr,
                index: idx,
                flags,
            },
            t,
        );
    }
    let per = 16 / e.size_bytes();
    let mut scalars = Vec::new();
    for chunk in 0..t.lanes() / per {
        let off = b.i32((chunk * per) as i64);
        let at = b.op(
            OpKind::Binary(BinOp::Add, idx, off),
            Type::s(ScalarType::I32),
        );
        let flags = MemFlags {
            align: 16,
            nontemporal: false,
            keep_l2: false,
        };
        let v = b.op(
            OpKind::Load {
                ptr,
                index: at,
                flags,
            },
            Type::vec(e, per),
        );
        for l in 0..per {
            scalars.push(b.op(OpKind::Extract(v, l), Type::s(e)));
        }
    }
    b.op(OpKind::Build(scalars), t)
}

/// Store an accumulator in pieces of 4 lanes.
fn store_frag(b: &mut KB, ptr: ValueId, idx: ValueId, v: ValueId) {
    let t = b.k.ty(v);
    let e = t.value_elem().unwrap();
    for chunk in 0..t.lanes() / 4 {
        let part = b.op(OpKind::Slice(v, chunk * 4), Type::vec(e, 4));
        let off = b.i32((chunk * 4) as i64);
        let at = b.op(
            OpKind::Binary(BinOp::Add, idx, off),
            Type::s(ScalarType::I32),
        );
        b.op0(OpKind::Store {
            ptr,
            index: at,
            value: part,
            flags: MemFlags::default(),
        });
    }
}

/// D = A*B + C inside a loop (the accumulator is loop-carried), fragments loaded per lane.
fn mma_kernel(atom: MmaAtom, target: Target) -> Kernel {
    let mut b = KB::new(&format!("mma_{atom:?}"), target);
    let (ta, tb, tc) = atom.operand_types(target);
    let ein = atom.in_type(target);
    let (pa, _) = b.tensor("a", ein, false);
    let (pb, _) = b.tensor("b", ein, false);
    let (pc, _) = b.tensor("c", atom.acc_type(), true);
    let iters = b.scalar("iters", ScalarType::I32);
    let tid = b.tid();
    let lanes_a = b.i32(ta.lanes() as i64);
    let lanes_b = b.i32(tb.lanes() as i64);
    let lanes_c = b.i32(tc.lanes() as i64);
    let ia = b.op(
        OpKind::Binary(BinOp::Mul, tid, lanes_a),
        Type::s(ScalarType::I32),
    );
    let ib = b.op(
        OpKind::Binary(BinOp::Mul, tid, lanes_b),
        Type::s(ScalarType::I32),
    );
    let ic = b.op(
        OpKind::Binary(BinOp::Mul, tid, lanes_c),
        Type::s(ScalarType::I32),
    );
    let a = load_frag(&mut b, pa, ia, ta);
    let bv = load_frag(&mut b, pb, ib, tb);
    let zero = b.op(OpKind::Const(Const::Int(0)), Type::s(ScalarType::I32));
    let c0 = match atom.acc_type() {
        ScalarType::I32 => b.op(OpKind::Const(Const::Int(0)), tc),
        _ => b.op(OpKind::Const(Const::Float(0.0)), tc),
    };
    let one = b.i32(1);
    let d = b.for_(zero, iters, one, &[c0], |b, _iv, acc| {
        vec![b.op(OpKind::Mma(atom, a, bv, acc[0]), tc)]
    });
    store_frag(&mut b, pc, ic, d[0]);
    b.finish()
}

#[test]
fn every_atom_emits_its_instruction_on_every_target_that_has_it() {
    let Some(t) = tools() else { return };
    let mut compiled = 0;
    for atom in atoms() {
        for target in Target::ALL {
            if !atom.supported_on(target) {
                continue;
            }
            let k = mma_kernel(atom, target);
            let c = compile(&t, &k);
            if target.is_amd() {
                check_amd_object(&k, &c);
            }
            assert!(
                c.asm.contains(mnemonic(atom)),
                "{atom:?} on {target}: `{}` missing:\n{}",
                mnemonic(atom),
                c.asm
            );
            compiled += 1;
        }
    }
    // 7 atoms on gfx942, 12 on gfx950, 4 on gfx1201, 5 on gfx1250, 5 on sm90.
    assert_eq!(compiled, 7 + 12 + 4 + 5 + 5);
}

#[test]
fn integer_wmma_marks_both_operands_signed() {
    let Some(t) = tools() else { return };
    for (atom, target) in [
        (MmaAtom::Wmma16x16x16I8, Target::Gfx1201),
        (MmaAtom::Wmma16x16x64I8, Target::Gfx1250),
    ] {
        let c = compile(&t, &mma_kernel(atom, target));
        let line = c
            .asm
            .lines()
            .find(|l| l.contains(mnemonic(atom)))
            .unwrap_or_else(|| panic!("{atom:?}: no `{}`:\n{}", mnemonic(atom), c.asm));
        assert!(line.contains("neg_lo:[1,1,0]"), "{atom:?}: {line}");
    }
}

#[test]
fn mfma_on_gfx1201_is_an_error_naming_kernel_and_op() {
    let mut b = KB::new("bad_mfma", Target::Gfx1201);
    let t16 = Type::vec(ScalarType::F16, 4);
    let t32 = Type::vec(ScalarType::F32, 4);
    let a = b.op(OpKind::Const(Const::Float(1.0)), t16);
    let c = b.op(OpKind::Const(Const::Float(0.0)), t32);
    b.op(OpKind::Mma(MmaAtom::Mfma16x16x16F16, a, a, c), t32);
    let err = flydsl_codegen::lower(&b.finish()).unwrap_err();
    assert_eq!(err.kernel, "bad_mfma");
    assert_eq!(err.op_name, "Mma");
    assert_eq!(err.op, 3);
    let msg = err.to_string();
    assert!(
        msg.contains("bad_mfma") && msg.contains("Mma") && msg.contains("gfx1201"),
        "{msg}"
    );
}

#[test]
fn every_atom_is_rejected_on_the_targets_without_it() {
    for atom in atoms() {
        for target in Target::ALL {
            if atom.supported_on(target) {
                continue;
            }
            // Operand types as some supporting target defines them.
            let home = Target::ALL
                .into_iter()
                .find(|&t| atom.supported_on(t))
                .unwrap();
            let (ta, tb, tc) = atom.operand_types(home);
            let mut b = KB::new("wrong_target", target);
            let zero = |b: &mut KB, t: Type| {
                let c = if t.value_elem().unwrap().is_float() {
                    Const::Float(0.0)
                } else {
                    Const::Int(0)
                };
                b.op(OpKind::Const(c), t)
            };
            let (a, bb, c) = (zero(&mut b, ta), zero(&mut b, tb), zero(&mut b, tc));
            b.op(OpKind::Mma(atom, a, bb, c), tc);
            let err = flydsl_codegen::lower(&b.finish()).unwrap_err();
            assert_eq!(
                (err.op_name.as_str(), err.kernel.as_str()),
                ("Mma", "wrong_target")
            );
        }
    }
}

/// D = MmaScaled(A, B, C, scale_a, scale_b) in a loop; the scale words are loaded per lane.
fn scaled_kernel(atom: MmaAtom, target: Target, op_target: Target) -> Kernel {
    let mut b = KB::new("mma_scaled", target);
    let (ta, tb, tc) = atom.operand_types(op_target);
    let ein = atom.in_type(op_target);
    let i32t = Type::s(ScalarType::I32);
    let (pa, _) = b.tensor("a", ein, false);
    let (pb, _) = b.tensor("b", ein, false);
    let (ps, _) = b.tensor("scales", ScalarType::I32, false);
    let (pc, _) = b.tensor("c", atom.acc_type(), true);
    let iters = b.scalar("iters", ScalarType::I32);
    let tid = b.tid();
    let mul = |b: &mut KB, n: u32| {
        let c = b.i32(n as i64);
        b.op(OpKind::Binary(BinOp::Mul, tid, c), i32t)
    };
    let (ia, ib, ic, is) = (
        mul(&mut b, ta.lanes()),
        mul(&mut b, tb.lanes()),
        mul(&mut b, tc.lanes()),
        mul(&mut b, 2),
    );
    let a = load_frag(&mut b, pa, ia, ta);
    let bv = load_frag(&mut b, pb, ib, tb);
    let sa = load_frag(&mut b, ps, is, i32t);
    let one = b.i32(1);
    let is1 = b.op(OpKind::Binary(BinOp::Add, is, one), i32t);
    let sb = load_frag(&mut b, ps, is1, i32t);
    let zero = b.i32(0);
    let c0 = b.op(OpKind::Const(Const::Float(0.0)), tc);
    let d = b.for_(zero, iters, one, &[c0], |b, _iv, acc| {
        vec![b.op(OpKind::MmaScaled(atom, a, bv, acc[0], sa, sb), tc)]
    });
    store_frag(&mut b, pc, ic, d[0]);
    b.finish()
}

#[test]
fn scaled_mfma_emits_its_instruction_on_gfx950() {
    let atom = MmaAtom::MfmaScale16x16x128Fp8;
    assert!(atom.is_scaled());
    assert_eq!(
        Target::ALL
            .into_iter()
            .filter(|&t| atom.supported_on(t))
            .collect::<Vec<_>>(),
        vec![Target::Gfx950]
    );
    let k = scaled_kernel(atom, Target::Gfx950, Target::Gfx950);
    let ll = flydsl_codegen::lower(&k).unwrap();
    assert!(
        ll.contains("@llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.v8i32.v8i32(")
            && ll.contains("i32 0, i32 0, i32 0, i32 %"),
        "{ll}"
    );
    let Some(t) = tools() else { return };
    let c = compile(&t, &k);
    check_amd_object(&k, &c);
    assert!(
        c.asm.contains(mnemonic(atom)),
        "`{}` missing:\n{}",
        mnemonic(atom),
        c.asm
    );
}

#[test]
fn scaled_mfma_is_rejected_on_other_targets() {
    for target in Target::ALL {
        if target == Target::Gfx950 {
            continue;
        }
        let k = scaled_kernel(MmaAtom::MfmaScale16x16x128Fp8, target, Target::Gfx950);
        let err = flydsl_codegen::lower(&k).unwrap_err();
        assert_eq!(err.op_name, "MmaScaled", "{target}: {err}");
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
}

#[test]
fn scaled_and_unscaled_ops_and_scale_types_are_checked() {
    let g = Target::Gfx950;
    let i32t = Type::s(ScalarType::I32);
    let zero = |b: &mut KB, t: Type| {
        let c = if t.value_elem().unwrap().is_float() {
            Const::Float(0.0)
        } else {
            Const::Int(0)
        };
        b.op(OpKind::Const(c), t)
    };
    // (atom, scaled op?, scale type, what the error says)
    let cases = [
        (MmaAtom::MfmaScale16x16x128Fp8, false, i32t, "use MmaScaled"),
        (MmaAtom::Mfma16x16x32Fp8, true, i32t, "takes no scales"),
        (
            MmaAtom::MfmaScale16x16x128Fp8,
            true,
            Type::s(ScalarType::F32),
            "i32 scalars",
        ),
        (
            MmaAtom::MfmaScale16x16x128Fp8,
            true,
            Type::vec(ScalarType::I32, 4),
            "i32 scalars",
        ),
        (
            MmaAtom::MfmaScale16x16x128Fp8,
            true,
            Type::s(ScalarType::I8),
            "i32 scalars",
        ),
    ];
    for (atom, scaled, st, want) in cases {
        let (ta, tb, tc) = atom.operand_types(g);
        let mut b = KB::new("bad_scaled", g);
        let (a, bb, c) = (zero(&mut b, ta), zero(&mut b, tb), zero(&mut b, tc));
        let s = zero(&mut b, st);
        let kind = if scaled {
            OpKind::MmaScaled(atom, a, bb, c, s, s)
        } else {
            OpKind::Mma(atom, a, bb, c)
        };
        b.op(kind, tc);
        let err = flydsl_codegen::lower(&b.finish()).unwrap_err();
        assert!(err.to_string().contains(want), "{atom:?}: {err}");
    }
    // Wrong A type (bf16 fragment for the fp8 atom).
    let atom = MmaAtom::MfmaScale16x16x128Fp8;
    let (_, tb, tc) = atom.operand_types(g);
    let mut b = KB::new("bad_scaled", g);
    let a = zero(&mut b, Type::vec(ScalarType::BF16, 32));
    let (bb, c, s) = (zero(&mut b, tb), zero(&mut b, tc), zero(&mut b, i32t));
    b.op(OpKind::MmaScaled(atom, a, bb, c, s, s), tc);
    let err = flydsl_codegen::lower(&b.finish()).unwrap_err();
    assert!(err.to_string().contains("takes A"), "{err}");
    // The WMMA fp8 atom with gfx942's FNUZ fp8 on gfx1250 is a type error.
    let atom = MmaAtom::Wmma16x16x64Fp8;
    let g12 = Target::Gfx1250;
    let (_, tb, tc) = atom.operand_types(g12);
    let mut b = KB::new("bad_wmma", g12);
    let a = zero(&mut b, Type::vec(ScalarType::F8E4M3FNUZ, 32));
    let (bb, c) = (zero(&mut b, tb), zero(&mut b, tc));
    b.op(OpKind::Mma(atom, a, bb, c), tc);
    let err = flydsl_codegen::lower(&b.finish()).unwrap_err();
    assert!(err.to_string().contains("takes A"), "{err}");
}
