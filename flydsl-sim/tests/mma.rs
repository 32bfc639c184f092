//! Matrix atoms: layout functions vs the documented formulas (matrix-layouts.md §1.2, §2.2,
//! §3.2, §4.2, §5) and worked values (§9.3); one-hot probes (§9.1), identity tiles (§9.2) and
//! random small-integer GEMM tiles executed through `OpKind::Mma`, compared exactly with a CPU
//! matmul. Fragments are packed with the test's own copy of the documented formulas.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::fp8::{self, Fp8Format};
use flydsl_sim::mma_layout::{a_coord, b_coord, c_coord};
use flydsl_sim::{launch, SimMemory, SimOptions};
use MmaAtom::*;

const ATOMS: [(MmaAtom, Target); 33] = [
    (Mfma16x16x16F16, Target::Gfx942),
    (Mfma16x16x16Bf16, Target::Gfx942),
    (Mfma32x32x8F16, Target::Gfx942),
    (Mfma32x32x8Bf16, Target::Gfx942),
    (Mfma16x16x32Fp8, Target::Gfx942),
    (Mfma16x16x32I8, Target::Gfx942),
    (Mfma16x16x16F16, Target::Gfx950),
    (Mfma16x16x16Bf16, Target::Gfx950),
    (Mfma32x32x8F16, Target::Gfx950),
    (Mfma32x32x8Bf16, Target::Gfx950),
    (Mfma16x16x32Fp8, Target::Gfx950),
    (Mfma16x16x32I8, Target::Gfx950),
    (Mfma16x16x32F16, Target::Gfx950),
    (Mfma16x16x32Bf16, Target::Gfx950),
    (Wmma16x16x16F16, Target::Gfx1201),
    (Wmma16x16x16Bf16, Target::Gfx1201),
    (Wmma16x16x32F16, Target::Gfx1250),
    (Wmma16x16x32Bf16, Target::Gfx1250),
    (Wmma16x16x64Fp8, Target::Gfx1250),
    (Wmma16x16x128Fp8, Target::Gfx1250),
    (MmaM16N8K16F16, Target::Sm90),
    (MmaM16N8K16Bf16, Target::Sm90),
    (Mfma32x32x16Fp8, Target::Gfx942),
    (Mfma32x32x16F16, Target::Gfx950),
    (Mfma32x32x16Bf16, Target::Gfx950),
    (Mfma32x32x16Fp8, Target::Gfx950),
    (Mfma16x16x64I8, Target::Gfx950),
    (Wmma16x16x16Fp8, Target::Gfx1201),
    (Wmma16x16x16I8, Target::Gfx1201),
    (Wmma16x16x64I8, Target::Gfx1250),
    (MmaM16N8K32E4M3, Target::Sm90),
    (MmaM16N8K32E5M2, Target::Sm90),
    (MmaM16N8K32S8, Target::Sm90),
];

/// The documented A map: (i, k) of lane `l`, element `e`.
fn doc_a(atom: MmaAtom, l: usize, e: usize) -> (usize, usize) {
    match atom {
        Mfma16x16x16F16 | Mfma16x16x16Bf16 => (l % 16, 4 * (l / 16) + e),
        Mfma32x32x8F16 | Mfma32x32x8Bf16 => (l % 32, 4 * (l / 32) + e),
        Mfma16x16x32Fp8 | Mfma16x16x32I8 | Mfma16x16x32F16 | Mfma16x16x32Bf16 => {
            (l % 16, 8 * (l / 16) + e)
        }
        Wmma16x16x16F16 | Wmma16x16x16Bf16 => (l % 16, 8 * (e / 4) + 4 * (l / 16) + e % 4),
        Wmma16x16x32F16 | Wmma16x16x32Bf16 => (l % 16, 16 * (e / 8) + 8 * (l / 16) + e % 8),
        // §4.2 [S/I]
        Wmma16x16x64Fp8 | Wmma16x16x128Fp8 => (l % 16, 32 * (e / 16) + 16 * (l / 16) + e % 16),
        // §2.2 [I] (unverified on hardware)
        MfmaScale16x16x128Fp8 => (l % 16, 64 * (e / 16) + 16 * (l / 16) + e % 16),
        MmaM16N8K16F16 | MmaM16N8K16Bf16 => {
            let (g, t) = (l >> 2, l % 4);
            (g + 8 * ((e / 2) % 2), 2 * t + e % 2 + 8 * (e / 4))
        }
        // §2.2 (f16/bf16 [S]), §1.2 "32x32x16 fp8, for reference" (lane i + 32*(k/8), e = k%8)
        Mfma32x32x16F16 | Mfma32x32x16Bf16 | Mfma32x32x16Fp8 => (l % 32, 8 * (l / 32) + e),
        // [I]: not in matrix-layouts.md; 16 K-contiguous bytes a lane (unobservable, §0.1)
        Mfma16x16x64I8 => (l % 16, 16 * (l / 16) + e),
        // §3.2 "A fp8 (16x16x16)" [X]; iu8 the same [I]
        Wmma16x16x16Fp8 | Wmma16x16x16I8 => (l % 16, 8 * (l / 16) + e),
        // §4.2 fp8 order [S/I], assumed for iu8
        Wmma16x16x64I8 => (l % 16, 32 * (e / 16) + 16 * (l / 16) + e % 16),
        // §5 m16n8k32 A table
        MmaM16N8K32E4M3 | MmaM16N8K32E5M2 | MmaM16N8K32S8 => {
            let (g, t) = (l >> 2, l % 4);
            (g + 8 * ((e / 4) % 2), 4 * t + e % 4 + 16 * (e / 8))
        }
    }
}

/// The documented B map: (k, j). AMD: A's map with i replaced by j.
fn doc_b(atom: MmaAtom, l: usize, e: usize) -> (usize, usize) {
    match atom {
        MmaM16N8K16F16 | MmaM16N8K16Bf16 => {
            let (g, t) = (l >> 2, l % 4);
            (2 * t + e % 2 + 8 * (e / 2), g)
        }
        MmaM16N8K32E4M3 | MmaM16N8K32E5M2 | MmaM16N8K32S8 => {
            let (g, t) = (l >> 2, l % 4);
            (4 * t + e % 4 + 16 * (e / 4), g)
        }
        _ => {
            let (j, k) = doc_a(atom, l, e);
            (k, j)
        }
    }
}

/// The documented C/D map: (i, j).
fn doc_c(atom: MmaAtom, l: usize, v: usize) -> (usize, usize) {
    match atom {
        Mfma32x32x8F16 | Mfma32x32x8Bf16 | Mfma32x32x16F16 | Mfma32x32x16Bf16 | Mfma32x32x16Fp8 => {
            (8 * (v / 4) + 4 * (l / 32) + v % 4, l % 32)
        }
        Wmma16x16x16F16 | Wmma16x16x16Bf16 | Wmma16x16x32F16 | Wmma16x16x32Bf16
        | Wmma16x16x64Fp8 | Wmma16x16x128Fp8 | Wmma16x16x16Fp8 | Wmma16x16x16I8
        | Wmma16x16x64I8 => (8 * (l / 16) + v, l % 16),
        MmaM16N8K16F16 | MmaM16N8K16Bf16 | MmaM16N8K32E4M3 | MmaM16N8K32E5M2 | MmaM16N8K32S8 => {
            let (g, t) = (l >> 2, l % 4);
            (g + 8 * (v / 2), 2 * t + v % 2)
        }
        _ => (4 * (l / 16) + v, l % 16),
    }
}

fn lens(atom: MmaAtom, target: Target) -> (usize, usize, usize, usize) {
    let (a, b, c) = atom.frag_lanes(target.wave_size());
    (
        target.wave_size() as usize,
        a as usize,
        b as usize,
        c as usize,
    )
}

#[test]
fn layout_functions_match_the_documented_maps_and_are_bijections() {
    let scaled = [(MfmaScale16x16x128Fp8, Target::Gfx950)];
    for (atom, target) in ATOMS.into_iter().chain(scaled) {
        let (ws, la, lb, lc) = lens(atom, target);
        let (m, n, k) = atom.shape();
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let mut seen_a = vec![0; m * k];
        let mut seen_b = vec![0; k * n];
        let mut seen_c = vec![0; m * n];
        for l in 0..ws {
            for e in 0..la {
                assert_eq!(
                    a_coord(atom, target, l, e),
                    doc_a(atom, l, e),
                    "{atom:?} A l{l} e{e}"
                );
                let (i, kk) = doc_a(atom, l, e);
                seen_a[i * k + kk] += 1;
            }
            for e in 0..lb {
                assert_eq!(
                    b_coord(atom, target, l, e),
                    doc_b(atom, l, e),
                    "{atom:?} B l{l} e{e}"
                );
                let (kk, j) = doc_b(atom, l, e);
                seen_b[kk * n + j] += 1;
            }
            for v in 0..lc {
                assert_eq!(
                    c_coord(atom, target, l, v),
                    doc_c(atom, l, v),
                    "{atom:?} C l{l} v{v}"
                );
                let (i, j) = doc_c(atom, l, v);
                seen_c[i * n + j] += 1;
            }
        }
        assert!(seen_a.iter().all(|&c| c == 1), "{atom:?} A not a bijection");
        assert!(seen_b.iter().all(|&c| c == 1), "{atom:?} B not a bijection");
        assert!(seen_c.iter().all(|&c| c == 1), "{atom:?} C not a bijection");
    }
}

#[test]
fn worked_values_of_section_9_3() {
    let g = Target::Gfx942;
    assert_eq!(a_coord(Mfma16x16x16F16, g, 17, 2), (1, 6));
    assert_eq!(a_coord(Mfma16x16x16F16, g, 17, 3), (1, 7));
    assert_eq!(c_coord(Mfma16x16x16F16, g, 17, 3), (7, 1));
    assert_eq!(c_coord(Mfma32x32x8F16, g, 40, 5), (13, 8));
    for byte in 0..4 {
        assert_eq!(a_coord(Mfma16x16x32Fp8, g, 33, 4 + byte), (1, 20 + byte));
    }
    assert_eq!(a_coord(Wmma16x16x16F16, Target::Gfx1201, 20, 4), (4, 12));
    assert_eq!(a_coord(Wmma16x16x16F16, Target::Gfx1201, 20, 5), (4, 13));
}

/// Values read off the prose and tables of matrix-layouts.md by hand for the atoms §9.3 has
/// no worked values for.
#[test]
fn worked_values_of_the_8_bit_and_32x32x16_atoms() {
    // §2.2: 32x32x16 f16, lanes 32-63 hold k 8..15; C as 32x32x8 (§9.3: lane 40 v5 = D[13][8]).
    for atom in [Mfma32x32x16F16, Mfma32x32x16Bf16, Mfma32x32x16Fp8] {
        assert_eq!(a_coord(atom, Target::Gfx950, 40, 3), (8, 11));
        assert_eq!(a_coord(atom, Target::Gfx950, 31, 7), (31, 7));
        assert_eq!(b_coord(atom, Target::Gfx950, 33, 0), (8, 1));
        assert_eq!(c_coord(atom, Target::Gfx950, 40, 5), (13, 8));
    }
    // §1.2: 32x32x16 fp8, A[i][k] in lane i + 32*(k/8), element k%8: A[5][12] -> lane 37, e 4.
    assert_eq!(a_coord(Mfma32x32x16Fp8, Target::Gfx942, 37, 4), (5, 12));
    // §3.2: gfx1201 fp8 A[l%16][8*(l/16) + e]: lane 20, VGPR 1 byte 1 (e = 5) holds A[4][13].
    assert_eq!(a_coord(Wmma16x16x16Fp8, Target::Gfx1201, 20, 5), (4, 13));
    assert_eq!(c_coord(Wmma16x16x16I8, Target::Gfx1201, 20, 2), (10, 4));
    // §4.2: gfx1250 16x16x64: lane 17, e 17 (VGPR 4 byte 1) holds A[1][32 + 16 + 1].
    assert_eq!(a_coord(Wmma16x16x64I8, Target::Gfx1250, 17, 17), (1, 49));
    // §5 m16n8k32: lane 6 (g 1, t 2), a13 (byte 1 of reg 3) is A[9][25]; b6 is B[26][1];
    // c3 is D[9][5].
    for atom in [MmaM16N8K32E4M3, MmaM16N8K32E5M2, MmaM16N8K32S8] {
        assert_eq!(a_coord(atom, Target::Sm90, 6, 13), (9, 25));
        assert_eq!(b_coord(atom, Target::Sm90, 6, 6), (26, 1));
        assert_eq!(c_coord(atom, Target::Sm90, 6, 3), (9, 5));
    }
}

/// Encode a small integer in the atom's input type.
fn enc(t: ScalarType, x: i32) -> u64 {
    match t {
        ScalarType::F16 => half::f16::from_f32(x as f32).to_bits() as u64,
        ScalarType::BF16 => ((x as f32).to_bits() >> 16) as u64,
        ScalarType::I8 => x as i8 as u8 as u64,
        _ => {
            let f = Fp8Format::of(t).unwrap();
            let c = fp8::encode(f, x as f32);
            assert_eq!(fp8::decode(f, c), x as f32);
            c as u64
        }
    }
}

/// A kernel computing one tile per wave: fragments of wave w at [w * ws * len ..]; a scaled
/// atom also reads one scale word per lane from `sa` and `sb`.
fn mma_kernel(atom: MmaAtom, target: Target) -> Kernel {
    let (la, lb, lc) = {
        let (_, a, b, c) = lens(atom, target);
        (a, b, c)
    };
    let it = atom.in_type(target);
    let at = atom.acc_type();
    let mut b = B::new(&format!("mma_{atom:?}"), target);
    let (pa, _) = b.tensor("a", it);
    let (pb, _) = b.tensor("b", it);
    let (pc, _) = b.tensor("c", at);
    let (pd, _) = b.tensor("d", at);
    let scales = atom.is_scaled().then(|| {
        (
            b.tensor("sa", ScalarType::I32).0,
            b.tensor("sb", ScalarType::I32).0,
        )
    });
    let g = b.gid();
    let frag = |b: &mut B, p: ValueId, len: usize, t: ScalarType| {
        let cl = b.i32(len as i32);
        let base = b.bin(BinOp::Mul, g, cl);
        let elems: Vec<ValueId> = (0..len)
            .map(|e| {
                let ce = b.i32(e as i32);
                let idx = b.bin(BinOp::Add, base, ce);
                b.load(p, idx, Type::Scalar(t))
            })
            .collect();
        (b.op(OpKind::Build(elems), Type::vec(t, len as u32)), base)
    };
    let (va, _) = frag(&mut b, pa, la, it);
    let (vb, _) = frag(&mut b, pb, lb, it);
    let (vc, cbase) = frag(&mut b, pc, lc, at);
    let kind = match scales {
        Some((psa, psb)) => {
            let sa = b.load(psa, g, I32);
            let sb = b.load(psb, g, I32);
            OpKind::MmaScaled(atom, va, vb, vc, sa, sb)
        }
        None => OpKind::Mma(atom, va, vb, vc),
    };
    let d = b.op(kind, Type::vec(at, lc as u32));
    for e in 0..lc {
        let x = b.op(OpKind::Extract(d, e as u32), Type::Scalar(at));
        let ce = b.i32(e as i32);
        let idx = b.bin(BinOp::Add, cbase, ce);
        b.store(pd, idx, x);
    }
    b.finish()
}

/// Run `tiles` (A, B, C integer matrices) through the atom; return each D.
fn run_tiles(
    atom: MmaAtom,
    target: Target,
    tiles: &[(Vec<i32>, Vec<i32>, Vec<i32>)],
) -> Vec<Vec<i64>> {
    let int = atom.acc_type() == ScalarType::I32;
    run_tiles_bits(atom, target, tiles, None)
        .into_iter()
        .map(|d| {
            d.into_iter()
                .map(|bits| {
                    if int {
                        bits as i32 as i64
                    } else {
                        let f = f32::from_bits(bits);
                        assert_eq!(f.fract(), 0.0, "non-integer result {f}");
                        f as i64
                    }
                })
                .collect()
        })
        .collect()
}

/// Run `tiles` through the atom, with per-tile, per-lane scale words `(sa, sb)` for a scaled
/// atom; return the bits of each D in row-major order.
fn run_tiles_bits(
    atom: MmaAtom,
    target: Target,
    tiles: &[(Vec<i32>, Vec<i32>, Vec<i32>)],
    scales: Option<&[(Vec<u32>, Vec<u32>)]>,
) -> Vec<Vec<u32>> {
    let (ws, la, lb, lc) = lens(atom, target);
    let (_, n, k) = atom.shape();
    let (n, k) = (n as usize, k as usize);
    let it = atom.in_type(target);
    let int = atom.acc_type() == ScalarType::I32;
    let es = it.size_bytes() as usize;
    let nt = tiles.len();
    let (mut fa, mut fb, mut fc) = (
        vec![0u8; nt * ws * la * es],
        vec![0u8; nt * ws * lb * es],
        vec![0u32; nt * ws * lc],
    );
    for (w, (a, bm, c)) in tiles.iter().enumerate() {
        for l in 0..ws {
            for e in 0..la {
                let (i, kk) = doc_a(atom, l, e);
                let bits = enc(it, a[i * k + kk]);
                let o = ((w * ws + l) * la + e) * es;
                fa[o..o + es].copy_from_slice(&bits.to_le_bytes()[..es]);
            }
            for e in 0..lb {
                let (kk, j) = doc_b(atom, l, e);
                let bits = enc(it, bm[kk * n + j]);
                let o = ((w * ws + l) * lb + e) * es;
                fb[o..o + es].copy_from_slice(&bits.to_le_bytes()[..es]);
            }
            for v in 0..lc {
                let (i, j) = doc_c(atom, l, v);
                let x = c[i * n + j];
                fc[(w * ws + l) * lc + v] = if int { x as u32 } else { (x as f32).to_bits() };
            }
        }
    }
    let kern = mma_kernel(atom, target);
    let mem = SimMemory::new();
    let (da, db, dc) = (
        upload_bytes(&mem, &fa),
        upload_bytes(&mem, &fb),
        upload_u32(&mem, &fc),
    );
    let dd = mem.alloc(fc.len() as u64 * 4).unwrap();
    let mut args = vec![
        Arg::Tensor(da, (fa.len() / es) as i64),
        Arg::Tensor(db, (fb.len() / es) as i64),
        Arg::Tensor(dc, fc.len() as i64),
        Arg::Tensor(dd, fc.len() as i64),
    ];
    assert_eq!(scales.is_some(), atom.is_scaled());
    if let Some(sc) = scales {
        assert_eq!(sc.len(), nt);
        let sa: Vec<u32> = sc.iter().flat_map(|(a, _)| a.iter().copied()).collect();
        let sb: Vec<u32> = sc.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        assert_eq!((sa.len(), sb.len()), (nt * ws, nt * ws));
        args.push(Arg::Tensor(upload_u32(&mem, &sa), sa.len() as i64));
        args.push(Arg::Tensor(upload_u32(&mem, &sb), sb.len() as i64));
    }
    launch(
        &kern,
        [nt as u32, 1, 1],
        [ws as u32, 1, 1],
        &pack(&kern, &args),
        &mem,
        &SimOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{atom:?} on {target}: {e}"));
    let out = download_u32(&mem, dd, fc.len());
    let m = atom.shape().0 as usize;
    (0..nt)
        .map(|w| {
            let mut d = vec![0u32; m * n];
            for l in 0..ws {
                for v in 0..lc {
                    let (i, j) = doc_c(atom, l, v);
                    d[i * n + j] = out[(w * ws + l) * lc + v];
                }
            }
            d
        })
        .collect()
}

fn is_fp8(atom: MmaAtom) -> bool {
    Fp8Format::of(atom.in_type(Target::Gfx950)).is_some()
}

/// The largest `r` such that every integer 1..=r is exact in the atom's input type, capped at
/// what a K index needs: 16 for E4M3 (3 mantissa bits), 8 for E5M2 (2), 127 for i8, K for
/// 16-bit floats.
fn exact_radix(atom: MmaAtom) -> usize {
    let t = atom.in_type(Target::Sm90);
    match t {
        ScalarType::F8E5M2 | ScalarType::F8E5M2FNUZ => 8,
        _ if is_fp8(atom) => 16,
        ScalarType::I8 => 127,
        _ => usize::MAX,
    }
}

/// A positive probe value for K index `k` seen from output column (or row) `x`, exact in the
/// atom's input type; the values over x = 0, 1 identify k. Where `k + 1` is exact: `k + 1`.
/// Otherwise (fp8 with K = 32 .. 128, i8 with K = 128): with `r` = [`exact_radix`],
/// `k % r + 1` for even x, `k / r + 1` for odd x.
fn probe_val(atom: MmaAtom, k: usize, x: usize) -> i32 {
    let r = exact_radix(atom);
    if (atom.shape().2 as usize) <= r {
        k as i32 + 1
    } else if x % 2 == 1 {
        (k / r) as i32 + 1
    } else {
        (k % r) as i32 + 1
    }
}

fn cpu_mma(m: usize, n: usize, k: usize, a: &[i32], b: &[i32], c: &[i32]) -> Vec<i64> {
    let mut d = vec![0i64; m * n];
    for i in 0..m {
        for j in 0..n {
            d[i * n + j] = c[i * n + j] as i64
                + (0..k)
                    .map(|kk| a[i * k + kk] as i64 * b[kk * n + j] as i64)
                    .sum::<i64>();
        }
    }
    d
}

#[test]
fn one_hot_probes_find_every_register_slot() {
    // The gfx950 copies of the gfx942 atoms share the layout code; only fp8 decodes differently.
    let probed = ATOMS.into_iter().filter(|&(a, t)| {
        t != Target::Gfx950
            || a.supported_on(Target::Gfx950) && !a.supported_on(Target::Gfx942)
            || a == Mfma16x16x32Fp8
    });
    for (atom, target) in probed {
        let (ws, la, lb, _) = lens(atom, target);
        let (m, n, k) = atom.shape();
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let zero_c = vec![0; m * n];
        // A probes: one slot = 1, B[k][j] = k + 1.
        let bk: Vec<i32> = (0..k * n).map(|x| probe_val(atom, x / n, x % n)).collect();
        let mut tiles = Vec::new();
        let mut slots = Vec::new();
        for l in 0..ws {
            for e in 0..la {
                let (i, kk) = doc_a(atom, l, e);
                let mut a = vec![0; m * k];
                a[i * k + kk] = 1;
                tiles.push((a, bk.clone(), zero_c.clone()));
                slots.push((i, kk));
            }
        }
        let ds = run_tiles(atom, target, &tiles);
        for (d, &(i, kk)) in ds.iter().zip(&slots) {
            for ii in 0..m {
                for j in 0..n {
                    let want = if ii == i {
                        probe_val(atom, kk, j) as i64
                    } else {
                        0
                    };
                    assert_eq!(
                        d[ii * n + j],
                        want,
                        "{atom:?}/{target} A probe ({i},{kk}) D[{ii}][{j}]"
                    );
                }
            }
        }
        // B probes: one slot = 1, A[i][k] = k + 1.
        let ak: Vec<i32> = (0..m * k).map(|x| probe_val(atom, x % k, x / k)).collect();
        let mut tiles = Vec::new();
        let mut slots = Vec::new();
        for l in 0..ws {
            for e in 0..lb {
                let (kk, j) = doc_b(atom, l, e);
                let mut bm = vec![0; k * n];
                bm[kk * n + j] = 1;
                tiles.push((ak.clone(), bm, zero_c.clone()));
                slots.push((kk, j));
            }
        }
        let ds = run_tiles(atom, target, &tiles);
        for (d, &(kk, j)) in ds.iter().zip(&slots) {
            for i in 0..m {
                for jj in 0..n {
                    let want = if jj == j {
                        probe_val(atom, kk, i) as i64
                    } else {
                        0
                    };
                    assert_eq!(
                        d[i * n + jj],
                        want,
                        "{atom:?}/{target} B probe ({kk},{j}) D[{i}][{jj}]"
                    );
                }
            }
        }
    }
}

#[test]
fn identity_and_random_integer_tiles_match_cpu_matmul() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (atom, target) in ATOMS {
        let (m, n, k) = atom.shape();
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let fp8 = is_fp8(atom);
        let lim = if fp8 { 4 } else { 16 };
        let mut rnd = |len: usize, lim: i64| -> Vec<i32> {
            (0..len).map(|_| rng.int(-lim, lim) as i32).collect()
        };
        let eye_a: Vec<i32> = (0..m * k).map(|x| (x / k == x % k) as i32).collect();
        let eye_b: Vec<i32> = (0..k * n).map(|x| (x / n == x % n) as i32).collect();
        let zc = vec![0; m * n];
        let tiles = vec![
            (eye_a.clone(), rnd(k * n, lim), zc.clone()),
            (rnd(m * k, lim), eye_b.clone(), zc.clone()),
            (rnd(m * k, lim), rnd(k * n, lim), rnd(m * n, 1000)),
            (rnd(m * k, lim), rnd(k * n, lim), rnd(m * n, 1000)),
        ];
        let ds = run_tiles(atom, target, &tiles);
        for (t, ((a, b, c), d)) in tiles.iter().zip(&ds).enumerate() {
            assert_eq!(
                *d,
                cpu_mma(m, n, k, a, b, c),
                "{atom:?} on {target}, tile {t}"
            );
        }
    }
}

#[test]
fn mma_needs_a_whole_wave() {
    // 48 threads on wave64: the only wave is partial.
    let k = mma_kernel(Mfma16x16x16F16, Target::Gfx942);
    let mem = SimMemory::new();
    let buf = mem.alloc(1 << 16).unwrap();
    let args = pack(
        &k,
        &[
            Arg::Tensor(buf, 1000),
            Arg::Tensor(buf, 1000),
            Arg::Tensor(buf, 1000),
            Arg::Tensor(buf, 1000),
        ],
    );
    let e = launch(
        &k,
        [1, 1, 1],
        [48, 1, 1],
        &args,
        &mem,
        &SimOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("whole wave"), "{e}");
}

// ---- gfx950 block-scaled MFMA (matrix-layouts.md §2.1, §2.2 [I], §9.5) ----

const SCALED: MmaAtom = MfmaScale16x16x128Fp8;

/// A scale word per lane: byte 0 = `s` (the byte opsel 0 selects), bytes 1..3 garbage that
/// must be ignored.
fn scale_word(s: u8, lane: usize) -> u32 {
    0xA5C3_E100 ^ ((lane as u32 * 0x0101_0100) & 0xFFFF_FF00) | s as u32
}

fn unit_scales() -> Vec<u32> {
    (0..64).map(|l| scale_word(127, l)).collect()
}

fn random_tile(rng: &mut Rng) -> (Vec<i32>, Vec<i32>, Vec<i32>) {
    let mut rnd = |len: usize, lim: i64| -> Vec<i32> {
        (0..len).map(|_| rng.int(-lim, lim) as i32).collect()
    };
    (rnd(16 * 128, 4), rnd(128 * 16, 4), rnd(16 * 16, 1000))
}

fn as_f32(d: &[u32]) -> Vec<f32> {
    d.iter().map(|&b| f32::from_bits(b)).collect()
}

fn exact(d: &[i64]) -> Vec<f32> {
    d.iter().map(|&x| x as f32).collect()
}

/// Partial dot of row `i` and column `j` over K-block `blk` (32 K).
fn block_dot(a: &[i32], b: &[i32], i: usize, j: usize, blk: usize) -> i64 {
    (32 * blk..32 * blk + 32)
        .map(|kk| a[i * 128 + kk] as i64 * b[kk * 16 + j] as i64)
        .sum()
}

#[test]
fn e8m0_scales_and_their_lanes() {
    use flydsl_sim::mma_layout::{e8m0_value, scale_coord};
    assert_eq!(e8m0_value(127), 1.0);
    assert_eq!(e8m0_value(128), 2.0);
    assert_eq!(e8m0_value(120), 1.0 / 128.0);
    assert_eq!(e8m0_value(0), 2f64.powi(-127));
    assert!(e8m0_value(0xFF).is_nan());
    // Lane l: row (column) l % 16, K-block l / 16; every (row, block) exactly once.
    let mut seen = [0; 64];
    for l in 0..64 {
        let (r, blk) = scale_coord(SCALED, l).unwrap();
        assert_eq!((r, blk), (l % 16, l / 16));
        seen[r * 4 + blk] += 1;
    }
    assert!(seen.iter().all(|&s| s == 1));
    assert_eq!(scale_coord(Mfma16x16x32Fp8, 3), None);
    assert_eq!(SCALED.shape(), (16, 16, 128));
    assert_eq!(SCALED.in_type(Target::Gfx950), ScalarType::F8E4M3FN);
    assert_eq!(
        SCALED.operand_types(Target::Gfx950),
        (
            Type::vec(ScalarType::F8E4M3FN, 32),
            Type::vec(ScalarType::F8E4M3FN, 32),
            Type::vec(ScalarType::F32, 4)
        )
    );
    assert_eq!(
        Wmma16x16x64Fp8.operand_types(Target::Gfx1250),
        (
            Type::vec(ScalarType::F8E4M3FN, 32),
            Type::vec(ScalarType::F8E4M3FN, 32),
            Type::vec(ScalarType::F32, 8)
        )
    );
    assert_eq!(
        Wmma16x16x128Fp8.operand_types(Target::Gfx1250),
        (
            Type::vec(ScalarType::F8E4M3FN, 64),
            Type::vec(ScalarType::F8E4M3FN, 64),
            Type::vec(ScalarType::F32, 8)
        )
    );
}

#[test]
fn scaled_mfma_with_unit_scales_is_the_exact_product() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let eye_a: Vec<i32> = (0..16 * 128).map(|x| (x / 128 == x % 128) as i32).collect();
    let mut tiles = vec![(eye_a, random_tile(&mut rng).1, vec![0; 256])];
    for _ in 0..4 {
        tiles.push(random_tile(&mut rng));
    }
    let sc: Vec<_> = tiles
        .iter()
        .map(|_| (unit_scales(), unit_scales()))
        .collect();
    let ds = run_tiles_bits(SCALED, Target::Gfx950, &tiles, Some(&sc));
    for (t, ((a, b, c), d)) in tiles.iter().zip(&ds).enumerate() {
        assert_eq!(
            as_f32(d),
            exact(&cpu_mma(16, 16, 128, a, b, c)),
            "scaled MFMA, unit scales, tile {t}"
        );
    }
}

#[test]
fn one_scale_byte_of_128_doubles_exactly_its_rows_block() {
    // §9.5: lane l's A scale covers row l % 16 over K-block l / 16 (B: column l % 16).
    let mut rng = Rng(0xDEAD_BEEF_1234_5678);
    let tile = random_tile(&mut rng);
    let (a, b, c) = &tile;
    let base = cpu_mma(16, 16, 128, a, b, c);
    let lanes = [0usize, 17, 37, 46, 63];
    let mut tiles = Vec::new();
    let mut sc = Vec::new();
    for &l in &lanes {
        for side in 0..2 {
            let mut s = unit_scales();
            s[l] = scale_word(128, l);
            tiles.push(tile.clone());
            sc.push(if side == 0 {
                (s, unit_scales())
            } else {
                (unit_scales(), s)
            });
        }
    }
    let ds = run_tiles_bits(SCALED, Target::Gfx950, &tiles, Some(&sc));
    for (x, d) in ds.iter().enumerate() {
        let (l, side) = (lanes[x / 2], x % 2);
        let (r, blk) = (l % 16, l / 16);
        let mut want = base.clone();
        for i in 0..16 {
            for j in 0..16 {
                if (side == 0 && i == r) || (side == 1 && j == r) {
                    want[i * 16 + j] += block_dot(a, b, i, j, blk);
                }
            }
        }
        assert_ne!(want, base, "lane {l}: the probe block must be nonzero");
        assert_eq!(
            as_f32(d),
            exact(&want),
            "lane {l} {} scale 128",
            ["A", "B"][side]
        );
    }
}

#[test]
fn a_nan_scale_poisons_only_its_row() {
    let mut rng = Rng(0x1357_9BDF_2468_ACE0);
    let tile = random_tile(&mut rng);
    let (a, b, c) = &tile;
    let base = cpu_mma(16, 16, 128, a, b, c);
    let mut s = unit_scales();
    s[21] = scale_word(0xFF, 21); // row 5, block 1
    let d = &run_tiles_bits(
        SCALED,
        Target::Gfx950,
        std::slice::from_ref(&tile),
        Some(&[(s, unit_scales())]),
    )[0];
    for i in 0..16 {
        for j in 0..16 {
            let got = f32::from_bits(d[i * 16 + j]);
            if i == 5 {
                assert!(got.is_nan(), "D[5][{j}] = {got}");
            } else {
                assert_eq!(got, base[i * 16 + j] as f32, "D[{i}][{j}]");
            }
        }
    }
}

#[test]
fn scaled_atom_on_the_wrong_target_or_op_is_rejected() {
    for (target, scaled_op, atom, want) in [
        (Target::Gfx942, true, SCALED, "does not exist on gfx942"),
        (Target::Gfx1250, true, SCALED, "does not exist on gfx1250"),
        (Target::Gfx950, false, SCALED, "use MmaScaled"),
        (Target::Gfx950, true, Mfma16x16x32Fp8, "takes no scales"),
    ] {
        let (ta, tb, tc) = atom.operand_types(Target::Gfx950);
        let mut k = Kernel::empty("bad", target);
        k.values = vec![ta, tb, tc, I32, I32, tc];
        for i in 0..5u32 {
            let c = if i >= 3 {
                Const::Int(127)
            } else {
                Const::Float(0.0)
            };
            k.body.ops.push(Op {
                results: vec![ValueId(i)],
                kind: OpKind::Const(c),
            });
        }
        let v = ValueId;
        k.body.ops.push(Op {
            results: vec![v(5)],
            kind: if scaled_op {
                OpKind::MmaScaled(atom, v(0), v(1), v(2), v(3), v(4))
            } else {
                OpKind::Mma(atom, v(0), v(1), v(2))
            },
        });
        let e = flydsl_ir::verify(&k).unwrap_err().to_string();
        assert!(e.contains(want), "{target} {atom:?}: {e}");
    }
}
