//! The DSL builds verified IR for every proof kernel on every target, and rejects bad kernels
//! with errors that name the kernel and the op.

use flydsl_devtools::proof;
use flydsl_dsl::atoms::{check_affine, host};
use flydsl_dsl::ir::{self, MmaAtom, ScalarType::*, Target};
use flydsl_dsl::*;

#[test]
fn proof_kernels_build_on_every_target() {
    for t in Target::ALL {
        for k in [
            proof::vadd(t, F32),
            proof::vadd(t, F16),
            proof::block_sum(t),
            proof::tiled_mma(t, F16),
            proof::tiled_mma(t, BF16),
        ] {
            let k = k.unwrap_or_else(|e| panic!("{t}: {e}"));
            assert_eq!(k.target, t);
            // Serialized IR round-trips.
            assert_eq!(ir::from_bytes(&ir::to_bytes(&k)).unwrap(), k);
        }
    }
}

#[test]
fn tiled_mma_uses_the_targets_atom() {
    for t in Target::ALL {
        let k = proof::tiled_mma(t, BF16).unwrap();
        let atom = MmaAtom::native_16bit(t, true);
        let mut found = false;
        walk(&k.body, &mut |op| {
            if let ir::OpKind::Mma(a, ..) = op.kind {
                assert_eq!(a, atom);
                found = true;
            }
        });
        assert!(found, "{t}: no Mma op");
    }
}

fn walk(b: &ir::Block, f: &mut impl FnMut(&ir::Op)) {
    for op in &b.ops {
        f(op);
        match &op.kind {
            ir::OpKind::If {
                then_block,
                else_block,
                ..
            } => {
                walk(then_block, f);
                walk(else_block, f);
            }
            ir::OpKind::For { body, .. } => walk(body, f),
            _ => {}
        }
    }
}

#[test]
fn atom_layouts_are_affine_in_lane_pieces_and_bijective() {
    // Every atom on every target that has it.
    let atoms = MmaAtom::ALL
        .into_iter()
        .flat_map(|a| Target::ALL.into_iter().map(move |t| (a, t)))
        .filter(|&(a, t)| a.supported_on(t));
    for (atom, t) in atoms {
        check_affine(atom, t).unwrap();
        let (m, n, k) = atom.shape();
        let (na, nb, nc) = atom.frag_lanes(t.wave_size());
        // Every element of A, B and C is held by exactly one (lane, element).
        for (name, len, rows, cols, f) in [
            (
                "A",
                na,
                m,
                k,
                host::a as fn(MmaAtom, u32, u32) -> (u32, u32),
            ),
            ("B", nb, k, n, host::b),
            ("C", nc, m, n, host::c),
        ] {
            let mut seen = vec![0u32; (rows * cols) as usize];
            for l in 0..t.wave_size() {
                for e in 0..len {
                    let (r, c) = f(atom, l, e);
                    assert!(
                        r < rows && c < cols,
                        "{atom:?} {name}: ({r},{c}) out of tile"
                    );
                    seen[(r * cols + c) as usize] += 1;
                }
            }
            assert!(
                seen.iter().all(|&s| s == 1),
                "{atom:?} {name} is not a bijection"
            );
        }
    }
}

#[test]
fn documented_worked_values() {
    // matrix-layouts.md §9.3.
    assert_eq!(host::a(MmaAtom::Mfma16x16x16F16, 17, 2), (1, 6));
    assert_eq!(host::a(MmaAtom::Mfma16x16x16F16, 17, 3), (1, 7));
    assert_eq!(host::c(MmaAtom::Mfma16x16x16F16, 17, 3), (7, 1));
    assert_eq!(host::c(MmaAtom::Mfma32x32x8F16, 40, 5), (13, 8));
    assert_eq!(host::a(MmaAtom::Mfma16x16x32Fp8, 33, 4), (1, 20));
    assert_eq!(host::a(MmaAtom::Wmma16x16x16F16, 20, 4), (4, 12));
    assert_eq!(host::a(MmaAtom::Wmma16x16x16F16, 20, 5), (4, 13));
    // §4.2: gfx1250 WMMA fp8 `A[l%16][32*(e/16) + 16*(l/16) + e%16]`, C `D[8*(l/16)+v][l%16]`.
    assert_eq!(host::a(MmaAtom::Wmma16x16x64Fp8, 20, 3), (4, 19));
    assert_eq!(host::a(MmaAtom::Wmma16x16x64Fp8, 20, 17), (4, 49));
    assert_eq!(host::b(MmaAtom::Wmma16x16x64Fp8, 5, 16), (32, 5));
    assert_eq!(host::c(MmaAtom::Wmma16x16x64Fp8, 21, 7), (15, 5));
    // 16x16x128 fp8: the same runs, four a lane (e = 48 is run 3 of the upper lane half).
    assert_eq!(host::a(MmaAtom::Wmma16x16x128Fp8, 20, 48), (4, 112));
    assert_eq!(host::a(MmaAtom::Wmma16x16x128Fp8, 3, 63), (3, 111));
    // §2.2 [I]: scaled MFMA fp8 `A[l%16][64*(e/16) + 16*(l/16) + e%16]`, MFMA 16x16 C.
    assert_eq!(host::a(MmaAtom::MfmaScale16x16x128Fp8, 50, 2), (2, 50));
    assert_eq!(host::a(MmaAtom::MfmaScale16x16x128Fp8, 50, 18), (2, 114));
    assert_eq!(host::c(MmaAtom::MfmaScale16x16x128Fp8, 50, 1), (13, 2));
}

#[test]
fn worked_values_of_the_8_bit_and_32x32x16_atoms() {
    use MmaAtom::*;
    // §2.2: 32x32x16, lanes 0-31 hold k 0..7 and lanes 32-63 k 8..15; §1.2 fp8: A[i][k] in
    // lane i + 32*(k/8), element k%8; C as 32x32x8 (§9.3: lane 40 VGPR 5 is D[13][8]).
    for atom in [Mfma32x32x16F16, Mfma32x32x16Bf16, Mfma32x32x16Fp8] {
        assert_eq!(host::a(atom, 40, 3), (8, 11));
        assert_eq!(host::a(atom, 37, 4), (5, 12));
        assert_eq!(host::b(atom, 33, 0), (8, 1));
        assert_eq!(host::c(atom, 40, 5), (13, 8));
    }
    // §3.2 fp8 16x16x16: lane 20, element 5 is A[4][13]; C D[8*(l/16)+v][l%16].
    for atom in [Wmma16x16x16Fp8, Wmma16x16x16I8] {
        assert_eq!(host::a(atom, 20, 5), (4, 13));
        assert_eq!(host::c(atom, 20, 2), (10, 4));
    }
    // §4.2 (the fp8 runs): lane 17, element 17 is A[1][49].
    assert_eq!(host::a(Wmma16x16x64I8, 17, 17), (1, 49));
    // 16x16x64 i8 on gfx950 [I]: lane 33 holds A[1][32..48].
    assert_eq!(host::a(Mfma16x16x64I8, 33, 15), (1, 47));
    assert_eq!(host::c(Mfma16x16x64I8, 33, 3), (11, 1));
    // §5 m16n8k32: lane 6 (g 1, t 2): a13 = A[9][25], b6 = B[26][1], c3 = D[9][5].
    for atom in [MmaM16N8K32E4M3, MmaM16N8K32E5M2, MmaM16N8K32S8] {
        assert_eq!(host::a(atom, 6, 13), (9, 25));
        assert_eq!(host::b(atom, 6, 6), (26, 1));
        assert_eq!(host::c(atom, 6, 3), (9, 5));
    }
}

#[test]
fn fp8_wmma_and_scaled_mfma_build_and_lower() {
    let k = KernelBuilder::new("wmma_fp8", Target::Gfx1250, 32)
        .build(|k| {
            let out = k.tensor_mut("out", F32);
            let atom = MmaAtom::Wmma16x16x64Fp8;
            let (ta, tb, tc) = atom.operand_types(Target::Gfx1250);
            let a = cnst(ta, ir::Const::Float(1.0));
            let b = cnst(tb, ir::Const::Float(2.0));
            let c = cnst(tc, ir::Const::Float(0.0));
            let d = mma(atom, a, b, c);
            out.store(lane_id(), d.at(0));
        })
        .unwrap();
    let ll = flydsl_codegen::lower(&k).unwrap();
    assert!(
        ll.contains("@llvm.amdgcn.wmma.f32.16x16x64.fp8.fp8.v8f32.v8i32("),
        "{ll}"
    );
    let k = KernelBuilder::new("mfma_scaled", Target::Gfx950, 64)
        .build(|k| {
            let out = k.tensor_mut("out", F32);
            let atom = MmaAtom::MfmaScale16x16x128Fp8;
            let (ta, tb, tc) = atom.operand_types(Target::Gfx950);
            let a = cnst(ta, ir::Const::Float(1.0));
            let b = cnst(tb, ir::Const::Float(2.0));
            let c = cnst(tc, ir::Const::Float(0.0));
            let d = mma_scaled(atom, a, b, c, c_i32(127), c_i32(128));
            out.store(lane_id(), d.at(0));
        })
        .unwrap();
    let mut found = false;
    walk(&k.body, &mut |op| {
        found |= matches!(op.kind, ir::OpKind::MmaScaled(..));
    });
    assert!(found);
    let ll = flydsl_codegen::lower(&k).unwrap();
    assert!(
        ll.contains("@llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.v8i32.v8i32("),
        "{ll}"
    );
}

#[test]
fn scaled_mfma_misuse_is_rejected() {
    let atom = MmaAtom::MfmaScale16x16x128Fp8;
    let build = |t: Target, scaled: bool, scale_ty: ir::ScalarType| {
        KernelBuilder::new("bad_scaled", t, 64)
            .build(|_| {
                let (ta, tb, tc) = atom.operand_types(Target::Gfx950);
                let a = cnst(ta, ir::Const::Float(0.0));
                let b = cnst(tb, ir::Const::Float(0.0));
                let c = cnst(tc, ir::Const::Float(0.0));
                let s = cnst(ir::Type::s(scale_ty), ir::Const::Int(127));
                let _ = if scaled {
                    mma_scaled(atom, a, b, c, s, s)
                } else {
                    mma(atom, a, b, c)
                };
            })
            .unwrap_err()
            .to_string()
    };
    let e = build(Target::Gfx942, true, I32);
    assert!(e.contains("gfx942") && e.contains("MmaScaled"), "{e}");
    let e = build(Target::Gfx950, false, I32);
    assert!(e.contains("use MmaScaled"), "{e}");
    let e = build(Target::Gfx950, true, I64);
    assert!(e.contains("i32 scalars"), "{e}");
}

#[test]
fn type_errors_name_kernel_and_op() {
    let e = KernelBuilder::new("bad_add", Target::Gfx942, 64)
        .build(|k| {
            let x = k.tensor_mut("x", F32);
            let i = thread_id_x();
            let v = x.load(i) + i; // f32 + i32
            x.store(i, v);
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad_add") && e.contains("Binary"), "{e}");
}

#[test]
fn atom_on_wrong_target_is_rejected() {
    let e = KernelBuilder::new("wrong_atom", Target::Gfx1201, 32)
        .build(|_| {
            let z16 = cnst(ir::Type::vec(F16, 4), ir::Const::Float(0.0));
            let z = cnst(ir::Type::vec(F32, 4), ir::Const::Float(0.0));
            let _ = mma(MmaAtom::Mfma16x16x16F16, z16, z16, z);
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("wrong_atom") && e.contains("Mfma16x16x16F16") && e.contains("gfx1201"),
        "{e}"
    );
}

#[test]
fn lds_over_the_limit_is_rejected() {
    let e = KernelBuilder::new("big_lds", Target::Gfx942, 64)
        .build(|k| {
            k.lds("huge", F32, 20_000);
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("big_lds") && e.contains("65536"), "{e}");
    // The same size fits gfx950's 160 KiB.
    KernelBuilder::new("big_lds", Target::Gfx950, 64)
        .build(|k| {
            k.lds("huge", F32, 20_000);
        })
        .unwrap();
}

#[test]
fn dynamic_lds_arrays_follow_the_host_layout_rule() {
    let k = KernelBuilder::new("dyn", Target::Gfx942, 64)
        .build(|k| {
            let n = k.scalar("n", I32);
            let out = k.tensor_mut("out", I32);
            let mut region = k.lds_dynamic("smem");
            region.array(F16, n);
            region.array(F32, 3);
            out.store(0, region.bytes());
        })
        .unwrap();
    assert_eq!(k.dynamic_lds.as_ref().unwrap().name, "smem");
    assert_eq!(k.dynamic_lds_offset(), 0);
    // Two DynLdsBase ops, lowered as offsets into the external region.
    let ll = flydsl_codegen::lower(&k).unwrap();
    assert!(
        ll.contains("@__flydsl_dyn_lds = external addrspace(3) global [0 x i8], align 16"),
        "{ll}"
    );
    assert_eq!(
        ll.matches("ptr addrspace(3) @__flydsl_dyn_lds, i32")
            .count(),
        2,
        "{ll}"
    );
    // The Sim computes the kernel's byte count; the host rule must agree for every n.
    for n in [0i32, 1, 7, 8, 1001] {
        let got = sim_out0(&k, n);
        let (_, want) = ir::dynamic_lds_layout(&[(F16, n as u64), (F32, 3)]).unwrap();
        assert_eq!(got as u64, want, "n={n}");
    }
}

/// Run a one-thread kernel `(n: i32, out: i32 tensor)` on the Sim and read `out[0]`.
fn sim_out0(k: &ir::Kernel, n: i32) -> i32 {
    {
        let mem = flydsl_sim::SimMemory::new();
        let out = mem.alloc(4).unwrap();
        let layout = k.kernarg_layout();
        let mut args = vec![0u8; layout.size as usize];
        for s in &layout.slots {
            let o = s.offset as usize;
            match s.name.as_str() {
                "n" => args[o..o + 4].copy_from_slice(&n.to_le_bytes()),
                "out" => args[o..o + 8].copy_from_slice(&out.to_le_bytes()),
                _ => args[o..o + 8].copy_from_slice(&1u64.to_le_bytes()),
            }
        }
        let opts = flydsl_sim::SimOptions::default();
        flydsl_sim::launch(k, [1, 1, 1], [1, 1, 1], &args, &mem, &opts).unwrap();
        let mut b = [0u8; 4];
        mem.read(out, &mut b).unwrap();
        i32::from_le_bytes(b)
    }
}

#[test]
fn a_second_dynamic_region_and_an_undeclared_one_are_errors() {
    let e = KernelBuilder::new("two_regions", Target::Sm90, 32)
        .build(|k| {
            k.lds_dynamic("a");
            k.lds_dynamic("b");
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("two_regions") && e.contains("declared twice"),
        "{e}"
    );
    // Raw IR: a DynLdsBase in a kernel without a region fails verification, naming the op.
    let mut k = ir::Kernel::empty("no_region", Target::Gfx1201);
    let off = ir::ValueId(0);
    let p = ir::ValueId(1);
    k.values = vec![ir::Type::s(I32), ir::Type::Ptr(ir::AddrSpace::Shared, F32)];
    k.body.ops = vec![
        ir::Op {
            results: vec![off],
            kind: ir::OpKind::Const(ir::Const::Int(0)),
        },
        ir::Op {
            results: vec![p],
            kind: ir::OpKind::DynLdsBase(off),
        },
    ];
    let e = ir::verify(&k).unwrap_err().to_string();
    assert!(
        e.contains("no_region") && e.contains("no dynamic LDS region"),
        "{e}"
    );
}

#[test]
fn panics_in_descriptions_become_errors() {
    let e = KernelBuilder::new("boom", Target::Sm90, 32)
        .build(|_| panic!("tile size 7 does not divide 32"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("boom") && e.contains("tile size 7"), "{e}");
}

#[test]
fn values_do_not_escape_their_region() {
    let e = KernelBuilder::new("escape", Target::Gfx942, 64)
        .build(|k| {
            let x = k.tensor_mut("x", F32);
            let t = thread_id_x();
            let mut inner = None;
            if_(t.lt(3), || inner = Some(x.load(t) * 2.0));
            x.store(t, inner.unwrap());
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("escape") && e.contains("outside the region"),
        "{e}"
    );
}

/// The generator's lane maps ([`host`]) and the Sim's (`flydsl_sim::mma_layout`), written
/// independently from matrix-layouts.md, agree on every slot of every atom on every target
/// that has it.
#[test]
fn generator_and_sim_lane_maps_agree() {
    use flydsl_sim::mma_layout as sim;
    let mut checked = 0;
    for atom in MmaAtom::ALL {
        for t in Target::ALL.into_iter().filter(|&t| atom.supported_on(t)) {
            let (na, nb, nc) = atom.frag_lanes(t.wave_size());
            for l in 0..t.wave_size() {
                let u = |(r, c): (usize, usize)| (r as u32, c as u32);
                let lu = l as usize;
                for e in 0..na {
                    let s = u(sim::a_coord(atom, t, lu, e as usize));
                    assert_eq!(host::a(atom, l, e), s, "{atom:?}/{t} A l{l} e{e}");
                }
                for e in 0..nb {
                    let s = u(sim::b_coord(atom, t, lu, e as usize));
                    assert_eq!(host::b(atom, l, e), s, "{atom:?}/{t} B l{l} e{e}");
                }
                for v in 0..nc {
                    let s = u(sim::c_coord(atom, t, lu, v as usize));
                    assert_eq!(host::c(atom, l, v), s, "{atom:?}/{t} C l{l} v{v}");
                }
            }
            checked += 1;
        }
    }
    // 7 atoms on gfx942, 13 on gfx950 (with the scaled one), 4 on gfx1201, 5 on gfx1250,
    // 5 on sm90.
    assert_eq!(checked, 7 + 13 + 4 + 5 + 5);
}

#[test]
fn a_vector_of_too_many_lanes_is_a_build_error() {
    let lanes = ir::Type::MAX_LANES + 45;
    let e = KernelBuilder::new("wide", Target::Gfx942, 64)
        .build(|k| {
            let x = k.tensor_mut("x", F32);
            let t = thread_id_x();
            let v = splat(x.load(t), lanes);
            x.store(t, v.slice(0, 1));
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("wide")
            && e.contains(&format!("lanes = {lanes}"))
            && e.contains(&format!("1..={}", ir::Type::MAX_LANES)),
        "{e}"
    );
}
