//! The second stage of the deterministic backward: `out[c] = sum_r part[r * n + c]` over `g`
//! f32 partial rows, written in the weight dtype, in a fixed summation order (bitwise
//! reproducible).
//!
//! A block of [`GENERIC_THREADS`] threads owns [`REDUCE_COLS`](crate::config::REDUCE_COLS) columns: [`REDUCE_COLS`](crate::config::REDUCE_COLS) / 4 threads across
//! the columns (4 columns each: one 128-bit load per row when `n % 4 == 0`, else four masked
//! scalar loads) times [`SLICES`] row slices; slice `s` sums rows `s, s + SLICES, ...` into
//! [`UNROLL`] interleaved accumulators (so that many loads are in flight per thread), the
//! accumulators are added in order, the slices of a wave meet by butterfly shuffles and the
//! waves' sums in LDS, added in wave order by one thread per column.
//!
//! Parameters: `part` (f32), `out` (weight dtype), scalars `g`, `n`. i32 bounds: `g` is the
//! backward's grid (at most MAX_GRID), columns are below `n + 32 <= MAX_COLS + 32`.

use crate::config::{reduce_name, DType, GENERIC_THREADS, REDUCE_COLS as COLS};
use flydsl_dsl::blocks::group_reduce_across;
use flydsl_dsl::ir::{Kernel, ScalarType, Target};
use flydsl_dsl::*;

use ScalarType::{F32, I64};

/// Row slices per block (`GENERIC_THREADS / (COLS / 4)`).
const SLICES: u32 = GENERIC_THREADS / (COLS / 4);
/// Independent loads per thread per loop iteration.
const UNROLL: u32 = 4;

/// Build the column-sum kernel writing `out` for `target`.
pub fn build(out: DType, target: Target) -> Result<Kernel, BuildError> {
    KernelBuilder::new(&reduce_name(out), target, GENERIC_THREADS).build(|k| {
        let part = k.tensor("part", F32);
        let o = k.tensor_mut("out", out.scalar());
        let g = k.scalar("g", ScalarType::I32);
        let n = k.scalar("n", ScalarType::I32);
        let red = k.lds("red", F32, GENERIC_THREADS / wave_size() * COLS);
        let tid = thread_id_x();
        let cx = tid % (COLS / 4) as i32;
        let slice = tid / (COLS / 4) as i32;
        let col = block_id_x() * COLS as i32 + cx * 4;
        let n64 = n.cast(I64);
        // The 4 columns of this thread in row `r`, by one 128-bit load (`vector`) or four
        // scalar ones (rows past `g` and columns past `n` read 0; the indices are clamped so
        // that every access stays inside `part`).
        let load4 = |r: Val, vector: bool| -> Vec<Val> {
            let rok = r.lt(g);
            let base = r.min(g - 1).cast(I64) * n64;
            if vector {
                let ok = rok & col.lt(n);
                let c = col.min(n - 4);
                let v = part.load_vec(base + c.cast(I64), 4, 16);
                v.elems()
                    .into_iter()
                    .map(|e| select(ok, e, c_f32(0.0)))
                    .collect()
            } else {
                (0..4)
                    .map(|e| {
                        let ce = col + e;
                        let ok = rok & ce.lt(n);
                        let v = part.load(base + ce.min(n - 1).cast(I64));
                        select(ok, v, c_f32(0.0))
                    })
                    .collect()
            }
        };
        let step = (SLICES * UNROLL) as i32;
        let init = vec![c_f32(0.0); (4 * UNROLL) as usize];
        let sum_rows = |vector: bool| {
            for_range(slice, g, c_i32(step), &init, |r0, acc| {
                let loads: Vec<Vec<Val>> = (0..UNROLL)
                    .map(|u| load4(r0 + (u * SLICES) as i32, vector))
                    .collect();
                let mut next = Vec::with_capacity(acc.len());
                for (u, l) in loads.iter().enumerate() {
                    for (e, &v) in l.iter().enumerate() {
                        next.push(acc[u * 4 + e] + v);
                    }
                }
                next
            })
        };
        // Rows of a multiple of 4 are 16-byte aligned: vector loads.
        let acc = if_else((n % 4).eq(0), || sum_rows(true), || sum_rows(false));
        // Slices of one wave meet by butterflies over the lanes with the same columns, then
        // one LDS slot per wave and column (at most 1 KiB), added in wave order.
        let cw = COLS / 4;
        let ws = wave_size();
        let nwaves = GENERIC_THREADS / ws;
        let wave = tid / ws as i32;
        for e in 0..4usize {
            let mut s = acc[e];
            for u in 1..UNROLL as usize {
                s = s + acc[u * 4 + e];
            }
            let s = group_reduce_across(s, cw, |a, b| a + b);
            if_(lane_id().lt(cw as i32), || {
                red.store(wave * COLS as i32 + cx * 4 + e as i32, s);
            });
        }
        barrier();
        let oc = block_id_x() * COLS as i32 + tid;
        if_(tid.lt(COLS as i32) & oc.lt(n), || {
            let mut s = red.load(tid);
            for w in 1..nwaves {
                s = s + red.load(tid + (w * COLS) as i32);
            }
            o.store(oc, s.cast(out.scalar()));
        });
    })
}
