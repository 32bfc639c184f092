//! The dispatcher: which kernel path and launch geometry serve a shape on a device.

use crate::config::{
    bwd_fast_spill_free, fast_max_block, fast_tiles, Dtype, Kind, Path, FWD_ROWS_TILES,
    GENERIC_THREADS, ROWS_BLOCK,
};
use flydsl_rt::LaunchConfig;

/// Most workgroups launched for row-looping kernels (they loop over further rows).
const MAX_GRID: usize = 1 << 20;

/// A chosen kernel path and its launch geometry.
///
/// ```
/// use fly_norm::{plan_forward, Dtype, Path};
/// // bf16 rows of 8192 on a wave64 device: one row per block, 4 tiles of 8 elements per thread.
/// let p = plan_forward(4096, 8192, Dtype::Bf16, false, 64, 304);
/// assert_eq!(p.path, Path::Fast(4));
/// assert_eq!(p.cfg.block, [256, 1, 1]);
/// // Odd rows take the generic path.
/// assert_eq!(plan_forward(8, 1021, Dtype::F32, false, 32, 132).path, Path::Generic);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The kernel path.
    pub path: Path,
    /// Grid and block.
    pub cfg: LaunchConfig,
    /// Lanes per row of the multi-row path (else 0).
    pub lanes: u32,
}

fn round_up(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}

fn grid(blocks: usize) -> u32 {
    blocks.clamp(1, MAX_GRID) as u32
}

/// The forward plan for `m` rows of `n` elements of `dt` (with the int8 quant output when
/// `quant`) on a device with waves of `wave` lanes and `cus` compute units (`m, n >= 1`).
///
/// Rows of a multiple of the 128-bit vector width go to the multi-row path when a row fits in
/// 4 vectors per lane of one wave, else to the fast path (one row per block, the smallest tile
/// count that keeps the block at <= 256 threads, else within the tile count's block cap);
/// everything else is generic.
pub fn plan_forward(m: usize, n: usize, dt: Dtype, quant: bool, wave: u32, cus: u32) -> Plan {
    let kind = if quant { Kind::FwdQuant } else { Kind::Fwd };
    let _ = cus;
    let ws = wave as usize;
    let vec = dt.vec() as usize;
    if n.checked_rem(vec) == Some(0) {
        let v = n / vec;
        if v <= FWD_ROWS_TILES[FWD_ROWS_TILES.len() - 1] as usize * ws {
            let t = FWD_ROWS_TILES
                .iter()
                .copied()
                .find(|&t| v <= t as usize * ws)
                .unwrap_or(1);
            let lanes = v.div_ceil(t as usize).next_power_of_two().min(ws);
            let block = (ROWS_BLOCK as usize).min(round_up(m * lanes, ws));
            let rows_per_block = block / lanes;
            return Plan {
                path: Path::Rows(t),
                cfg: LaunchConfig::linear(grid(m.div_ceil(rows_per_block)), block as u32),
                lanes: lanes as u32,
            };
        }
        for cap in [Some(256usize), None] {
            let fits = |t: u32| {
                v.div_ceil(t as usize) <= cap.unwrap_or(fast_max_block(kind, dt, t) as usize)
            };
            if let Some(t) = fast_tiles(kind).iter().copied().find(|&t| fits(t)) {
                let block = round_up(v.div_ceil(t as usize), ws);
                return Plan {
                    path: Path::Fast(t),
                    cfg: LaunchConfig::linear(grid(m), block as u32),
                    lanes: 0,
                };
            }
        }
    }
    Plan {
        path: Path::Generic,
        cfg: LaunchConfig::linear(grid(m), GENERIC_THREADS),
        lanes: 0,
    }
}

/// The backward plan: the fast path for vector-width rows, else generic. The fast path takes
/// the smallest tile count keeping the block at <= 256 threads, else within the tile count's
/// block cap, among the tile counts that run without register spills (at most 16 elements a
/// thread, see `bwd_fast_spill_free` in `kernels/config.rs`); only rows too long for those
/// take a spilling one. So 2-byte rows of 4096 < n <= 8192 take 2 tiles in blocks of up
/// to 512 threads rather than 4 tiles (32 elements a thread) in blocks of <= 256.
///
/// The grid is persistent (each block loops over rows, accumulating its weight-gradient
/// columns in registers) and every block writes one f32 partial row per weight gradient, which
/// the column-sum kernel then reads: so the grid is kept small, just enough blocks per compute
/// unit to keep about 64 KiB of `x` and `dy` loads in flight per unit (at least 1, at most 4,
/// and within 2048 threads per unit), and the rows are split evenly over it. A block of more
/// than 256 threads counts as a whole unit: its kernel's 512-thread launch bound lets a thread
/// take 128 registers (sm_90; 256 VGPRs on AMD), so a second such block need not fit, and the
/// extra blocks would only run after the first ones, each adding a partial row.
///
/// ```
/// use fly_norm::{plan_backward, Dtype, Path};
/// let p = plan_backward(32768, 8192, Dtype::Bf16, 32, 132);
/// assert_eq!(p.path, Path::Fast(2));
/// assert_eq!(p.cfg.block, [512, 1, 1]);
/// // 1 block per SM, the rows split evenly: 249 per block.
/// assert_eq!(p.cfg.grid, [132, 1, 1]);
/// let p = plan_backward(4096, 8192, Dtype::Bf16, 32, 132);
/// assert_eq!(p.cfg.grid, [128, 1, 1]); // 32 rows per block
/// // f32 rows of 8192: 4 tiles of 4 elements (spill-free), 512 threads, 1 block per SM.
/// let p = plan_backward(4096, 8192, Dtype::F32, 32, 132);
/// assert_eq!((p.path, p.cfg.block, p.cfg.grid), (Path::Fast(4), [512, 1, 1], [128, 1, 1]));
/// // 2 tiles in 256 threads: 4 blocks per SM (16 KiB of loads per block row).
/// let p = plan_backward(32768, 4096, Dtype::Bf16, 32, 132);
/// assert_eq!((p.path, p.cfg.block, p.cfg.grid), (Path::Fast(2), [256, 1, 1], [521, 1, 1]));
/// // 2-byte rows past 8192 take the (spilling) 4-tile kernel.
/// assert_eq!(plan_backward(4096, 16384, Dtype::Bf16, 32, 132).path, Path::Fast(4));
/// ```
pub fn plan_backward(m: usize, n: usize, dt: Dtype, wave: u32, cus: u32) -> Plan {
    let ws = wave as usize;
    let vec = dt.vec() as usize;
    let elem = dt.bytes() as usize;
    // Blocks per compute unit for a block whose row step loads `row_bytes` (x and dy).
    let persistent = |block: usize, row_bytes: usize| {
        let per_cu = (64 * 1024usize)
            .div_ceil(row_bytes.max(1))
            .clamp(1, 4)
            .min((2048 / block).max(1));
        let per_cu = if block > 256 { 1 } else { per_cu };
        let target = m.min(cus.max(1) as usize * per_cu).max(1);
        // Even split: the fewest blocks that give every block the same number of rows.
        grid(m.div_ceil(m.div_ceil(target)))
    };
    if n.checked_rem(vec) == Some(0) {
        let v = n / vec;
        // (block cap, spill-free tile counts only), in order of preference.
        for (cap, spill_free) in [(Some(256usize), true), (None, true), (None, false)] {
            let fits = |t: u32| {
                (!spill_free || bwd_fast_spill_free(dt, t))
                    && v.div_ceil(t as usize)
                        <= cap.unwrap_or(fast_max_block(Kind::Bwd, dt, t) as usize)
            };
            if let Some(t) = fast_tiles(Kind::Bwd).iter().copied().find(|&t| fits(t)) {
                let block = round_up(v.div_ceil(t as usize), ws);
                return Plan {
                    path: Path::Fast(t),
                    cfg: LaunchConfig::linear(
                        persistent(block, 2 * block * t as usize * 16),
                        block as u32,
                    ),
                    lanes: 0,
                };
            }
        }
    }
    let b = GENERIC_THREADS as usize;
    Plan {
        path: Path::Generic,
        cfg: LaunchConfig::linear(persistent(b, 2 * b * elem), GENERIC_THREADS),
        lanes: 0,
    }
}
