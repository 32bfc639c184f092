//! The Hopper GEMM: `C = epilogue(A * B^T)` with 16-bit inputs and f32 accumulation on
//! sm_90a, fed by TMA through a multi-stage mbarrier pipeline into wgmma.
//!
//! A is M x K and B is N x K, both row-major (K contiguous: the layout of activations and of
//! a linear layer's weight); bias is [N] and C is M x N row-major, all in the input dtype.
//! A workgroup computes `bm` x `bn` tiles of its `Tile` config with one warpgroup per 64
//! rows, persistently: the grid has at most one workgroup per SM and each walks tiles
//! x, x + grid_x, ... in groups of `GROUP_M` tile rows so that neighbours share A and B in
//! L2 (`pipeline.rs`). The pipeline has `tile.stages()` stages (more for smaller tiles: at
//! small M the kernel streams B, and the bytes in flight set its bandwidth), one ring over
//! all of a workgroup's tiles: thread 0 refills stage `g + stages - 1` (at most) once every
//! warpgroup has finished reading stage `g - 1` (a workgroup barrier after
//! `wgmma.wait_group 1`), so the next tile's first stages load while this tile's epilogue
//! runs. Where M is one tile row, each tile walks K from its own starting stage, spreading
//! the rows' reads over DRAM.
//!
//! Built as [`Out::Partial`] (split-K), workgroup (x, y) sums only K stages
//! `[y * kps, (y + 1) * kps)` of its tile into plane y of an f32 workspace instead, and
//! `kernels/splitk.rs` finishes C.
//!
//! Host side (`src/lib.rs`): tensor maps over A (`dims [K, M]`, `boxes [BK, bm]`) and B
//! (`[K, N]`, `[BK, bn]`) with the 128-byte swizzle, `tile.threads()` threads,
//! `tile.lds_bytes()` of dynamic LDS, `min(tiles, SMs)` workgroups
//! (`grid::persistent_grid`). K must be a multiple of 8 (TMA row strides are 16-byte
//! multiples); M and N are free (TMA zero-fills past the edges, the epilogue guards).
//! The kernel's index arithmetic is i32 except C offsets (i64): M, N, K < 2^31 - 2^16.

use crate::pipeline::{Pipeline, Schedule, TileAt};
use crate::table::{kernel_name, partial_kernel_name, Epilogue, Out, Tile, BK};
use crate::DType;
use flydsl_dsl::ir::{Dim, Kernel, ScalarType, ScalarType::*, Target};
use flydsl_dsl::nv::{wgmma, wgmma_commit, wgmma_fence, wgmma_wait};
use flydsl_dsl::*;

/// The epilogue on one f32 accumulator; `bias` loads this column's bias as f32.
pub(crate) fn epilogue(epi: Epilogue, v: Val, bias: impl FnOnce() -> Val) -> Val {
    if !epi.has_bias() {
        return v;
    }
    let x = v + bias();
    let log2e = std::f32::consts::LOG2_E;
    match epi {
        Epilogue::None | Epilogue::Bias => x,
        Epilogue::BiasRelu => x.max(0.0f32),
        // x * sigmoid(x) = x / (1 + 2^(-x log2 e)).
        Epilogue::BiasSilu => x * ((x * -log2e).exp2() + 1.0f32).rcp(),
        // tanh(u) = 1 - 2 / (1 + e^(2u)); gelu = 0.5 x (1 + tanh(u)) = x - x / (1 + e^(2u)).
        Epilogue::BiasGelu => {
            let u = (x + x * x * x * 0.044715f32) * (2.0f32 / std::f32::consts::PI).sqrt();
            x - x * ((u * (2.0 * log2e)).exp2() + 1.0f32).rcp()
        }
    }
}

/// Columns per group whose values [`for_each_acc`] loads together (8 per thread).
const COL_GROUP: u32 = 32;

/// Write this warpgroup's 64 x `bn` block of `tile` `at` (of the wgmma output), the part
/// inside the `m` x `n` output: C, or for a swapped tile C's transpose (`n` x `m`). Thread
/// (warp w, lane l) holds rows 16w + l/4 (+8) and column pairs 8j + 2(l%4), +1 of that
/// output.
///
/// `row(r)` runs once per row of the thread and `col(c)` once per column, both
/// unconditionally at the index clamped into the output (`min(r, rows - 1)`, `min(c, cols -
/// 1)`; the kernels run only when m, n >= 1), so their loads (scales, bias) are in bounds
/// and issue together, [`COL_GROUP`] columns at a time, instead of one guarded load after
/// another. `value(row values, column values, accumulator index)` gives an element's output
/// value; `store(row values, column, v, pair)` writes `v`, one element or (`pair`) the two
/// of a column pair as one vector, which it may take as aligned to two elements: pairs are
/// stored whole when the output's row length is even and both columns are inside it, else
/// (and always on a swapped tile, whose column pairs are not adjacent in C) element by
/// element.
#[allow(clippy::too_many_arguments)]
pub(crate) fn for_each_acc(
    tid: Val,
    at: TileAt,
    (m, n): (Val, Val),
    tile: Tile,
    row: impl Fn(Val) -> Vec<Val>,
    col: impl Fn(Val) -> Vec<Val>,
    value: impl Fn(&[Val], &[Val], u32) -> Val,
    store: impl Fn(&[Val], Val, Val, bool),
) {
    let (m0, n0, bn, pairs) = (at.m0, at.n0, tile.bn, !tile.swap_ab);
    let (m, n) = if tile.swap_ab { (n, m) } else { (m, n) };
    let wg = tid / 128;
    let w = (tid % 128) / 32;
    let l = tid % 32;
    let row0 = m0 + wg * 64 + w * 16 + l / 4;
    let col0 = n0 + (l % 4) * 2;
    let rows: Vec<Val> = (0..2i32).map(|h| row0 + h * 8).collect();
    let row_vals: Vec<Vec<Val>> = rows.iter().map(|&r| row(r.min(m - 1))).collect();
    let even_n = (n % 2).eq(0);
    let per_group = (COL_GROUP.min(bn) / 8) as usize;
    // The thread's column pairs j in groups of `per_group` (a shorter last group where
    // `bn` is not a multiple of COL_GROUP).
    let pairs_j: Vec<u32> = (0..bn / 8).collect();
    for js in pairs_j.chunks(per_group) {
        // Columns 8j and 8j + 1 of the thread, and their values.
        let cols: Vec<[Val; 2]> = js
            .iter()
            .map(|&j| [0, 1].map(|e| col0 + (j * 8 + e) as i32))
            .collect();
        let vals: Vec<[Vec<Val>; 2]> = cols
            .iter()
            .map(|cs| cs.map(|c| col(c.min(n - 1))))
            .collect();
        for h in 0..2u32 {
            let rv = &row_vals[h as usize];
            if_(rows[h as usize].lt(m), || {
                for ((&j, cs), cv) in js.iter().zip(&cols).zip(&vals) {
                    let v = [0, 1].map(|e| value(rv, &cv[e as usize], 4 * j + 2 * h + e));
                    let singles = || {
                        for e in 0..2 {
                            if_(cs[e].lt(n), || store(rv, cs[e], v[e], false));
                        }
                    };
                    if pairs {
                        if_then_else(
                            even_n & cs[1].lt(n),
                            || store(rv, cs[0], vec_of(&v), true),
                            singles,
                        );
                    } else {
                        singles();
                    }
                }
            });
        }
    }
}

/// Store split y's f32 sums (`acc_at(i)`: accumulator register i) of this warpgroup's block
/// of `tile` `at` into the workspace `ws[y][m][n]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store_partial(
    ws: Tensor,
    tid: Val,
    at: TileAt,
    m: Val,
    n: Val,
    tile: Tile,
    acc_at: impl Fn(u32) -> Val,
) {
    let n64 = n.cast(I64);
    let split = block_id(Dim::Y);
    // The workspace offset of row r (in split y's plane).
    let row_at = move |r: Val| (split * m + r).cast(I64) * n64;
    let value = |_: &[Val], _: &[Val], i: u32| acc_at(i);
    let none = |_: Val| Vec::new();
    if tile.swap_ab {
        // The wgmma's rows are C's columns.
        let store = |rv: &[Val], r: Val, v: Val, _| ws.store(row_at(r) + rv[0], v);
        let col_index = |c: Val| vec![c.cast(I64)];
        for_each_acc(tid, at, (m, n), tile, col_index, none, value, store);
    } else {
        let store = |rv: &[Val], c: Val, v: Val, pair: bool| {
            ws.store_aligned(rv[0] + c.cast(I64), v, 4 << pair as u32, false)
        };
        let row = |r: Val| vec![row_at(r)];
        for_each_acc(tid, at, (m, n), tile, row, none, value, store);
    }
}

/// Where a Hopper GEMM writes its tiles: C (the sums scaled by `scale_a[m] * scale_b[n]`
/// where the kernel has `scales`, then through the epilogue with its bias, rounded to C's
/// dtype) or a split-K workspace (f32 sums, unscaled).
#[derive(Clone, Copy)]
pub(crate) enum Sink {
    C {
        epi: Epilogue,
        scales: Option<(Tensor, Tensor)>,
        bias: Tensor,
        c: Tensor,
    },
    Partial(Tensor),
}

impl Sink {
    /// Write `tile` `at`'s f32 sums (`acc_at(i)`: accumulator register i of this thread)
    /// of an `m` x `n` C, whose elements are `ot`. A swapped tile's wgmma rows are C's
    /// columns: its elements are stored one by one down C's columns (a small-M tile, whose
    /// C is small next to the B it streams).
    #[allow(clippy::too_many_arguments)]
    pub fn write_tile(
        self,
        tid: Val,
        at: TileAt,
        m: Val,
        n: Val,
        tile: Tile,
        ot: ScalarType,
        acc_at: impl Fn(u32) -> Val,
    ) {
        let (epi, scales, bias, c) = match self {
            Sink::Partial(ws) => return store_partial(ws, tid, at, m, n, tile, acc_at),
            Sink::C {
                epi,
                scales,
                bias,
                c,
            } => (epi, scales, bias, c),
        };
        let n64 = n.cast(I64);
        // Values of C's row i: its offset in C, then scale_a[i].
        let c_row = |i: Val| {
            let mut v = vec![i.cast(I64) * n64];
            v.extend(scales.map(|(sa, _)| sa.load(i)));
            v
        };
        // Values of C's column j: its index, then scale_b[j], then the bias.
        let c_col = |j: Val| {
            let mut v = vec![j.cast(I64)];
            v.extend(scales.map(|(_, sb)| sb.load(j)));
            if epi.has_bias() {
                v.push(bias.load(j).cast(F32));
            }
            v
        };
        // The output value of accumulator i with its C row's and column's values.
        let out = |rv: &[Val], cv: &[Val], i: u32| {
            let v = match scales {
                Some(_) => acc_at(i) * rv[1] * cv[1],
                None => acc_at(i),
            };
            epilogue(epi, v, || cv[cv.len() - 1]).cast(ot)
        };
        if tile.swap_ab {
            let store = |cv: &[Val], i: Val, v: Val, _| {
                c.store(i.cast(I64) * n64 + cv[0], v);
            };
            let value = |cv: &[Val], rv: &[Val], i: u32| out(rv, cv, i);
            for_each_acc(tid, at, (m, n), tile, c_col, c_row, value, store);
        } else {
            let store = |rv: &[Val], j: Val, v: Val, pair: bool| {
                c.store_aligned(rv[0] + j.cast(I64), v, 2 << pair as u32, false)
            };
            for_each_acc(tid, at, (m, n), tile, c_row, c_col, out, store);
        }
    }
}

/// The kernel for `dt` (bf16 or f16), output `out` and `tile` (sm_90 only).
pub fn build(target: Target, dt: DType, out: Out, tile: Tile) -> Result<Kernel, BuildError> {
    let st = dt.scalar();
    let bn = tile.bn;
    let name = match out {
        Out::C(epi) => kernel_name(dt, epi, tile),
        Out::Partial => partial_kernel_name(dt, tile),
    };
    KernelBuilder::new(&name, target, tile.threads()).build(|k| {
        let a_map = k.tensor("a_map", I8);
        let b_map = k.tensor("b_map", I8);
        let sink = match out {
            Out::C(epi) => Sink::C {
                epi,
                scales: None,
                bias: k.tensor("bias", st),
                c: k.tensor_mut("c", st),
            },
            Out::Partial => Sink::Partial(k.tensor_mut("ws", F32)),
        };
        let m = k.scalar("m", I32);
        let n = k.scalar("n", I32);
        let kd = k.scalar("k", I32);
        let kps = matches!(sink, Sink::Partial(_)).then(|| k.scalar("kps", I32));
        let sched = Schedule::new(m, n, tile, kd, BK, kps);
        let pipe = Pipeline::start(k, sched, (a_map, b_map), st, tile, BK);
        let tid = thread_id_x();
        let wg = tid / 128;
        let zero = splat(c_f32(0.0), bn / 2);
        for_range_(c_i32(0), sched.tiles, c_i32(1), |it| {
            let (at, next) = (sched.tile(it), sched.next_tile(it));
            let base = it * sched.count;
            let acc = for_range(c_i32(0), sched.count, c_i32(1), &[zero], |j, carried| {
                let g = base + j;
                let s = pipe.ready(g);
                wgmma_fence();
                let mut acc = carried[0];
                // This warpgroup's 64 rows of A.
                let a_rows = ptr_offset(pipe.a_tile(s), wg * (64 * BK) as i32);
                let b_rows = pipe.b_tile(s);
                for kk in 0..(BK / 16) as i32 {
                    // The kk-th 16-wide K slice of both tiles.
                    let a = ptr_offset(a_rows, c_i32(kk * 16));
                    let b = ptr_offset(b_rows, c_i32(kk * 16));
                    acc = wgmma(bn, a, b, acc);
                }
                wgmma_commit();
                let acc = wgmma_wait(1, &[acc])[0];
                pipe.refill(g, j, at, next);
                vec![acc]
            });
            let acc = wgmma_wait(0, &acc)[0];
            sink.write_tile(tid, at, m, n, tile, st, |i| acc.at(i));
        });
    })
}
