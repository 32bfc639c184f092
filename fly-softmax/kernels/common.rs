//! What the forward and backward kernel descriptions share beyond [`flydsl_dsl::blocks`]
//! (reductions, row resources and loads): the row-block loop, the static shape of a
//! configuration, tile loads/stores in f32, and the reduction over the threads of one row.

pub use flydsl_dsl::blocks::{hfold, load_row, opaque, row_rsrc, team_reduce, Scratch};

use crate::table::{Config, DType};
use flydsl_dsl::ir::{Const, ScalarType, Type};
use flydsl_dsl::*;

/// `log2(e)`: softmax runs in the exp2 domain, `exp(x) = exp2(x * log2(e))`.
pub const LOG2E: f64 = std::f64::consts::LOG2_E;

/// The static shape of one kernel: how many elements one access moves (`width`) and how many
/// accesses per thread hold the resident row (`tiles`).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Elements per access: the 128-bit vector on vector paths, 1 on scalar paths.
    pub width: u32,
    /// Accesses per thread of a resident row (0 on looped paths).
    pub tiles: u32,
    /// Threads per row.
    pub group: u32,
    /// Threads per block.
    pub threads: u32,
}

impl Shape {
    /// The shape of `cfg` built for `d`.
    pub fn of(cfg: &Config, d: DType) -> Shape {
        let width = if cfg.path.is_vector() { d.vec() } else { 1 };
        Shape {
            width,
            tiles: cfg.ept / width,
            group: cfg.group,
            threads: cfg.threads,
        }
    }
    /// Byte alignment the accesses may assume.
    pub fn align(&self) -> u32 {
        if self.width > 1 {
            16
        } else {
            0
        }
    }
}

/// A constant f32 vector of `width` lanes (a scalar when `width == 1`).
pub fn f32_const(width: u32, v: f64) -> Val {
    cnst(Type::vec(ScalarType::F32, width), Const::Float(v))
}

/// Lane index of this thread within its row's group of threads.
pub fn lane_in_row(group: u32, threads: u32) -> Val {
    let tid = thread_id_x();
    if group == threads {
        tid
    } else {
        tid & (group as i32 - 1)
    }
}

/// Run `body(row, valid)` for every row this thread works on: blocks stride over row blocks
/// of `rows_per_block` rows (`nblocks` is the launched grid), so any `m` works with any grid.
/// The loop is uniform across the block (barriers and shuffles are allowed inside); `row` is
/// clamped to `m - 1` on the threads of a block's last, partial row block, which get
/// `valid == false` and must not touch memory (see [`row_rsrc`]).
///
/// i32 bounds: the loop counter steps `rb += nblocks` while `rb < row_blocks`, so its last
/// value is below `row_blocks + nblocks <= m + MAX_GRID` (`plan::MAX_GRID` = 2^20 caps the
/// grid), and `m + rows - 1` and `rb * rows + tid / group` are below `m + threads`: all
/// stay below 2^31 only for `m <= i32::MAX - MAX_GRID`, the limit the API must enforce.
pub fn for_each_row(m: Val, nblocks: Val, cfg: &Config, body: impl FnOnce(Val, Option<Val>)) {
    let rows = cfg.rows_per_block();
    let row_blocks = if rows == 1 {
        m
    } else {
        (m + (rows as i32 - 1)) / rows as i32
    };
    for_range_(block_id_x(), row_blocks, nblocks, |rb| {
        if rows == 1 {
            body(rb, None);
        } else {
            let row = rb * rows as i32 + thread_id_x() / cfg.group as i32;
            let valid = row.lt(m);
            body(row.min(m - 1), Some(valid));
        }
    });
}

/// Load `width` elements at row index `idx` and widen them to f32.
pub fn load_f32(r: &Rsrc, idx: Val, s: &Shape) -> Val {
    r.load_vec(idx, s.width, s.align()).cast(ScalarType::F32)
}

/// Narrow an f32 value to `dt` and store it at row index `idx`.
pub fn store_from_f32(r: &Rsrc, idx: Val, v: Val, dt: ScalarType, s: &Shape) {
    r.store_aligned(idx, v.cast(dt), s.align(), false)
}

/// Row index of tile `j` of this thread (resident paths): tiles are interleaved across the
/// row's threads so consecutive lanes touch consecutive 128-bit chunks (coalesced). Below
/// `class + width` (at most 2^17), whatever `n`.
pub fn tile_index(lane: Val, j: u32, s: &Shape) -> Val {
    (lane + (j * s.group) as i32) * s.width as i32
}

/// Broadcast an f32 scalar to the access width.
pub fn bcast(v: Val, s: &Shape) -> Val {
    splat(v, s.width)
}

/// Reduce `v` (f32) over the `group` threads of one row with `f`; every thread of the row
/// gets the result ([`team_reduce`]: xor shuffles within a wave; a row spanning several waves
/// then exchanges one value per wave through `scratch`, [`scratch`], folded in wave order, so
/// results are deterministic). Must be called from block-uniform control flow. A caller that
/// reuses `scratch` must separate this read from the next write by a barrier.
pub fn row_reduce(
    v: Val,
    group: u32,
    scratch: Option<Scratch>,
    f: impl Fn(Val, Val) -> Val,
) -> Val {
    team_reduce(&[v], group, scratch, |a, b| vec![f(a[0], b[0])])[0]
}

/// One LDS array of one f32 per wave, when rows span several waves.
pub fn scratch(k: &mut KernelDef, name: &str, cfg: &Config, ws: u32) -> Option<Scratch> {
    (cfg.group > ws).then(|| {
        Scratch::new(
            k.lds(name, ScalarType::F32, cfg.threads / ws),
            cfg.threads / ws,
        )
    })
}

/// The waves-per-EU hint of a configuration.
pub fn wpe(cfg: &Config) -> Option<u32> {
    (cfg.wpe != 0).then_some(cfg.wpe)
}

/// Whether the configuration's path keeps the row in registers.
pub fn resident(cfg: &Config) -> bool {
    !cfg.path.is_loop()
}

/// How a ragged row of `n` elements starting at element `row * n` splits: `head` elements up
/// to the first 16-byte boundary (fewer than a vector, at most `n`), a body of `len` elements
/// (whole aligned vectors), and `tail` elements after it (fewer than a vector). All i32.
#[derive(Clone, Copy)]
pub struct Split {
    head: Val,
    len: Val,
    tail: Val,
}

impl Split {
    /// The split of row `row` on a ragged path (`None` on the other paths, whose rows are one
    /// body of `n` elements). The row's start is misaligned by `(row * n) % width` elements,
    /// computed in i32 from `row % width` and `n % width` (`width` is a power of two), so
    /// nothing overflows for any `row`, `n`; the tensor's base is 16-byte aligned (device
    /// allocations are).
    pub fn of(cfg: &Config, s: &Shape, row: Val, n: Val) -> Option<Split> {
        if !cfg.path.is_ragged() {
            return None;
        }
        let w = s.width as i32;
        let mis = ((row & (w - 1)) * (n & (w - 1))) & (w - 1);
        let head = ((c_i32(w) - mis) & (w - 1)).min(n);
        let len = (n - head) & -w;
        Some(Split {
            head,
            len,
            tail: n - head - len,
        })
    }
    /// The body's length in elements (a multiple of the vector width).
    pub fn len(&self) -> Val {
        self.len
    }
}

/// The unaligned head and the tail of a ragged row: lane `l` of the row owns element `l` of
/// each (lanes past its length read 0 and their stores are dropped: both are resources of
/// exactly that length). The row's lanes are at least a vector's worth (a table invariant:
/// ragged configurations have `group >= 8`), so every element has an owner.
#[derive(Clone, Copy)]
pub struct Edges {
    head: Rsrc,
    tail: Rsrc,
    split: Split,
}

impl Edges {
    /// This lane's head and tail elements in f32, `fill` on the lanes that own none; with the
    /// keep-in-L2 hint when `keep_l2` (i1) is given and set (see [`load_row`]).
    pub fn load(&self, lane: Val, keep_l2: Option<Val>, fill: f64) -> [Val; 2] {
        let one = |r: Rsrc, len: Val| {
            let v = match keep_l2 {
                Some(k) => load_row(r, &[lane], 1, 0, k)[0],
                None => r.load(lane),
            }
            .cast(ScalarType::F32);
            select(lane.lt(len), v, f32_const(1, fill))
        };
        [
            one(self.head, self.split.head),
            one(self.tail, self.split.tail),
        ]
    }
    /// Store this lane's head and tail elements (f32, narrowed to `dt`).
    pub fn store(&self, lane: Val, v: [Val; 2], dt: ScalarType) {
        self.store_head(lane, v[0], dt);
        self.store_tail(lane, v[1], dt);
    }
    /// Store this lane's head element (f32, narrowed to `dt`).
    pub fn store_head(&self, lane: Val, v: Val, dt: ScalarType) {
        self.head.store(lane, v.cast(dt));
    }
    /// Store this lane's tail element (f32, narrowed to `dt`).
    pub fn store_tail(&self, lane: Val, v: Val, dt: ScalarType) {
        self.tail.store(lane, v.cast(dt));
    }
}

/// One row of a tensor as the kernels walk it: `body` (the whole row, or a ragged row's
/// aligned vectors) of `len` elements, and a ragged row's [`Edges`].
#[derive(Clone, Copy)]
pub struct RowView {
    /// The body's resource (indices from the body's start).
    pub body: Rsrc,
    /// The body's length in elements (i32).
    pub len: Val,
    /// A ragged row's head and tail.
    pub edges: Option<Edges>,
}

impl RowView {
    /// Row `row` of the row-major `[m, n]` tensor `t`, split as `split` says (see [`row_rsrc`]
    /// for `valid`: an invalid row's resources are empty).
    pub fn of(t: &Tensor, row: Val, n: Val, valid: Option<Val>, split: Option<Split>) -> RowView {
        let Some(sp) = split else {
            return RowView {
                body: row_rsrc(t, row, n, valid),
                len: n,
                edges: None,
            };
        };
        let base = row.cast(ScalarType::I64) * n.cast(ScalarType::I64);
        let part = |start: Val, len: Val| {
            let len = match valid {
                Some(v) => select(v, len, 0),
                None => len,
            };
            t.offset(base + start.cast(ScalarType::I64))
                .rsrc_n(len.cast(ScalarType::I64))
        };
        RowView {
            body: part(sp.head, sp.len),
            len: sp.len,
            edges: Some(Edges {
                head: part(c_i32(0), sp.head),
                tail: part(sp.head + sp.len, sp.tail),
                split: sp,
            }),
        }
    }
}
