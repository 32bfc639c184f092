//! The Hopper (sm_90a) FlashAttention forward: TMA-fed K/V stages, `S = Q K^T` by SS wgmma,
//! online softmax in registers (exp2, scale folded in the log2 domain), `P` packed in
//! registers and fed to the register-A wgmma (`NvOp::WgmmaRs`) against an MN-major V. Dense
//! BSHD only, one pass over the keys (no split), head dims 64, 128 and 256 exactly
//! (`table::HOPPER_HEAD_DIMS`); `src/hopper.rs` builds the tensor maps and launches it.
//!
//! # Semantics
//!
//! `q [B, Sq, Hq, D]`, `k`, `v [B, Skv, Hkv, D]`, `out` like `q` (all `dt`), optional `lse`
//! f32 `[B, Hq, Sq]` (natural log, scale folded in). `Hq % Hkv == 0` (query head `h` reads
//! kv head `h / (Hq / Hkv)`). `out[b, i, h] = sum_j softmax_j(scale q_i . k_j) v_j` over the
//! visible keys: all `j < Skv`, and with `causal` only `j <= i + Skv - Sq` (bottom-right
//! aligned). A row with no visible key gets zeros and `lse = -inf` (no NaN). These are
//! exactly the portable kernel's semantics (`kernels/fwd.rs`).
//!
//! # Kernel parameters (in order)
//!
//! | name | type | meaning |
//! |---|---|---|
//! | `q_map`, `k_map`, `v_map` | `i8` tensor | 128-byte swizzled tensor maps (`table::hopper_map_dims`) |
//! | `out` | `dt` tensor (mut) | `[B, Sq, Hq, D]` |
//! | `lse` | f32 tensor (mut) | `[B, Hq, Sq]`, written when `has_lse != 0` (else any buffer) |
//! | `sq`, `skv`, `hq`, `hkv` | i32 | lengths and head counts (`sq, skv >= 1`) |
//! | `scale_log2` | f32 | `softmax_scale * log2(e)`, finite and > 0 |
//! | `has_lse` | i32 | 0 or 1 |
//!
//! # Launch (`src/hopper.rs`)
//!
//! - grid `HopperTile::grid(B, Sq, Hq)` = `[ceil(Sq / block_m), Hq, B]`,
//!   `HopperTile::threads` threads, `HopperTile::lds_bytes` bytes of dynamic LDS;
//! - tensor maps with the 128-byte swizzle over `q` (dims `[D, Hq, Sq, B]`, element
//!   strides `[D, Hq D, Sq Hq D]`, box `[64, 1, block_m, 1]`) and over `k` and `v` (dims
//!   `[D, Hkv, Skv, B]`, box `[64, 1, block_n, 1]`). TMA zero-fills rows past `Sq` / `Skv`;
//!   the kernel masks keys past `Skv` with `-inf` and guards stores of rows past `Sq`.
//! - Index bounds (checked by the API): output and LSE offsets are i64 (any `B Sq Hq D`
//!   below 2^63); query-row and key positions are i32 and reach a sequence length plus a
//!   few tiles, so `Sq, Skv <= table::HOPPER_MAX_SEQLEN` (2^31 - 2^16); TMA takes row
//!   strides below 2^40 bytes (`Sq Hq D` and `Skv Hkv D` elements) and grid y, z <= 65535.
//!
//! # Design
//!
//! One workgroup per (query tile of `block_m` rows, query head, batch): `warpgroups`
//! consumer warpgroups of 64 rows each. Thread 0 loads the Q tile once (`D / 64` SW128
//! boxes of `block_m x 64`) and streams K and V tiles (`block_n` keys, `D / 64` boxes each)
//! through `stages` mbarrier stages (`full` barriers count the TMA bytes). When a warpgroup
//! has finished a tile (`wgmma.wait_group 0` after its `P V`), its first thread arrives on
//! the stage's `empty` barrier (one arrival per warpgroup and phase). Thread 0 refills a
//! stage one iteration late: at the end of iteration `it` it waits for the `empty` phase of
//! tile `it - 1` (which the other warpgroups have usually long passed) and loads tile
//! `it - 1 + stages` there, so the warpgroups are never forced into lockstep and one's
//! softmax can overlap the other's wgmmas, while loads stay two tiles ahead (`D = 256`,
//! with two stages, refills the stage of the tile just finished instead).
//! Per KV tile each warpgroup computes `S` (64 x block_n, `D / 16` SS wgmmas), masks it
//! (only tiles that cross `Skv` or the causal diagonal), updates the running row max `m`
//! (in units of `scale * log2 e`), `P = exp2(S scale_log2 - m)`, the row sums, rescales `O`
//! by `exp2(m_old - m)` (exact; the factor is 1 when the max did not grow and 0 while a row
//! has seen no key), and accumulates `O += P V` (`block_n / 16` RS wgmmas of N = D with V
//! MN-major). Causal workgroups stop at the last KV tile the diagonal reaches. The Sim runs
//! it (no warp specialization: every wait is reached in lockstep).

use crate::table::{HopperTile, HOPPER_BOX_D};
use crate::DType;
use flydsl_dsl::ir::{Dim, Kernel, ScalarType::*, Target, WgmmaB};
use flydsl_dsl::nv::{
    fence_proxy_async, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_wait, tma_load, wgmma,
    wgmma_a_frag, wgmma_commit, wgmma_fence, wgmma_rs, wgmma_wait,
};
use flydsl_dsl::*;

/// The Hopper attention kernel `name` for `target` (sm90 only), `dt` (bf16 or f16), head
/// dim `d` (one of `table::HOPPER_HEAD_DIMS`) and the mask; see the module docs for its
/// parameters and launch.
pub fn build(
    target: Target,
    dt: DType,
    head_dim: usize,
    causal: bool,
    name: &str,
) -> Result<Kernel, BuildError> {
    let invalid = |reason: String| BuildError::Invalid {
        kernel: name.to_string(),
        target,
        reason,
    };
    if target != Target::Sm90 {
        return Err(invalid(format!(
            "the Hopper attention kernel needs wgmma and TMA: target {target} has neither; use Target::Sm90"
        )));
    }
    let Some(tile) = HopperTile::of(head_dim) else {
        return Err(invalid(format!(
            "head_dim {head_dim} is not one of {:?}",
            crate::table::HOPPER_HEAD_DIMS
        )));
    };
    if dt != DType::BF16 && dt != DType::F16 {
        return Err(invalid(format!("dtype {dt} is not bf16 or f16")));
    }
    let dt = dt.scalar();
    let d = tile.head_dim();
    let dblocks = d / HOPPER_BOX_D;
    let bm_rows = tile.block_m();
    let bnu = tile.block_n();
    let nst = tile.stages();
    let nwg = tile.warpgroups();
    KernelBuilder::new(name, target, tile.threads()).build(|k| {
        let q_map = k.tensor("q_map", I8);
        let k_map = k.tensor("k_map", I8);
        let v_map = k.tensor("v_map", I8);
        let out = k.tensor_mut("out", dt);
        let lse = k.tensor_mut("lse", F32);
        let sq = k.scalar("sq", I32);
        let skv = k.scalar("skv", I32);
        let hq = k.scalar("hq", I32);
        let hkv = k.scalar("hkv", I32);
        let scale_log2 = k.scalar("scale_log2", F32);
        let has_lse = k.scalar("has_lse", I32);
        let bars = k.lds("kv_full", I64, nst);
        let empties = k.lds("kv_empty", I64, nst);
        let qbar = k.lds("q_full", I64, 1);
        // Elements: Q (block_m x D), then per stage K (block_n x D) and V (block_n x D); every D / 64
        // column block is its own SW128 box of rows x 64.
        let q_elems = (bm_rows * d) as i32;
        let kv_elems = (bnu * d) as i32;
        let tiles = k.lds_dynamic("tiles").array_aligned(
            dt,
            (bm_rows * d + 2 * nst * bnu * d) as i32,
            1024,
        );
        let stages = nst as i32;
        let (bm, bn) = (bm_rows as i32, bnu as i32);
        let tid = thread_id_x();
        let wg = tid / 128;
        let w = (tid % 128) / 32;
        let l = tid % 32;

        let mt = block_id(Dim::X);
        let h = block_id(Dim::Y);
        let b = block_id(Dim::Z);
        let hk = h / (hq / hkv);
        let m0 = mt * bm;
        // KV tiles this workgroup visits: all, or (causal) up to the diagonal of its last row.
        let kv_tiles = (skv + (bn - 1)) / bn;
        let n_tiles = if causal {
            // Keys the last row sees; summed so that no partial sum leaves i32 (m0 < sq and
            // both lengths are at most HOPPER_MAX_SEQLEN).
            let lim = ((m0 - sq) + (skv + bm)).max(c_i32(0));
            kv_tiles.min((lim + (bn - 1)) / bn)
        } else {
            kv_tiles
        };

        let q_blk = move |j: u32| tiles.ptr_at(c_i32((j * bm_rows * 64) as i32));
        let k_blk = move |s: Val, j: u32| {
            tiles.ptr_at(s * (2 * kv_elems) + (q_elems + (j * bnu * 64) as i32))
        };
        let v_blk = move |s: Val, j: u32| {
            tiles.ptr_at(s * (2 * kv_elems) + (q_elems + kv_elems + (j * bnu * 64) as i32))
        };
        let bar = move |s: Val| bars.ptr_at(s);
        let empty = move |s: Val| empties.ptr_at(s);
        let leader = tid.eq(0);
        if_(leader, || {
            for s in 0..stages {
                mbar_init(bar(c_i32(s)), 1);
                // One arrival per consumer warpgroup (its first thread).
                mbar_init(empty(c_i32(s)), nwg);
            }
            mbar_init(qbar.ptr(), 1);
            fence_proxy_async();
        });
        barrier();
        let issue = move |it: Val| {
            let s = it % stages;
            mbar_arrive_expect_tx(bar(s), c_i32(2 * kv_elems * 2));
            for j in 0..dblocks {
                let c = [c_i32((j * HOPPER_BOX_D) as i32), hk, it * bn, b];
                tma_load(k_map.ptr(), k_blk(s, j), bar(s), &c);
                tma_load(v_map.ptr(), v_blk(s, j), bar(s), &c);
            }
        };
        if_(leader, || {
            mbar_arrive_expect_tx(qbar.ptr(), c_i32(q_elems * 2));
            for j in 0..dblocks {
                let c = [c_i32((j * HOPPER_BOX_D) as i32), h, m0, b];
                tma_load(q_map.ptr(), q_blk(j), qbar.ptr(), &c);
            }
            for_range_(c_i32(0), n_tiles.min(stages), c_i32(1), issue);
        });
        mbar_wait(qbar.ptr(), c_i32(0));

        // This thread's rows (h2 = 0, 1) within the workgroup's tile, and its column base.
        let row_in_tile = |h2: i32| wg * 64 + w * 16 + l / 4 + h2 * 8;
        let col_base = (l % 4) * 2;
        let neg_inf = c_f32(f32::NEG_INFINITY);
        let sregs = bnu / 2;
        let oregs = d / 2;
        // Carried: O (<D/2 x f32>), the row maxima m0/m1 (scaled log2 units) and the
        // thread-partial row sums l0/l1.
        let init = vec![
            splat(c_f32(0.0), oregs),
            neg_inf,
            neg_inf,
            c_f32(0.0),
            c_f32(0.0),
        ];
        let fin = for_range(c_i32(0), n_tiles, c_i32(1), &init, |it, cr| {
            let s = it % stages;
            mbar_wait(bar(s), (it / stages) & 1);
            // S = Q K^T for this warpgroup's 64 rows.
            // The fence orders the zeroed accumulator's register writes before the wgmmas.
            let mut sacc = splat(c_f32(0.0), sregs);
            wgmma_fence();
            for kk in 0..d / 16 {
                let (j, within) = (kk / 4, ((kk % 4) * 16) as i32);
                let a = ptr_offset(q_blk(j), wg * (64 * 64) + within);
                let bptr = ptr_offset(k_blk(s, j), c_i32(within));
                sacc = wgmma(bnu, a, bptr, sacc);
            }
            wgmma_commit();
            let sacc = wgmma_wait(0, &[sacc])[0];
            // Mask keys past skv and (causal) past the diagonal, only on tiles that need it.
            let n0 = it * bn;
            let diag = sq - skv; // key j visible to row i iff j <= i - diag
            let ragged = (n0 + bn).gt(skv);
            let need = if causal {
                ragged | (n0 + (bn - 1)).gt(m0 + wg * 64 - diag)
            } else {
                ragged
            };
            let sv = if_then_else(
                need,
                || {
                    let mut e = Vec::with_capacity(sregs as usize);
                    for r in 0..sregs {
                        let (jj, q) = ((r / 4) as i32, (r % 4) as i32);
                        let col = n0 + col_base + (jj * 8 + q % 2);
                        let row = m0 + row_in_tile(q / 2);
                        let mut bad = col.ge(skv);
                        if causal {
                            bad = bad | col.gt(row - diag);
                        }
                        e.push(select(bad, neg_inf, sacc.at(r)));
                    }
                    vec_of(&e)
                },
                || sacc,
            );
            // Online softmax per row h2: registers 4j + 2 h2 + e.
            let mut new_m = Vec::new();
            let mut alphas = Vec::new();
            let mut p = vec![c_f32(0.0); sregs as usize];
            let mut lsum = Vec::new();
            for h2 in 0..2u32 {
                let mut mx = neg_inf;
                for jj in 0..bnu / 8 {
                    for e in 0..2 {
                        mx = mx.max(sv.at(4 * jj + 2 * h2 + e));
                    }
                }
                mx = mx.max(shuffle_xor(mx, 1));
                mx = mx.max(shuffle_xor(mx, 2));
                let m_old = cr[1 + h2 as usize];
                let m_new = m_old.max(mx * scale_log2);
                // A row that has seen no key keeps m = -inf: subtract 0 instead (p = 0).
                let m_use = select(m_new.eq(neg_inf), c_f32(0.0), m_new);
                let alpha = (m_old - m_use).exp2();
                let mut sum = c_f32(0.0);
                for jj in 0..bnu / 8 {
                    for e in 0..2 {
                        let r = (4 * jj + 2 * h2 + e) as usize;
                        let pv = sv.at(r as u32).fma(scale_log2, c_f32(0.0) - m_use).exp2();
                        p[r] = pv;
                        sum = sum + pv;
                    }
                }
                new_m.push(m_new);
                alphas.push(alpha);
                lsum.push(cr[3 + h2 as usize].fma(alpha, sum));
            }
            // O *= alpha (per row), then O += P V.
            let o_in = cr[0];
            let scaled: Vec<Val> = (0..oregs)
                .map(|r| o_in.at(r) * alphas[((r % 4) / 2) as usize])
                .collect();
            let mut o = vec_of(&scaled);
            let pv = vec_of(&p);
            let frags: Vec<Val> = (0..bnu / 16).map(|kk| wgmma_a_frag(pv, kk, dt)).collect();
            // After O's rescale and the P fragments' conversion: order them before the wgmmas.
            wgmma_fence();
            let layout = WgmmaB::MnMajor {
                block_bytes: bnu * 128,
            };
            for (kk, &frag) in (0..bnu / 16).zip(&frags) {
                let vptr = ptr_offset(v_blk(s, 0), c_i32((kk * 16 * 64) as i32));
                o = wgmma_rs(d, frag, vptr, layout, o);
            }
            wgmma_commit();
            let o = wgmma_wait(0, &[o])[0];
            // This warpgroup is done with stage s (its wait retired every read of it).
            if_((tid % 128).eq(c_i32(0)), || mbar_arrive(empty(s)));
            // Refill the stage of the previous tile (of this one with 2 stages) once all
            // warpgroups released it.
            let lag = if nst >= 3 { 1 } else { 0 };
            let prev = it - lag;
            let next = prev + stages;
            if_(leader & it.ge(c_i32(lag)) & next.lt(n_tiles), || {
                let ps = prev % stages;
                mbar_wait(empty(ps), (prev / stages) & 1);
                issue(next);
            });
            vec![o, new_m[0], new_m[1], lsum[0], lsum[1]]
        });

        // Epilogue: full row sums, O / l (0 for an empty row), LSE.
        let o = fin[0];
        let ln2 = std::f32::consts::LN_2;
        let d64 = c_i64(d as i64);
        for h2 in 0..2u32 {
            let mut lrow = fin[3 + h2 as usize];
            lrow = lrow + shuffle_xor(lrow, 1);
            lrow = lrow + shuffle_xor(lrow, 2);
            let m_row = fin[1 + h2 as usize];
            let empty = lrow.eq(c_f32(0.0));
            let inv = select(empty, c_f32(0.0), lrow.rcp());
            let row = m0 + row_in_tile(h2 as i32);
            if_(row.lt(sq), || {
                let base = ((b.cast(I64) * sq.cast(I64) + row.cast(I64)) * hq.cast(I64)
                    + h.cast(I64))
                    * d64;
                for jj in 0..d / 8 {
                    // Two adjacent columns: one 4-byte store.
                    let col = col_base + (jj * 8) as i32;
                    let pair =
                        vec_of(&[o.at(4 * jj + 2 * h2) * inv, o.at(4 * jj + 2 * h2 + 1) * inv]);
                    out.store_aligned(base + col.cast(I64), pair.cast(dt), 4, false);
                }
                if_(has_lse.ne(c_i32(0)) & (l % 4).eq(c_i32(0)), || {
                    let val = select(empty, neg_inf, (m_row + lrow.log2()) * ln2);
                    let at =
                        (b.cast(I64) * hq.cast(I64) + h.cast(I64)) * sq.cast(I64) + row.cast(I64);
                    lse.store(at, val);
                });
            });
        }
    })
}
