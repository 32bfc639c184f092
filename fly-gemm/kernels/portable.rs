//! The portable GEMM: `C = epilogue(A * B^T)` with 16-bit inputs and f32 accumulation, or
//! `C = epilogue((A * B^T) * scale_a[m] * scale_b[n])` with 8-bit inputs (fp8 E4M3 in the
//! target's format, f32 accumulation; int8, exact s32 accumulation), described once over the
//! tile layer (`flydsl_dsl::tile`) and built for every AMD target (MFMA on gfx942/gfx950,
//! WMMA on gfx1201/gfx1250) and for sm_90 (`mma.sync`), where it is the fallback for what
//! the wgmma kernels refuse (16-bit `k % 8 != 0`, 8-bit `k % 16 != 0`, preshuffled B).
//!
//! One workgroup computes one `tile_m x tile_n` tile of C with four waves along N
//! (`TiledMma` of the target's native 16-bit or 8-bit atom: `MmaAtom::native_16bit`,
//! `MmaAtom::native_8bit`). Per K step of `tile_k` (whole 64-byte micro-steps) A and B move
//! global -> registers (128-bit, zeros past M, N, K) -> XOR-16
//! swizzled LDS; with `lds_stage` 2 the loads of step t + 1 are in flight while step t feeds
//! the matrix atoms out of the other buffer (one barrier per step); with `lds_stage` 1 the
//! loads are in flight during the atoms and land after a barrier (two barriers per step).
//! B is read plain (`[n, k]` row-major, by the same tiled copy as A) or preshuffled. Where
//! the atom's B operand is whole 16-byte K chunks of one column (MFMA 16x16x32 on gfx950,
//! WMMA 16x16x32 on gfx1250: [`direct_b_runs`]) preshuffled B goes global -> registers with
//! no LDS (the reference's design; the next step's operands load during this step's atoms);
//! elsewhere each thread moves whole 16-byte chunks of 16-row groups into LDS. The
//! `PlainScalar` variant reads A and B one element at a time for any K (rows not 16-byte
//! aligned). The epilogue is chosen at run time (`epi`, [`Epilogue::index`]) and applied in
//! f32 (8-bit: the accumulator converted to f32, times `scale_a[row]`, then times
//! `scale_b[col]`, as the wgmma kernel does); stores outside C are dropped.
//!
//! Host side (`src/lib.rs`): grid `(ceil(m / tile_m), ceil(n / tile_n))`, `4 * wave` threads,
//! no dynamic LDS; i32 index arithmetic inside a row panel: `tile_m * k`, `tile_n * k` and
//! `tile_m * n` below 2^31 (panels start at i64 offsets).

use crate::table::{portable_name, BRead, Epilogue, Operands, TileConfig, PORTABLE_WAVES};
use crate::wgmma::epilogue;
use flydsl_dsl::ir::{Dim, Kernel, MmaAtom, ScalarType, ScalarType::*, Target, Type};
use flydsl_dsl::tile::*;
use flydsl_dsl::*;

/// The element type of A and B.
fn input_scalar(ops: Operands) -> ScalarType {
    match ops {
        Operands::Half(dt) => dt.scalar(),
        Operands::Scaled(q, _) => crate::wgmma_scaled::input_scalar(q),
    }
}

/// `lanes` zeros of `st` (all bits clear: 0.0 in every float format, fp8 FNUZ included).
fn zeros(st: ScalarType, lanes: u32) -> Val {
    let int = match st.size_bytes() {
        1 => I8,
        2 => I16,
        _ => I32,
    };
    splat(c_i32(0).cast(int), lanes).bitcast(Type::vec(st, lanes))
}

/// The tile-layer objects of one variant (checked before the kernel body is built).
struct Plan {
    mma: TiledMma,
    copy_a: TiledCopy,
    copy_b: Option<TiledCopy>,
    lay_a: flydsl_dsl::layout::ComposedLayout,
    lay_b: flydsl_dsl::layout::ComposedLayout,
}

fn plan(target: Target, ops: Operands, cfg: TileConfig, b: BRead) -> Result<Plan, TileError> {
    let st = input_scalar(ops);
    let atom = match ops {
        Operands::Half(dt) => MmaAtom::native_16bit(target, dt == crate::DType::BF16),
        // gfx950 fp8: the block-scaled 16x16x128 MFMA (unit scales; 4x the K of the plain
        // fp8 one, the reference's choice) where the K step holds two or more of them
        // (with one, the 64 x 256 x 128 tile, it needs 268 registers instead of 256:
        // occupancy 1, not 2; `bench/gemm-amd-static.md`).
        Operands::Scaled(crate::Quant::Fp8, _)
            if target == Target::Gfx950 && cfg.tile_k.is_multiple_of(256) =>
        {
            MmaAtom::MfmaScale16x16x128Fp8
        }
        Operands::Scaled(q, _) => MmaAtom::native_8bit(target, q == crate::Quant::Int8),
    };
    let (am, an, _) = atom.shape();
    let reps = (cfg.tile_m / am, cfg.tile_n / (PORTABLE_WAVES * an));
    let mma = TiledMma::new(atom, target, (1, PORTABLE_WAVES), reps)?;
    let threads = mma.threads();
    let (bm, bn, bk) = (cfg.tile_m as i64, cfg.tile_n as i64, cfg.tile_k as i64);
    let copy_atom = match b {
        BRead::PlainScalar => CopyAtom::Scalar,
        _ => CopyAtom::best_global(target),
    };
    let copy_a = TiledCopy::new(copy_atom, st, threads, (bm, bk))?;
    let copy_b = match b {
        BRead::Preshuffled => None,
        _ => Some(TiledCopy::new(copy_atom, st, threads, (bn, bk))?),
    };
    Ok(Plan {
        mma,
        copy_a,
        copy_b,
        lay_a: smem_xor16(bm, bk, st)?,
        lay_b: smem_xor16(bn, bk, st)?,
    })
}

/// Where preshuffled B can skip LDS: when each lane's B operand of the target's atom is
/// whole 16-byte K chunks of one column (runs of `kpack` = 16 bytes of consecutive K
/// starting at a multiple of `kpack`, the atom 16 columns wide), every run is one chunk of
/// the preshuffled layout, loaded straight from global memory into the operand registers
/// (the reference's design). The value indices where the runs start; `None` for atoms whose
/// lanes hold shorter K runs (MFMA 16x16x16 16-bit and 16x16x32 8-bit, `mma.sync`), which
/// stage B through LDS.
fn direct_b_runs(mma: &TiledMma, target: Target, kpack: i64) -> Option<Vec<i64>> {
    let tv = mma.atom().b();
    let (_, an, _) = mma.atom().atom().shape();
    if an != 16 || tv.vals() % kpack != 0 {
        return None;
    }
    let runs: Vec<i64> = (0..tv.vals()).step_by(kpack as usize).collect();
    for &v in &runs {
        let (r, c) = tv.val_coord(v);
        if c % kpack != 0 || (1..kpack).any(|u| tv.val_coord(v + u) != (r, c + u)) {
            return None;
        }
    }
    let lanes_aligned = (0..target.wave_size() as i64).all(|l| tv.thr_coord_lit(l).1 % kpack == 0);
    lanes_aligned.then_some(runs)
}

/// Whether preshuffled B can go global -> registers for `ops` on `target` (the atom's B
/// operand is whole 16-byte K chunks, or K packs of them), which the direct-B configs need.
pub fn has_direct_b(target: Target, ops: Operands, cfg: TileConfig) -> bool {
    let Ok(p) = plan(target, ops, cfg, BRead::Preshuffled) else {
        return false;
    };
    let kpack = 16 / ops.elem_bytes() as i64;
    let direct =
        p.mma.k_pack(ops.elem_bytes()) > 1 || direct_b_runs(&p.mma, target, kpack).is_some();
    // Registers: gfx1201 has 256 VGPRs a lane and no AGPRs; past 64 f32 accumulators a lane
    // (64 x 256 on wave32: 128) they no longer fit next to a K step of B (it spills).
    let acc_per_lane = cfg.tile_m * cfg.tile_n / (PORTABLE_WAVES * target.wave_size());
    direct && !(target == Target::Gfx1201 && acc_per_lane > 64)
}

/// The kernel for the operands `ops` (16-bit, or 8-bit with scales), `cfg` and the B read
/// `b` on `target`.
pub fn build(
    target: Target,
    ops: Operands,
    cfg: TileConfig,
    b: BRead,
) -> Result<Kernel, BuildError> {
    let name = portable_name(ops, cfg, b);
    let fail = |reason: String| BuildError::Invalid {
        kernel: name.clone(),
        target,
        reason,
    };
    let p = plan(target, ops, cfg, b).map_err(|e| fail(e.to_string()))?;
    let eb = ops.elem_bytes();
    if cfg.lds_stage == 0 || cfg.lds_stage > 2 || !(cfg.tile_k * eb).is_multiple_of(64) {
        return Err(fail(format!(
            "{cfg:?}: lds_stage 1 or 2, tile_k * {eb} bytes % 64 == 0"
        )));
    }
    let st = input_scalar(ops);
    let st_out = ops.out().scalar();
    let scaled = matches!(ops, Operands::Scaled(..));
    // Elements per 16-byte chunk (the preshuffle layout's KPACK).
    let kpack = 16 / eb as i64;
    let (bm, bn, bk) = (cfg.tile_m as i64, cfg.tile_n as i64, cfg.tile_k as i64);
    let s = cfg.lds_stage;
    let scalar = b == BRead::PlainScalar;
    // K packs: atoms whose lanes hold less than 16 bytes of K read A and B 16 bytes at a
    // time, `pack` atoms per read (K permuted alike in both: `TiledMma::k_pack`); then
    // preshuffled B always goes global -> registers, one chunk per lane and pack.
    let pack = p.mma.k_pack(eb);
    let (_, _, ak) = p.mma.atom().atom().shape();
    if !cfg.tile_k.is_multiple_of(ak * pack) {
        return Err(fail(format!(
            "{cfg:?}: tile_k must be a multiple of {pack} packed atoms of K {ak}"
        )));
    }
    let runs = match b {
        BRead::Preshuffled if pack == 1 => direct_b_runs(&p.mma, target, kpack),
        _ => None,
    };
    let direct_b = runs.is_some() || (b == BRead::Preshuffled && pack > 1);
    let mma = &p.mma;
    let threads = mma.threads();
    // The direct-B configs keep the reference's occupancy on the MFMA targets (LLVM
    // otherwise doubles the accumulators to alternate MFMA destinations).
    let cap = crate::table::register_cap(ops, cfg, target.is_amd() && target.wave_size() == 64);
    // Rotated loops keep the accumulators in one register set (`KernelAttrs::rotate_loops`).
    KernelBuilder::new(&name, target, threads)
        .max_registers(cap)
        .rotate_loops(true)
        .build(|k| {
            let a = k.tensor("a", st);
            let bt = k.tensor("b", st);
            let scales = scaled.then(|| (k.tensor("scale_a", F32), k.tensor("scale_b", F32)));
            let bias = k.tensor("bias", st_out);
            let c = k.tensor_mut("c", st_out);
            let (m, n, kd) = (k.scalar("m", I32), k.scalar("n", I32), k.scalar("k", I32));
            let epi = k.scalar("epi", I32);
            let sa = STensor::new(
                k.lds("a_tiles", st, STensor::elems(&p.lay_a, s) as u32),
                p.lay_a.clone(),
                s,
            )
            .unwrap();
            // Preshuffled B straight to registers where the atom allows it: no LDS for B.
            let sb_store = (!direct_b).then(|| {
                STensor::new(
                    k.lds("b_tiles", st, STensor::elems(&p.lay_b, s) as u32),
                    p.lay_b.clone(),
                    s,
                )
                .unwrap()
            });
            let sb = sb_store.as_ref();
            let tid = thread_id_x();
            // M tiles along x (up to 2^31 - 1 of them), N tiles along y.
            let (bx, by) = (block_id(Dim::Y), block_id_x());
            let ga = GTensor::new(a, m, kd);
            let a_tile = move |t: Val| ga.local_tile((bm, bk), (by, t));
            let ca = p.copy_a.partition(tid);
            let thr = mma.thr_slice(tid);
            let k_tiles = (kd + (bk - 1) as i32) / bk as i32;
            let stage = move |t: Val| if s == 1 { c_i32(0) } else { t % s as i32 };

            // B: plain through the tiled copy, or preshuffled chunks.
            let gb = GTensor::new(bt, n, kd);
            let cb = p.copy_b.as_ref().map(|cb| cb.partition(tid));
            // Preshuffled: this workgroup's tile_n rows are tile_n / 16 contiguous groups of
            // 16 * k elements starting at element bx * tile_n * k. Thread `tid` moves the
            // 16-byte chunks v = tid + i * threads: row 16 g + nl, chunk cl of the step.
            let rows_in = (n - bx * bn as i32).min(bn as i32).max(0);
            let panel = bt.offset((bx * bn as i32).cast(I64) * kd.cast(I64));
            let kc = (bk / kpack) as i32; // 16-byte chunks per row per step
            let per_thread = (bn * bk / kpack) / threads as i64;
            let chunk = move |i: i64| {
                let v = tid + (i * threads as i64) as i32;
                (v % 16, (v / 16) % kc, v / (16 * kc))
            };
            // One preshuffled 16-byte chunk: row `nl` (of this workgroup's panel), columns
            // `col .. col + kpack` (col a multiple of kpack); zeros past n and k.
            let kp = kpack as i32;
            let b_chunk = move |rs: Option<flydsl_dsl::Rsrc>, row: Val, col: Val| {
                let num = rows_in * kd;
                let ok = row.lt(rows_in) & col.lt(kd);
                let idx = (row / 16) * 16 * kd + col * 16 + (row % 16) * kp;
                match rs {
                    Some(rs) => rs.load_vec(select(ok, idx, num), kp as u32, 16),
                    None => {
                        let x = panel.load_vec(select(ok, idx, c_i32(0)), kp as u32, 16);
                        select(ok, x, zeros(st, kp as u32))
                    }
                }
            };
            let b_rsrc = move || {
                target
                    .is_amd()
                    .then(|| panel.rsrc_n((rows_in * kd).cast(I64)))
            };
            // Direct B: this lane's operand of N repetition j, atom K step kk of tile t, in the
            // order [kk][j], each the concatenation of its 16-byte runs.
            let (_, an, ak) = mma.atom().atom().shape();
            let reps_n = cfg.tile_n / (PORTABLE_WAVES * an);
            // K per unit: one atom, or one pack of atoms.
            let unit_k = ak as i64 * pack as i64;
            let units = (bk / unit_k) as u32;
            let ws = target.wave_size() as i32;
            let (b_n0, b_k0) = mma.atom().b().thr_coord(tid % ws);
            let wave_n0 = (tid / ws) * (reps_n * an) as i32;
            // Direct B: per N repetition, this lane's operand of unit `u` of tile `t` (the
            // concatenation of its 16-byte runs), or with packs its one 16-byte chunk of the pack.
            let load_unit = |t: Val, u: u32| -> Vec<Val> {
                let rs = b_rsrc();
                let k_unit = t * bk as i32 + (u as i64 * unit_k) as i32;
                (0..reps_n)
                    .map(|j| {
                        let row = wave_n0 + b_n0.val() + (j * an) as i32;
                        if pack > 1 {
                            return b_chunk(rs, row, k_unit + b_k0.val() * pack as i32);
                        }
                        let mut elems = Vec::new();
                        for &v in runs.as_deref().unwrap_or(&[]) {
                            let (r, c) = mma.atom().b().val_coord(v);
                            let col = k_unit + b_k0.val() + c as i32;
                            elems.extend(b_chunk(rs, row + r as i32, col).elems());
                        }
                        vec_of(&elems)
                    })
                    .collect()
            };
            let load_frags =
                |t: Val| -> Vec<Val> { (0..units).flat_map(|u| load_unit(t, u)).collect() };
            let load_b = |t: Val| -> Vec<Val> {
                if let Some(cb) = &cb {
                    return cb.load(&gb.local_tile((bn, bk), (bx, t))).vals().to_vec();
                }
                let rs = b_rsrc();
                (0..per_thread)
                    .map(|i| {
                        let (nl, cl, g) = chunk(i);
                        b_chunk(rs, g * 16 + nl, t * bk as i32 + cl * kp)
                    })
                    .collect()
            };
            let store_b = |vals: Vec<Val>, dst: Option<SView>| match (&cb, dst) {
                (_, None) => {}
                (Some(cb), Some(dst)) => {
                    let nv = vals.len() as i64;
                    cb.store(
                        &Frag::new(vals, flydsl_dsl::layout::Layout::col_major(nv).unwrap()),
                        &dst,
                    )
                }
                (None, Some(dst)) => {
                    for (i, v) in vals.into_iter().enumerate() {
                        let (nl, cl, g) = chunk(i as i64);
                        dst.store(Idx::Dyn(g * 16 + nl), Idx::Dyn(cl * kp), v);
                    }
                }
            };
            let b_stage = |t: Val| sb.map(|sb| sb.stage(stage(t)));

            // The scalar variant copies element by element in a run-time loop (global -> LDS,
            // one element in flight per thread): unrolled, its loads would not fit in registers.
            let direct = |t: Val| {
                let st_ = stage(t);
                let sb = sb.expect("the scalar variant stages B in LDS");
                let tiles = [
                    (a_tile(t), sa.stage(st_), bm),
                    (gb.local_tile((bn, bk), (bx, t)), sb.stage(st_), bn),
                ];
                for (src, dst, rows) in tiles {
                    let count = (rows * bk / threads as i64) as i32;
                    for_range_(c_i32(0), c_i32(count), c_i32(1), |i| {
                        let v = tid + i * threads as i32;
                        let (r, col) = (Idx::Dyn(v / bk as i32), Idx::Dyn(v % bk as i32));
                        dst.store(r, col, src.load(r, col, 1));
                    });
                }
            };
            // Prologue: tiles 0 .. s-2 (lds_stage 2) or tile 0 (lds_stage 1) into LDS; with
            // direct B, tile 0's B operands into registers.
            for t in 0..s.max(2) - 1 {
                let t = c_i32(t as i32);
                if scalar {
                    direct(t);
                    continue;
                }
                let ra = ca.load(&a_tile(t));
                ca.store(&ra, &sa.stage(stage(t)));
                if !direct_b {
                    let rb = load_b(t);
                    store_b(rb, b_stage(t));
                }
            }
            barrier();
            let acc0 = mma.zero_acc();
            let n_acc = acc0.vals().len();
            // The 64 x 256 tile's units are fenced for the AMD scheduler (`sched_barrier`):
            // hoisting every unit's LDS reads above the first MFMAs costs more registers than
            // the tile has (fp8 on gfx942: 268 -> 256 VGPRs, occupancy 1 -> 2). The next
            // tile's loads of a unit are fenced on both sides, so they cannot rise above the
            // MFMAs that free their registers.
            let fence_units = target.is_amd() && cfg.tile_n == 256;
            // One tile's atoms; `after(u)` runs after unit `u`'s (direct B: the next tile's
            // operands of that unit load into the registers it just freed).
            let mma_step = |acc: Frag, t: Val, bfr: &[Val], after: &mut dyn FnMut(u32)| {
                let mut acc = acc;
                let a_s = sa.stage(stage(t));
                let r = reps_n as usize;
                for u in 0..units as usize {
                    if u > 0 {
                        if fence_units {
                            sched_barrier(0);
                        }
                        after(u as u32 - 1);
                        if fence_units {
                            sched_barrier(0);
                        }
                    }
                    let k0 = u as i64 * unit_k;
                    if pack == 1 {
                        let a_f = thr.partition_a(&a_s, k0);
                        acc = match b_stage(t) {
                            Some(b_s) => thr.gemm(&acc, &a_f, &thr.partition_b(&b_s, k0)),
                            None => thr.gemm(&acc, &a_f, &bfr[u * r..(u + 1) * r]),
                        };
                        continue;
                    }
                    // One 16-byte read per lane and operand feeds `pack` atoms.
                    let a_p = thr.partition_a_packed(&a_s, k0, eb);
                    let b_p = match b_stage(t) {
                        Some(b_s) => thr.partition_b_packed(&b_s, k0, eb),
                        None => bfr[u * r..(u + 1) * r]
                            .iter()
                            .map(|&x| split_runs(x, pack))
                            .collect(),
                    };
                    for jj in 0..pack as usize {
                        let a_f: Vec<Val> = a_p.iter().map(|v| v[jj]).collect();
                        let b_f: Vec<Val> = b_p.iter().map(|v| v[jj]).collect();
                        acc = thr.gemm(&acc, &a_f, &b_f);
                    }
                }
                after(units - 1);
                acc
            };
            let mut init = acc0.vals().to_vec();
            if direct_b {
                init.extend(load_frags(c_i32(0)));
            }
            let acc = for_range(c_i32(0), k_tiles, c_i32(1), &init, |t, carried| {
                let acc = acc0.with_vals(carried[..n_acc].to_vec());
                let bfr = &carried[n_acc..];
                let next = t + (s.max(2) - 1) as i32;
                // The global loads of the next tile (zeros past K) are in flight while this
                // tile feeds the matrix atoms (the scalar variant copies after them) ...
                if scalar {
                    let acc = mma_step(acc, t, bfr, &mut |_| {});
                    if s == 1 {
                        barrier();
                    }
                    direct(next);
                    barrier();
                    return acc.vals().to_vec();
                }
                let ra = ca.load(&a_tile(next));
                // Direct B: the next tile's operands (t + 1: registers are not staged), unit by
                // unit as this tile's atoms free their registers.
                let rb = if direct_b { Vec::new() } else { load_b(next) };
                let mut next_frags = Vec::new();
                let acc = mma_step(acc, t, bfr, &mut |u| {
                    if direct_b {
                        next_frags.extend(load_unit(t + 1, u));
                    }
                });
                if s == 1 {
                    // ... every wave is done with the only buffer before it is refilled.
                    barrier();
                }
                // ... then they land in the buffer the previous step read (ping-pong) or the
                // only one (single stage).
                ca.store(&ra, &sa.stage(stage(next)));
                store_b(rb, b_stage(next));
                barrier();
                let mut out = acc.vals().to_vec();
                out.extend(next_frags);
                out
            });
            let acc = acc0.with_vals(acc[..n_acc].to_vec());

            // Epilogue (chosen at run time): scales, bias and activation in f32, stores guarded.
            let gc = GTensor::new(c, m, n).local_tile((bm, bn), (by, bx));
            let gbias = GTensor::new(bias, c_i32(1), n).local_tile((1, bn), (c_i32(0), bx));
            let gscale = scales.map(|(sa, sb)| {
                (
                    GTensor::new(sa, m, c_i32(1)).local_tile((bm, 1), (by, c_i32(0))),
                    GTensor::new(sb, c_i32(1), n).local_tile((1, bn), (c_i32(0), bx)),
                )
            });
            let (am, an, _) = mma.atom().atom().shape();
            let (nc, reps_m, reps_n) = (
                mma.atom().atom().frag_lanes(target.wave_size()).2,
                cfg.tile_m / am,
                cfg.tile_n / (PORTABLE_WAVES * an),
            );
            // In groups of up to 4 values of one atom (i, j), the scale and bias loads come
            // before the group's stores: C may alias them as far as LLVM knows, so a load after
            // a store waits for it, while loads of one address with no store between them
            // merge into one. Four is a whole CDNA atom; RDNA's 8-value atoms take two groups,
            // which keeps fewer values live.
            const GROUP: u32 = 4;
            for e in Epilogue::ALL {
                if_(epi.eq(e.index() as i32), || {
                    for j in 0..reps_n {
                        for (i, v0) in (0..reps_m)
                            .flat_map(|i| (0..nc).step_by(GROUP as usize).map(move |v0| (i, v0)))
                        {
                            let mut outs = Vec::new();
                            let f = acc.at(&[i as i64, j as i64]);
                            for v in v0..(v0 + GROUP).min(nc) {
                                let (r, col) = thr.partition_c(i, j, v);
                                let mut x = f.at(v).cast(F32);
                                if let Some((sa, sb)) = &gscale {
                                    x = x * sa.load(r, Idx::Lit(0), 1);
                                    x = x * sb.load(Idx::Lit(0), col, 1);
                                }
                                let bias = || gbias.load(Idx::Lit(0), col, 1).cast(F32);
                                outs.push((r, col, epilogue(e, x, bias).cast(st_out)));
                            }
                            for (r, col, y) in outs {
                                gc.store(r, col, y);
                            }
                        }
                    }
                });
            }
        })
}
