//! The split-K reduce: `C = act(sum_y ws[y] * scale_a[m] * scale_b[n] + bias[n])`, the
//! second kernel of a Hopper GEMM whose K is split over `splits` workgroups per tile
//! (`table::Out::Partial`: each wrote its f32 sums into `ws[y][m][n]`).
//!
//! The sums are added in split order (deterministic: the same bits on every run). The scales
//! apply when `scaled != 0` (the 8-bit GEMM), bias and activation as the 16-bit and 8-bit
//! kernels' epilogue (`wgmma::epilogue`); the result is rounded once to the output dtype.
//! Grid: x over column blocks of `REDUCE_THREADS * REDUCE_VEC`, y over the `m` rows (the
//! host keeps `m <= 65535`); each thread sums `REDUCE_VEC` adjacent columns with 128-bit
//! loads when `n % 4 == 0` (rows then start 16-byte aligned), one element at a time else.
//! The splits are read [`UNROLL`] at a time, their loads issued together: one after another
//! (a loop of load-then-add) each split waited a full memory latency, 4.5-6 us of a 40 us
//! GEMM at 4-8 splits on the H200.

use crate::table::{reduce_kernel_name, Epilogue, REDUCE_THREADS, REDUCE_VEC};
use crate::wgmma::epilogue;
use crate::DType;
use flydsl_dsl::ir::{Dim, Kernel, ScalarType::*, Target};
use flydsl_dsl::*;

/// Splits whose loads one step of the reduce issues together.
const UNROLL: i32 = 4;

/// The sum over `splits` splits, in split order, of `load(y)` (split y's value): [`UNROLL`]
/// loads per step, each of a split index clamped into range and added only where the
/// index is one (so the sum is the plain loop's, bit for bit).
fn sum_splits(splits: Val, zero: Val, load: impl Fn(Val) -> Val) -> Val {
    let steps = (splits + (UNROLL - 1)) / UNROLL;
    for_range(c_i32(0), steps, c_i32(1), &[zero], |step, acc| {
        let ys: Vec<Val> = (0..UNROLL).map(|u| step * UNROLL + u).collect();
        let vals: Vec<Val> = ys.iter().map(|&y| load(y.min(splits - 1))).collect();
        let sum = ys
            .iter()
            .zip(vals)
            .fold(acc[0], |s, (&y, v)| select(y.lt(splits), s + v, s));
        vec![sum]
    })[0]
}

/// The reduce for output `out` (bf16 or f16) and `epi`.
pub fn build(target: Target, out: DType, epi: Epilogue) -> Result<Kernel, BuildError> {
    let ot = out.scalar();
    let name = reduce_kernel_name(out, epi);
    KernelBuilder::new(&name, target, REDUCE_THREADS).build(|k| {
        let ws = k.tensor("ws", F32);
        let scale_a = k.tensor("scale_a", F32);
        let scale_b = k.tensor("scale_b", F32);
        let bias = k.tensor("bias", ot);
        let c = k.tensor_mut("c", ot);
        let m = k.scalar("m", I32);
        let n = k.scalar("n", I32);
        let splits = k.scalar("splits", I32);
        let scaled = k.scalar("scaled", I32);
        let row = block_id(Dim::Y);
        let vec = REDUCE_VEC as i32;
        let col0 = (block_id_x() * REDUCE_THREADS as i32 + thread_id_x()) * vec;
        let n64 = n.cast(I64);
        let plane = m.cast(I64) * n64;
        let at = row.cast(I64) * n64;
        // Split y's element at offset `i` of split 0.
        let split_at = move |y: Val, i: Val| y.cast(I64) * plane + i;
        let finish = move |col: Val, sum: Val| {
            let v = if_else(
                scaled.ne(0),
                || vec![sum * scale_a.load(row) * scale_b.load(col)],
                || vec![sum],
            )[0];
            let v = epilogue(epi, v, || bias.load(col).cast(F32));
            c.store(at + col.cast(I64), v.cast(ot));
        };
        if_else(
            (n % vec).eq(0),
            || {
                if_(col0.lt(n), || {
                    let first = at + col0.cast(I64);
                    let zero = splat(c_f32(0.0), REDUCE_VEC);
                    let sum = sum_splits(splits, zero, |y| {
                        ws.load_vec(split_at(y, first), REDUCE_VEC, 16)
                    });
                    for e in 0..vec {
                        finish(col0 + e, sum.at(e as u32));
                    }
                });
                vec![]
            },
            || {
                for e in 0..vec {
                    let col = col0 + e;
                    if_(col.lt(n), || {
                        let i = at + col.cast(I64);
                        let sum = sum_splits(splits, c_f32(0.0), |y| ws.load(split_at(y, i)));
                        finish(col, sum);
                    });
                }
                vec![]
            },
        );
    })
}
