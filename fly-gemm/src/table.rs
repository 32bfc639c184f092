//! What the build script and the library share: the epilogues, the kernel names and the
//! tiling of the Hopper kernel. Included by `build.rs` with `#[path]`, so it depends on
//! nothing but `crate::DType`.

use crate::DType;

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
/// Pipeline stages.
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
    /// OCP fp8 e4m3fn (`flydsl_rt::F8E4M3FN`), f32 accumulation.
    Fp8,
    /// Signed int8, exact s32 accumulation.
    Int8,
}

impl Quant {
    /// Every input type, in kernel-table order.
    pub const ALL: [Quant; 2] = [Quant::Fp8, Quant::Int8];
    /// Short name used in kernel names and errors.
    pub fn name(self) -> &'static str {
        match self {
            Quant::Fp8 => "e4m3fn",
            Quant::Int8 => "i8",
        }
    }
    /// Index in [`Quant::ALL`].
    pub fn index(self) -> usize {
        match self {
            Quant::Fp8 => 0,
            Quant::Int8 => 1,
        }
    }
}

/// The output dtypes of the scaled GEMM (bias and C).
pub const SCALED_OUT: [DType; 2] = [DType::BF16, DType::F16];

/// A tile config of the Hopper kernels (16-bit and 8-bit): `bm` rows (64 per consumer
/// warpgroup) by `bn` columns (the wgmma N) of C per workgroup. A pipeline stage is 128
/// bytes of K per tile row either way (`BK` 16-bit or `BK8` 8-bit elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Rows of C per workgroup: 64 (one warpgroup) or 128 (two).
    pub bm: u32,
    /// Columns of C per workgroup (a multiple of 8 in 8..=256).
    pub bn: u32,
}

/// The tile configs of both kernels, largest first: 128 x 256 for large grids, 128 x 128
/// and 64 x 64 to spread small-M (or small-N) GEMMs over more SMs. The dispatcher
/// ([`Tile::pick`]) takes the first that makes enough tiles.
pub const TILES: [Tile; 3] = [
    Tile { bm: 128, bn: 256 },
    Tile { bm: 128, bn: 128 },
    Tile { bm: 64, bn: 64 },
];

/// Workgroups that fill an H200 (its 132 SMs, one workgroup each: the large tile's LDS
/// allows one per SM).
pub const FILL_TILES: usize = 132;

impl Tile {
    /// Threads per workgroup: one warpgroup (128 threads) per 64 rows.
    pub fn threads(self) -> u32 {
        self.bm / 64 * 128
    }
    /// Bytes of one pipeline stage (A and B tiles: 128 bytes of K per row).
    pub fn stage_bytes(self) -> u32 {
        (self.bm + self.bn) * BK8
    }
    /// Pipeline stages (the same for both kernels).
    pub fn stages(self) -> u32 {
        STAGES8
    }
    /// Dynamic LDS per launch: the stages plus 1024 bytes of alignment slack.
    pub fn lds_bytes(self) -> u32 {
        STAGES8 * self.stage_bytes() + 1024
    }
    /// Index in [`TILES`].
    pub fn index(self) -> usize {
        TILES.iter().position(|&t| t == self).unwrap_or(0)
    }
    /// Tiles (workgroups) of an `m` x `n` C.
    pub fn tiles(self, m: usize, n: usize) -> usize {
        m.div_ceil(self.bm as usize) * n.div_ceil(self.bn as usize)
    }
    /// The dispatcher's rule: the largest config with at least [`FILL_TILES`] tiles of
    /// `m` x `n`, else the smallest (small M is memory-bound: more workgroups stream B
    /// faster than fewer, larger ones).
    ///
    /// ```
    /// use fly_gemm::table::{Tile, TILES};
    /// assert_eq!(Tile::pick(4096, 8192), TILES[0]); // 32 x 32 tiles
    /// assert_eq!(Tile::pick(512, 8192), TILES[1]); // 4 x 32 large tiles: too few
    /// assert_eq!(Tile::pick(16, 8192), TILES[2]);
    /// ```
    pub fn pick(m: usize, n: usize) -> Tile {
        TILES
            .into_iter()
            .find(|t| t.tiles(m, n) >= FILL_TILES)
            .unwrap_or(TILES[TILES.len() - 1])
    }
    /// The kernel-name suffix (none for the first config).
    pub fn suffix(self) -> String {
        if self == TILES[0] {
            String::new()
        } else {
            format!("_m{}n{}", self.bm, self.bn)
        }
    }
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
    (tile.index() * Quant::ALL.len() + q.index()) * Epilogue::ALL.len() + epi.index()
}

/// K per pipeline stage of the 8-bit kernels (128 one-byte elements: one 128-byte swizzled
/// row, four k32 wgmmas).
pub const BK8: u32 = 128;
/// Pipeline stages of the 8-bit kernels.
pub const STAGES8: u32 = 4;
/// Dynamic LDS of the largest 8-bit config (197,632 bytes: within sm_90's 227 KiB).
///
/// ```
/// assert!(fly_gemm::table::LDS_BYTES8 <= 227 * 1024);
/// ```
pub const LDS_BYTES8: u32 = STAGES8 * (BM + BN) * BK8 + 1024;
