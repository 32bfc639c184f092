//! The README's "Adding a kernel" example, compiled here so it cannot rot: the README's code
//! block must equal the text between the `README:begin` / `README:end` markers (checked by
//! `tests/tests/readme_example.rs`, which also runs the kernel on the Sim for every target).

// README:begin
use flydsl_dsl::ir::{Dim, Kernel, MmaAtom, ScalarType::*, Target};
use flydsl_dsl::tile::*;
use flydsl_dsl::*;

/// K per LDS tile.
const BK: i64 = 32;

/// `C[m, n] (f32) = A[m, k] · B[n, k]ᵀ` (bf16, row-major, `k % 8 == 0`): one block per
/// `bm x bn` tile of C; a K loop stages `bm x BK` and `bn x BK` tiles through LDS.
pub fn tile_gemm(t: Target) -> Result<Kernel, BuildError> {
    let mma = TiledMma::new(MmaAtom::native_16bit(t, true), t, (2, 2), (2, 2)).unwrap();
    let (bm, bn, threads) = (mma.tile_m(), mma.tile_n(), mma.threads());
    KernelBuilder::new("tile_gemm", t, threads).build(|k| {
        let (m, n, kd) = (k.scalar("m", I32), k.scalar("n", I32), k.scalar("k", I32));
        let a = GTensor::new(k.tensor("a", BF16), m, kd);
        let b = GTensor::new(k.tensor("b", BF16), n, kd);
        let c = GTensor::new(k.tensor_mut("c", F32), m, n);
        let lds = |k: &mut KernelDef, name: &str, rows| {
            let lay = smem_xor16(rows, BK, BF16).unwrap();
            let arr = k.lds(name, BF16, STensor::elems(&lay, 1) as u32);
            STensor::new(arr, lay, 1).unwrap()
        };
        let (sa, sb) = (lds(k, "sa", bm), lds(k, "sb", bn));
        let (va, vb) = (sa.stage(c_i32(0)), sb.stage(c_i32(0)));
        let tid = thread_id_x();
        let part = |rows| TiledCopy::new(CopyAtom::best_global(t), BF16, threads, (rows, BK));
        let (ca, cb) = (part(bm).unwrap(), part(bn).unwrap());
        let (ca, cb) = (ca.partition(tid), cb.partition(tid));
        let thr = mma.thr_slice(tid);
        let (bi, bj) = (block_id(Dim::X), block_id(Dim::Y));
        let k_tiles = (kd + (BK - 1) as i32) / BK as i32;
        let acc = for_range_with(0, k_tiles, 1, mma.zero_acc(), |kt, acc| {
            copy(&ca, &a.local_tile((bm, BK), (bi, kt)), &va);
            copy(&cb, &b.local_tile((bn, BK), (bj, kt)), &vb);
            barrier();
            let step = mma.atom_k() as usize;
            let acc = (0..BK).step_by(step).fold(acc, |acc, k0| {
                thr.gemm(&acc, &thr.partition_a(&va, k0), &thr.partition_b(&vb, k0))
            });
            barrier();
            acc
        });
        thr.store_c(&acc, &c.local_tile((bm, bn), (bi, bj)), F32);
    })
}
// README:end
