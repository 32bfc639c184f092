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

const ATOMS: [(MmaAtom, Target); 20] = [
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
    (MmaM16N8K16F16, Target::Sm90),
    (MmaM16N8K16Bf16, Target::Sm90),
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
        MmaM16N8K16F16 | MmaM16N8K16Bf16 => {
            let (g, t) = (l >> 2, l % 4);
            (g + 8 * ((e / 2) % 2), 2 * t + e % 2 + 8 * (e / 4))
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
        _ => {
            let (j, k) = doc_a(atom, l, e);
            (k, j)
        }
    }
}

/// The documented C/D map: (i, j).
fn doc_c(atom: MmaAtom, l: usize, v: usize) -> (usize, usize) {
    match atom {
        Mfma32x32x8F16 | Mfma32x32x8Bf16 => (8 * (v / 4) + 4 * (l / 32) + v % 4, l % 32),
        Wmma16x16x16F16 | Wmma16x16x16Bf16 | Wmma16x16x32F16 | Wmma16x16x32Bf16 => {
            (8 * (l / 16) + v, l % 16)
        }
        MmaM16N8K16F16 | MmaM16N8K16Bf16 => {
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
    for (atom, target) in ATOMS {
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

/// A kernel computing one tile per wave: fragments of wave w at [w * ws * len ..].
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
    let d = b.op(OpKind::Mma(atom, va, vb, vc), Type::vec(at, lc as u32));
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
    let args = [
        Arg::Tensor(da, (fa.len() / es) as i64),
        Arg::Tensor(db, (fb.len() / es) as i64),
        Arg::Tensor(dc, fc.len() as i64),
        Arg::Tensor(dd, fc.len() as i64),
    ];
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
            let mut d = vec![0i64; m * n];
            for l in 0..ws {
                for v in 0..lc {
                    let (i, j) = doc_c(atom, l, v);
                    let bits = out[(w * ws + l) * lc + v];
                    d[i * n + j] = if int {
                        bits as i32 as i64
                    } else {
                        let f = f32::from_bits(bits);
                        assert_eq!(f.fract(), 0.0, "non-integer result {f}");
                        f as i64
                    };
                }
            }
            d
        })
        .collect()
}

/// A distinct positive integer for each k that is exact in the atom's input type (fp8 E4M3
/// holds every integer up to 16, then only even ones up to 32, then multiples of 4).
fn probe_val(atom: MmaAtom, k: usize) -> i32 {
    if atom != Mfma16x16x32Fp8 {
        return k as i32 + 1;
    }
    let k = k as i32;
    match k {
        0..=15 => k + 1,
        16..=23 => 16 + 2 * (k - 15),
        _ => 32 + 4 * (k - 23),
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
        let bk: Vec<i32> = (0..k * n).map(|x| probe_val(atom, x / n)).collect();
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
                        probe_val(atom, kk) as i64
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
        let ak: Vec<i32> = (0..m * k).map(|x| probe_val(atom, x % k)).collect();
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
                        probe_val(atom, kk) as i64
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
        let fp8 = atom == Mfma16x16x32Fp8;
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
