//! Tile-layer tests against the atom tables, computed independently of the layout algebra.

use super::*;
use crate::atoms::host;
use flydsl_ir::{MmaAtom, Target};

/// Every atom with the first target that has it.
fn atoms() -> Vec<(MmaAtom, Target)> {
    use MmaAtom::*;
    [
        Mfma16x16x16F16,
        Mfma16x16x16Bf16,
        Mfma32x32x8F16,
        Mfma32x32x8Bf16,
        Mfma16x16x32Fp8,
        Mfma16x16x32I8,
        Mfma16x16x32F16,
        Mfma16x16x32Bf16,
        Wmma16x16x16F16,
        Wmma16x16x16Bf16,
        Wmma16x16x32F16,
        Wmma16x16x32Bf16,
        Wmma16x16x64Fp8,
        Wmma16x16x128Fp8,
        MfmaScale16x16x128Fp8,
        MmaM16N8K16F16,
        MmaM16N8K16Bf16,
    ]
    .into_iter()
    .map(|a| {
        let t = Target::ALL
            .into_iter()
            .find(|&t| a.supported_on(t))
            .unwrap();
        (a, t)
    })
    .collect()
}

#[test]
fn atom_layouts_reproduce_the_tables() {
    for (atom, t) in atoms() {
        let tv = AtomTv::new(atom, t).unwrap_or_else(|e| panic!("{atom:?}: {e}"));
        let (na, nb, nc) = atom.frag_lanes(t.wave_size());
        for l in 0..t.wave_size() {
            let lit = |tv: &Tv, e: u32| {
                let (r, c) = tv.thr_coord_lit(l as i64);
                let (vr, vc) = tv.val_coord(e as i64);
                ((r + vr) as u32, (c + vc) as u32)
            };
            for e in 0..na {
                assert_eq!(lit(tv.a(), e), host::a(atom, l, e), "{atom:?} A {l} {e}");
            }
            for e in 0..nb {
                let (k, j) = host::b(atom, l, e);
                assert_eq!(lit(tv.b(), e), (j, k), "{atom:?} B {l} {e}");
            }
            for v in 0..nc {
                assert_eq!(lit(tv.c(), v), host::c(atom, l, v), "{atom:?} C {l} {v}");
            }
        }
    }
}

/// For each atom: every A slot (lane, e, block) gets its value from the C slot holding the
/// same (row, k), found by searching the C table.
#[test]
fn c_to_a_sends_each_element_to_its_operand_slot() {
    let mut report = vec![];
    for (atom, t) in atoms() {
        let r = c_to_a_map(atom, t).unwrap_or_else(|e| panic!("{atom:?}: {e}"));
        let (m, n, k) = atom.shape();
        let (na, _, nc) = atom.frag_lanes(t.wave_size());
        // The C holder of every (row, col) of the strip.
        let mut holder = std::collections::HashMap::new();
        for j in 0..r.c_atoms() {
            for l in 0..t.wave_size() {
                for v in 0..nc {
                    let (i, c) = host::c(atom, l, v);
                    assert!(i < m && c < n);
                    holder.insert(
                        (i, c + j * n),
                        Slot {
                            lane: l,
                            reg: v,
                            atom: j,
                        },
                    );
                }
            }
        }
        assert_eq!(
            holder.len() as u32,
            m * n * r.c_atoms(),
            "{atom:?}: C is not a bijection"
        );
        let mut moves = false;
        for b in 0..r.a_atoms() {
            for l in 0..t.wave_size() {
                for e in 0..na {
                    let (i, kk) = host::a(atom, l, e);
                    let want = holder[&(i, kk + b * k)];
                    assert_eq!(r.src(l, e, b), want, "{atom:?} A lane {l} e {e} block {b}");
                    moves |= want.lane != l;
                }
            }
        }
        assert_eq!(r.cross_lane(), moves, "{atom:?}");
        report.push(format!(
            "{atom:?}: {} C -> {} A, {}",
            r.c_atoms(),
            r.a_atoms(),
            if moves {
                "cross-lane shuffle"
            } else {
                "register permutation"
            }
        ));
    }
    println!("{}", report.join("\n"));
}

#[test]
fn swizzles_are_bijections_that_keep_16_byte_chunks() {
    use crate::layout::Coord;
    use flydsl_ir::ScalarType::{BF16, F32, F8E4M3FN};
    for (elem, rows, cols) in [
        (BF16, 64, 32),
        (BF16, 128, 64),
        (F32, 32, 16),
        (F8E4M3FN, 16, 128),
    ] {
        let chunk = 16 / elem.size_bytes() as i64;
        let chunks = (cols / chunk).min(8);
        // XOR-16: chunk j of row r at chunk j ^ (r % chunks); 128-byte: j ^ (r % 8).
        let xor16 = smem_xor16(rows, cols, elem).unwrap();
        for r in 0..rows {
            for c in 0..cols {
                let off = xor16
                    .crd2idx(&Coord::Tuple(vec![Coord::Int(r), Coord::Int(c)]))
                    .unwrap();
                let j = (c / chunk) ^ (r % chunks);
                assert_eq!(off, r * cols + j * chunk + c % chunk, "{xor16} ({r},{c})");
                if let Ok(sw) = smem_sw128(rows, cols, elem) {
                    let o = sw
                        .crd2idx(&Coord::Tuple(vec![Coord::Int(r), Coord::Int(c)]))
                        .unwrap();
                    assert_eq!(o, r * cols + ((c / chunk) ^ (r % 8)) * chunk + c % chunk);
                }
            }
        }
        for l in [xor16].into_iter().chain(smem_sw128(rows, cols, elem).ok()) {
            let mut seen = vec![false; (rows * cols) as usize];
            for r in 0..rows {
                for c in 0..cols {
                    let off = l
                        .crd2idx(&Coord::Tuple(vec![Coord::Int(r), Coord::Int(c)]))
                        .unwrap();
                    assert!(!std::mem::replace(&mut seen[off as usize], true), "{l}");
                    // Same offset inside the chunk; the chunk stays in its row.
                    assert_eq!(off % chunk, c % chunk, "{l}");
                    assert_eq!(off / cols, r, "{l}");
                }
            }
        }
    }
}

#[test]
fn tiled_copy_covers_the_tile_once() {
    use flydsl_ir::ScalarType::BF16;
    for (threads, shape) in [
        (128u32, (64i64, 32i64)),
        (256, (128, 32)),
        (64, (16, 64)),
        (8, (8, 8)),
    ] {
        let c = TiledCopy::new(CopyAtom::Vec128, BF16, threads, shape).unwrap();
        let tv = c.tv();
        let mut seen = vec![0; (shape.0 * shape.1) as usize];
        for t in 0..threads as i64 {
            let (r0, c0) = tv.thr_coord_lit(t);
            for v in 0..tv.vals() {
                let (r, cc) = tv.val_coord(v);
                seen[((r0 + r) * shape.1 + c0 + cc) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&x| x == 1), "{threads} {shape:?}");
        assert_eq!(tv.col_run(8), 8);
    }
    assert!(TiledCopy::new(CopyAtom::Tma, BF16, 128, (64, 32)).is_err());
    // More threads than accesses: refused, not silently idle.
    assert!(TiledCopy::new(CopyAtom::Vec128, BF16, 32, (8, 8)).is_err());
}

#[test]
fn sm90_16bit_mma_operands_are_ldmatrix_x4_and_x2() {
    for atom in [
        MmaAtom::native_16bit(Target::Sm90, true),
        MmaAtom::native_16bit(Target::Sm90, false),
    ] {
        let t = AtomTv::new(atom, Target::Sm90).unwrap();
        let (ta, tb, _) = atom.operand_types(Target::Sm90);
        let a = super::ldsm::plan(t.a(), ta, Target::Sm90).expect("A is one ldmatrix.x4");
        assert_eq!(a.count, 4);
        // m16n8k16 A: rows 0-7 / 8-15 of K 0-7, then of K 8-15.
        assert_eq!(a.bases, vec![(0, 0), (8, 0), (0, 8), (8, 8)]);
        let b = super::ldsm::plan(t.b(), tb, Target::Sm90).expect("B is one ldmatrix.x2");
        assert_eq!(b.bases, vec![(0, 0), (0, 8)]);
        assert!(super::ldsm::plan(t.a(), ta, Target::Gfx942).is_none());
    }
    // The C layout (f32) is no ldmatrix operand.
    let atom = MmaAtom::native_16bit(Target::Sm90, true);
    let t = AtomTv::new(atom, Target::Sm90).unwrap();
    let (_, _, tc) = atom.operand_types(Target::Sm90);
    assert!(super::ldsm::plan(t.c(), tc, Target::Sm90).is_none());
}
