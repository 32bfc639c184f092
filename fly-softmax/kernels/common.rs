//! Building blocks shared by the forward and backward kernel descriptions: the row-block
//! loop, per-row buffer resources with 64-bit row offsets, tile loads/stores in f32, and
//! reductions over the threads of one row (shuffles, plus one LDS exchange when a row spans
//! several waves).

use crate::table::{Config, DType, Path};
use flydsl_dsl::ir::{Const, ScalarType, Type};
use flydsl_dsl::*;

/// `log2(e)`: softmax runs in the exp2 domain, `exp(x) = exp2(x * log2(e))`.
pub const LOG2E: f64 = std::f64::consts::LOG2_E;

/// The IR element type of a dtype.
pub fn scalar_type(d: DType) -> ScalarType {
    match d {
        DType::F32 => ScalarType::F32,
        DType::F16 => ScalarType::F16,
        DType::BF16 => ScalarType::BF16,
    }
}

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

/// A buffer resource over row `row` of a row-major `[m, n]` tensor: 64-bit row offset, `n`
/// valid elements (0 when `valid` is false, so every access is dropped / reads zero).
/// Indices into it are i32 elements, and on AMD `index * element size` is the i32 byte
/// offset: the API's `n * element size <= i32::MAX` (`validate::max_n`) keeps every
/// in-row offset below 2^31.
pub fn row_rsrc(t: &Tensor, row: Val, n: Val, valid: Option<Val>) -> Rsrc {
    let base = row.cast(ScalarType::I64) * n.cast(ScalarType::I64);
    let len = match valid {
        Some(v) => select(v, n, 0),
        None => n,
    };
    t.offset(base).rsrc_n(len.cast(ScalarType::I64))
}

/// Load `width` elements at row index `idx`, with the keep-in-L2 hint when `keep`.
pub fn load_raw(r: &Rsrc, idx: Val, s: &Shape, keep: bool) -> Val {
    if keep {
        r.load_vec_keep_l2(idx, s.width, s.align())
    } else {
        r.load_vec(idx, s.width, s.align())
    }
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

/// Fold the lanes of a vector with `f` (identity for scalars).
pub fn horizontal(v: Val, f: impl Fn(Val, Val) -> Val) -> Val {
    let e = v.elems();
    let mut acc = e[0];
    for &x in &e[1..] {
        acc = f(acc, x);
    }
    acc
}

/// Broadcast an f32 scalar to the access width.
pub fn bcast(v: Val, s: &Shape) -> Val {
    splat(v, s.width)
}

/// Reduce `v` (f32) over the `group` threads of one row with `f`; every thread of the row
/// gets the result. Within a wave this is a butterfly of xor shuffles (masks below `group`
/// never leave the row); a row spanning several waves then exchanges one value per wave
/// through `scratch` (one f32 per wave) between a barrier and the read. The combination order
/// is fixed, so results are deterministic. Must be called from block-uniform control flow.
/// A caller that reuses `scratch` must separate this read from the next write by a barrier.
pub fn group_reduce(v: Val, group: u32, scratch: Option<Lds>, f: impl Fn(Val, Val) -> Val) -> Val {
    let ws = wave_size();
    let mut acc = v;
    let mut mask = group.min(ws) / 2;
    while mask >= 1 {
        acc = f(acc, shuffle_xor(acc, mask as i32));
        mask /= 2;
    }
    if group <= ws {
        return acc;
    }
    let Some(lds) = scratch else {
        // A programming error in the kernel description: reported as a build error.
        panic!("group_reduce over {group} threads on a wave of {ws} needs an LDS scratch array");
    };
    let tid = thread_id_x();
    let per_row = group / ws;
    if_(lane_id().eq(0), || lds.store(tid / ws as i32, acc));
    barrier();
    let first = tid / group as i32 * per_row as i32;
    let mut r = lds.load(first);
    for k in 1..per_row {
        r = f(r, lds.load(first + k as i32));
    }
    r
}

/// One LDS array of one f32 per wave, when rows span several waves.
pub fn scratch(k: &mut KernelDef, name: &str, cfg: &Config, ws: u32) -> Option<Lds> {
    (cfg.group > ws).then(|| k.lds(name, ScalarType::F32, cfg.threads / ws))
}

/// The waves-per-EU hint of a configuration.
pub fn wpe(cfg: &Config) -> Option<u32> {
    (cfg.wpe != 0).then_some(cfg.wpe)
}

/// Whether the configuration's path keeps the row in registers.
pub fn resident(cfg: &Config) -> bool {
    matches!(cfg.path, Path::Vector | Path::Scalar)
}
