//! The persistent tile schedule and the TMA stage ring of the Hopper GEMMs (`wgmma.rs`,
//! `wgmma_scaled.rs`).
//!
//! Schedule ([`Schedule`]): the host launches at most one workgroup per SM (every config
//! takes more than half of an SM's LDS, so no two share one) and no more than there are
//! tiles; workgroup x computes tiles x, x + grid_x, x + 2 grid_x, ... of the grouped order
//! of [`tile_origin`], each over the same K stages (all of K, or split y's share).
//!
//! Ring ([`Pipeline`]): the K stages of all of a workgroup's tiles form one sequence, stage
//! `g = it * count + j` being stage j of its tile `it`. Stage g lives in LDS slot
//! `g % stages` and completes phase `(g / stages) & 1` of that slot's mbarrier. Thread 0
//! loads stage `g + ahead` (`ahead = min(stages - 1, count)`) once every warpgroup is done
//! reading stage `g - 1`, so the last stages of one tile load the first ones of the next,
//! and those loads run while the epilogue writes C: the next tile starts with a full ring
//! instead of a cold one. `ahead <= count` keeps every load within the next tile, whose
//! origin the loop computes once per tile: the hot loop has no tile arithmetic (it cost
//! fp8 15% in registers and time when the loads decoded their tile there).

use crate::table::{Tile, GROUP_M};
use flydsl_dsl::ir::{Dim, ScalarType};
use flydsl_dsl::nv::{fence_proxy_async, mbar_arrive_expect_tx, mbar_init, mbar_wait, tma_load};
use flydsl_dsl::*;

/// The origin `(m0, n0)` of tile `t` of an `m` x `n` C cut into `bm` x `bn` tiles, the
/// tiles taken in groups of `GROUP_M` tile rows so that neighbours share A and B in L2.
pub(crate) fn tile_origin(t: Val, m: Val, n: Val, bm: u32, bn: u32) -> (Val, Val) {
    let tiles_m = (m + (bm as i32 - 1)) / bm as i32;
    let tiles_n = (n + (bn as i32 - 1)) / bn as i32;
    let group = tiles_n * GROUP_M as i32;
    let first_m = (t / group) * GROUP_M as i32;
    let gsize = (tiles_m - first_m).min(GROUP_M as i32);
    let tm = first_m + (t % group) % gsize;
    let tn = (t % group) / gsize;
    (tm * bm as i32, tn * bn as i32)
}

/// One tile of a workgroup's walk: the origin of its block of the wgmma output (of C, or of
/// C's transpose for a swapped tile: `m0` is then a column of C) and the rotation of its K
/// walk (see [`Schedule::k_tile`]).
#[derive(Clone, Copy)]
pub(crate) struct TileAt {
    pub m0: Val,
    pub n0: Val,
    rot: Val,
}

/// The tiles and K stages one workgroup computes.
#[derive(Clone, Copy)]
pub(crate) struct Schedule {
    m: Val,
    n: Val,
    bm: u32,
    bn: u32,
    /// The first K tile (in `bk`-element units) of every tile's walk.
    first: Val,
    /// K stages per tile.
    pub count: Val,
    /// Whether the K walks rotate (all of M is one tile row).
    rotate: Val,
    /// Tiles of this workgroup.
    pub tiles: Val,
}

impl Schedule {
    /// The schedule of `tile`'s tiles of an `m` x `n` C over `kd` columns of K in stages
    /// of `bk`: all of K, or for a partial-sum kernel split y's `kps` stages (`kps` is the
    /// kernel argument; the host makes every split non-empty). A swapped tile walks the
    /// `n` x `m` transpose.
    pub fn new(m: Val, n: Val, tile: Tile, kd: Val, bk: u32, kps: Option<Val>) -> Self {
        let (bm, bn) = (tile.bm, tile.bn);
        let rotate = m.le(tile.c_rows() as i32);
        let (m, n) = if tile.swap_ab { (n, m) } else { (m, n) };
        let ktiles = (kd + (bk as i32 - 1)) / bk as i32;
        let (first, count) = match kps {
            None => (c_i32(0), ktiles),
            Some(kps) => {
                let first = block_id(Dim::Y) * kps;
                (first, kps.min(ktiles - first))
            }
        };
        let total = ((m + (bm as i32 - 1)) / bm as i32) * ((n + (bn as i32 - 1)) / bn as i32);
        let grid = grid_dim_x();
        let tiles = (total - block_id_x() + (grid - 1)) / grid;
        Schedule {
            m,
            n,
            bm,
            bn,
            first,
            count,
            rotate,
            tiles,
        }
    }

    /// Tile `it` (`0 <= it < tiles`) of this workgroup's walk.
    ///
    /// Where all of C's rows are one tile row (every tile streams its own rows of B),
    /// tile t's K walk starts at stage `t % count` and wraps around, so that at any moment
    /// the workgroups read B at spread K offsets instead of one 128-byte column of every
    /// row at once. The sum is the same (exact in the tests), taken in a rotated order.
    pub fn tile(self, it: Val) -> TileAt {
        let t = block_id_x() + it * grid_dim_x();
        let (m0, n0) = tile_origin(t, self.m, self.n, self.bm, self.bn);
        let rot = select(self.rotate, t % self.count.max(1), c_i32(0));
        TileAt { m0, n0, rot }
    }

    /// Tile `it + 1` of the walk, or tile `it` again where `it` is the last (the ring loads
    /// nothing past the walk's end, so the value is then unused).
    pub fn next_tile(self, it: Val) -> TileAt {
        self.tile((it + 1).min(self.tiles - 1))
    }

    /// The K tile (in `bk`-element units) that stage `j` (`0 <= j < count`) of `tile` reads.
    pub fn k_tile(self, tile: TileAt, j: Val) -> Val {
        let r = j + tile.rot;
        self.first + select(r.lt(self.count), r, r - self.count)
    }

    /// Stages over all of this workgroup's tiles (the host keeps it below 2^30).
    pub fn stages(self) -> Val {
        self.tiles * self.count
    }
}

/// The LDS ring of a Hopper GEMM's A and B stages, filled by TMA (see the module doc).
#[derive(Clone, Copy)]
pub(crate) struct Pipeline {
    pub sched: Schedule,
    a_map: Tensor,
    b_map: Tensor,
    bars: Lds,
    ring: DynLdsArray,
    stages: i32,
    /// Stages loaded ahead of the one being read: `min(stages - 1, count)`.
    ahead: Val,
    bk: i32,
    bm: i32,
    stage_bytes: i32,
    stage_elems: i32,
}

impl Pipeline {
    /// The ring of `tile`'s `stages()` slots of `stage_bytes()` (the wgmma's A operand, `bm`
    /// x `bk` elements of `elem`, then its B operand) in the kernel's dynamic LDS, fed from
    /// the tensor maps `a_map` (dims `[K, M]`) and `b_map` (`[K, N]`), whose roles a
    /// swapped tile exchanges (B's rows are then the wgmma's A): initializes its mbarriers
    /// (a workgroup barrier) and has thread 0 load the first `ahead` stages of the walk.
    pub fn start(
        k: &mut KernelDef,
        sched: Schedule,
        (a_map, b_map): (Tensor, Tensor),
        elem: ScalarType,
        tile: Tile,
        bk: u32,
    ) -> Pipeline {
        let (stages, stage_bytes, bm) = (tile.stages(), tile.stage_bytes(), tile.bm);
        let (a_map, b_map) = if tile.swap_ab {
            (b_map, a_map)
        } else {
            (a_map, b_map)
        };
        let bars = k.lds("full", ScalarType::I64, stages);
        let elem_bytes = elem.size_bytes();
        let ring =
            k.lds_dynamic("tiles")
                .array_aligned(elem, stages * stage_bytes / elem_bytes, 1024);
        let p = Pipeline {
            sched,
            a_map,
            b_map,
            bars,
            ring,
            stages: stages as i32,
            ahead: sched.count.min(stages as i32 - 1),
            bk: bk as i32,
            bm: bm as i32,
            stage_bytes: stage_bytes as i32,
            stage_elems: (stage_bytes / elem_bytes) as i32,
        };
        let leader = thread_id_x().eq(0);
        if_(leader, || {
            for s in 0..p.stages {
                mbar_init(p.bar(c_i32(s)), 1);
            }
            fence_proxy_async();
        });
        barrier();
        if_(leader, || {
            let first = sched.stages().min(p.ahead);
            for_range_(c_i32(0), first, c_i32(1), |g| p.load_any(g));
        });
        p
    }

    fn bar(self, s: Val) -> Val {
        self.bars.ptr_at(s)
    }

    /// The wgmma's A tile (`bm` rows) in slot `s`.
    pub fn a_tile(self, s: Val) -> Val {
        self.ring.ptr_at(s * self.stage_elems)
    }

    /// The wgmma's B tile (`bn` rows) in slot `s`.
    pub fn b_tile(self, s: Val) -> Val {
        self.ring.ptr_at(s * self.stage_elems + self.bm * self.bk)
    }

    /// Load stage `g` of the walk, stage `j` of `tile`, into its slot.
    fn load(self, g: Val, tile: TileAt, j: Val) {
        let s = g % self.stages;
        let k0 = self.sched.k_tile(tile, j) * self.bk;
        mbar_arrive_expect_tx(self.bar(s), c_i32(self.stage_bytes));
        tma_load(
            self.a_map.ptr(),
            self.a_tile(s),
            self.bar(s),
            &[k0, tile.m0],
        );
        tma_load(
            self.b_map.ptr(),
            self.b_tile(s),
            self.bar(s),
            &[k0, tile.n0],
        );
    }

    /// Load stage `g` of the walk, finding its tile (the prologue's loads).
    fn load_any(self, g: Val) {
        let count = self.sched.count.max(1);
        let it = g / count;
        self.load(g, self.sched.tile(it), g - it * count);
    }

    /// Wait until stage `g` of the walk is in LDS; its slot.
    pub fn ready(self, g: Val) -> Val {
        let s = g % self.stages;
        mbar_wait(self.bar(s), (g / self.stages) & 1);
        s
    }

    /// Once this thread is done reading stage `g - 1` (`g` is stage `j` of tile `at`, the
    /// tile after it `next`, from [`Schedule::next_tile`]): a workgroup barrier, then
    /// thread 0 loads stage `g + ahead`, of `at` or of `next`, into its slot, whose
    /// previous stage (`g + ahead - stages <= g - 1`) every warpgroup is then done with.
    pub fn refill(self, g: Val, j: Val, at: TileAt, next: TileAt) {
        barrier();
        let g_load = g + self.ahead;
        if_(thread_id_x().eq(0) & g_load.lt(self.sched.stages()), || {
            let j_load = j + self.ahead;
            let here = j_load.lt(self.sched.count);
            let tile = TileAt {
                m0: select(here, at.m0, next.m0),
                n0: select(here, at.n0, next.n0),
                rot: select(here, at.rot, next.rot),
            };
            let j_load = select(here, j_load, j_load - self.sched.count);
            self.load(g_load, tile, j_load);
        });
    }
}
