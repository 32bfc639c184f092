//! The variant table of fly-norm, shared by `build.rs` (which builds exactly these kernels)
//! and `src/` (whose dispatcher picks among exactly these). Plain Rust, no dependencies.
//!
//! A kernel *family* fixes the norm, the direction (forward, forward with int8 quant,
//! backward), the activation dtype and the weight dtype; a *path* fixes the code shape:
//!
//! - [`Path::Fast`]: one row per block, the block's thread count chosen at launch time (a
//!   multiple of the wave size, at most [`MAX_BLOCK`]), `tiles` 128-bit vectors per thread held
//!   in registers; one block reduction (wave shuffles + one LDS slot per wave, one barrier).
//!   Needs `n % vec == 0` and `n <= MAX_BLOCK * tiles * vec`.
//! - [`Path::Rows`]: several rows per wave: groups of `lanes` lanes (a power of two up to the
//!   wave size, chosen at launch time) each own a row of at most `lanes * tiles * vec`
//!   elements; reductions by shuffles only, no LDS, no barrier. Needs `n % vec == 0`.
//! - [`Path::FastRagged`], [`Path::RowsRagged`]: the two above for any `n`: each row's
//!   vectors aligned to memory ([`ragged_slots`] of them; the partial first and last ones
//!   element by element, masked to the row), its weights realigned in registers.
//! - [`Path::Generic`]: any `n`: scalar loads in run-time loops over the row (two passes, three
//!   with quant), [`GENERIC_THREADS`] threads per block.
//!
//! Optional operands (residual add, mean/rstd outputs, smooth-quant scales, LayerNorm bias)
//! are run-time options of every kernel: an empty buffer switches them off, so they do not
//! multiply the number of kernels.

#![allow(dead_code)]

/// Which normalisation.
///
/// ```
/// assert_eq!(fly_norm::Norm::Rms.name(), "rmsnorm");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Norm {
    /// `(x - mean) * rstd * gamma + beta`.
    Layer,
    /// `x * rstd * gamma`.
    Rms,
}

impl Norm {
    /// Name used in kernel names.
    ///
    /// ```
    /// assert_eq!(fly_norm::Norm::Layer.name(), "layernorm");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Norm::Layer => "layernorm",
            Norm::Rms => "rmsnorm",
        }
    }
}

/// Element dtypes of activations and weights: the workspace's one dtype enum
/// (`flydsl_rt::DType`, which is `flydsl_ir::DType`; the including crate root imports it).
pub(crate) use crate::DType;

/// What a kernel family computes: its direction and outputs (the word means the same in
/// every kernel crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Forward writing `y` in the activation dtype.
    Forward,
    /// Forward writing int8 `q` and f32 per-row `yscale` (dynamic or smooth quant).
    ForwardQuant,
    /// Backward: `dx`, and per-block f32 partial rows (or f32 atomics) for dgamma/dbeta.
    Backward,
}

impl Kind {
    /// Name used in kernel names.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Forward => "fwd",
            Kind::ForwardQuant => "fwdq",
            Kind::Backward => "bwd",
        }
    }
}

/// How a kernel walks a row: its code path (see the module docs; the word means the same in
/// every kernel crate, and the dispatcher picks it from `n` and the dtype).
///
/// ```
/// use fly_norm::{plan_forward, DType, Norm, Path};
/// assert_eq!(plan_forward(Norm::Rms, 1, 1001, DType::F32, false, 32, 1).path, Path::FastRagged(2));
/// // Past the fast paths' rows (512 threads x 8 tiles x 4 f32): generic.
/// assert_eq!(plan_forward(Norm::Rms, 1, 16385, DType::F32, false, 32, 1).path, Path::Generic);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// One row per block, `tiles` 128-bit vectors per thread, block size chosen at launch.
    Fast(u32),
    /// Groups of lanes per row, `tiles` 128-bit vectors per lane, no LDS.
    Rows(u32),
    /// Any row length; scalar loads and run-time loops.
    Generic,
    /// [`Path::Fast`] for rows of any length (`n % vec != 0`): each row's vectors are aligned
    /// to memory, not to the row (see [`ragged_slots`]).
    FastRagged(u32),
    /// [`Path::Rows`] for rows of any length, as [`Path::FastRagged`].
    RowsRagged(u32),
}

impl Path {
    /// Suffix used in kernel names.
    ///
    /// ```
    /// assert_eq!(fly_norm::Path::Fast(4).suffix(), "fast_t4");
    /// ```
    pub fn suffix(self) -> String {
        match self {
            Path::Fast(t) => format!("fast_t{t}"),
            Path::Rows(t) => format!("rows_t{t}"),
            Path::Generic => "generic".to_string(),
            Path::FastRagged(t) => format!("fastr_t{t}"),
            Path::RowsRagged(t) => format!("rowsr_t{t}"),
        }
    }
    /// The aligned path a ragged path follows (its tile count, block caps and weight chunks);
    /// every other path is its own.
    ///
    /// ```
    /// use fly_norm::Path;
    /// assert_eq!(Path::RowsRagged(4).aligned(), Path::Rows(4));
    /// assert_eq!(Path::Fast(2).aligned(), Path::Fast(2));
    /// ```
    pub const fn aligned(self) -> Path {
        match self {
            Path::FastRagged(t) => Path::Fast(t),
            Path::RowsRagged(t) => Path::Rows(t),
            p => p,
        }
    }
    /// Whether this is a ragged path ([`Path::FastRagged`], [`Path::RowsRagged`]).
    ///
    /// ```
    /// assert!(fly_norm::Path::FastRagged(2).is_ragged());
    /// ```
    pub const fn is_ragged(self) -> bool {
        matches!(self, Path::FastRagged(_) | Path::RowsRagged(_))
    }
}

/// The 128-bit slots a ragged row of `n` elements of a dtype with `vec` elements a vector
/// may touch, wherever it starts: a ragged path's vectors are aligned to memory, so a row
/// starting `p` elements past a vector boundary (`0 <= p < vec`) spans `ceil((n + p) / vec)`
/// of them, its first and last ones partly (the kernels mask those element by element).
///
/// ```
/// assert_eq!(fly_norm::ragged_slots(1, 8), 1);
/// assert_eq!(fly_norm::ragged_slots(9, 8), 2);
/// assert_eq!(fly_norm::ragged_slots(4001, 8), 501);
/// ```
pub const fn ragged_slots(n: usize, vec: usize) -> usize {
    (n + 2 * vec - 2) / vec
}

/// Tile counts of the forward fast path.
pub const FWD_FAST_TILES: [u32; 3] = [2, 4, 8];
/// Tile counts of the forward-quant fast path. With 8 tiles the kernel keeps no `y` across
/// its amax reduction ([`quant_recomputes`]); the dispatcher takes it only for rows that
/// 4 tiles in 512 threads cannot hold (which would otherwise be generic).
pub const FWD_QUANT_FAST_TILES: [u32; 3] = [2, 4, 8];
/// Whether the quant forward with `tiles` tiles a lane computes `y` twice, once for the
/// row's amax and again after its reduction to quantise, rather than keeping every `y` (f32)
/// live across the reduction: with 8 tiles that would be 64 registers of `y` alone for
/// 2-byte rows (spills at the 128 registers of the 512-thread bound, sm_90), so the 8-tile
/// kernel recomputes (its weights a second time from L1, [`QUANT_T8_WEIGHT_CHUNK`] tiles
/// at a time). 2 and 4 tiles keep the single pass: recomputing raised ptxas's count there
/// (bf16 LayerNorm 2 tiles: 80 -> 97).
pub const fn quant_recomputes(tiles: u32) -> bool {
    tiles >= 8
}
/// The 8-tile quant forward's weight chunk ([`fwd_weight_chunk`]).
pub const QUANT_T8_WEIGHT_CHUNK: u32 = 2;
/// Tile counts of the forward multi-row path.
pub const FWD_ROWS_TILES: [u32; 2] = [1, 4];
/// Tile counts of the backward fast path (8 is not built for LayerNorm of 2-byte elements:
/// see [`bwd_fast_spill_free`]).
pub const BWD_FAST_TILES: [u32; 4] = [1, 2, 4, 8];
/// Threads per block of the generic path (and of the column-reduce kernel).
pub const GENERIC_THREADS: u32 = 256;
/// Columns summed by one block of the column-reduce kernel.
pub const REDUCE_COLS: u32 = 32;
/// Largest block of the fast path.
pub const MAX_BLOCK: u32 = 1024;
/// Most blocks of any fly-norm launch (the dispatcher's cap): blocks loop over the rows.
///
/// ```
/// assert_eq!(fly_norm::MAX_GRID, 1 << 20);
/// ```
pub const MAX_GRID: u32 = 1 << 20;
/// Largest `m` the kernels take. Their row loops count in i32 (`row += grid` while
/// `row < m`, multi-row blocks `(m + rows_per_block - 1) / rows_per_block`), which stays
/// below 2^31 for `m <= i32::MAX - MAX_GRID`.
///
/// ```
/// assert_eq!(fly_norm::MAX_ROWS, (i32::MAX - (1 << 20)) as usize);
/// ```
pub const MAX_ROWS: usize = i32::MAX as usize - MAX_GRID as usize;
/// Largest `n` the kernels take, for every dtype: a row of f32 stays under 2 GiB, so every
/// element index of a row, its AMD buffer byte offset (`index * element size`, i32) and the
/// generic path's column loop counter (`i += 256 * vec` while `i < n`) stay below 2^31.
///
/// ```
/// assert_eq!(fly_norm::MAX_COLS, (i32::MAX / 4) as usize);
/// ```
pub const MAX_COLS: usize = i32::MAX as usize / 4;

/// The tile counts of the fast path of `kind`.
pub const fn fast_tiles(kind: Kind) -> &'static [u32] {
    match kind {
        Kind::Forward => &FWD_FAST_TILES,
        Kind::ForwardQuant => &FWD_QUANT_FAST_TILES,
        Kind::Backward => &BWD_FAST_TILES,
    }
}

/// The tile counts of the forward fast path of `kind` for `dt` rows, ragged (the
/// [`Path::FastRagged`] kernels) or not: every count of [`fast_tiles`], except that ragged
/// rows stop at 4 tiles. The ragged 8-tile kernels (the element-wise loads of the partial
/// vectors on top of 32-64 values per thread) spilled on AMD: 172-640 bytes of scratch for
/// 2-byte rows on gfx942, gfx950, gfx1201 and gfx1250, and SGPR spills for f32 rows on
/// gfx942; such rows take the generic path, as they did before the ragged kernels.
pub const fn fwd_fast_tiles(kind: Kind, _dt: DType, ragged: bool) -> &'static [u32] {
    if ragged {
        &FWD_FAST_TILES_RAGGED
    } else {
        fast_tiles(kind)
    }
}
/// [`fwd_fast_tiles`] of ragged rows (plain and quant forward).
const FWD_FAST_TILES_RAGGED: [u32; 2] = [2, 4];

/// Largest block of the fast path with `tiles` tiles (forward or backward). The cap is also
/// the kernel's launch bound, which sets the register budget per thread (on sm_90 a bound of
/// 1024 threads leaves 64 registers, 512 leaves 128, 256 leaves 255; on AMD 1024 leaves 128
/// VGPRs, 512 256): so each tile count gets the smallest cap that still covers the rows the
/// dispatcher sends it (rows up to 256 threads x 8 tiles go to blocks of <= 256 threads; only
/// the longest rows use the 512-thread caps). The backward sends rows of 257..512 threads to
/// its largest row-resident tile count (see [`bwd_fast_resident`]) before a row-streaming
/// one: 2 tiles of 2-byte elements (rows of 4096 < n <= 8192), which fit the 128 registers
/// of the 512-thread bound; f32 keeps 2 tiles at 256 (its longer rows take 4 resident
/// tiles). The row-streaming tile counts (4 and 8 of 2-byte elements, 8 of f32) take 512.
/// Register counts behind these choices: `bench/fly-norm-registers.md`.
pub const fn fast_max_block(kind: Kind, dt: DType, tiles: u32) -> u32 {
    match kind {
        // The last tile count, or the largest one before the row-streaming ones.
        Kind::Backward if tiles >= 4 || !bwd_fast_resident(dt, 2 * tiles, true) => 512,
        Kind::Backward => 256,
        Kind::ForwardQuant if tiles >= 4 => 512,
        _ if tiles >= 8 => 512,
        _ => 256,
    }
}
/// Whether the backward fast path with `tiles` tiles of `dt` keeps the row in registers
/// across the row reduction: at most 16 elements a thread (8 in the ragged kernels, whose
/// element-wise loads and bounds take more registers). The LayerNorm backward keeps x-hat,
/// dy * gamma, dy and two f32 partials per element live there, which at 32 elements a thread
/// spilled about 1 KB a thread inside the row loop (RMSNorm's about 200 B; sizes in
/// `bench/fly-norm-registers.md`). Longer tile counts read the row a second time after the
/// reduction (from L2: the block's row was just read), so that only the per-column weight
/// gradient partials stay live across it.
pub const fn bwd_fast_resident(dt: DType, tiles: u32, aligned: bool) -> bool {
    tiles * dt.vec() <= if aligned { 16 } else { 8 }
}
/// Whether the backward fast path of `norm` with `tiles` tiles of `dt` is built, for aligned
/// rows or (`ragged`) for rows that are not a multiple of the vector width, so that it runs
/// without spills on sm_90 (the 512-thread bound leaves 128 registers): a thread keeps
/// `tiles * vec` f32 weight-gradient partials per weight gradient across its rows.
///
/// - Aligned: at most 64 partials. 8 tiles of 2-byte elements would be 128 for LayerNorm
///   (dgamma and dbeta), the whole budget, so LayerNorm rows of more than 16384 2-byte
///   elements take the generic path; RMSNorm's 64 (2-byte) and f32 ones fit. LayerNorm's
///   f32 8 tiles (64 partials) spilled 44 bytes on gfx942 and gfx950, so LayerNorm has no
///   8-tile backward.
/// - Ragged: at most 32 partials, or 64 with at most 4 tiles: the element-wise loads of 8
///   tiles (their addresses and bounds) spilled 136..480 B a thread with 64 partials, so
///   ragged 2-byte RMSNorm rows past 16384 and ragged f32 LayerNorm rows past 8192 take the
///   generic path.
pub const fn bwd_fast_spill_free(norm: Norm, dt: DType, tiles: u32, ragged: bool) -> bool {
    let partials = tiles
        * dt.vec()
        * match norm {
            Norm::Layer => 2,
            Norm::Rms => 1,
        };
    if ragged {
        partials <= 32 || (partials <= 64 && tiles <= 4)
    } else {
        partials <= 64 && !(tiles == 8 && matches!(norm, Norm::Layer))
    }
}
/// In how many groups a row-streaming backward kernel ([`bwd_fast_resident`] false) reads its
/// tiles in each of its two passes over the row: a group's loads issue after the previous
/// group's values arrived, so fewer registers hold loads, at the price of one more memory
/// round trip per group and row (the block has one row in flight). 2 groups for 128-bit
/// loads; 4 for the ragged kernels' element-wise ones (a 2-byte element takes a register of
/// its own), which spill with 2 (sm_90 counts in `bench/fly-norm-registers.md`).
pub const fn bwd_stream_groups(aligned: bool) -> u32 {
    if aligned {
        2
    } else {
        4
    }
}
/// The name of the backward kernel of `fam` on `path`: [`Family::kernel_name`], with
/// `_ragged` for the fast path's variant for rows that are not a multiple of the vector
/// width (element-wise loads; built for every fast-path tile count).
pub fn bwd_kernel_name(fam: Family, path: Path, ragged: bool) -> String {
    let name = fam.kernel_name(path);
    if ragged {
        name + "_ragged"
    } else {
        name
    }
}
/// Register cap of the forward of `fam` on `path` on sm_90 (`.maxnreg`; AMD ignores it), or
/// none. The vectorised forward paths keep only the x loads of the resident blocks in flight,
/// so the number of blocks per SM sets the bandwidth (65536 registers per SM, allocated in
/// steps of 8 per thread; at most 2048 threads and 32 blocks). Each cap is the smallest
/// register count that raises the blocks per SM over what ptxas picks left alone, chosen
/// from the measured counts in `bench/fly-norm-registers.md`:
///
/// - `Fast(4)` (rows of 2048..8192 2-byte, 1024..4096 f32 elements, 256-thread blocks): 64,
///   4 blocks per SM (only the packed x is live across the row reduction).
/// - `Fast(2)` (rows of up to 4096 2-byte, 2048 f32 elements): 40 for LayerNorm, which hoists
///   its gamma and beta loads above the reduction's barrier next to the packed x; 32 for
///   RMSNorm with same-dtype weights (the SM's 2048-thread limit), 40 with f32 weights.
/// - `Rows(4)` (rows of up to 128 vectors, one wave each, 256-thread blocks): 64 for RMSNorm
///   with same-dtype weights. LayerNorm and f32-weight RMSNorm get there through
///   [`fwd_weight_chunk`] instead, which needs no cap.
pub const fn fwd_max_registers(fam: Family, path: Path) -> Option<u32> {
    match (fam.kind, path) {
        (Kind::Forward, Path::Fast(4)) => Some(64),
        (Kind::Forward, Path::Fast(2)) => match (fam.norm, fam.dt, fam.wdt) {
            (Norm::Rms, DType::F32, _)
            | (Norm::Rms, DType::F16, DType::F16)
            | (Norm::Rms, DType::BF16, DType::BF16) => Some(32),
            _ => Some(40),
        },
        (Kind::Forward, Path::Rows(4)) => match (fam.norm, fam.dt, fam.wdt) {
            (Norm::Rms, DType::F32, _)
            | (Norm::Rms, DType::F16, DType::F16)
            | (Norm::Rms, DType::BF16, DType::BF16) => Some(64),
            _ => None,
        },
        _ => None,
    }
}
/// How many tiles' weights the forward of `fam` on `path` reads at a time (the quant forward
/// all at once on the aligned paths, the ragged paths [`RAGGED_WEIGHT_CHUNK`]; below, the
/// plain forward, kind [`Kind::Forward`], on the aligned paths): each group's loads issue only after the previous group's weights have arrived
/// (its indices carry a run-time zero taken from that group's output), so fewer weight
/// registers are live, at the price of one more L1 round trip per group. Only the multi-row
/// path with 4 tiles uses groups of 2: there a lane holds its row's 64 bytes of packed x and,
/// with no barrier to hold them back, ptxas issues all 8 (LayerNorm) gamma and beta loads
/// together, 32 more registers, one block per SM fewer on sm_90; the groups of 2 win it back
/// (and save VGPRs on AMD for most of these kernels; counts in
/// `bench/fly-norm-registers.md`). Everything else takes all its tiles at once.
pub const fn fwd_weight_chunk(fam: Family, path: Path) -> u32 {
    match (fam.kind, path) {
        (Kind::Forward, Path::Rows(4)) => match (fam.norm, fam.dt, fam.wdt) {
            (Norm::Layer, _, _) | (Norm::Rms, DType::F16 | DType::BF16, DType::F32) => 2,
            _ => 4,
        },
        (Kind::ForwardQuant, Path::Fast(8)) => QUANT_T8_WEIGHT_CHUNK,
        (_, Path::Fast(t) | Path::Rows(t)) => t,
        (_, Path::Generic) => 1,
        (_, Path::FastRagged(_) | Path::RowsRagged(_)) => RAGGED_WEIGHT_CHUNK,
    }
}
/// The ragged paths' weight chunk ([`fwd_weight_chunk`], plain and quant forwards): a ragged
/// slot's weights come from two aligned vectors per tensor ([`Path::FastRagged`]), so all
/// tiles at once keep twice the aligned paths' weight registers live (ptxas, sm_90, bf16
/// LayerNorm `FastRagged(8)`: 1448 B of spills at the 512-thread bound).
pub const RAGGED_WEIGHT_CHUNK: u32 = 1;
/// Largest block of the multi-row path.
pub const ROWS_BLOCK: u32 = 256;
/// Largest number of waves in a block on any target (1024 threads of wave32).
pub const MAX_WAVES: u32 = 32;

/// One kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Family {
    /// Which norm.
    pub norm: Norm,
    /// Direction.
    pub kind: Kind,
    /// Activation dtype.
    pub dt: DType,
    /// Weight dtype.
    pub wdt: DType,
}

impl Family {
    /// The paths this family is built with.
    pub fn paths(self) -> Vec<Path> {
        let mut v = Vec::new();
        match self.kind {
            Kind::Forward | Kind::ForwardQuant => {
                v.extend(fast_tiles(self.kind).iter().map(|&t| Path::Fast(t)));
                v.extend(FWD_ROWS_TILES.iter().map(|&t| Path::Rows(t)));
                let ragged = fwd_fast_tiles(self.kind, self.dt, true);
                v.extend(ragged.iter().map(|&t| Path::FastRagged(t)));
                v.extend(FWD_ROWS_TILES.iter().map(|&t| Path::RowsRagged(t)));
            }
            Kind::Backward => v.extend(
                BWD_FAST_TILES
                    .iter()
                    .filter(|&&t| bwd_fast_spill_free(self.norm, self.dt, t, false))
                    .map(|&t| Path::Fast(t)),
            ),
        }
        v.push(Path::Generic);
        v
    }
    /// The kernel name of this family on `path`, e.g. `rmsnorm_fwd_bf16_wf32_fast_t4`.
    pub fn kernel_name(self, path: Path) -> String {
        format!(
            "{}_{}_{}_w{}_{}",
            self.norm.name(),
            self.kind.name(),
            self.dt.name(),
            self.wdt.name(),
            path.suffix()
        )
    }
}

/// The weight dtypes allowed with activation dtype `dt` for `norm`: the same dtype, plus f32
/// weights with f16/bf16 activations for RMSNorm.
pub fn weight_dtypes(norm: Norm, dt: DType) -> Vec<DType> {
    let mut v = vec![dt];
    if norm == Norm::Rms && dt != DType::F32 {
        v.push(DType::F32);
    }
    v
}

/// Every kernel family that is built.
pub fn families() -> Vec<Family> {
    let mut v = Vec::new();
    for norm in [Norm::Layer, Norm::Rms] {
        for kind in [Kind::Forward, Kind::ForwardQuant, Kind::Backward] {
            for dt in DType::ALL {
                for wdt in weight_dtypes(norm, dt) {
                    v.push(Family {
                        norm,
                        kind,
                        dt,
                        wdt,
                    });
                }
            }
        }
    }
    v
}

/// Name of the column-reduce kernel writing dtype `out` (sums `g` f32 rows of length `n`).
pub fn reduce_name(out: DType) -> String {
    format!("norm_colsum_{}", out.name())
}
