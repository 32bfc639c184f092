//! The Hopper 8-bit GEMM: `C = act((A * B^T) * scale_a[m] * scale_b[n] + bias[n])` with fp8
//! e4m3fn (f32 accumulation) or int8 (exact s32 accumulation) inputs on sm_90a, fed by TMA
//! through a multi-stage mbarrier pipeline into m64n256k32 wgmma.
//!
//! The structure is the 16-bit kernel's (`wgmma.rs`): A is M x K and B is N x K, both
//! row-major 8-bit; `scale_a` [M] and `scale_b` [N] are f32; bias [N] and C [M, N] are in
//! the output dtype (bf16 or f16). A workgroup computes `bm` x `bn` tiles of its [`Tile`]
//! config, persistently, with one warpgroup per 64 rows; a stage holds `BK8` = 128 K elements
//! (one 128-byte swizzled row per tile row), read by four k32 wgmmas. fp8 sums each stage
//! from zero and adds it into f32 accumulators (Hopper keeps too few bits of a long fp8
//! wgmma sum; see `build`). The accumulator is scaled in f32 (int8: converted from s32
//! first), then the bias and activation are applied and the result is rounded once.
//!
//! [`Out::Partial`] builds the split-K form as in `wgmma.rs` (f32 sums, int8 converted from
//! its exact s32 slice sums; scales applied by the reduce).
//!
//! Host side (`src/scaled.rs`): tensor maps over A (`dims [K, M]`, `boxes [BK8, bm]`) and B
//! (`[K, N]`, `[BK8, bn]`) with the 128-byte swizzle, `tile.threads()` threads,
//! `tile.lds_bytes()` of dynamic LDS, `min(tiles, SMs)` workgroups, each walking its tiles
//! through one stage ring (`pipeline.rs`). K must be a multiple of 16 (TMA row strides are
//! 16-byte multiples); M and N are free (TMA zero-fills past the edges, the epilogue
//! guards). Index arithmetic is i32 except C offsets (i64): M, N, K < 2^31 - 2^16.

use crate::pipeline::{Pipeline, Schedule};
use crate::table::{scaled_kernel_name, scaled_partial_kernel_name, Out, Quant, Tile, BK8};
use crate::wgmma::Sink;
use crate::DType;
use flydsl_dsl::ir::{Kernel, ScalarType, ScalarType::*, Target};
use flydsl_dsl::nv::{wgmma, wgmma_commit, wgmma_fence, wgmma_wait};
use flydsl_dsl::*;

/// The widest column chunk of an fp8 stage (see `build`): the chunk's stage sum and the
/// tile's f32 accumulators both live in registers.
const PROMOTE_N: u32 = 128;

/// fp8's two-level accumulation for tiles of at most `PROMOTE_N` columns: `ktiles` stages
/// of `n` columns, each summed from zero by `mma(kt, zero)` (its wgmmas committed as one
/// group) and added into the f32 accumulators while the next stage's group runs; `refill(kt)`
/// runs once stage kt - 1 is complete. Returns the accumulators, complete.
///
/// The stage sums alternate between two register sets (the loop is unrolled twice), so the
/// add never reads the registers of a wgmma in flight: carrying one set around the loop would
/// need a copy of the group in flight, and ptxas then serializes every wgmma (C7514).
/// 3 n / 2 accumulator registers: 192 for 128 x 128.
fn promote_overlapped(
    n: u32,
    ktiles: Val,
    mma: impl Fn(Val, Val) -> Val + Copy,
    refill: impl Fn(Val) + Copy,
) -> Vec<Val> {
    let zero = splat(c_f32(0.0), n / 2);
    // Stage kt: start its sum, wait for the previous one (`prev`) and add it into `f`.
    let step = move |kt: Val, f: Val, prev: Val| {
        let t = mma(kt, zero);
        let w = wgmma_wait(1, &[prev, t]);
        refill(kt);
        (f + w[0], w[1])
    };
    let pairs = ktiles / 2;
    let carried = for_range(c_i32(0), pairs, c_i32(1), &[zero, zero], |i, c| {
        let (f, t0) = step(i * 2, c[0], c[1]);
        let (f, t1) = step(i * 2 + 1, f, t0);
        vec![f, t1]
    });
    // An odd stage count ends with one more stage; either way the last sum is waited for
    // inside the branch, so no value in flight crosses it.
    if_else(
        (ktiles % 2).eq(1),
        || {
            let (f, t) = step(ktiles - 1, carried[0], carried[1]);
            vec![f + wgmma_wait(0, &[t])[0]]
        },
        || vec![carried[0] + wgmma_wait(0, &[carried[1]])[0]],
    )
}

/// The IR element type of `q`'s inputs.
pub fn input_scalar(q: Quant) -> ScalarType {
    match q {
        Quant::Fp8 => F8E4M3FN,
        Quant::Fp8Fnuz => F8E4M3FNUZ,
        Quant::Int8 => I8,
    }
}

/// The kernel for inputs `q`, output dtype `ot` (bf16 or f16; unused by [`Out::Partial`]),
/// output `out` and `tile` (sm_90 only).
pub fn build(
    target: Target,
    q: Quant,
    ot: DType,
    out: Out,
    tile: Tile,
) -> Result<Kernel, BuildError> {
    let it = input_scalar(q);
    let bn = tile.bn;
    let name = match out {
        Out::C(epi) => scaled_kernel_name(q, ot, epi, tile),
        Out::Partial => scaled_partial_kernel_name(q, tile),
    };
    if q != Quant::Int8 && bn > PROMOTE_N && !bn.is_multiple_of(PROMOTE_N) {
        // The wide tiles' fp8 sums go in whole chunks of PROMOTE_N columns.
        return Err(BuildError::Invalid {
            kernel: name,
            target,
            reason: format!(
                "fp8 tiles wider than {PROMOTE_N} columns need a multiple of it, not {bn}"
            ),
        });
    }
    let ot = ot.scalar();
    KernelBuilder::new(&name, target, tile.threads()).build(|k| {
        let a_map = k.tensor("a_map", I8);
        let b_map = k.tensor("b_map", I8);
        let sink = match out {
            Out::C(epi) => Sink::C {
                epi,
                scales: Some((k.tensor("scale_a", F32), k.tensor("scale_b", F32))),
                bias: k.tensor("bias", ot),
                c: k.tensor_mut("c", ot),
            },
            Out::Partial => Sink::Partial(k.tensor_mut("ws", F32)),
        };
        let m = k.scalar("m", I32);
        let n = k.scalar("n", I32);
        let kd = k.scalar("k", I32);
        let kps = matches!(sink, Sink::Partial(_)).then(|| k.scalar("kps", I32));
        let sched = Schedule::new(m, n, tile, kd, BK8, kps);
        let pipe = Pipeline::start(k, sched, (a_map, b_map), it, tile, BK8);
        let tid = thread_id_x();
        let wg = tid / 128;

        // The wgmmas of stage `s` for one chunk of `cw` columns (the kk-th 32-wide K slice,
        // 32 bytes, of both tiles, over this warpgroup's 64 rows of A), committed as one
        // group.
        let mma = move |s: Val, c: u32, cw: u32, acc: Val| {
            wgmma_fence();
            let a_rows = ptr_offset(pipe.a_tile(s), wg * (64 * BK8) as i32);
            let b_rows = ptr_offset(pipe.b_tile(s), c_i32((c * cw * BK8) as i32));
            let mut acc = acc;
            for kk in 0..(BK8 / 32) as i32 {
                let a = ptr_offset(a_rows, c_i32(kk * 32));
                let b = ptr_offset(b_rows, c_i32(kk * 32));
                acc = wgmma(cw, a, b, acc);
            }
            wgmma_commit();
            acc
        };
        // fp8: Hopper's tensor cores keep only about 13 mantissa bits of an fp8 wgmma's
        // running sum (truncated), so a long K swamps the small products (seen on the H200:
        // 16% of sum |a b| at K = 8192). So each stage's four k32 wgmmas start from zero
        // and their sum is added into f32 accumulators once per 128-wide K stage, as
        // CUTLASS's two-level fp8 accumulation does; cuBLAS's `_scaled_mm` gives the same
        // values. int8 accumulates exactly in s32, one group per stage with the previous
        // one in flight.
        let cw = if q == Quant::Int8 {
            bn
        } else {
            bn.min(PROMOTE_N)
        };
        let as_f32 = |v: Val| if q == Quant::Int8 { v.cast(F32) } else { v };
        for_range_(c_i32(0), sched.tiles, c_i32(1), |ti| {
            let (at, next) = (sched.tile(ti), sched.next_tile(ti));
            let base = ti * sched.count;
            // Stage j of this tile: wait for its bytes; its slot.
            let ready = move |j: Val| pipe.ready(base + j);
            // Every warpgroup is done with stage j - 1: refill its slot.
            let refill = move |j: Val| pipe.refill(base + j, j, at, next);
            let acc: Vec<Val> = match q {
                Quant::Int8 => {
                    let zero = splat(c_i32(0), bn / 2);
                    let acc = for_range(c_i32(0), sched.count, c_i32(1), &[zero], |j, carried| {
                        let acc = mma(ready(j), 0, bn, carried[0]);
                        let out = wgmma_wait(1, &[acc]);
                        refill(j);
                        out
                    });
                    wgmma_wait(0, &acc)
                }
                _ if bn <= PROMOTE_N => {
                    promote_overlapped(bn, sched.count, |j, acc| mma(ready(j), 0, bn, acc), refill)
                }
                _ => {
                    // Too wide for two stage sums in registers: chunks of `PROMOTE_N`
                    // columns, each waited for before its add (bn / 2 + PROMOTE_N / 2
                    // accumulator registers: 192 for 128 x 256).
                    let zero = splat(c_f32(0.0), cw / 2);
                    let init = vec![zero; (bn / cw) as usize];
                    for_range(c_i32(0), sched.count, c_i32(1), &init, |j, carried| {
                        let s = ready(j);
                        let out = (0..bn / cw)
                            .map(|c| carried[c as usize] + wgmma_wait(0, &[mma(s, c, cw, zero)])[0])
                            .collect();
                        refill(j);
                        out
                    })
                }
            };
            // Accumulator register `i` of the warpgroup's 64 x bn block.
            let per_chunk = cw / 2;
            let acc_at = |i: u32| as_f32(acc[(i / per_chunk) as usize].at(i % per_chunk));
            sink.write_tile(tid, at, m, n, tile, ot, acc_at);
        });
    })
}
