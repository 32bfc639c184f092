//! The accumulator-to-operand re-layout ([`flydsl_dsl::tile::c_to_a`]) inside a kernel, on
//! every target and every 16-bit matrix atom it has: a chained two-MMA kernel computes
//! `D = (A · B1ᵀ) · B2ᵀ` with the intermediate `S = A · B1ᵀ` kept in registers (the C
//! fragments of the first tiled MMA turned into the A fragments of the second, as
//! FlashAttention's `P · V`), and the Sim result must equal a CPU model exactly.
//!
//! Shapes per atom `M x N x K`: `A` is `M x 2K` (two K steps), `S` is `M x L` with
//! `L = lcm(N, K)` (the strip `c_to_a` converts), `B2` is `N x L`. Inputs are -1, 0 or 1,
//! so `S` (|S| <= 2K <= 64) is exact in f16 and bf16 and every sum is exact in f32: the
//! comparison is bit-exact. The kernel runs with memcheck, racecheck, initcheck and
//! indexcheck on.

use flydsl_dsl::ir::{Kernel, MmaAtom, ScalarType, Target};
use flydsl_dsl::tile::{
    c_to_a, c_to_a_map, copy, smem_xor16, CopyAtom, GTensor, STensor, TiledCopy, TiledMma,
};
use flydsl_dsl::*;
use flydsl_sim::{SimMemory, SimOptions};
use flydsl_testutil::rng::Rng;

/// Every 16-bit-input, f32-accumulator atom `target` supports.
fn atoms(target: Target) -> Vec<MmaAtom> {
    use MmaAtom::*;
    [
        Mfma16x16x16F16,
        Mfma16x16x16Bf16,
        Mfma32x32x8F16,
        Mfma32x32x8Bf16,
        Mfma16x16x32F16,
        Mfma16x16x32Bf16,
        Mfma32x32x16F16,
        Mfma32x32x16Bf16,
        Wmma16x16x16F16,
        Wmma16x16x16Bf16,
        Wmma16x16x32F16,
        Wmma16x16x32Bf16,
        MmaM16N8K16F16,
        MmaM16N8K16Bf16,
    ]
    .into_iter()
    .filter(|a| a.supported_on(target))
    .collect()
}

/// (M, N, K, L, K1) of the chained kernel for `atom`.
fn dims(atom: MmaAtom, target: Target) -> (i64, i64, i64, i64, i64) {
    let (m, n, k) = atom.shape();
    let r = c_to_a_map(atom, target).unwrap();
    let l = (r.c_atoms() * n) as i64;
    assert_eq!(
        l,
        (r.a_atoms() * k) as i64,
        "{atom:?}: C and A strips differ"
    );
    (m as i64, n as i64, k as i64, l, 2 * k as i64)
}

/// The chained kernel: one wave; A, B1, B2 staged through xor-16 swizzled LDS with a
/// tiled copy, `S = A · B1ᵀ` by a tiled MMA of `L / N` atoms along N, `P = c_to_a(S)`, then
/// `D = P · B2ᵀ` over `L / K` K steps, stored as f32.
fn chained(target: Target, atom: MmaAtom) -> Kernel {
    let (m, n, k, l, k1) = dims(atom, target);
    let it = atom.in_type(target);
    let w = target.wave_size();
    let r = c_to_a_map(atom, target).unwrap();
    KernelBuilder::new("chained_mma", target, w)
        .build(|kb| {
            let a = kb.tensor("a", it);
            let b1 = kb.tensor("b1", it);
            let b2 = kb.tensor("b2", it);
            let d = kb.tensor_mut("d", ScalarType::F32);
            let tid = thread_id_x();
            let z = c_i32(0);
            let g = |t, rows: i64, cols: i64| {
                GTensor::new(t, c_i32(rows as i32), c_i32(cols as i32))
                    .local_tile((rows, cols), (z, z))
            };
            let mut stage = |name: &str, t, rows: i64, cols: i64| {
                let lay = smem_xor16(rows, cols, it).unwrap();
                let s =
                    STensor::new(kb.lds(name, it, STensor::elems(&lay, 1) as u32), lay, 1).unwrap();
                let tc = TiledCopy::new(CopyAtom::Scalar, it, w, (rows, cols)).unwrap();
                copy(&tc.partition(tid), &g(t, rows, cols), &s.stage(z));
                s
            };
            let sa = stage("sa", a, m, k1);
            let sb1 = stage("sb1", b1, l, k1);
            let sb2 = stage("sb2", b2, n, l);
            barrier();
            let mma1 = TiledMma::new(atom, target, (1, 1), (1, r.c_atoms())).unwrap();
            let thr1 = mma1.thr_slice(tid);
            let mut s = mma1.zero_acc();
            for step in 0..k1 / k {
                let av = thr1.partition_a(&sa.stage(z), step * k);
                let bv = thr1.partition_b(&sb1.stage(z), step * k);
                s = thr1.gemm(&s, &av, &bv);
            }
            let p = c_to_a(&r, atom, s.vals());
            let mma2 = TiledMma::new(atom, target, (1, 1), (1, 1)).unwrap();
            let thr2 = mma2.thr_slice(tid);
            let mut acc = mma2.zero_acc();
            for (step, pa) in p.iter().enumerate() {
                let bv = thr2.partition_b(&sb2.stage(z), step as i64 * k);
                acc = thr2.gemm(&acc, &[*pa], &bv);
            }
            thr2.store_c(&acc, &g(d, m, n), ScalarType::F32);
        })
        .unwrap()
}

/// Pack kernel arguments: `args[i]` is parameter i's address.
fn kernarg(k: &Kernel, args: &[u64]) -> Vec<u8> {
    let layout = k.kernarg_layout();
    let mut buf = vec![0u8; layout.size as usize];
    for s in &layout.slots {
        let o = s.offset as usize;
        buf[o..o + s.size as usize]
            .copy_from_slice(&args[s.param].to_le_bytes()[..s.size as usize]);
    }
    buf
}

/// The 16-bit encoding of -1, 0 or 1 in `t`.
fn enc(t: ScalarType, x: i32) -> u16 {
    match (t, x) {
        (_, 0) => 0,
        (ScalarType::F16, 1) => 0x3c00,
        (ScalarType::F16, -1) => 0xbc00,
        (ScalarType::BF16, 1) => 0x3f80,
        (ScalarType::BF16, -1) => 0xbf80,
        _ => unreachable!("{t} {x}"),
    }
}

fn upload(mem: &SimMemory, t: ScalarType, v: &[i32]) -> u64 {
    let bytes: Vec<u8> = v.iter().flat_map(|&x| enc(t, x).to_le_bytes()).collect();
    let at = mem.alloc(bytes.len() as u64).unwrap();
    mem.write(at, &bytes).unwrap();
    at
}

/// `D = (A · B1ᵀ) · B2ᵀ` in exact integers (all matrices row-major).
fn model(
    a: &[i32],
    b1: &[i32],
    b2: &[i32],
    (m, n, l, k1): (usize, usize, usize, usize),
) -> Vec<f32> {
    let s: Vec<i64> = (0..m * l)
        .map(|x| {
            let (i, j) = (x / l, x % l);
            (0..k1)
                .map(|q| (a[i * k1 + q] * b1[j * k1 + q]) as i64)
                .sum()
        })
        .collect();
    (0..m * n)
        .map(|x| {
            let (i, j) = (x / n, x % n);
            (0..l)
                .map(|q| s[i * l + q] * b2[j * l + q] as i64)
                .sum::<i64>() as f32
        })
        .collect()
}

#[test]
fn chained_mma_keeps_the_intermediate_in_registers_on_every_target() {
    let mut rng = Rng::new(13);
    let mut tri =
        |len: usize| -> Vec<i32> { (0..len).map(|_| (rng.next_u64() % 3) as i32 - 1).collect() };
    let mut checked = 0;
    for target in Target::ALL {
        let list = atoms(target);
        assert!(!list.is_empty(), "{target}: no 16-bit atom");
        for atom in list {
            let (m, n, _, l, k1) = dims(atom, target);
            let (m, n, l, k1) = (m as usize, n as usize, l as usize, k1 as usize);
            let kern = chained(target, atom);
            let it = atom.in_type(target);
            for _ in 0..2 {
                let (a, b1, b2) = (tri(m * k1), tri(l * k1), tri(n * l));
                let mem = SimMemory::new();
                let pa = upload(&mem, it, &a);
                let pb1 = upload(&mem, it, &b1);
                let pb2 = upload(&mem, it, &b2);
                let pd = mem.alloc((m * n * 4) as u64).unwrap();
                let args = kernarg(&kern, &[pa, pb1, pb2, pd]);
                let w = target.wave_size();
                flydsl_sim::launch(
                    &kern,
                    [1, 1, 1],
                    [w, 1, 1],
                    &args,
                    &mem,
                    &SimOptions::default(),
                )
                .unwrap_or_else(|e| panic!("{target} {atom:?}: {e}"));
                let mut out = vec![0u8; m * n * 4];
                mem.read(pd, &mut out).unwrap();
                let got: Vec<f32> = out
                    .chunks(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                let want = model(&a, &b1, &b2, (m, n, l, k1));
                assert!(
                    want.iter().any(|&x| x != 0.0),
                    "{target} {atom:?}: trivial input"
                );
                assert_eq!(got, want, "{target} {atom:?}: D = (A·B1ᵀ)·B2ᵀ");
                checked += 1;
            }
        }
    }
    // Two 16-bit atoms per target at least (f16 and bf16), two inputs each.
    assert!(checked >= 2 * 2 * Target::ALL.len(), "{checked} runs");
}
