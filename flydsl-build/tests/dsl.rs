//! The DSL builds verified IR for every proof kernel on every target, and rejects bad kernels
//! with errors that name the kernel and the op.

use flydsl_build::dsl::atoms::{check_affine, host};
use flydsl_build::dsl::*;
use flydsl_build::ir::{self, MmaAtom, ScalarType::*, Target};
use flydsl_build::proof;

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
    let atoms = [
        (MmaAtom::Mfma16x16x16F16, Target::Gfx942),
        (MmaAtom::Mfma32x32x8Bf16, Target::Gfx942),
        (MmaAtom::Mfma16x16x32Fp8, Target::Gfx942),
        (MmaAtom::Mfma16x16x32Bf16, Target::Gfx950),
        (MmaAtom::Wmma16x16x16F16, Target::Gfx1201),
        (MmaAtom::Wmma16x16x32Bf16, Target::Gfx1250),
        (MmaAtom::MmaM16N8K16Bf16, Target::Sm90),
    ];
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
