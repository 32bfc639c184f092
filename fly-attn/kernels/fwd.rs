//! The portable FlashAttention forward kernel: one description over the tile layer, with
//! the target's native 16-bit matrix atom (MFMA 16x16 on gfx942/gfx950, WMMA 16x16 on
//! gfx1201/gfx1250, `mma.sync` m16n8k16 on sm90).
//!
//! Grid `(q tiles, heads_q, batch * splits)`, `WAVES` waves stacked along the `BM` query
//! rows. Per workgroup:
//!
//! 1. the Q tile `[BM, DP]` goes to LDS once (zeros past the sequence and past `D`);
//! 2. for every key tile `t` of this split (`BN` keys): K (prefetched into registers during
//!    the previous tile) is parked in LDS, `S = Q K^T` on the atoms, V of tile `t` is loaded
//!    meanwhile and parked transposed (`[DP, BN]`, the `B^T` operand of `P V`) in the same
//!    LDS buffer once every wave is done with K, the next K tile is loaded, and the online
//!    softmax runs in registers: logits scaled into the exp2 domain, masked (`-inf` past
//!    the keys, and bottom-right causal), running max `m`, `alpha = exp2(m_old - m_use)`
//!    with `m_use = 0` while a row has seen no key (so no `-inf - -inf`), P kept in
//!    registers and turned into A fragments by `tile::c_to_a`, then `O = alpha O + P V`;
//! 3. `O / l` (zero when `l = 0`: fully masked rows) and the LSE `(m + log2 l) ln 2`
//!    (`-inf` when `l = 0`) are stored, to `out`/`lse`, or, with several splits, to the f32
//!    workspace (`ws_o` `[splits, total_q, Hq, D]`, `ws_lse` `[splits, Hq, total_q]`) for
//!    the combine kernel.
//!
//! Row statistics live per (lane, row of the lane's C fragment); the lanes holding one row
//! are those that differ only in the "column bits" of the lane id, derived from the atom's
//! C layout at build time, and row maxima and the final sums are butterflies over them.
//!
//! fp8 inputs ([`Inputs::Fp8`]): q, k and v are e4m3fn, loaded with the same vectors and
//! converted exactly to bf16 as they are staged into LDS (`widen`: the hardware unpack on
//! AMD, the integer decode elsewhere, [`hw_unpack`]); the rest is the bf16 body (bf16
//! atoms, bf16 P), so the MMAs run at the bf16 rate (native fp8 MMAs are future work). The
//! f32 descales are three 1-element tensors read in the kernel: `q_descale * k_descale`
//! multiplies the exp2-domain scale, `v_descale` the normalized O before it is stored (to
//! `out` or, split, to the workspace: the bf16 combine kernel serves fp8 as is).
//!
//! Index bounds (checked by the API): `BM * heads * D < 2^31` (offsets inside one tile's
//! rows are i32), sequence lengths and `total_q * heads_q` below 2^31; base offsets of a
//! sequence and head are i64.

use crate::table::{o_passes, BM, BN, WAVES};
use crate::DType;
use flydsl_dsl::ir::{Dim, Kernel, ScalarType, Target};
use flydsl_dsl::layout::{ComposedLayout, Swizzle};
use flydsl_dsl::tile::*;
use flydsl_dsl::*;

const LN2: f32 = std::f32::consts::LN_2;

/// The lane-id bits that change only the column of a C element (never its row), and the
/// distinct row offsets of a lane's C values (value `v` belongs to group
/// `groups[v]`). Errors if some lane bit changes both.
fn row_structure(tv: &Tv, wave: u32) -> Result<(Vec<u32>, Vec<usize>, usize), String> {
    let mut col_bits = Vec::new();
    let mut b = 1;
    while b < wave {
        let rows_same =
            (0..wave as i64).all(|l| tv.thr_coord_lit(l).0 == tv.thr_coord_lit(l ^ b as i64).0);
        let cols_same =
            (0..wave as i64).all(|l| tv.thr_coord_lit(l).1 == tv.thr_coord_lit(l ^ b as i64).1);
        match (rows_same, cols_same) {
            (true, _) => col_bits.push(b),
            (false, true) => {}
            (false, false) => return Err(format!("lane bit {b} moves rows and columns")),
        }
        b <<= 1;
    }
    let mut rows: Vec<i64> = (0..tv.vals()).map(|v| tv.val_coord(v).0).collect();
    rows.sort_unstable();
    rows.dedup();
    let groups = (0..tv.vals())
        .map(|v| rows.binary_search(&tv.val_coord(v).0).unwrap_or(0))
        .collect();
    Ok((col_bits, groups, rows.len()))
}

/// Reduce `x` over the lanes of one row.
fn row_reduce(x: Val, col_bits: &[u32], f: impl Fn(Val, Val) -> Val) -> Val {
    col_bits
        .iter()
        .fold(x, |acc, &b| f(acc, shuffle_xor(acc, c_i32(b as i32))))
}

/// How an fp8 variant turns e4m3fn codes into f32 (then bf16: [`widen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unpack {
    /// The hardware unpack of OCP fp8 (`v_cvt_pk_f32_fp8`, two codes per instruction).
    Ocp,
    /// gfx942's hardware unpack, which reads FNUZ (bias 8): an e4m3fn code's FNUZ value is
    /// half its value, except 0x80 (-0 in e4m3fn, NaN in FNUZ: made 0) and S.1111.111
    /// (NaN in e4m3fn, 240 in FNUZ: made NaN).
    Fnuz,
    /// The integer decode of `flydsl-codegen` (branch-free, every target).
    Decode,
}

/// The unpack of the fp8 variant of head tile `dp` on `target`: the OCP instruction on
/// gfx950, gfx1201 and gfx1250, the FNUZ one (with two fixes) on gfx942, the integer decode
/// on sm90 and on gfx1250's 256 tile (where the unpacked values' live ranges spilled 68
/// bytes of scratch and the decode's do not).
fn hw_unpack(target: Target, dp: usize) -> Unpack {
    let types = ir::AmdOp::fp8_types(target);
    if target == Target::Gfx1250 && dp > 128 {
        Unpack::Decode
    } else if types.contains(&ScalarType::F8E4M3FN) {
        Unpack::Ocp
    } else if types.contains(&ScalarType::F8E4M3FNUZ) {
        Unpack::Fnuz
    } else {
        Unpack::Decode
    }
}

/// `v` (fp8 e4m3fn) converted to `st` (bf16) exactly: to f32 by `unpack`, whose upper 16
/// bits are the bf16 (every e4m3fn value, NaN included, is a bf16 value: no rounding
/// step). (`Unpack::Fnuz` gives -0 as +0: unobservable, every input only enters sums that
/// start at +0.)
fn widen(unpack: Unpack, v: Val, st: ScalarType) -> Val {
    let e4m3 = ScalarType::F8E4M3FN;
    if v.elem() != e4m3 || st != ScalarType::BF16 {
        return v.cast(st);
    }
    let n = v.lanes();
    let hw = |from: ScalarType| -> Vec<Val> {
        let words = v.bitcast(ir::Type::vec(ScalarType::I32, n / 4));
        (0..n / 4)
            .flat_map(|w| {
                let x = words.at(w);
                [false, true].map(|hi| cvt_pk_f32_fp8(x, hi, from))
            })
            .flat_map(|p| [p.at(0), p.at(1)])
            .collect()
    };
    let f = match unpack {
        Unpack::Ocp if n.is_multiple_of(4) => vec_of(&hw(e4m3)),
        Unpack::Fnuz if n.is_multiple_of(4) => {
            let es: Vec<Val> = hw(ScalarType::F8E4M3FNUZ)
                .into_iter()
                .map(|x| {
                    let r = x * 2.0f32;
                    // |r| < 480: the value; 480: e4m3fn's NaN; NaN (0x80): e4m3fn's -0.
                    let big = select(r.abs().eq(480.0f32), c_f32(f32::NAN), c_f32(0.0));
                    select(r.abs().lt(480.0f32), r, big)
                })
                .collect();
            vec_of(&es)
        }
        _ => v.cast(ScalarType::F32),
    };
    let bits = f.bitcast(ir::Type::vec(ScalarType::I32, n));
    bits.lshr(16)
        .cast(ScalarType::I16)
        .bitcast(ir::Type::vec(ScalarType::BF16, n))
}

/// Store this thread's register vectors `f` (loaded by a copy of thread-value layout `tv`
/// from a tensor of `in_t`) into the 16-bit LDS tile `dst` of `st`: unchanged when `in_t`
/// is `st`, else converted (fp8 e4m3fn -> bf16 is exact) and stored in 8-element (16-byte)
/// pieces, each at its own coordinate, so that no store straddles a swizzle chunk.
#[allow(clippy::too_many_arguments)]
fn stage_store(
    unpack: Unpack,
    thr: &ThrCopy,
    tv: &Tv,
    tid: Val,
    f: &Frag,
    dst: &SView,
    in_t: ScalarType,
    st: ScalarType,
) {
    if in_t == st {
        thr.store(f, dst);
        return;
    }
    let (r0, c0) = tv.thr_coord(tid);
    let n = f.vals().first().map_or(1, |v| v.lanes()) as i64;
    let piece = 8.min(n);
    for (a, &v) in f.vals().iter().enumerate() {
        let w = widen(unpack, v, st);
        let (r, c) = tv.val_coord(a as i64 * n);
        for h in (0..n).step_by(piece as usize) {
            let part: Vec<Val> = (h..h + piece).map(|e| w.at(e as u32)).collect();
            let row = Idx::Dyn(r0.val() + r as i32);
            let col = Idx::Dyn(c0.val() + (c + h) as i32);
            dst.store(row, col, if piece == 1 { part[0] } else { vec_of(&part) });
        }
    }
}

/// The operands of one forward variant: q, k and v of the 16-bit output dtype, or OCP fp8
/// e4m3fn with per-tensor f32 descales (output bf16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inputs {
    /// q, k, v and out of this dtype.
    Half(DType),
    /// q, k, v e4m3fn (`q_descale`, `k_descale`, `v_descale`: one f32 each), out bf16.
    Fp8,
}

impl Inputs {
    /// The 16-bit type of the LDS tiles, the MMAs, P and the output.
    pub fn compute(self) -> DType {
        match self {
            Inputs::Half(d) => d,
            Inputs::Fp8 => DType::BF16,
        }
    }
    /// The element type of q, k and v in global memory.
    pub fn input(self) -> ScalarType {
        match self {
            Inputs::Half(d) => d.scalar(),
            Inputs::Fp8 => ScalarType::F8E4M3FN,
        }
    }
}

/// The forward kernel for operands `inputs` and head tile `dp` on `target`.
///
/// fp8 inputs are converted to bf16 as they are staged into LDS (exact: every e4m3fn value
/// is a bf16 value), so the body is the bf16 one and the MMAs run at the bf16 rate (native
/// fp8 MMAs are future work); `q_descale * k_descale` multiplies the exp2-domain logit scale
/// and `v_descale` the normalized O (also the split-K partial O, so the combine is the
/// bf16 one).
pub fn build(target: Target, inputs: Inputs, dp: usize, name: &str) -> Result<Kernel, BuildError> {
    let dt = inputs.compute();
    let st = dt.scalar();
    let in_t = inputs.input();
    let fp8 = inputs == Inputs::Fp8;
    let unpack = hw_unpack(target, dp);
    let fail = |reason: String| BuildError::Invalid {
        kernel: name.to_string(),
        target,
        reason,
    };
    let tfail = |e: TileError| fail(e.to_string());
    let atom = ir::MmaAtom::native_16bit(target, dt == DType::BF16);
    let (am, an, ak) = atom.shape();
    let (bm, bn, dpi) = (BM as i64, BN as i64, dp as i64);
    // O columns per workgroup: all of them, or a 1/passes share (grid x covers the passes).
    let passes = o_passes(target, dp);
    let dpo = dpi / passes as i64;
    // S = Q K^T: waves along M, each one atom row by all BN keys.
    let mma_s = TiledMma::new(atom, target, (WAVES, 1), (1, BN as u32 / an)).map_err(tfail)?;
    // O = P V: the same waves, all DP columns.
    let mma_o = TiledMma::new(atom, target, (WAVES, 1), (1, dpo as u32 / an)).map_err(tfail)?;
    if mma_s.tile_m() != bm || am * WAVES != BM as u32 {
        return Err(fail(format!("atom M {am} x {WAVES} waves != BM {BM}")));
    }
    let relayout = c_to_a_map(atom, target).map_err(tfail)?;
    let l = (relayout.c_atoms() * an) as usize;
    if !BN.is_multiple_of(l) || !BN.is_multiple_of(ak as usize) {
        return Err(fail(format!(
            "BN {BN} is not a multiple of the re-layout strip {l}"
        )));
    }
    let wave = target.wave_size();
    let (col_bits, groups, ngroups) = row_structure(mma_s.atom().c(), wave).map_err(fail)?;
    let nc = groups.len();
    let threads = mma_s.threads();
    // 16-byte global loads; fp8 tiles too small for one 16-byte vector per thread (the
    // 32 x 64 K/V tile on wave64 targets) take 8-byte vectors.
    let tiled = |rows: i64, cols: i64| {
        TiledCopy::new(CopyAtom::best_global(target), in_t, threads, (rows, cols))
            .or_else(|_| TiledCopy::new(CopyAtom::Vec64, in_t, threads, (rows, cols)))
            .map_err(tfail)
    };
    let copy_q = tiled(bm, dpi)?;
    let copy_kv = tiled(bn, dpi)?;
    let copy_v = tiled(bn, dpo)?;
    // V^T and P are written element by element: unswizzled rows padded by 16 bytes (bank
    // spread, 16-byte aligned vectors), so every address is one base plus a constant.
    // (No padding where it would not fit the target's LDS: sm90's 48 KiB at D = 256.)
    let es = st.size_bytes() as i64;
    let fits = (bm * dpi + dpo * (bn + 8) + bm * (bn + 8)) * es <= target.max_lds_bytes() as i64;
    let pad = if fits { 8 } else { 0 };
    let padded = |rows: i64, cols: i64| -> Result<ComposedLayout, BuildError> {
        let l = flydsl_dsl::layout::Layout::new((rows, cols), (cols + pad, 1))
            .map_err(|e| fail(e.to_string()))?;
        Ok(ComposedLayout::new(Swizzle::identity(), l))
    };
    let lay_vt = padded(dpo, bn)?;
    // gfx1201 (256 VGPRs): the XOR-swizzled Q and K tiles cost one live address register
    // per fragment read across the key loop (and spilled at D >= 128); there they are
    // padded rows too (base + constant offsets). Elsewhere the XOR-16 swizzle.
    let (lay_q, lay_k) = if target == Target::Gfx1201 {
        (padded(bm, dpi)?, padded(bn, dpi)?)
    } else {
        (
            smem_xor16(bm, dpi, st).map_err(tfail)?,
            smem_xor16(bn, dpi, st).map_err(tfail)?,
        )
    };
    let kv_elems = STensor::elems(&lay_k, 1).max(STensor::elems(&lay_vt, 1));
    // RDNA WMMA: C holds a column per lane and A a row per lane with the source register
    // depending on the lane, so the register re-layout costs 16 shuffles per element and
    // LLVM spills; there P goes through a small LDS tile (each wave its own 16 rows).
    let p_via_lds = matches!(target, Target::Gfx1201 | Target::Gfx1250);
    let lay_p = padded(bm, bn)?;
    let i32_ = ScalarType::I32;
    let f32_ = ScalarType::F32;
    let i64_ = ScalarType::I64;
    KernelBuilder::new(name, target, threads)
        .rotate_loops(true)
        .build(|k| {
            let q = k.tensor("q", in_t);
            let kt = k.tensor("k", in_t);
            let vt = k.tensor("v", in_t);
            let descales = fp8.then(|| {
                let mut d = |n: &str| k.tensor(n, f32_);
                (d("q_descale"), d("k_descale"), d("v_descale"))
            });
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
            let scale_log2 = k.scalar("scale_log2", f32_);
            // fp8: the descales are device data, read once per workgroup.
            let (scale_log2, v_scale) = match &descales {
                Some((qd, kd, vd)) => (
                    scale_log2 * qd.load(c_i32(0)) * kd.load(c_i32(0)),
                    vd.load(c_i32(0)),
                ),
                None => (scale_log2, c_f32(1.0)),
            };

            let q_mem = k.lds("q_tile", st, STensor::elems(&lay_q, 1) as u32);
            let kv_mem = k.lds("kv_tile", st, kv_elems as u32);
            let sq_t = STensor::new(q_mem, lay_q.clone(), 1).unwrap();
            let sk_t = STensor::new(kv_mem, lay_k.clone(), 1).unwrap();
            let sv_t = STensor::new(kv_mem, lay_vt.clone(), 1).unwrap();
            let zero = c_i32(0);
            let (s_q, s_k, s_vt) = (sq_t.stage(zero), sk_t.stage(zero), sv_t.stage(zero));
            let sp_t = p_via_lds.then(|| {
                let mem = k.lds("p_tile", st, STensor::elems(&lay_p, 1) as u32);
                STensor::new(mem, lay_p.clone(), 1).unwrap()
            });

            let tid = thread_id_x();
            let qt = block_id_x() / passes as i32;
            let pass = block_id_x() % passes as i32;
            // This pass's O columns: [o_col, o_col + dpo) of head_dim.
            let h = block_id(Dim::Y);
            let bz = block_id(Dim::Z);
            let b = bz / splits;
            let sp = bz % splits;
            let hk = h / (heads_q / heads_kv);
            // Sequence b: dense sequences are packed rows b * seqlen ..; varlen reads cu_seqlens
            // (the dense launch passes [0, 0] and never indexes past it).
            let is_var = varlen.ne(0);
            let vb = select(is_var, b, zero);
            let q_start = select(is_var, cu_q.load(vb), b * seqlen_q);
            let sq = select(is_var, cu_q.load(vb + 1) - q_start, seqlen_q);
            let kv_start = select(is_var, cu_kv.load(vb), b * seqlen_kv);
            let skv = select(is_var, cu_kv.load(vb + 1) - kv_start, seqlen_kv);
            let q0 = qt * BM as i32;
            if_(q0.lt(sq), || {
                let ldq = heads_q * d;
                let ldkv = heads_kv * d;
                let head_base = |start: Val, ld: Val, head: Val| {
                    start.cast(i64_) * ld.cast(i64_) + (head * d).cast(i64_)
                };
                let q_base = head_base(q_start, ldq, h);
                let kv_base = head_base(kv_start, ldkv, hk);
                let gq = GTensor::strided(q.offset(q_base), sq, d, ldq);
                let gk = GTensor::strided(kt.offset(kv_base), skv, d, ldkv);
                let o_col = pass * dpo as i32;
                let o_cols = (d - o_col).max(0);
                let gv = GTensor::strided(vt.offset(kv_base + o_col.cast(i64_)), skv, o_cols, ldkv);
                // Keys this q tile can see, its key tiles and this split's share of them.
                let shift = skv - sq;
                let causal_end = (q0 + BM as i32 + shift).min(skv).max(0);
                let n_end = select(causal.ne(0), causal_end, skv);
                let tiles = (n_end + (BN as i32 - 1)) / BN as i32;
                let per = (tiles + (splits - 1)) / splits;
                let t_begin = (sp * per).min(tiles);
                let t_end = (t_begin + per).min(tiles);

                let (cq, ckv) = (copy_q.partition(tid), copy_kv.partition(tid));
                let gq_tile = gq.local_tile((bm, dpi), (qt, zero));
                if fp8 {
                    let rq = cq.load(&gq_tile);
                    stage_store(unpack, &cq, copy_q.tv(), tid, &rq, &s_q, in_t, st);
                } else {
                    copy(&cq, &gq_tile, &s_q);
                }
                let k_tile = |t: Val| gk.local_tile((bn, dpi), (t, zero));
                let v_tile = |t: Val| gv.local_tile((bn, dpo), (t, zero));
                let cv = copy_v.partition(tid);
                // K tile t into registers, or zeros past this split's tiles: a tile past the
                // sequence must not even form its address (the pointer engine reads element 0 of
                // the tile for masked vectors).
                let vec = ckv.atom().bits(in_t) / (8 * in_t.size_bytes());
                let n_vec = (copy_kv.tv().vals() / vec as i64) as usize;
                let frag_layout = flydsl_dsl::layout::Layout::col_major(n_vec as i64).unwrap();
                let load_k = |t: Val| {
                    let vals = if_else(
                        t.lt(t_end),
                        || ckv.load(&k_tile(t)).vals().to_vec(),
                        || {
                            let z = cnst(ir::Type::s(in_t), ir::Const::Float(0.0));
                            vec![splat(z, vec); n_vec]
                        },
                    );
                    Frag::new(vals, frag_layout.clone())
                };
                // Register prefetch (K of tile t + 1 and V of tile t in flight during the MMAs)
                // everywhere but gfx1201, whose 256 VGPRs cannot hold them next to O at D >= 128:
                // there each tile is loaded when it is needed.
                let prefetch = target != Target::Gfx1201;
                let rk0: Vec<Val> = if prefetch {
                    load_k(t_begin).vals().to_vec()
                } else {
                    vec![]
                };
                let thr_s = mma_s.thr_slice(tid);
                let thr_o = mma_o.thr_slice(tid);
                let acc0 = mma_o.zero_acc();
                let n_o = acc0.vals().len();
                let n_k = rk0.len();
                let neg_inf = c_f32(f32::NEG_INFINITY);
                let mut init: Vec<Val> = acc0.vals().to_vec();
                init.extend((0..ngroups).map(|_| neg_inf)); // m (exp2 domain, max of seen logits)
                init.extend((0..ngroups).map(|_| c_f32(0.0))); // l (this lane's partial sum)
                init.extend(rk0.iter().copied());
                let fin = for_range(t_begin, t_end, c_i32(1), &init, |t, c| {
                    let o = acc0.with_vals(c[..n_o].to_vec());
                    let m_old = &c[n_o..n_o + ngroups];
                    let l_old = &c[n_o + ngroups..n_o + 2 * ngroups];
                    let rk = if prefetch {
                        Frag::new(c[n_o + 2 * ngroups..].to_vec(), frag_layout.clone())
                    } else {
                        ckv.load(&k_tile(t))
                    };
                    stage_store(unpack, &ckv, copy_kv.tv(), tid, &rk, &s_k, in_t, st);
                    barrier();
                    let rv_early = prefetch.then(|| cv.load(&v_tile(t)));
                    let mut s = mma_s.zero_acc();
                    for k0 in (0..dpi).step_by(ak as usize) {
                        s = thr_s.gemm(
                            &s,
                            &thr_s.partition_a(&s_q, k0),
                            &thr_s.partition_b(&s_k, k0),
                        );
                        if !prefetch {
                            // gfx1201: keep LLVM from issuing every step's LDS reads up front.
                            flydsl_dsl::sched_barrier(0);
                        }
                    }
                    barrier();
                    let rv = rv_early.unwrap_or_else(|| cv.load(&v_tile(t)));
                    // V tile t, transposed into the buffer K just left: V^T[d][key].
                    let (vr0, vc0) = copy_v.tv().thr_coord(tid);
                    for (a, &vec) in rv.vals().iter().enumerate() {
                        let (r, cc) = copy_v.tv().val_coord(a as i64 * vec.lanes() as i64);
                        let vec = if fp8 { widen(unpack, vec, st) } else { vec };
                        for e in 0..vec.lanes() {
                            let row = Idx::Dyn(vc0.val() + (cc + e as i64) as i32);
                            let col = Idx::Dyn(vr0.val() + r as i32);
                            s_vt.store(row, col, vec.at(e));
                        }
                    }
                    let rk_next = if prefetch {
                        load_k(t + 1).vals().to_vec()
                    } else {
                        vec![]
                    };
                    // Online softmax of S in registers.
                    let n_s = BN / an as usize;
                    let mut p_elems: Vec<Vec<Val>> = Vec::with_capacity(n_s);
                    let mut tile_max = vec![neg_inf; ngroups];
                    for j in 0..n_s {
                        let f = s.at(&[0, j as i64]);
                        let mut row = Vec::with_capacity(nc);
                        for (v, &g) in groups.iter().enumerate() {
                            let (r, cc) = thr_s.partition_c(0, j as u32, v as u32);
                            let qi = q0 + r.val();
                            let kj = t * BN as i32 + cc.val();
                            let vis = kj.lt(skv) & (causal.eq(0) | kj.le(qi + shift));
                            let x = select(vis, f.at(v as u32) * scale_log2, neg_inf);
                            tile_max[g] = tile_max[g].max(x);
                            row.push(x);
                        }
                        p_elems.push(row);
                    }
                    let mut m_new = Vec::with_capacity(ngroups);
                    let mut alpha = Vec::with_capacity(ngroups);
                    let mut m_use = Vec::with_capacity(ngroups);
                    for g in 0..ngroups {
                        let mx = row_reduce(tile_max[g], &col_bits, |a, b| a.max(b));
                        let mn = m_old[g].max(mx);
                        // A row that has seen no key yet keeps m = -inf; subtract 0 instead.
                        let mu = select(mn.eq(f32::NEG_INFINITY), c_f32(0.0), mn);
                        alpha.push((m_old[g] - mu).exp2());
                        m_new.push(mn);
                        m_use.push(mu);
                    }
                    let mut l_new: Vec<Val> = (0..ngroups).map(|g| l_old[g] * alpha[g]).collect();
                    let mut p_frags = Vec::with_capacity(n_s);
                    for row in &p_elems {
                        let ps: Vec<Val> = row
                            .iter()
                            .zip(&groups)
                            .map(|(&x, &g)| {
                                let p = (x - m_use[g]).exp2();
                                l_new[g] = l_new[g] + p;
                                p
                            })
                            .collect();
                        p_frags.push(vec_of(&ps));
                    }
                    let mut p_a = Vec::new();
                    if let Some(sp_t) = &sp_t {
                        let s_p = sp_t.stage(zero);
                        for (j, f) in p_frags.iter().enumerate() {
                            for v in 0..nc as u32 {
                                let (r, cc) = thr_s.partition_c(0, j as u32, v);
                                s_p.store(r, cc, f.at(v).cast(st));
                            }
                        }
                    } else {
                        for strip in p_frags.chunks(relayout.c_atoms() as usize) {
                            p_a.extend(c_to_a(&relayout, atom, strip));
                        }
                    }
                    // O *= alpha (per row), then O += P V once V^T is in LDS.
                    let scaled: Vec<Val> = o
                        .vals()
                        .iter()
                        .map(|&f| {
                            let es: Vec<Val> = groups
                                .iter()
                                .enumerate()
                                .map(|(v, &g)| f.at(v as u32) * alpha[g])
                                .collect();
                            vec_of(&es)
                        })
                        .collect();
                    let mut o = acc0.with_vals(scaled);
                    barrier();
                    if let Some(sp_t) = &sp_t {
                        let s_p = sp_t.stage(zero);
                        p_a = (0..bn / ak as i64)
                            .flat_map(|kk| thr_o.partition_a(&s_p, kk * ak as i64))
                            .collect();
                    }
                    for (kk, pa) in p_a.iter().enumerate() {
                        let k0 = kk as i64 * ak as i64;
                        o = thr_o.gemm(&o, std::slice::from_ref(pa), &thr_o.partition_b(&s_vt, k0));
                        if !prefetch {
                            flydsl_dsl::sched_barrier(0);
                        }
                    }
                    barrier();
                    let mut next = o.vals().to_vec();
                    next.extend(m_new);
                    next.extend(l_new);
                    next.extend(rk_next);
                    next
                });
                debug_assert_eq!(fin.len(), n_o + 2 * ngroups + n_k);
                let m = &fin[n_o..n_o + ngroups];
                let l_part = &fin[n_o + ngroups..n_o + 2 * ngroups];
                let mut inv = Vec::with_capacity(ngroups);
                let mut lse_g = Vec::with_capacity(ngroups);
                for g in 0..ngroups {
                    let lt = row_reduce(l_part[g], &col_bits, |a, b| a + b);
                    let has = lt.gt(0.0f32);
                    // fp8: v_descale scales the normalized O (partial O too, before the combine).
                    inv.push(select(has, v_scale / lt, c_f32(0.0)));
                    lse_g.push(select(has, (m[g] + lt.log2()) * LN2, neg_inf));
                }
                let o = acc0.with_vals(
                    fin[..n_o]
                        .iter()
                        .map(|&f| {
                            let es: Vec<Val> = groups
                                .iter()
                                .enumerate()
                                .map(|(v, &g)| f.at(v as u32) * inv[g])
                                .collect();
                            vec_of(&es)
                        })
                        .collect(),
                );
                // One lane per row writes the LSE: the lane whose column bits are all 0.
                let cmask: u32 = col_bits.iter().sum();
                let lane = tid % wave as i32;
                let writer = (lane & cmask as i32).eq(0);
                // Rows of this lane: value v of C fragment (0, 0) for each group's first value.
                let group_rows: Vec<Val> = (0..ngroups)
                    .map(|g| {
                        let v = groups.iter().position(|&x| x == g).unwrap_or(0);
                        thr_o.partition_c(0, 0, v as u32).0.val()
                    })
                    .collect();
                if_else(
                    splits.gt(1),
                    || {
                        let ws_base = (sp.cast(i64_) * total_q.cast(i64_) + q_start.cast(i64_))
                            * ldq.cast(i64_)
                            + (h * d + o_col).cast(i64_);
                        let gw = GTensor::strided(ws_o.offset(ws_base), sq, o_cols, ldq);
                        thr_o.store_c(&o, &gw.local_tile((bm, dpo), (qt, zero)), f32_);
                        let lbase =
                            (sp * heads_q + h).cast(i64_) * total_q.cast(i64_) + q_start.cast(i64_);
                        let lt = ws_lse.offset(lbase);
                        for g in 0..ngroups {
                            let qi = q0 + group_rows[g];
                            if_(writer & pass.eq(0) & qi.lt(sq), || lt.store(qi, lse_g[g]));
                        }
                        vec![]
                    },
                    || {
                        let go = GTensor::strided(
                            out.offset(q_base + o_col.cast(i64_)),
                            sq,
                            o_cols,
                            ldq,
                        );
                        thr_o.store_c(&o, &go.local_tile((bm, dpo), (qt, zero)), st);
                        // LSE: dense [B, Hq, Sq], varlen [Hq, total_q].
                        let lbase = select(
                            is_var,
                            h.cast(i64_) * total_q.cast(i64_) + q_start.cast(i64_),
                            (b * heads_q + h).cast(i64_) * seqlen_q.cast(i64_),
                        );
                        let lt = lse.offset(lbase);
                        for g in 0..ngroups {
                            let qi = q0 + group_rows[g];
                            if_(write_lse.ne(0) & pass.eq(0) & writer & qi.lt(sq), || {
                                lt.store(qi, lse_g[g])
                            });
                        }
                        vec![]
                    },
                );
            });
        })
}

/// The split-K combine: one workgroup per (packed query row, head) merges the `splits`
/// partial results of the workspace by their LSEs (`w_s = exp(lse_s - lse)`, `lse = log
/// sum exp(lse_s)`; all `-inf`: zeros and `-inf`) into `out` and, when `write_lse`, the LSE.
pub fn combine(target: Target, dt: DType, threads: u32, name: &str) -> Result<Kernel, BuildError> {
    let st = dt.scalar();
    let (i32_, f32_, i64_) = (ScalarType::I32, ScalarType::F32, ScalarType::I64);
    KernelBuilder::new(name, target, threads).build(|k| {
        let ws_o = k.tensor("ws_o", f32_);
        let ws_lse = k.tensor("ws_lse", f32_);
        let out = k.tensor_mut("out", st);
        let lse = k.tensor_mut("lse", f32_);
        let seqlen_q = k.scalar("seqlen_q", i32_);
        let heads_q = k.scalar("heads_q", i32_);
        let d = k.scalar("head_dim", i32_);
        let total_q = k.scalar("total_q", i32_);
        let varlen = k.scalar("varlen", i32_);
        let write_lse = k.scalar("write_lse", i32_);
        let splits = k.scalar("splits", i32_);
        let row = block_id_x();
        let h = block_id(Dim::Y);
        let tid = thread_id_x();
        let neg_inf = c_f32(f32::NEG_INFINITY);
        let lse_at = |s: Val| {
            ws_lse.load((s * heads_q + h).cast(i64_) * total_q.cast(i64_) + row.cast(i64_))
        };
        let mx = for_range(c_i32(0), splits, c_i32(1), &[neg_inf], |s, c| {
            vec![c[0].max(lse_at(s))]
        })[0];
        let mu = select(mx.eq(f32::NEG_INFINITY), c_f32(0.0), mx);
        let total = for_range(c_i32(0), splits, c_i32(1), &[c_f32(0.0)], |s, c| {
            vec![c[0] + ((lse_at(s) - mu) * std::f32::consts::LOG2_E).exp2()]
        })[0];
        let has = total.gt(0.0f32);
        let inv = select(has, c_f32(1.0) / total, c_f32(0.0));
        let ld = heads_q.cast(i64_) * d.cast(i64_);
        let row_off = row.cast(i64_) * ld + (h * d).cast(i64_);
        for_range_(tid, d, c_i32(threads as i32), |di| {
            let acc = for_range(c_i32(0), splits, c_i32(1), &[c_f32(0.0)], |s, c| {
                let w = ((lse_at(s) - mu) * std::f32::consts::LOG2_E).exp2();
                let x = ws_o.load(s.cast(i64_) * total_q.cast(i64_) * ld + row_off + di.cast(i64_));
                vec![c[0] + w * x]
            })[0];
            out.store(row_off + di.cast(i64_), (acc * inv).cast(st));
        });
        let lse_v = select(has, mu + total.log2() * std::f32::consts::LN_2, neg_inf);
        if_(write_lse.ne(0) & tid.eq(0), || {
            // Dense LSE [B, Hq, Sq]: row = b * Sq + i; varlen [Hq, total_q].
            let sq = seqlen_q.max(1);
            let b = row / sq;
            let i = row % sq;
            let dense = (b * heads_q + h).cast(i64_) * seqlen_q.cast(i64_) + i.cast(i64_);
            let var = h.cast(i64_) * total_q.cast(i64_) + row.cast(i64_);
            lse.store(select(varlen.ne(0), var, dense), lse_v);
        });
    })
}
