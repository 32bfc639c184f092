//! What the build script and the library share: the epilogues, the kernel names and the
//! tiling of the Hopper kernel. Included by `build.rs` with `#[path]`, so it depends on
//! nothing but `crate::DType` and `crate::Target`.

use crate::{DType, Target};

/// The fused epilogue applied to each f32 accumulator `v` (column `j`) before rounding to
/// the output dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// `v`.
    None,
    /// `v + bias[j]`.
    Bias,
    /// `max(v + bias[j], 0)`.
    BiasRelu,
    /// `silu(v + bias[j]) = x / (1 + exp(-x))`.
    BiasSilu,
    /// `gelu(v + bias[j])`, tanh approximation:
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    BiasGelu,
}

impl Epilogue {
    /// Every epilogue, in kernel-table order.
    pub const ALL: [Epilogue; 5] = [
        Epilogue::None,
        Epilogue::Bias,
        Epilogue::BiasRelu,
        Epilogue::BiasSilu,
        Epilogue::BiasGelu,
    ];
    /// True when the epilogue reads `bias`.
    pub fn has_bias(self) -> bool {
        self != Epilogue::None
    }
    /// Short name used in kernel names.
    pub fn name(self) -> &'static str {
        match self {
            Epilogue::None => "none",
            Epilogue::Bias => "bias",
            Epilogue::BiasRelu => "bias_relu",
            Epilogue::BiasSilu => "bias_silu",
            Epilogue::BiasGelu => "bias_gelu",
        }
    }
    /// Index in [`Epilogue::ALL`] (the dispatch-table key).
    pub fn index(self) -> usize {
        Epilogue::ALL.iter().position(|&e| e == self).unwrap_or(0)
    }
}

/// The dtypes with a kernel: A, B, bias and C share it.
pub const DTYPES: [DType; 2] = [DType::BF16, DType::F16];

/// The Hopper kernel's name for `dt`, `epi` and `tile` (the first config has no suffix).
pub fn kernel_name(dt: DType, epi: Epilogue, tile: Tile) -> String {
    format!("gemm_wgmma_{}_{}{}", dt.name(), epi.name(), tile.suffix())
}

/// The 16-bit dispatch-table key of (`epi`, `tile`) (per dtype); ascending in the build
/// script's declaration order.
pub fn key16(epi: Epilogue, tile: Tile) -> usize {
    tile.index() * Epilogue::ALL.len() + epi.index()
}

/// Rows of C per workgroup of the Hopper kernel's first (largest) config (two warpgroups
/// of 64).
pub const BM: u32 = 128;
/// Columns of C per workgroup of the first config (the wgmma N).
pub const BN: u32 = 256;
/// K per pipeline stage (64 16-bit elements: one 128-byte swizzled row).
pub const BK: u32 = 64;
/// Pipeline stages of the first (largest) config; every config's count is
/// [`Tile::stages`].
pub const STAGES: u32 = 4;
/// Threads per workgroup.
pub const THREADS: u32 = 256;
/// Tile rows per group of the tile order (L2 locality).
pub const GROUP_M: u32 = 8;
/// Bytes of one stage (A and B tiles).
pub const STAGE_BYTES: u32 = (BM + BN) * BK * 2;
/// Dynamic LDS per launch: the stages plus the slack of aligning them to 1024 bytes.
pub const LDS_BYTES: u32 = STAGES * STAGE_BYTES + 1024;

/// The 8-bit input types of the scaled GEMM ([`crate::gemm_scaled`]): A and B share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quant {
    /// OCP fp8 e4m3fn (`flydsl_rt::F8E4M3FN`), f32 accumulation: gfx950, gfx1201, gfx1250
    /// and sm90.
    Fp8,
    /// AMD fp8 e4m3fnuz (`flydsl_rt::F8E4M3FNUZ`), f32 accumulation: gfx942, whose matrix
    /// instructions read this format.
    Fp8Fnuz,
    /// Signed int8, exact s32 accumulation: every target.
    Int8,
}

impl Quant {
    /// Every input type, in kernel-table order.
    pub const ALL: [Quant; 3] = [Quant::Fp8, Quant::Fp8Fnuz, Quant::Int8];
    /// The input types of the Hopper wgmma kernel, in its table order ([`scaled_key`]).
    pub const WGMMA: [Quant; 2] = [Quant::Fp8, Quant::Int8];
    /// Short name used in kernel names and errors.
    pub fn name(self) -> &'static str {
        match self {
            Quant::Fp8 => "e4m3fn",
            Quant::Fp8Fnuz => "e4m3fnuz",
            Quant::Int8 => "i8",
        }
    }
    /// Index in [`Quant::WGMMA`] (the wgmma table's key; `Fp8Fnuz` has no wgmma kernel and
    /// shares `Fp8`'s index).
    pub fn index(self) -> usize {
        match self {
            Quant::Fp8 | Quant::Fp8Fnuz => 0,
            Quant::Int8 => 1,
        }
    }
    /// Whether `target`'s matrix instructions read this type (its fp8 format is
    /// `Target::native_fp8_e4m3`: FNUZ on gfx942, OCP elsewhere; int8 everywhere).
    pub fn on(self, target: Target) -> bool {
        match self {
            Quant::Fp8 => target != Target::Gfx942,
            Quant::Fp8Fnuz => target == Target::Gfx942,
            Quant::Int8 => true,
        }
    }
    /// The targets that read this type ([`Quant::on`]).
    pub fn targets(self) -> Vec<Target> {
        Target::ALL.into_iter().filter(|&t| self.on(t)).collect()
    }
}

/// The output dtypes of the scaled GEMM (bias and C).
pub const SCALED_OUT: [DType; 2] = [DType::BF16, DType::F16];

/// A tile config of the Hopper kernels (16-bit and 8-bit): `bm` rows (64 per consumer
/// warpgroup) by `bn` columns (the wgmma N) of the wgmma's output per workgroup. That
/// output is a `bm` x `bn` block of C, or with `swap_ab` of C's transpose: the wgmma's M
/// then runs over B's rows (C's columns) and its N over A's rows, so a GEMM of a few rows
/// (a decode step's tokens) fills the wgmma with weights instead of padding. A pipeline
/// stage is 128 bytes of K per tile row either way (`BK` 16-bit or `BK8` 8-bit elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Rows of the wgmma output per workgroup: 64 per warpgroup (one to four).
    pub bm: u32,
    /// Columns of the wgmma output per workgroup: a multiple of 8 in 8..=256 (the 8-bit
    /// kernels: int8 wgmma takes multiples of 16 past 32, and the fp8 kernel's tiles wider
    /// than 128 columns must be multiples of 128, its promotion chunk).
    pub bn: u32,
    /// Whether the tile computes C's transpose (B's rows on the wgmma's M).
    pub swap_ab: bool,
}

/// The tile configs of both kernels: 128 x 256 for large grids, 128 x 128 to spread
/// mid-size GEMMs over more SMs, for small M 256 columns of C by 32 rows (swapped: four
/// warpgroups of 64 rows of B each, so each SM streams B through four wgmma chains),
/// 128 x 64 for M up to 128 where 128 x 128 makes too few tiles, and 64 x 96 (one
/// warpgroup) for M up to 128 where its tiles make one wave over most SMs. [`Tile::pick`]
/// chooses.
pub const TILES: [Tile; 5] = [
    Tile {
        bm: 128,
        bn: 256,
        swap_ab: false,
    },
    Tile {
        bm: 128,
        bn: 128,
        swap_ab: false,
    },
    Tile {
        bm: 256,
        bn: 32,
        swap_ab: true,
    },
    Tile {
        bm: 128,
        bn: 64,
        swap_ab: false,
    },
    Tile {
        bm: 64,
        bn: 96,
        swap_ab: false,
    },
];

/// The fewest 64 x 96 tiles ([`TILES`]`[4]`) for which [`Tile::pick`] takes them: at
/// M <= 64 half of [`FILL_TILES`], at M in 65..=128 (two tile rows, each B tile read by
/// both) three quarters; the H200 runs behind both floors are in `bench/gemm-wgmma.md`
/// (session 17).
///
/// ```
/// use fly_gemm::table::{narrow_fill, FILL_TILES};
/// assert_eq!((narrow_fill(16), narrow_fill(128)), (FILL_TILES / 2, FILL_TILES * 3 / 4));
/// ```
pub fn narrow_fill(m: usize) -> usize {
    if m > 64 {
        FILL_TILES * 3 / 4
    } else {
        FILL_TILES / 2
    }
}

/// Workgroups that fill an H200 (its 132 SMs, one workgroup each: the large tile's LDS
/// allows one per SM).
pub const FILL_TILES: usize = 132;

impl Tile {
    /// Rows of C per tile (of A per stage): `bm`, or `bn` when swapped.
    pub fn c_rows(self) -> u32 {
        if self.swap_ab {
            self.bn
        } else {
            self.bm
        }
    }
    /// Columns of C per tile (rows of B per stage): `bn`, or `bm` when swapped.
    pub fn c_cols(self) -> u32 {
        if self.swap_ab {
            self.bm
        } else {
            self.bn
        }
    }
    /// Warpgroups per workgroup: one per 64 rows.
    pub fn warpgroups(self) -> u32 {
        self.bm / 64
    }
    /// Threads per workgroup: one warpgroup (128 threads) per 64 rows.
    pub fn threads(self) -> u32 {
        self.warpgroups() * 128
    }
    /// Bytes of one pipeline stage (A and B tiles: 128 bytes of K per row).
    pub fn stage_bytes(self) -> u32 {
        (self.bm + self.bn) * BK8
    }
    /// Pipeline stages (the same for both kernels): as many as fit [`STAGE_LDS`] bytes, at
    /// most [`MAX_STAGES`]. The 128 x 256 tile gets 4, 128 x 128 6, the swapped 256 x 32 5,
    /// 128 x 64 8, 64 x 96 9.
    ///
    /// ```
    /// use fly_gemm::table::{TILES, STAGES};
    /// assert_eq!(TILES.map(|t| t.stages()), [STAGES, 6, 5, 8, 9]);
    /// assert!(TILES.iter().all(|t| t.lds_bytes() <= 227 * 1024));
    /// // More than half of an SM's 228 KiB: one workgroup per SM (the persistent grid).
    /// assert!(TILES.iter().all(|t| 2 * (t.lds_bytes() + 1024) > 228 * 1024));
    /// ```
    pub fn stages(self) -> u32 {
        (STAGE_LDS / self.stage_bytes()).clamp(2, MAX_STAGES)
    }
    /// Dynamic LDS per launch: the stages plus 1024 bytes of alignment slack.
    pub fn lds_bytes(self) -> u32 {
        self.stages() * self.stage_bytes() + 1024
    }
    /// Index in [`TILES`].
    pub fn index(self) -> usize {
        TILES.iter().position(|&t| t == self).unwrap_or(0)
    }
    /// Tiles (workgroups) of an `m` x `n` C.
    pub fn tiles(self, m: usize, n: usize) -> usize {
        m.div_ceil(self.c_rows() as usize) * n.div_ceil(self.c_cols() as usize)
    }
    /// The dispatcher's rule, from the H200 tile sweep (`tests/examples/gemm_bench.rs`, N =
    /// K = 8192; `bench/gemm-wgmma.md`): 128 x 256 when it makes at least 90% of
    /// [`FILL_TILES`] tiles of `m` x `n` (M = 512: 4 x 32 = 128 tiles, fastest there), else
    /// 128 x 128 for `m > 128`, or for `m > 64` where it makes at least [`FILL_TILES`]
    /// tiles, 64 x 96 for `m <= 128` where its tiles number [`narrow_fill`] to
    /// [`FILL_TILES`] (one wave over most SMs, no split: N = 8192 at M <= 64 makes 86,
    /// N = 5120 at M = 128 108), 128 x 64 for the other `m` in 65..=128 (twice the tiles of
    /// 128 x 128, so twice the SMs streaming B without a split: at M = 128 5-16% faster at
    /// N = 8192 and (4096, 14336), between 3% slower and 6% faster at 5120, 11-16% slower at
    /// 28672, where 128 x 128 makes 224 tiles; H200, session 16), else the swapped tile
    /// (small M is memory-bound: A's rows take 4 KiB of its 36 KiB stage, and four
    /// warpgroups each stream 64 rows of B through their own wgmma chain; M = 33..64 takes
    /// two tiles per 256 columns, which read the same B rows together, so the second read
    /// hits L2). The same rule for both kernels and every dtype.
    ///
    /// ```
    /// use fly_gemm::table::{Tile, TILES};
    /// assert_eq!(Tile::pick(4096, 8192), TILES[0]); // 32 x 32 tiles
    /// assert_eq!(Tile::pick(512, 8192), TILES[0]); // 4 x 32
    /// assert_eq!(Tile::pick(128, 8192), TILES[3]); // 128 tiles of 128 x 64
    /// assert_eq!(Tile::pick(128, 5120), TILES[4]); // 108 tiles of 64 x 96 (80 of 128 x 64)
    /// assert_eq!(Tile::pick(16, 8192), TILES[4]); // 86 tiles of 64 x 96
    /// assert_eq!(Tile::pick(16, 5120), TILES[2]); // 54 of 64 x 96: split swapped tiles
    /// assert_eq!(Tile::pick(128, 4096), TILES[3]); // 86 of 64 x 96 at two tile rows
    /// assert_eq!(Tile::pick(128, 28672), TILES[1]); // 224 of 128 x 128
    /// assert_eq!(Tile::pick(256, 8192), TILES[1]);
    /// ```
    pub fn pick(m: usize, n: usize) -> Tile {
        if TILES[0].tiles(m, n) * 10 >= FILL_TILES * 9 {
            TILES[0]
        } else if m > 128 || (m > 64 && TILES[1].tiles(m, n) >= FILL_TILES) {
            TILES[1]
        } else if (narrow_fill(m)..=FILL_TILES).contains(&TILES[4].tiles(m, n)) {
            TILES[4]
        } else if m > 64 {
            TILES[3]
        } else {
            TILES[2]
        }
    }
    /// [`Tile::pick`] for the scaled kernel with inputs `q`: fp8 takes 128 x 128 where the
    /// rule gives 128 x 256. Its stage sums are added into f32 in chunks of at most 128
    /// columns, each waited for (`kernels/wgmma_scaled.rs`), so the wide tile serializes two
    /// chunks per stage; on the H200 128 x 128 ran 7-8% faster at M = 512 and 1024 (780
    /// against 721 and 810 against 759 TFLOP/s, N = K = 8192; `bench/gemm-wgmma.md`,
    /// session 9). int8 keeps the rule.
    ///
    /// ```
    /// use fly_gemm::table::{Quant, Tile, TILES};
    /// assert_eq!(Tile::pick_scaled(Quant::Fp8, 4096, 8192), TILES[1]);
    /// assert_eq!(Tile::pick_scaled(Quant::Int8, 4096, 8192), TILES[0]);
    /// assert_eq!(Tile::pick_scaled(Quant::Fp8, 16, 5120), TILES[2]);
    /// ```
    pub fn pick_scaled(q: Quant, m: usize, n: usize) -> Tile {
        match Tile::pick(m, n) {
            t if t == TILES[0] && q != Quant::Int8 => TILES[1],
            t => t,
        }
    }
    /// The tile in kernel names: C's rows and columns per tile, `_swap` when swapped.
    pub fn dims(self) -> String {
        let swap = if self.swap_ab { "_swap" } else { "" };
        format!("m{}n{}{swap}", self.c_rows(), self.c_cols())
    }
    /// The kernel-name suffix (none for the first config).
    pub fn suffix(self) -> String {
        if self == TILES[0] {
            String::new()
        } else {
            format!("_{}", self.dims())
        }
    }
}

/// What a Hopper kernel writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Out {
    /// C = the epilogue of the accumulators, rounded once to the output dtype.
    C(Epilogue),
    /// One K split's f32 sums (scales, bias and activation not applied) into a workspace
    /// `[splits, m, n]`: the split is the workgroup's grid y and covers K stages
    /// `[y * kps, (y + 1) * kps)`; the split-K reduce (`kernels/splitk.rs`) finishes C.
    Partial,
}

/// The 16-bit Hopper kernel's split-K partial-sum form ([`Out::Partial`]) for `dt`, `tile`.
pub fn partial_kernel_name(dt: DType, tile: Tile) -> String {
    format!("gemm_wgmma_{}_partial_{}", dt.name(), tile.dims())
}

/// The 8-bit Hopper kernel's split-K partial-sum form for inputs `q` and `tile` (any output
/// dtype: it writes f32).
pub fn scaled_partial_kernel_name(q: Quant, tile: Tile) -> String {
    format!("gemm_wgmma_{}_partial_{}", q.name(), tile.dims())
}

/// The 8-bit partial kernels' dispatch key of (`q`, `tile`).
pub fn scaled_partial_key(q: Quant, tile: Tile) -> usize {
    tile.index() * Quant::WGMMA.len() + q.index()
}

/// The split-K reduce's name for output `out` and `epi`.
pub fn reduce_kernel_name(out: DType, epi: Epilogue) -> String {
    format!("gemm_splitk_reduce_{}_{}", out.name(), epi.name())
}

/// Threads per workgroup of the split-K reduce.
pub const REDUCE_THREADS: u32 = 256;
/// Adjacent columns per thread of the split-K reduce.
pub const REDUCE_VEC: u32 = 4;

/// The most K splits of one Hopper GEMM (the workspace holds `splits * m * n` f32).
pub const MAX_SPLITS: usize = 16;

/// K stages (of `bk` elements) each split keeps at least, so the pipeline fills before the
/// split's K runs out.
pub const MIN_SPLIT_STAGES: usize = 4;

/// Rows of B that one tile row of workgroups must stream at once to saturate the H200's
/// DRAM at small M: the session-12 split sweep (`bench/gemm-wgmma.md`) ran 128 x 8192 x
/// 8192 (64 tiles of 128 x 128: 8192 rows) fastest unsplit, and 4096 or 5120 rows fastest
/// split in two.
pub const SATURATING_ROWS: usize = 8192;

/// The dispatcher's K splits for `tile` at `m x n x k` with `bk`-element stages: 1 when the
/// tiles fill at least half the device ([`FILL_TILES`]); else enough splits to fill it, and
/// where all of M is one row of unswapped tiles (the memory-bound case: every workgroup
/// streams its own rows of B) no more than make [`SATURATING_ROWS`] rows of B in flight.
/// Each split keeps at least [`MIN_SPLIT_STAGES`] stages, at most [`MAX_SPLITS`] splits.
///
/// ```
/// use fly_gemm::table::{split_k, TILES, BK};
/// assert_eq!(split_k(TILES[1], 128, 4096, 14336, BK as usize), 2); // 4096 rows
/// assert_eq!(split_k(TILES[1], 128, 8192, 8192, BK as usize), 1); // 8192 rows
/// assert_eq!(split_k(TILES[1], 128, 28672, 4096, BK as usize), 1); // 224 tiles
/// assert_eq!(split_k(TILES[1], 1024, 1024, 8192, BK as usize), 2); // 64 tiles, 8 rows of them
/// assert_eq!(split_k(TILES[2], 1, 1024, 8192, BK as usize), 16); // 4 tiles
/// assert_eq!(split_k(TILES[2], 1, 8192, 8192, BK as usize), 4); // 32 tiles
/// assert_eq!(split_k(TILES[2], 16, 4096, 512, BK as usize), 2); // 8 stages of K
/// assert_eq!(split_k(TILES[2], 16, 64, 128, BK as usize), 1); // 2 stages
/// ```
pub fn split_k(tile: Tile, m: usize, n: usize, k: usize, bk: usize) -> usize {
    let tiles = tile.tiles(m, n).max(1);
    if tiles * 2 > FILL_TILES {
        return 1;
    }
    let by_k = k.div_ceil(bk.max(1)) / MIN_SPLIT_STAGES;
    let mut splits = FILL_TILES / tiles;
    if m <= tile.c_rows() as usize && !tile.swap_ab {
        splits = splits.min(SATURATING_ROWS.div_ceil(tiles * tile.c_cols() as usize));
    }
    splits.min(by_k).clamp(1, MAX_SPLITS)
}

/// K stages per split and the split count that `splits` requested splits make of `ktiles`
/// stages: every split gets `kps` stages but the last (at least one); fewer splits when
/// `splits` does not divide them so.
///
/// ```
/// assert_eq!(fly_gemm::table::split_stages(10, 4), (3, 4)); // 3 + 3 + 3 + 1
/// assert_eq!(fly_gemm::table::split_stages(9, 4), (3, 3));
/// ```
pub fn split_stages(ktiles: usize, splits: usize) -> (usize, usize) {
    let kps = ktiles.div_ceil(splits.max(1)).max(1);
    (kps, ktiles.div_ceil(kps).max(1))
}

/// The scaled Hopper kernel's name for input `q`, output `out`, `epi` and `tile`.
pub fn scaled_kernel_name(q: Quant, out: DType, epi: Epilogue, tile: Tile) -> String {
    format!(
        "gemm_wgmma_{}_{}_{}{}",
        q.name(),
        out.name(),
        epi.name(),
        tile.suffix()
    )
}

/// The scaled dispatch-table key of (`q`, `epi`, `tile`) (per output dtype); ascending in
/// the build script's declaration order.
pub fn scaled_key(q: Quant, epi: Epilogue, tile: Tile) -> usize {
    (tile.index() * Quant::WGMMA.len() + q.index()) * Epilogue::ALL.len() + epi.index()
}

/// K per pipeline stage of the 8-bit kernels (128 one-byte elements: one 128-byte swizzled
/// row, four k32 wgmmas).
pub const BK8: u32 = 128;
/// Pipeline stages of the 8-bit kernels' first (largest) config; every config's count is
/// [`Tile::stages`].
pub const STAGES8: u32 = 4;
/// LDS the pipeline stages of a Hopper GEMM config may take (192 KiB; sm_90 gives a
/// workgroup up to 227 KiB).
pub const STAGE_LDS: u32 = 192 * 1024;
/// The most pipeline stages of a Hopper GEMM config.
pub const MAX_STAGES: u32 = 12;
/// Dynamic LDS of the largest 8-bit config (197,632 bytes: within sm_90's 227 KiB).
///
/// ```
/// assert!(fly_gemm::table::LDS_BYTES8 <= 227 * 1024);
/// ```
pub const LDS_BYTES8: u32 = STAGES8 * (BM + BN) * BK8 + 1024;

// ---- portable GEMM (gemmport): the tile-layer kernel's configs and variants ----

/// How the portable kernel reads B (one kernel variant each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BRead {
    /// Plain row-major `[n, k]`, 128-bit vectors (needs `k % 8 == 0`: 16-byte rows).
    Plain,
    /// Plain row-major `[n, k]`, one element per access (any `k`; A is read the same way).
    PlainScalar,
    /// The preshuffled layout (`crate::preshuffle`), 128-bit vectors of one 16-byte chunk.
    Preshuffled,
}

impl BRead {
    /// Every variant, in key order.
    pub const ALL: [BRead; 3] = [BRead::Plain, BRead::PlainScalar, BRead::Preshuffled];
    /// Short name used in kernel names.
    pub fn name(self) -> &'static str {
        match self {
            BRead::Plain => "plain",
            BRead::PlainScalar => "plain_scalar",
            BRead::Preshuffled => "preshuffled",
        }
    }
}

/// One tile configuration of the portable GEMM: a `tile_m x tile_n` block tile of C,
/// `tile_k` of K per step (elements; a multiple of 32: whole 64-byte micro-steps of 16-bit
/// data), `lds_stage` LDS buffers (1: single stage, 2: ping-pong). Four waves per
/// workgroup, all along N (the reference's layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileConfig {
    /// Rows of C per workgroup (a multiple of 16).
    pub tile_m: u32,
    /// Columns of C per workgroup (a multiple of 64: four waves along N).
    pub tile_n: u32,
    /// K per pipeline step, in elements (a multiple of 32).
    pub tile_k: u32,
    /// LDS stages: 1 or 2.
    pub lds_stage: u32,
}

/// Waves per workgroup of the portable kernel (all along N).
pub const PORTABLE_WAVES: u32 = 4;

/// The portable kernel's config table. The first two serve every B layout on every
/// target: 16x128x128 single-stage (small M, decode; 36 KiB of LDS with B staged) and
/// 64x128x32 ping-pong (everything else; 24 KiB, two workgroups per CU on gfx942; 64x256
/// spills on the wave32 targets, whose 16x16 WMMA keeps 8 f32 per lane per atom). The last
/// two are the reference's preshuffle configs, 16x128x256 and 64x256x128 ping-pong, which
/// read preshuffled B global -> registers and stage only A ([`DIRECT_B_CONFIGS`]): they
/// exist for preshuffled B on the targets where that read works (the atom's B operand is
/// whole 16-byte K chunks, or K packs of them: gfx942, gfx950, gfx1250; gfx1201 for 8-bit
/// inputs), and other calls that pin them run as [`GENERAL_CONFIG`].
pub const PORTABLE_CONFIGS: [TileConfig; 4] = [
    TileConfig {
        tile_m: 16,
        tile_n: 128,
        tile_k: 128,
        lds_stage: 1,
    },
    TileConfig {
        tile_m: 64,
        tile_n: 128,
        tile_k: 32,
        lds_stage: 2,
    },
    TileConfig {
        tile_m: 16,
        tile_n: 128,
        tile_k: 256,
        lds_stage: 2,
    },
    TileConfig {
        tile_m: 64,
        tile_n: 256,
        tile_k: 128,
        lds_stage: 2,
    },
];

/// The portable kernel's 8-bit configs: the first two are [`PORTABLE_CONFIGS`]' with the
/// same bytes per K step (`tile_k` twice as many 1-byte elements), the same LDS and the same
/// roles; the last two the reference's fp8 preshuffle configs (16x128x256, 64x256x128
/// ping-pong; B global -> registers, [`DIRECT_B_CONFIGS`]).
pub const PORTABLE_CONFIGS8: [TileConfig; 4] = [
    TileConfig {
        tile_m: 16,
        tile_n: 128,
        tile_k: 256,
        lds_stage: 1,
    },
    TileConfig {
        tile_m: 64,
        tile_n: 128,
        tile_k: 64,
        lds_stage: 2,
    },
    TileConfig {
        tile_m: 16,
        tile_n: 128,
        tile_k: 256,
        lds_stage: 2,
    },
    TileConfig {
        tile_m: 64,
        tile_n: 256,
        tile_k: 128,
        lds_stage: 2,
    },
];

/// Indices (in both config tables) of the configs that exist only with preshuffled B read
/// global -> registers (see [`PORTABLE_CONFIGS`]).
pub const DIRECT_B_CONFIGS: [usize; 2] = [2, 3];

/// VGPRs (architectural plus accumulation) per lane the MFMA targets (`mfma`: gfx942,
/// gfx950) may give the 16 x 128 x 256 direct-B config, so that it keeps the reference's
/// occupancy (`amd-codeobject-anchors.md`: bf16 4 waves per SIMD, fp8 5; without a cap
/// LLVM alternates MFMA destinations over twice the accumulators): `512 / waves` rounded
/// down to the 8-register granule. The 64 x 256 x 128 config has none: capped at the
/// reference's 2 (bf16) or 3 (fp8) waves it spills (`bench/gemm-amd-static.md`). `None` for
/// every other config and target.
pub fn register_cap(ops: Operands, cfg: TileConfig, mfma: bool) -> Option<u32> {
    let ci = ops.configs().iter().position(|&c| c == cfg)?;
    if !mfma || ci != DIRECT_B_CONFIGS[0] {
        return None;
    }
    let waves = if ops.elem_bytes() == 2 { 4 } else { 5 };
    Some(512 / waves / 8 * 8)
}

/// The config that serves every B read on every target: what a call pinned to a config
/// without a variant for it runs as (the ping-pong 64 x 128 tile).
pub const GENERAL_CONFIG: usize = 1;

impl TileConfig {
    /// LDS bytes of one launch (A and B tiles of 2-byte elements, every stage).
    pub fn lds_bytes(&self) -> u32 {
        self.lds_bytes_of(2)
    }
    /// LDS bytes of one launch with `elem_bytes`-byte inputs (A and B tiles, every stage).
    pub fn lds_bytes_of(&self, elem_bytes: u32) -> u32 {
        (self.tile_m + self.tile_n) * self.tile_k * elem_bytes * self.lds_stage
    }
    /// The config's index in [`PORTABLE_CONFIGS`], if it is one.
    pub fn index(&self) -> Option<usize> {
        PORTABLE_CONFIGS.iter().position(|c| c == self)
    }
    /// The config's index in [`PORTABLE_CONFIGS8`], if it is one.
    pub fn index8(&self) -> Option<usize> {
        PORTABLE_CONFIGS8.iter().position(|c| c == self)
    }
    /// Short name used in kernel names, e.g. `16x128x128s1`.
    pub fn name(&self) -> String {
        format!(
            "{}x{}x{}s{}",
            self.tile_m, self.tile_n, self.tile_k, self.lds_stage
        )
    }
}

/// Config whose `PlainScalar` variant serves every `k % 8 != 0` with plain B: the scalar
/// copies of the 16x128x128 tile would not fit in registers (they spill on wave32).
pub const SCALAR_CONFIG: usize = 1;

/// Whether config `config` has a kernel for the B read `b` (see [`SCALAR_CONFIG`] and
/// [`DIRECT_B_CONFIGS`]; a direct-B config's kernels exist only on the targets that can
/// read B that way).
pub fn has_variant(config: usize, b: BRead) -> bool {
    if DIRECT_B_CONFIGS.contains(&config) {
        return b == BRead::Preshuffled;
    }
    b != BRead::PlainScalar || config == SCALAR_CONFIG
}

/// The portable kernel's dispatch key of (config index, B read).
pub fn portable_key(config: usize, b: BRead) -> usize {
    config * BRead::ALL.len() + BRead::ALL.iter().position(|&x| x == b).unwrap_or(0)
}

/// What a portable variant reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operands {
    /// A, B, bias and C of one 16-bit dtype (bf16, f16), f32 accumulation.
    Half(DType),
    /// 8-bit A and B, f32 `scale_a` `[m]` and `scale_b` `[n]`, bias and C of the 16-bit
    /// output dtype.
    Scaled(Quant, DType),
}

impl Operands {
    /// Bytes of one A or B element.
    pub fn elem_bytes(self) -> u32 {
        match self {
            Operands::Half(_) => 2,
            Operands::Scaled(..) => 1,
        }
    }
    /// The output (bias and C) dtype.
    pub fn out(self) -> DType {
        match self {
            Operands::Half(d) | Operands::Scaled(_, d) => d,
        }
    }
    /// The config table of these operands ([`PORTABLE_CONFIGS`] or [`PORTABLE_CONFIGS8`]).
    pub fn configs(self) -> [TileConfig; 4] {
        match self {
            Operands::Half(_) => PORTABLE_CONFIGS,
            Operands::Scaled(..) => PORTABLE_CONFIGS8,
        }
    }
    /// The targets with a kernel for these operands.
    pub fn targets(self) -> Vec<Target> {
        match self {
            Operands::Half(_) => Target::ALL.to_vec(),
            Operands::Scaled(q, _) => q.targets(),
        }
    }
}

/// The portable kernel's name for the operands, config and B read (16-bit:
/// `gemm_tile_bf16_...`; 8-bit: `gemm_tile_e4m3fn_bf16_...`).
pub fn portable_name(ops: Operands, cfg: TileConfig, b: BRead) -> String {
    match ops {
        Operands::Half(dt) => format!("gemm_tile_{}_{}_{}", dt.name(), cfg.name(), b.name()),
        Operands::Scaled(q, out) => format!(
            "gemm_tile_{}_{}_{}_{}",
            q.name(),
            out.name(),
            cfg.name(),
            b.name()
        ),
    }
}
// ---- end portable GEMM ----
