//! The Hopper 8-bit GEMM: `C = act((A * B^T) * scale_a[m] * scale_b[n] + bias[n])` with fp8
//! e4m3fn (f32 accumulation) or int8 (exact s32 accumulation) inputs on sm_90a, fed by TMA
//! through a multi-stage mbarrier pipeline into m64n256k32 wgmma.
//!
//! The structure is the 16-bit kernel's (`wgmma.rs`): A is M x K and B is N x K, both
//! row-major 8-bit; `scale_a` [M] and `scale_b` [N] are f32; bias [N] and C [M, N] are in
//! the output dtype (bf16 or f16). Each workgroup computes one `bm` x `bn` tile of its
//! [`Tile`] config with one warpgroup per 64 rows; a stage holds `BK8` = 128 K elements
//! (one 128-byte swizzled row per tile row), read by four k32 wgmmas. fp8 sums each stage
//! from zero and adds it into f32 accumulators (Hopper keeps too few bits of a long fp8
//! wgmma sum; see `build`). The accumulator is scaled in f32 (int8: converted from s32
//! first), then the bias and activation are applied and the result is rounded once.
//!
//! Host side (`src/scaled.rs`): tensor maps over A (`dims [K, M]`, `boxes [BK8, bm]`) and B
//! (`[K, N]`, `[BK8, bn]`) with the 128-byte swizzle, `tile.threads()` threads,
//! `tile.lds_bytes()` of dynamic LDS, one workgroup per tile. K must be a multiple of 16 (TMA row strides are
//! 16-byte multiples); M and N are free (TMA zero-fills past the edges, the epilogue
//! guards). Index arithmetic is i32 except C offsets (i64): M, N, K < 2^31 - 2^16.

use crate::table::{scaled_kernel_name, Epilogue, Quant, Tile, BK8, GROUP_M};
use crate::wgmma::epilogue;
use crate::DType;
use flydsl_dsl::ir::{Kernel, ScalarType, ScalarType::*, Target};
use flydsl_dsl::nv::{
    fence_proxy_async, mbar_arrive_expect_tx, mbar_init, mbar_wait, tma_load, wgmma, wgmma_commit,
    wgmma_fence, wgmma_wait,
};
use flydsl_dsl::*;

/// The widest column chunk of an fp8 stage (see `build`): the chunk's stage sum and the
/// tile's f32 accumulators both live in registers.
const PROMOTE_N: u32 = 128;

/// The IR element type of `q`'s inputs.
pub fn input_scalar(q: Quant) -> ScalarType {
    match q {
        Quant::Fp8 => F8E4M3FN,
        Quant::Fp8Fnuz => F8E4M3FNUZ,
        Quant::Int8 => I8,
    }
}

/// The kernel for inputs `q`, output `out` (bf16 or f16), `epi` and `tile` (sm_90 only).
pub fn build(
    target: Target,
    q: Quant,
    out: DType,
    epi: Epilogue,
    tile: Tile,
) -> Result<Kernel, BuildError> {
    let ot = out.scalar();
    let it = input_scalar(q);
    let (bm, bn) = (tile.bm, tile.bn);
    let stage_bytes = tile.stage_bytes();
    let name = scaled_kernel_name(q, out, epi, tile);
    KernelBuilder::new(&name, target, tile.threads()).build(|k| {
        let a_map = k.tensor("a_map", I8);
        let b_map = k.tensor("b_map", I8);
        let scale_a = k.tensor("scale_a", F32);
        let scale_b = k.tensor("scale_b", F32);
        let bias = k.tensor("bias", ot);
        let c = k.tensor_mut("c", ot);
        let m = k.scalar("m", I32);
        let n = k.scalar("n", I32);
        let kd = k.scalar("k", I32);
        let bars = k.lds("full", I64, tile.stages());
        let tiles = k
            .lds_dynamic("tiles")
            .array_aligned(it, tile.stages() * stage_bytes, 1024);
        let (stages, bk) = (tile.stages() as i32, BK8 as i32);
        let tid = thread_id_x();
        let wg = tid / 128;

        // Grouped tile order.
        let pid = block_id_x();
        let tiles_m = (m + (bm as i32 - 1)) / bm as i32;
        let tiles_n = (n + (bn as i32 - 1)) / bn as i32;
        let group = tiles_n * GROUP_M as i32;
        let first_m = (pid / group) * GROUP_M as i32;
        let gsize = (tiles_m - first_m).min(GROUP_M as i32);
        let tm = first_m + (pid % group) % gsize;
        let tn = (pid % group) / gsize;
        let (m0, n0) = (tm * bm as i32, tn * bn as i32);
        let ktiles = (kd + (bk - 1)) / bk;

        // One byte per element: element offsets are byte offsets.
        let stage_elems = stage_bytes as i32;
        let a_tile = move |s: Val| tiles.ptr_at(s * stage_elems);
        let b_tile = move |s: Val| tiles.ptr_at(s * stage_elems + (bm * BK8) as i32);
        let bar = move |s: Val| bars.ptr_at(s);
        let leader = tid.eq(0);
        if_(leader, || {
            for s in 0..stages {
                mbar_init(bar(c_i32(s)), 1);
            }
            fence_proxy_async();
        });
        barrier();
        let issue = move |kt: Val| {
            let s = kt % stages;
            mbar_arrive_expect_tx(bar(s), c_i32(stage_bytes as i32));
            tma_load(a_map.ptr(), a_tile(s), bar(s), &[kt * bk, m0]);
            tma_load(b_map.ptr(), b_tile(s), bar(s), &[kt * bk, n0]);
        };
        if_(leader, || {
            for_range_(c_i32(0), ktiles.min(stages - 1), c_i32(1), issue);
        });

        // fp8: Hopper's tensor cores keep only about 13 mantissa bits of an fp8 wgmma's
        // running sum (truncated), so a long K swamps the small products (seen on the H200:
        // 16% of sum |a b| at K = 8192). So each stage's four k32 wgmmas start from zero
        // and their sum is added into f32 accumulators once per 128-wide K stage, as
        // CUTLASS's two-level fp8 accumulation does; cuBLAS's `_scaled_mm` gives the same
        // values. A stage runs in chunks of at most `PROMOTE_N` columns, each waited for
        // before its add (bn / 2 + PROMOTE_N / 2 accumulator registers: 192 for 128 x 256).
        // Keeping the previous stage's group in flight during the add serialized the
        // wgmmas instead (ptxas C7514: other instructions read the accumulators of a wgmma
        // in flight): without it fp8 ran about 20% faster at M = 128 on the H200 and 14-19%
        // at M >= 1024 (with 128 x 128 tiles). int8 accumulates exactly in s32, one group per
        // stage with the previous one in flight.
        let promote = q != Quant::Int8;
        let cw = if promote { bn.min(PROMOTE_N) } else { bn };
        let chunks = bn / cw;
        let zero = if promote {
            splat(c_f32(0.0), cw / 2)
        } else {
            splat(c_i32(0), bn / 2)
        };
        let init = vec![zero; chunks as usize];
        let carried = for_range(c_i32(0), ktiles, c_i32(1), &init, |kt, carried| {
            let s = kt % stages;
            mbar_wait(bar(s), (kt / stages) & 1);
            // This warpgroup's 64 rows of A.
            let a_rows = ptr_offset(a_tile(s), wg * (64 * BK8) as i32);
            // The wgmmas of one chunk of `cw` columns (the kk-th 32-wide K slice, 32 bytes,
            // of both tiles), committed as one group.
            let chunk = |c: u32, acc: Val| {
                wgmma_fence();
                let b_rows = ptr_offset(b_tile(s), c_i32((c * cw * BK8) as i32));
                let mut acc = acc;
                for kk in 0..(BK8 / 32) as i32 {
                    let a = ptr_offset(a_rows, c_i32(kk * 32));
                    let b = ptr_offset(b_rows, c_i32(kk * 32));
                    acc = wgmma(cw, a, b, acc);
                }
                wgmma_commit();
                acc
            };
            let out = if promote {
                (0..chunks)
                    .map(|c| carried[c as usize] + wgmma_wait(0, &[chunk(c, zero)])[0])
                    .collect()
            } else {
                let acc = chunk(0, carried[0]);
                wgmma_wait(1, &[acc])
            };
            // Every warpgroup is done with stage kt - 1: refill it with tile kt + stages - 1.
            barrier();
            let next = kt + (stages - 1);
            if_(leader & next.lt(ktiles), || issue(next));
            out
        });
        let acc: Vec<Val> = if promote {
            carried
        } else {
            wgmma_wait(0, &carried)
        };
        // Accumulator register `i` of the warpgroup's 64 x bn block.
        let per_chunk = cw / 2;
        let acc_at = |i: u32| acc[(i / per_chunk) as usize].at(i % per_chunk);

        // Epilogue: thread (warp w, lane l) holds rows 16w + l/4 (+8) and column pairs
        // 8j + 2(l%4) of its warpgroup's 64 x bn block.
        let w = (tid % 128) / 32;
        let l = tid % 32;
        let row0 = m0 + wg * 64 + w * 16 + l / 4;
        let col0 = n0 + (l % 4) * 2;
        let n64 = n.cast(I64);
        for h in 0..2i32 {
            let row = row0 + h * 8;
            if_(row.lt(m), || {
                let base = row.cast(I64) * n64;
                let sa = scale_a.load(row);
                for j in 0..(bn / 8) as i32 {
                    for e in 0..2i32 {
                        let col = col0 + (j * 8 + e);
                        if_(col.lt(n), || {
                            let v = acc_at((4 * j + 2 * h + e) as u32);
                            let v = if q == Quant::Int8 { v.cast(F32) } else { v };
                            let v = v * sa * scale_b.load(col);
                            let v = epilogue(epi, v, || bias.load(col).cast(F32));
                            c.store(base + col.cast(I64), v.cast(ot));
                        });
                    }
                }
            });
        }
    })
}
