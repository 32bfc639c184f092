//! The split-KV decode kernel: attention for few query rows over long key sequences, one
//! description for every target (wave64 and wave32), no matrix atoms and no LDS round trip
//! in the key loop.
//!
//! Grid `(splits * row_groups, heads_kv, batch)`, [`DECODE_WAVES`] waves. A workgroup owns
//! one kv head `hk` of one sequence, one key split and one *row group*: up to `RB` (the
//! variant's row block, [`crate::table::DECODE_ROW_BLOCKS`]) of the `G * seqlen_q` query
//! rows that read this kv head (`G = heads_q / heads_kv`; row `r` is query head
//! `hk * G + r / seqlen_q` at position `r % seqlen_q`), so K and V are read once per kv head
//! and row group instead of once per query head.
//!
//! Lanes: `L = DP / 8` lanes (DP the head tile) cover one key, each a 16-byte chunk of 8
//! elements of K and of V; a wave covers `wave / L` keys ("slots") at once, and each slot
//! loads `U` keys per iteration before it computes ([`unroll`]), so `U` 128-bit loads of K
//! and of V per lane are in flight. Per key, each lane forms its 8-element partial dot
//! with every row's q chunk (q in f32 registers, loaded once), a butterfly over the `L`
//! lanes of the slot sums it; every slot then runs its own online softmax (exp2 domain,
//! running max that subtracts 0 while a row has seen no key, so no `-inf - -inf`) and
//! accumulates its 8 columns of `O` for every row in f32 registers. At the end the slots of
//! a wave merge by shuffles (LSE-weighted), the waves through LDS (one barrier), and the
//! workgroup stores `O / l` and the LSE to `out` / `lse`, or, with several splits, the
//! normalized partial O and its LSE to the split-K workspace (`ws_o` `[splits, total_q,
//! Hq, D]`, `ws_lse` `[splits, Hq, total_q]`, the layout of `kernels/fwd.rs`) for the shared
//! combine kernel. A split or row without a visible key gives zeros and LSE `-inf`.
//!
//! Loads never leave the tensors: key positions past the split are clamped to its last key
//! (and masked), chunks past `D` read column 0 and are zeroed. Index arithmetic: element
//! offsets and the first key row of a sequence are i64 (`(start + row) * heads * D +
//! head * D + column`); positions inside a sequence are i32 (at most
//! `dispatch::DECODE_MAX_INDEX`, checked by the dispatcher). q, k and v must start 16-byte
//! aligned (the API routes other calls to the portable kernel).

use crate::table::DECODE_WAVES;
use crate::DType;
use flydsl_dsl::blocks::widen as widen16;
use flydsl_dsl::ir::{Dim, Kernel, ScalarType, Target};
use flydsl_dsl::*;

/// Elements of one lane's chunk (16 bytes of a 16-bit type).
const CHUNK: usize = 8;

/// Keys each slot loads per iteration before computing: more bytes in flight where the
/// registers allow (O takes `8 * rb` f32 registers per lane, the loads `8 * u`).
pub fn unroll(rb: usize) -> usize {
    match rb {
        1 => 8,
        2..=4 => 4,
        _ => 2,
    }
}

/// The register cap of row block `rb` on `target`: `maxnreg` 96 for block 1 on sm90
/// (uncapped, ptxas 12.9 settled on 80 registers for the f16 256 tile and spilled 4 bytes;
/// with 96 no variant spills), none elsewhere (blocks 4 and 8 take about 130 and 230 on
/// sm90; on AMD a 96-VGPR cap spilled). Whether another cap buys speed needs the H200.
pub fn register_cap(target: Target, rb: usize) -> Option<u32> {
    (target == Target::Sm90 && rb == 1).then_some(96)
}

/// The decode kernel for `dt`, head tile `dp` (64, 128 or 256) and row block `rb` on
/// `target`.
pub fn build(
    target: Target,
    dt: DType,
    dp: usize,
    rb: usize,
    name: &str,
) -> Result<Kernel, BuildError> {
    let st = dt.scalar();
    let wave = target.wave_size() as usize;
    let lanes_per_key = dp / CHUNK;
    if !lanes_per_key.is_power_of_two() || lanes_per_key > wave {
        return Err(BuildError::Invalid {
            kernel: name.to_string(),
            target,
            reason: format!("head tile {dp}: {lanes_per_key} lanes per key on a wave of {wave}"),
        });
    }
    let slots = wave / lanes_per_key;
    let waves = DECODE_WAVES as usize;
    let u = unroll(rb);
    let threads = (waves * wave) as u32;
    let (i32_, f32_, i64_) = (ScalarType::I32, ScalarType::F32, ScalarType::I64);
    KernelBuilder::new(name, target, threads)
        .max_registers(register_cap(target, rb))
        .rotate_loops(true)
        .build(|k| {
            let q = k.tensor("q", st);
            let kt = k.tensor("k", st);
            let vt = k.tensor("v", st);
            let out = k.tensor_mut("out", st);
            let lse = k.tensor_mut("lse", f32_);
            let ws_o = k.tensor_mut("ws_o", f32_);
            let ws_lse = k.tensor_mut("ws_lse", f32_);
            let cu_q = k.tensor("cu_q", i32_);
            let cu_kv = k.tensor("cu_kv", i32_);
            let seqlen_q = k.scalar("seqlen_q", i32_);
            let seqlen_kv = k.scalar("seqlen_kv", i32_);
            let heads_q = k.scalar("heads_q", i32_);
            let heads_kv = k.scalar("heads_kv", i32_);
            let d = k.scalar("head_dim", i32_);
            let total_q = k.scalar("total_q", i32_);
            let varlen = k.scalar("varlen", i32_);
            let causal = k.scalar("causal", i32_);
            let write_lse = k.scalar("write_lse", i32_);
            let splits = k.scalar("splits", i32_);
            let max_sq = k.scalar("max_seqlen_q", i32_);
            let scale_log2 = k.scalar("scale_log2", f32_);
            // The cross-wave merge: per (wave, row) m, l and DP columns of O.
            let part_m = k.lds("part_m", f32_, (waves * rb) as u32);
            let part_l = k.lds("part_l", f32_, (waves * rb) as u32);
            let part_o = k.lds("part_o", f32_, (waves * rb * dp) as u32);

            let tid = thread_id_x();
            let lane = tid % wave as i32;
            let w = tid / wave as i32;
            let chunk = lane % lanes_per_key as i32;
            let slot = lane / lanes_per_key as i32;
            let sp = block_id_x() % splits;
            let rg = block_id_x() / splits;
            let hk = block_id(Dim::Y);
            let b = block_id(Dim::Z);
            let g_heads = heads_q / heads_kv;
            let is_var = varlen.ne(0);
            let zero = c_i32(0);
            let vb = select(is_var, b, zero);
            let q_start = select(is_var, cu_q.load(vb), b * seqlen_q);
            let sq = select(is_var, cu_q.load(vb + 1) - q_start, seqlen_q);
            // The first key row in i64: `batch * seqlen_kv` may pass 2^31 in the dense layout.
            let kv0 = cu_kv.load(vb);
            let kv_start = select(is_var, kv0.cast(i64_), b.cast(i64_) * seqlen_kv.cast(i64_));
            let skv = select(is_var, cu_kv.load(vb + 1) - kv0, seqlen_kv);
            let sqm = max_sq.max(1);
            let ldq = heads_q * d;
            let ldkv = heads_kv * d;
            let col = chunk * CHUNK as i32;
            let col_ok = col.lt(d);
            let col_c = select(col_ok, col, zero);
            // This workgroup's rows: (valid, query head, position).
            let rows: Vec<(Val, Val, Val)> = (0..rb)
                .map(|rr| {
                    let r = rg * rb as i32 + rr as i32;
                    let g = r / sqm;
                    let qi = r % sqm;
                    (g.lt(g_heads) & qi.lt(sq), hk * g_heads + g, qi)
                })
                .collect();
            let neg_inf = c_f32(f32::NEG_INFINITY);
            let fzero = c_f32(0.0);
            // q chunks in f32 (zeros for invalid rows and columns past D).
            let qf: Vec<Vec<Val>> = rows
                .iter()
                .map(|&(ok, h, qi)| {
                    let v = if_else(
                        ok & col_ok,
                        || {
                            let i = (q_start + qi).cast(i64_) * ldq.cast(i64_)
                                + (h * d + col).cast(i64_);
                            vec![q.load_vec(i, CHUNK as u32, 16)]
                        },
                        || {
                            vec![splat(
                                cnst(ir::Type::s(st), ir::Const::Float(0.0)),
                                CHUNK as u32,
                            )]
                        },
                    )[0];
                    widen16(v).elems()
                })
                .collect();
            // This split's keys.
            let per = (skv + (splits - 1)) / splits;
            let k_begin = (sp * per).min(skv);
            let k_end = (k_begin + per).min(skv);
            let step = (u * waves * slots) as i32;
            let n_keys = k_end - k_begin;
            let shift = skv - sq;
            let kv_col = (hk * d + col_c).cast(i64_);
            let mut init: Vec<Val> = Vec::new();
            init.extend((0..rb).map(|_| neg_inf)); // m
            init.extend((0..rb).map(|_| fzero)); // l
            init.extend((0..rb * CHUNK).map(|_| fzero)); // O
            let fin = for_range(zero, n_keys, c_i32(step), &init, |it, c| {
                let (m_old, rest) = c.split_at(rb);
                let (l_old, o_old) = rest.split_at(rb);
                // Issue every load of this iteration first.
                let keys: Vec<Val> = (0..u)
                    .map(|uu| k_begin + it + (w + (uu * waves) as i32) * slots as i32 + slot)
                    .collect();
                let loads: Vec<(Val, Vec<Val>)> = keys
                    .iter()
                    .map(|&j| {
                        let jc = j.min(k_end - 1);
                        let i = (kv_start + jc.cast(i64_)) * ldkv.cast(i64_) + kv_col;
                        let z = splat(cnst(ir::Type::s(st), ir::Const::Float(0.0)), CHUNK as u32);
                        let kx = select(col_ok, kt.load_vec(i, CHUNK as u32, 16), z);
                        let vx = select(col_ok, vt.load_vec(i, CHUNK as u32, 16), z);
                        (kx, widen16(vx).elems())
                    })
                    .collect();
                // Logits s[u][r] (exp2 domain, masked to -inf).
                let mut s = Vec::with_capacity(u);
                for (uu, (kx, _)) in loads.iter().enumerate() {
                    let kf = widen16(*kx).elems();
                    let j = keys[uu];
                    let row: Vec<Val> = rows
                        .iter()
                        .zip(&qf)
                        .map(|(&(_, _, qi), qr)| {
                            let mut acc = qr[0] * kf[0];
                            for e in 1..CHUNK {
                                acc = qr[e].fma(kf[e], acc);
                            }
                            let mut bit = 1;
                            while bit < lanes_per_key {
                                acc = acc + shuffle_xor(acc, c_i32(bit as i32));
                                bit *= 2;
                            }
                            let vis = j.lt(k_end) & (causal.eq(0) | j.le(qi + shift));
                            select(vis, acc * scale_log2, neg_inf)
                        })
                        .collect();
                    s.push(row);
                }
                let mut next_m = Vec::with_capacity(rb);
                let mut next_l = Vec::with_capacity(rb);
                let mut next_o = Vec::with_capacity(rb * CHUNK);
                for r in 0..rb {
                    let mn = s.iter().fold(m_old[r], |a, row| a.max(row[r]));
                    let mu = select(mn.eq(f32::NEG_INFINITY), fzero, mn);
                    let alpha = (m_old[r] - mu).exp2();
                    let ps: Vec<Val> = s.iter().map(|row| (row[r] - mu).exp2()).collect();
                    let l = ps.iter().fold(l_old[r] * alpha, |a, &p| a + p);
                    for e in 0..CHUNK {
                        let mut o = o_old[r * CHUNK + e] * alpha;
                        for (uu, (_, vf)) in loads.iter().enumerate() {
                            o = ps[uu].fma(vf[e], o);
                        }
                        next_o.push(o);
                    }
                    next_m.push(mn);
                    next_l.push(l);
                }
                let mut next = next_m;
                next.extend(next_l);
                next.extend(next_o);
                next
            });
            let (m, rest) = fin.split_at(rb);
            let (l, o) = rest.split_at(rb);
            let (mut m, mut l, mut o) = (m.to_vec(), l.to_vec(), o.to_vec());
            // Merge the slots of the wave (lane bits above the chunk bits).
            let mut bit = lanes_per_key;
            while bit < wave {
                for r in 0..rb {
                    let mo = shuffle_xor(m[r], c_i32(bit as i32));
                    let lo = shuffle_xor(l[r], c_i32(bit as i32));
                    let mn = m[r].max(mo);
                    let mu = select(mn.eq(f32::NEG_INFINITY), fzero, mn);
                    let (a, bb) = ((m[r] - mu).exp2(), (mo - mu).exp2());
                    l[r] = l[r] * a + lo * bb;
                    for e in 0..CHUNK {
                        let x = o[r * CHUNK + e];
                        o[r * CHUNK + e] = x * a + shuffle_xor(x, c_i32(bit as i32)) * bb;
                    }
                    m[r] = mn;
                }
                bit *= 2;
            }
            // The waves meet in LDS: slot 0's lanes write their rows' partials.
            if_(slot.eq(0), || {
                for r in 0..rb {
                    let at = w * rb as i32 + r as i32;
                    let oi = at * dp as i32 + col;
                    for h in (0..CHUNK).step_by(4) {
                        let part = vec_of(&o[r * CHUNK + h..r * CHUNK + h + 4]);
                        part_o.store_aligned(oi + h as i32, part, 16);
                    }
                    if_(chunk.eq(0), || {
                        part_m.store(at, m[r]);
                        part_l.store(at, l[r]);
                    });
                }
            });
            barrier();
            let split_ws = splits.gt(1);
            for_range_(tid, c_i32((rb * dp) as i32), c_i32(threads as i32), |e| {
                let r = e / dp as i32;
                let dcol = e % dp as i32;
                let mt = (0..waves).fold(neg_inf, |a, wi| a.max(part_m.load(r + (wi * rb) as i32)));
                let mu = select(mt.eq(f32::NEG_INFINITY), fzero, mt);
                let (mut lt, mut ot) = (fzero, fzero);
                for wi in 0..waves {
                    let at = r + (wi * rb) as i32;
                    let a = (part_m.load(at) - mu).exp2();
                    lt = part_l.load(at).fma(a, lt);
                    ot = part_o.load(at * dp as i32 + dcol).fma(a, ot);
                }
                let has = lt.gt(0.0f32);
                let ov = select(has, ot / lt, fzero);
                let lse_v = select(has, (mt + lt.log2()) * std::f32::consts::LN_2, neg_inf);
                // Row r of this group: the same (valid, head, position) as `rows[r]`, at run time.
                let rr = rg * rb as i32 + r;
                let g = rr / sqm;
                let qi = rr % sqm;
                let h = hk * g_heads + g;
                let ok = g.lt(g_heads) & qi.lt(sq);
                let row = q_start + qi;
                if_(ok & dcol.lt(d), || {
                    if_else(
                        split_ws,
                        || {
                            let i = ((sp.cast(i64_) * total_q.cast(i64_) + row.cast(i64_))
                                * heads_q.cast(i64_)
                                + h.cast(i64_))
                                * d.cast(i64_)
                                + dcol.cast(i64_);
                            ws_o.store(i, ov);
                            if_(dcol.eq(0), || {
                                let li = (sp * heads_q + h).cast(i64_) * total_q.cast(i64_)
                                    + row.cast(i64_);
                                ws_lse.store(li, lse_v);
                            });
                            vec![]
                        },
                        || {
                            let i = row.cast(i64_) * ldq.cast(i64_) + (h * d + dcol).cast(i64_);
                            out.store(i, ov.cast(st));
                            if_(write_lse.ne(0) & dcol.eq(0), || {
                                // Dense LSE [B, Hq, Sq]; varlen [Hq, total_q].
                                let li = select(
                                    is_var,
                                    h.cast(i64_) * total_q.cast(i64_) + row.cast(i64_),
                                    (b * heads_q + h).cast(i64_) * seqlen_q.cast(i64_)
                                        + qi.cast(i64_),
                                );
                                lse.store(li, lse_v);
                            });
                            vec![]
                        },
                    );
                });
            });
        })
}
