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
