//! What the build script and the library share: the tiling of the portable kernel, the
//! head-dimension variants and the kernel names. Included by `build.rs` with `#[path]`, so
//! it depends on nothing but `crate::DType`.

use crate::{DType, Target};

/// The dtypes with a kernel: q, k, v and out share it.
pub const DTYPES: [DType; 2] = [DType::BF16, DType::F16];

/// Query rows per workgroup of the portable kernel (4 waves of one 16-row atom each).
pub const BM: usize = 64;
/// Keys per K/V tile of the portable kernel.
pub const BN: usize = 32;
/// Waves per workgroup (stacked along the query rows).
pub const WAVES: u32 = 4;

/// The compiled head-dimension tiles. A call with head dim `d` (a multiple of 32, at most
/// 256) runs the smallest tile `>= d`; the columns past `d` read zeros and are never
/// stored (so D = 32 runs the 64 tile, 96 the 128 tile, 160 / 192 / 224 the 256 tile).
pub const HEAD_TILES: [usize; 3] = [64, 128, 256];

/// The head-dimension tile of head dim `d`, if one exists.
pub fn head_tile(d: usize) -> Option<usize> {
    if d == 0 || !d.is_multiple_of(32) {
        return None;
    }
    HEAD_TILES.iter().copied().find(|&t| t >= d)
}

/// The portable forward kernel's name for `dt` and head tile `dp`.
pub fn fwd_name(dt: DType, dp: usize) -> String {
    format!("attn_fwd_{}_d{dp}", dt.name())
}

/// The portable forward kernel's name for fp8 e4m3fn q, k, v (with descales, bf16 out) and
/// head tile `dp`.
///
/// ```
/// assert_eq!(fly_attn::table::fwd_fp8_name(128), "attn_fwd_e4m3fn_bf16_d128");
/// ```
pub fn fwd_fp8_name(dp: usize) -> String {
    format!("attn_fwd_e4m3fn_bf16_d{dp}")
}

/// The split-K combine kernel's name for the output dtype `dt`.
pub fn combine_name(dt: DType) -> String {
    format!("attn_combine_{}", dt.name())
}

/// Threads of the combine kernel (one workgroup per (query row, head), looping over D).
pub const COMBINE_THREADS: u32 = 64;

/// Most key splits (the combine kernel's per-split loop and the workspace bound).
pub const MAX_SPLITS: usize = 64;

/// Workgroups that share one query tile's output columns: 2 for the 256-column tile on
/// gfx1201 (its 256 VGPRs cannot hold a 16 x 256 f32 accumulator per wave next to the
/// rest: each pass recomputes S and keeps half of O), else 1. The grid's x extent is
/// `q tiles * passes`.
pub fn o_passes(target: Target, dp: usize) -> u32 {
    if target == Target::Gfx1201 && dp > 128 {
        2
    } else {
        1
    }
}

/// The head dims of the Hopper kernel (`kernels/wgmma.rs`): compiled exactly, no padding
/// (a TMA box covers 64 columns of one head and the stores write every column).
pub const HOPPER_HEAD_DIMS: [usize; 3] = [64, 128, 256];

/// TMA box width of the Hopper kernel (elements): one 128-byte swizzled row of a 16-bit type.
pub const HOPPER_BOX_D: u32 = 64;

/// Longest `seqlen_q` and `seqlen_kv` the Hopper kernel takes: its query-row and key
/// positions (TMA coordinates, tile bounds, the causal diagonal) are i32 expressions that
/// reach a sequence length plus a few tiles.
pub const HOPPER_MAX_SEQLEN: usize = (1 << 31) - (1 << 16);

/// The tiling of the Hopper kernel for one head dim (one of [`HOPPER_HEAD_DIMS`]).
///
/// ```
/// use fly_attn::table::HopperTile;
/// let t = HopperTile::of(64).unwrap();
/// assert_eq!((t.warpgroups(), t.block_m(), t.threads()), (3, 192, 384));
/// let t = HopperTile::of(128).unwrap();
/// assert_eq!((t.warpgroups(), t.block_m(), t.threads()), (2, 128, 256));
/// assert_eq!(HopperTile::of(256).unwrap().block_n(), 64);
/// assert!(HopperTile::of(96).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HopperTile {
    head_dim: u32,
}

impl HopperTile {
    /// The tile of head dim `d`, if the Hopper kernel is compiled for it.
    pub fn of(d: usize) -> Option<HopperTile> {
        HOPPER_HEAD_DIMS
            .contains(&d)
            .then_some(HopperTile { head_dim: d as u32 })
    }

    /// The head dim.
    pub fn head_dim(self) -> u32 {
        self.head_dim
    }

    /// Consumer warpgroups (64 query rows each) per workgroup: three for `D = 64` (as FA3
    /// does: S, O and P fit in 168 registers), two for `D = 128` and `256`.
    pub fn warpgroups(self) -> u32 {
        if self.head_dim == 64 {
            3
        } else {
            2
        }
    }

    /// Query rows per workgroup: 64 per warpgroup.
    pub fn block_m(self) -> u32 {
        64 * self.warpgroups()
    }

    /// Threads per workgroup: 128 per warpgroup.
    pub fn threads(self) -> u32 {
        128 * self.warpgroups()
    }

    /// Keys per K/V tile: 128, or 64 for `D = 256` (its O accumulator takes 128 registers).
    pub fn block_n(self) -> u32 {
        if self.head_dim == 256 {
            64
        } else {
            128
        }
    }

    /// K/V pipeline stages: 3, or 2 for `D = 256` (what fits in 227 KiB of LDS).
    pub fn stages(self) -> u32 {
        if self.head_dim == 256 {
            2
        } else {
            3
        }
    }

    /// Dynamic LDS bytes: the Q tile and [`HopperTile::stages`] K and V tiles, plus 1024
    /// bytes of alignment slack (the tiles are 1024-byte aligned for the 128-byte swizzle).
    ///
    /// ```
    /// use fly_attn::table::HopperTile;
    /// let b = |d| HopperTile::of(d).unwrap().lds_bytes();
    /// assert_eq!(b(128), (128 + 6 * 128) * 128 * 2 + 1024); // 225 KiB: fits 227 KiB
    /// assert_eq!(b(64), (192 + 6 * 128) * 64 * 2 + 1024);
    /// assert_eq!(b(256), (128 + 4 * 64) * 256 * 2 + 1024);
    /// ```
    pub fn lds_bytes(self) -> u32 {
        (self.block_m() + 2 * self.stages() * self.block_n()) * self.head_dim * 2 + 1024
    }

    /// The launch grid `[ceil(seqlen_q / block_m), heads_q, batch]`.
    ///
    /// ```
    /// use fly_attn::table::HopperTile;
    /// assert_eq!(HopperTile::of(128).unwrap().grid(2, 129, 16), [2, 16, 2]);
    /// assert_eq!(HopperTile::of(64).unwrap().grid(2, 129, 16), [1, 16, 2]);
    /// ```
    pub fn grid(self, batch: u32, seqlen_q: u32, heads_q: u32) -> [u32; 3] {
        [seqlen_q.div_ceil(self.block_m()), heads_q, batch]
    }
}

/// Tensor-map shape `(dims, strides, boxes)` (innermost first, element strides) of the
/// Hopper kernel's 128-byte swizzled TMA maps over a BSHD tensor `[b, s, h, d]`; `rows` is
/// the box's row count ([`HopperTile::block_m`] for q, [`HopperTile::block_n`] for k and
/// v). TMA zero-fills rows past `s`.
///
/// ```
/// use fly_attn::table::hopper_map_dims;
/// let (dims, strides, boxes) = hopper_map_dims(2, 100, 8, 128, 128);
/// assert_eq!(dims, [128, 8, 100, 2]);
/// assert_eq!(strides, [128, 8 * 128, 100 * 8 * 128]);
/// assert_eq!(boxes, [64, 1, 128, 1]);
/// ```
pub fn hopper_map_dims(
    b: u64,
    s: u64,
    h: u64,
    d: u64,
    rows: u32,
) -> ([u64; 4], [u64; 3], [u32; 4]) {
    (
        [d, h, s, b],
        [d, h * d, s * h * d],
        [HOPPER_BOX_D, 1, rows, 1],
    )
}

/// The Hopper kernel's name for `dt`, head dim `d` and the mask.
///
/// ```
/// use fly_attn::{table::hopper_name, DType};
/// assert_eq!(hopper_name(DType::BF16, 128, true), "attn_wgmma_bf16_d128_causal");
/// ```
pub fn hopper_name(dt: DType, d: usize, causal: bool) -> String {
    format!(
        "attn_wgmma_{}_d{d}_{}",
        dt.name(),
        if causal { "causal" } else { "full" }
    )
}

/// The Hopper dispatch table's key of head dim `d` and the mask.
pub fn hopper_key(d: usize, causal: bool) -> usize {
    2 * d + usize::from(causal)
}

/// Waves per workgroup of the decode kernel (`kernels/decode.rs`).
pub const DECODE_WAVES: u32 = 4;

/// The decode kernel's compiled row blocks: query rows (query heads of one kv head times
/// query positions) per workgroup. A call with `rows = seqlen_q * heads_q / heads_kv` runs
/// the smallest block `>= rows`, or groups of 8 when more ([`decode_rows`]).
pub const DECODE_ROW_BLOCKS: [usize; 3] = [1, 4, 8];

/// The row block and the number of row groups (workgroups per kv head and split) of a
/// decode call with `rows` query rows per kv head.
///
/// ```
/// use fly_attn::table::decode_rows;
/// assert_eq!(decode_rows(1), (1, 1));
/// assert_eq!(decode_rows(3), (4, 1));
/// assert_eq!(decode_rows(8), (8, 1));
/// assert_eq!(decode_rows(17), (8, 3));
/// ```
pub fn decode_rows(rows: usize) -> (usize, usize) {
    let big = DECODE_ROW_BLOCKS[DECODE_ROW_BLOCKS.len() - 1];
    match DECODE_ROW_BLOCKS.iter().copied().find(|&b| b >= rows) {
        Some(b) => (b, 1),
        None => (big, rows.div_ceil(big)),
    }
}

/// The decode kernel's name for `dt`, head tile `dp` and row block `rb`.
///
/// ```
/// use fly_attn::{table::decode_name, DType};
/// assert_eq!(decode_name(DType::BF16, 128, 4), "attn_decode_bf16_d128_r4");
/// ```
pub fn decode_name(dt: DType, dp: usize, rb: usize) -> String {
    format!("attn_decode_{}_d{dp}_r{rb}", dt.name())
}

/// The decode dispatch table's key of head tile `dp` and row block `rb`.
pub fn decode_key(dp: usize, rb: usize) -> usize {
    16 * dp + rb
}
