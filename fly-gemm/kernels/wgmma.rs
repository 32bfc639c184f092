//! The Hopper GEMM: `C = epilogue(A * B^T)` with 16-bit inputs and f32 accumulation on
//! sm_90a, fed by TMA through a multi-stage mbarrier pipeline into wgmma.
//!
//! A is M x K and B is N x K, both row-major (K contiguous: the layout of activations and of
//! a linear layer's weight); bias is [N] and C is M x N row-major, all in the input dtype.
//! Each workgroup computes one `bm` x `bn` tile of its `Tile` config with one warpgroup per
//! 64 rows; the
//! workgroups walk the tiles in groups of `GROUP_M` tile rows so that neighbours share A
//! and B in L2. The pipeline has `tile.stages()` stages (more for smaller tiles: at small M
//! the kernel streams B, and the bytes in flight set its bandwidth). Thread 0 refills stage
//! `kt + stages - 1` once every warpgroup has finished reading it (a workgroup barrier
//! after `wgmma.wait_group 1`). Where M is one tile row, each workgroup walks K from its own
//! starting stage (`k_stages`), spreading the rows' reads over DRAM.
//!
//! Built as [`Out::Partial`] (split-K), workgroup (x, y) sums only K stages
//! `[y * kps, (y + 1) * kps)` of its tile into plane y of an f32 workspace instead, and
//! `kernels/splitk.rs` finishes C.
//!
//! Host side (`src/lib.rs`): tensor maps over A (`dims [K, M]`, `boxes [BK, bm]`) and B
//! (`[K, N]`, `[BK, bn]`) with the 128-byte swizzle, `tile.threads()` threads,
//! `tile.lds_bytes()` of dynamic LDS, one workgroup per tile. K must be a multiple of 8 (TMA row strides are
//! 16-byte multiples); M and N are free (TMA zero-fills past the edges, the epilogue guards).
//! The kernel's index arithmetic is i32 except C offsets (i64): M, N, K < 2^31 - 2^16.

use crate::table::{kernel_name, partial_kernel_name, Epilogue, Out, Tile, BK, GROUP_M};
use crate::DType;
use flydsl_dsl::ir::{Dim, Kernel, ScalarType::*, Target};
use flydsl_dsl::nv::{
    fence_proxy_async, mbar_arrive_expect_tx, mbar_init, mbar_wait, tma_load, wgmma, wgmma_commit,
    wgmma_fence, wgmma_wait,
};
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

/// The first (grouped) tile order of a Hopper GEMM: the origin `(m0, n0)` of workgroup x's
/// `bm` x `bn` tile of an `m` x `n` C, walking the tiles in groups of `GROUP_M` tile rows
/// so that neighbours share A and B in L2.
pub(crate) fn tile_origin(m: Val, n: Val, bm: u32, bn: u32) -> (Val, Val) {
    let pid = block_id_x();
    let tiles_m = (m + (bm as i32 - 1)) / bm as i32;
    let tiles_n = (n + (bn as i32 - 1)) / bn as i32;
    let group = tiles_n * GROUP_M as i32;
    let first_m = (pid / group) * GROUP_M as i32;
    let gsize = (tiles_m - first_m).min(GROUP_M as i32);
    let tm = first_m + (pid % group) % gsize;
    let tn = (pid % group) / gsize;
    (tm * bm as i32, tn * bn as i32)
}

/// This workgroup's K stages of `bk` elements: stage `j` of its loop (`0 <= j < count`)
/// reads K tile [`KStages::tile`]`(j)`. All of K, or for a partial-sum kernel split y's
/// `kps` stages (`kps` is the kernel argument; the host makes every split non-empty).
///
/// Where all of M is one tile row (`m <= bm`: every workgroup streams its own rows of B),
/// workgroup x starts its walk at stage `x % count` and wraps around, so that at any moment
/// the workgroups read B at spread K offsets instead of one 128-byte column of every row
/// at once. The sum is the same (it is exact in the tests), taken in a rotated order.
pub(crate) fn k_stages(m: Val, bm: u32, kd: Val, bk: u32, kps: Option<Val>) -> KStages {
    let ktiles = (kd + (bk as i32 - 1)) / bk as i32;
    let (first, count) = match kps {
        None => (c_i32(0), ktiles),
        Some(kps) => {
            let first = block_id(Dim::Y) * kps;
            (first, kps.min(ktiles - first))
        }
    };
    let rot = select(m.le(bm as i32), block_id_x() % count.max(1), c_i32(0));
    KStages { first, count, rot }
}

/// A workgroup's walk over its K stages ([`k_stages`]).
#[derive(Clone, Copy)]
pub(crate) struct KStages {
    first: Val,
    /// Stages in the walk.
    pub count: Val,
    rot: Val,
}

impl KStages {
    /// The K tile (in `bk`-element units) that stage `j` of the walk reads.
    pub fn tile(self, j: Val) -> Val {
        let r = j + self.rot;
        self.first + select(r.lt(self.count), r, r - self.count)
    }
}

/// Columns per group whose values [`for_each_acc`] loads together (8 per thread).
const COL_GROUP: u32 = 32;

/// Write this warpgroup's 64 x `bn` block of the tile at `(m0, n0)`, the part inside the `m`
/// x `n` C. Thread (warp w, lane l) holds rows 16w + l/4 (+8) and column pairs
/// 8j + 2(l%4), +1.
///
/// `row(r)` runs once per row of the thread and `col(c)` once per column, both
/// unconditionally at the index clamped into C (`min(r, m - 1)`, `min(c, n - 1)`; the
/// kernels run only when m, n >= 1), so their loads (scales, bias) are in bounds and issue
/// together, [`COL_GROUP`] columns at a time, instead of one guarded load after another.
/// `value(row values, column values, accumulator index)` gives an element's output value;
/// `store(row values, column, v, pair)` writes `v`, one element or (`pair`) the two of a
/// column pair as one vector, which it may take as aligned to two elements: pairs are
/// stored whole when `n` is even and both columns are inside C, else element by element.
#[allow(clippy::too_many_arguments)]
pub(crate) fn for_each_acc(
    tid: Val,
    m0: Val,
    n0: Val,
    m: Val,
    n: Val,
    bn: u32,
    row: impl Fn(Val) -> Vec<Val>,
    col: impl Fn(Val) -> Vec<Val>,
    value: impl Fn(&[Val], &[Val], u32) -> Val,
    store: impl Fn(&[Val], Val, Val, bool),
) {
    let wg = tid / 128;
    let w = (tid % 128) / 32;
    let l = tid % 32;
    let row0 = m0 + wg * 64 + w * 16 + l / 4;
    let col0 = n0 + (l % 4) * 2;
    let rows: Vec<Val> = (0..2i32).map(|h| row0 + h * 8).collect();
    let row_vals: Vec<Vec<Val>> = rows.iter().map(|&r| row(r.min(m - 1))).collect();
    let even_n = (n % 2).eq(0);
    let per_group = COL_GROUP.min(bn) / 8;
    for g in 0..bn / 8 / per_group {
        let js: Vec<u32> = (g * per_group..(g + 1) * per_group).collect();
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
                    if_then_else(
                        even_n & cs[1].lt(n),
                        || store(rv, cs[0], vec_of(&v), true),
                        || {
                            for e in 0..2 {
                                if_(cs[e].lt(n), || store(rv, cs[e], v[e], false));
                            }
                        },
                    );
                }
            });
        }
    }
}

/// Store split y's f32 sums (`acc_at(i)`: accumulator register i) of this warpgroup's block
/// into the workspace `ws[y][m][n]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store_partial(
    ws: Tensor,
    tid: Val,
    m0: Val,
    n0: Val,
    m: Val,
    n: Val,
    bn: u32,
    acc_at: impl Fn(u32) -> Val,
) {
    let n64 = n.cast(I64);
    let split = block_id(Dim::Y);
    for_each_acc(
        tid,
        m0,
        n0,
        m,
        n,
        bn,
        |r| vec![(split * m + r).cast(I64) * n64],
        |_| Vec::new(),
        |_, _, i| acc_at(i),
        |rv, col, v, pair| ws.store_aligned(rv[0] + col.cast(I64), v, 4 << pair as u32, false),
    );
}

/// Where the kernel writes: C (through the epilogue, with its bias) or a workspace.
enum Sink {
    C(Epilogue, Tensor, Tensor),
    Partial(Tensor),
}

/// The kernel for `dt` (bf16 or f16), output `out` and `tile` (sm_90 only).
pub fn build(target: Target, dt: DType, out: Out, tile: Tile) -> Result<Kernel, BuildError> {
    let st = dt.scalar();
    let (bm, bn) = (tile.bm, tile.bn);
    let stage_bytes = tile.stage_bytes();
    let name = match out {
        Out::C(epi) => kernel_name(dt, epi, tile),
        Out::Partial => partial_kernel_name(dt, tile),
    };
    KernelBuilder::new(&name, target, tile.threads()).build(|k| {
        let a_map = k.tensor("a_map", I8);
        let b_map = k.tensor("b_map", I8);
        let sink = match out {
            Out::C(epi) => Sink::C(epi, k.tensor("bias", st), k.tensor_mut("c", st)),
            Out::Partial => Sink::Partial(k.tensor_mut("ws", F32)),
        };
        let m = k.scalar("m", I32);
        let n = k.scalar("n", I32);
        let kd = k.scalar("k", I32);
        let kps = matches!(sink, Sink::Partial(_)).then(|| k.scalar("kps", I32));
        let bars = k.lds("full", I64, tile.stages());
        let tiles = k
            .lds_dynamic("tiles")
            .array_aligned(st, tile.stages() * stage_bytes / 2, 1024);
        let (stages, bk) = (tile.stages() as i32, BK as i32);
        let tid = thread_id_x();
        let wg = tid / 128;
        let (m0, n0) = tile_origin(m, n, bm, bn);
        let walk = k_stages(m, bm, kd, BK, kps);
        let ktiles = walk.count;

        let stage_elems = (stage_bytes / 2) as i32;
        let a_tile = move |s: Val| tiles.ptr_at(s * stage_elems);
        let b_tile = move |s: Val| tiles.ptr_at(s * stage_elems + (bm * BK) as i32);
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
            tma_load(a_map.ptr(), a_tile(s), bar(s), &[walk.tile(kt) * bk, m0]);
            tma_load(b_map.ptr(), b_tile(s), bar(s), &[walk.tile(kt) * bk, n0]);
        };
        if_(leader, || {
            for_range_(c_i32(0), ktiles.min(stages - 1), c_i32(1), issue);
        });

        let zero = splat(c_f32(0.0), bn / 2);
        let acc = for_range(c_i32(0), ktiles, c_i32(1), &[zero], |kt, carried| {
            let s = kt % stages;
            mbar_wait(bar(s), (kt / stages) & 1);
            wgmma_fence();
            let mut acc = carried[0];
            // This warpgroup's 64 rows of A.
            let a_rows = ptr_offset(a_tile(s), wg * (64 * BK) as i32);
            let b_rows = b_tile(s);
            for kk in 0..(BK / 16) as i32 {
                // The kk-th 16-wide K slice of both tiles.
                let a = ptr_offset(a_rows, c_i32(kk * 16));
                let b = ptr_offset(b_rows, c_i32(kk * 16));
                acc = wgmma(bn, a, b, acc);
            }
            wgmma_commit();
            let acc = wgmma_wait(1, &[acc])[0];
            // Every warpgroup is done with stage kt - 1: refill it with tile kt + stages - 1.
            barrier();
            let next = kt + (stages - 1);
            if_(leader & next.lt(ktiles), || issue(next));
            vec![acc]
        });
        let acc = wgmma_wait(0, &acc)[0];

        let acc_at = |i: u32| acc.at(i);
        match sink {
            Sink::Partial(ws) => store_partial(ws, tid, m0, n0, m, n, bn, acc_at),
            Sink::C(epi, bias, c) => {
                let n64 = n.cast(I64);
                for_each_acc(
                    tid,
                    m0,
                    n0,
                    m,
                    n,
                    bn,
                    |r| vec![r.cast(I64) * n64],
                    |col| {
                        let has = epi.has_bias();
                        has.then(|| bias.load(col).cast(F32)).into_iter().collect()
                    },
                    |_, cv, i| epilogue(epi, acc_at(i), || cv[0]).cast(st),
                    |rv, col, v, pair| {
                        c.store_aligned(rv[0] + col.cast(I64), v, 2 << pair as u32, false)
                    },
                );
            }
        }
    })
}
