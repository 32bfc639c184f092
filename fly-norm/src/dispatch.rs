//! The dispatcher: which kernel path and launch geometry serve a shape on a device.

use crate::config::{
    bwd_fast_spill_free, fast_max_block, fast_tiles, fwd_fast_tiles, ragged_slots, DType, Kind,
    Norm, Path, FWD_ROWS_TILES, GENERIC_THREADS, ROWS_BLOCK,
};
/// Activations of more than this many bytes are read with the keep-in-L2 hint (see
/// [`plan_forward`] and [`flydsl_rt::hints`]).
pub use flydsl_rt::hints::KEEP_L2_MIN_BYTES;
use flydsl_rt::LaunchConfig;

/// Most workgroups launched for row-looping kernels (they loop over further rows).
const MAX_GRID: usize = crate::config::MAX_GRID as usize;

/// A chosen kernel path and its launch geometry.
///
/// ```
/// use fly_norm::{plan_forward, DType, Norm, Path};
/// // bf16 rows of 8192 on a wave64 device: one row per block, 4 tiles of 8 elements per thread.
/// let p = plan_forward(Norm::Rms, 4096, 8192, DType::BF16, false, 64, 304);
/// assert_eq!(p.path, Path::Fast(4));
/// assert_eq!(p.cfg.block, [256, 1, 1]);
/// // Odd rows take the ragged paths: 1021 f32 elements span up to 256 vectors, 2 tiles each
/// // in 128 threads.
/// let p = plan_forward(Norm::Rms, 8, 1021, DType::F32, false, 32, 132);
/// assert_eq!((p.path, p.cfg.block), (Path::FastRagged(2), [128, 1, 1]));
/// // Short odd rows: 125 f32 elements, up to 32 vectors: 32 lanes a row, 1 tile each.
/// let p = plan_forward(Norm::Rms, 8, 125, DType::F32, false, 32, 132);
/// assert_eq!((p.path, p.lanes), (Path::RowsRagged(1), 32));
/// // 2-byte rows of 4096: 4 tiles in 128 threads, read with the keep-in-L2 hint (256 MiB).
/// let p = plan_forward(Norm::Rms, 32768, 4096, DType::BF16, false, 32, 132);
/// assert_eq!((p.path, p.cfg.block, p.keep_l2), (Path::Fast(4), [128, 1, 1], true));
/// // Few rows: at most 32 blocks per compute unit, each looping over its rows.
/// let p = plan_forward(Norm::Rms, 8192, 2048, DType::BF16, false, 32, 132);
/// assert_eq!((p.path, p.cfg.grid, p.keep_l2), (Path::Fast(2), [4224, 1, 1], false));
/// // Short rows: one wave per row, blocks of 2 waves.
/// let p = plan_forward(Norm::Rms, 65536, 1024, DType::BF16, false, 32, 132);
/// assert_eq!((p.path, p.cfg.block, p.lanes), (Path::Rows(4), [64, 1, 1], 32));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The kernel path.
    pub path: Path,
    /// Grid and block.
    pub cfg: LaunchConfig,
    /// Lanes per row of the multi-row path (else 0).
    pub lanes: u32,
    /// Whether the vectorised paths read `x` and the residual with the keep-in-L2 hint
    /// (NVIDIA only; AMD kernels ignore it). A hint: it changes speed, never results.
    pub keep_l2: bool,
}

fn round_up(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}

/// `n % d == 0` (`usize::is_multiple_of` needs Rust 1.87; the workspace's MSRV is 1.85).
#[allow(clippy::manual_is_multiple_of)]
fn multiple_of(n: usize, d: usize) -> bool {
    n % d == 0
}

fn grid(blocks: usize) -> u32 {
    blocks.clamp(1, MAX_GRID) as u32
}

/// The multi-row plan for `m` rows with `t` tiles a lane and `lanes` lanes a row, in blocks
/// of at most `cap` threads (and the kernel's [`ROWS_BLOCK`]), no more than the rows need.
fn rows_plan(m: usize, t: u32, lanes: usize, cap: usize, ws: usize) -> Plan {
    let block = cap
        .min(ROWS_BLOCK as usize)
        .min(round_up(m.max(1) * lanes, ws));
    Plan {
        path: Path::Rows(t),
        cfg: LaunchConfig::linear(grid(m.div_ceil(block / lanes)), block as u32),
        lanes: lanes as u32,
        keep_l2: false,
    }
}

/// The forward plan for `m` rows of `n` elements of `dt` (with the int8 quant output when
/// `quant`) on a device with waves of `wave` lanes and `cus` compute units (`m, n >= 1`).
///
/// Rows of a multiple of the 128-bit vector width go to the multi-row path when a row fits in
/// 4 vectors per lane of one wave, else to the fast path (one row per block, the smallest tile
/// count that keeps the block at <= 256 threads, else within the tile count's block cap).
/// Other rows take the same rule on the ragged paths ([`Path::RowsRagged`],
/// [`Path::FastRagged`]) with the row's [`ragged_slots`](crate::ragged_slots) for its vectors
/// (one more than an aligned row of the same length may need): they read each row once, in
/// 128-bit vectors but for its partial first and last ones, where the generic path reads
/// it two or three times by elements (31-60% of copy bandwidth on the H200,
/// `bench/fly-norm-dispatch.md`). Rows too long for the fast paths are generic.
///
/// The quant forward takes its 8-tile kernels (which compute `y` twice rather than keep it
/// across the amax reduction) only for rows that 4 tiles in 512 threads cannot hold: f32
/// rows past 8192 and 2-byte rows past 16384 elements (up to 16384 and 32768), which
/// otherwise went generic (35% of copy at f32 4096 x 14336 on the H200,
/// `bench/h200-table.md`); shorter rows keep the measured 2- and 4-tile choices.
///
/// ```
/// use fly_norm::{plan_forward, DType, Norm, Path};
/// let p = plan_forward(Norm::Rms, 4096, 14336, DType::F32, true, 32, 132);
/// assert_eq!((p.path, p.cfg.block[0]), (Path::Fast(8), 448));
/// let p = plan_forward(Norm::Rms, 4096, 14336, DType::BF16, true, 32, 132);
/// assert_eq!((p.path, p.cfg.block[0]), (Path::Fast(4), 448));
/// ```
///
/// Three choices of the plain forward (not the quant one) on wave32 devices come from the H200
/// sweep (`examples/fwd_sweep.rs`, every plan timed on the same inputs; the measurements are in
/// `bench/fly-norm-dispatch.md`); wave64 devices, where they are unmeasured, keep the rule
/// above:
/// - the multi-row path runs blocks of 2 waves rather than 256 threads;
/// - 2-byte rows of 257..=512 vectors (2049..=4096 elements) take the tile count that keeps
///   the block at <= 128 threads;
/// - the fast path's grid stops at 32 blocks per compute unit (each block loops over its rows)
///   when there are at most 64 rows per compute unit; with more rows, one row per block.
///
/// Activations of more than [`KEEP_L2_MIN_BYTES`] are read with the keep-in-L2 hint
/// ([`Plan::keep_l2`]): it pays from 256 MiB of `x` and is within noise at 128 MiB and less
/// (`bench/fly-norm-dispatch.md`).
///
/// ```
/// use fly_norm::{plan_forward, DType, Norm, KEEP_L2_MIN_BYTES};
/// let rows = KEEP_L2_MIN_BYTES / (4096 * 2); // bf16 rows of 4096: exactly the threshold
/// assert!(!plan_forward(Norm::Rms, rows, 4096, DType::BF16, false, 32, 132).keep_l2);
/// assert!(plan_forward(Norm::Rms, rows + 1, 4096, DType::BF16, false, 32, 132).keep_l2);
/// ```
///
/// ```
/// use fly_norm::{plan_forward, DType, Norm, Path};
/// // f32 rows of 8192 on the H200 (wave32, 132 SMs): 8 tiles of 4 in 256 threads.
/// let p = plan_forward(Norm::Rms, 4096, 8192, DType::F32, false, 32, 132);
/// assert_eq!((p.path, p.cfg.block[0], p.keep_l2), (Path::Fast(8), 256, false));
/// // Rows that are not a multiple of the vector width: the ragged paths, generic when too long.
/// assert_eq!(plan_forward(Norm::Rms, 4, 4000, DType::BF16, true, 64, 304).path, Path::Fast(2));
/// assert_eq!(plan_forward(Norm::Rms, 4, 4001, DType::BF16, true, 64, 304).path, Path::FastRagged(2));
/// assert_eq!(plan_forward(Norm::Rms, 4, 32769, DType::BF16, true, 64, 304).path, Path::Generic);
/// ```
///
/// LayerNorm's plain forward of 2-byte rows on wave32 devices (NVIDIA) takes the most tiles
/// per thread whose block still fills a wave (8, then 4), fast path even for rows of 1024
/// that would go to the multi-row path: its accurate variance costs more instructions per
/// element, and fewer, longer threads win back issue slots (the H200 sweep behind it:
/// `bench/fly-norm-dispatch.md`).
///
/// ```
/// use fly_norm::{plan_forward, DType, Norm, Path};
/// let p = plan_forward(Norm::Layer, 32768, 8192, DType::BF16, false, 32, 132);
/// assert_eq!((p.path, p.cfg.block[0]), (Path::Fast(8), 128));
/// let p = plan_forward(Norm::Layer, 65536, 1024, DType::BF16, false, 32, 132);
/// assert_eq!((p.path, p.cfg.block[0]), (Path::Fast(4), 32));
/// // RMSNorm keeps the general rule.
/// let p = plan_forward(Norm::Rms, 32768, 8192, DType::BF16, false, 32, 132);
/// assert_eq!((p.path, p.cfg.block[0]), (Path::Fast(4), 256));
/// ```
pub fn plan_forward(
    norm: Norm,
    m: usize,
    n: usize,
    dt: DType,
    quant: bool,
    wave: u32,
    cus: u32,
) -> Plan {
    let path = layer_long_tiles(norm, m, n, dt, quant, wave, cus)
        .unwrap_or_else(|| plan_forward_path(m, n, dt, quant, wave, cus));
    Plan {
        keep_l2: keeps_l2(m, n, dt),
        ..path
    }
}

/// LayerNorm's 2-byte plain forward on wave32 (see [`plan_forward`]): the fast path with 8
/// tiles when that leaves at least one wave a row, else 4 (rows of 1024 to 16384 2-byte
/// elements); `None` for everything else.
fn layer_long_tiles(
    norm: Norm,
    m: usize,
    n: usize,
    dt: DType,
    quant: bool,
    wave: u32,
    cus: u32,
) -> Option<Plan> {
    let (ws, vec) = (wave as usize, dt.vec() as usize);
    if norm != Norm::Layer || quant || ws != 32 || dt.bytes() != 2 || !multiple_of(n, vec) {
        return None;
    }
    let v = n / vec;
    let t = [8u32, 4]
        .into_iter()
        .find(|&t| v >= t as usize * ws && v.div_ceil(t as usize) <= 256)?;
    let block = round_up(v.div_ceil(t as usize), ws);
    let cus = cus.max(1) as usize;
    let blocks = if m <= 64 * cus { m.min(32 * cus) } else { m };
    Some(Plan {
        path: Path::Fast(t),
        cfg: LaunchConfig::linear(grid(blocks), block as u32),
        lanes: 0,
        keep_l2: false,
    })
}

/// Whether the dispatcher reads `m x n` activations of `dt` with the keep-in-L2 hint.
fn keeps_l2(m: usize, n: usize, dt: DType) -> bool {
    m.saturating_mul(n).saturating_mul(dt.bytes() as usize) > KEEP_L2_MIN_BYTES
}

/// A path constructor from a tile count (`Path::Fast`, ...).
type PathOf = fn(u32) -> Path;

/// The vectors a forward row of `n` elements needs and its (fast, multi-row) paths: the
/// aligned ones for rows of a multiple of the vector width `vec`, else the ragged ones
/// ([`ragged_slots`] vectors).
fn row_shape(n: usize, vec: usize) -> (usize, PathOf, PathOf) {
    if multiple_of(n, vec) {
        (n / vec, Path::Fast, Path::Rows)
    } else {
        (ragged_slots(n, vec), Path::FastRagged, Path::RowsRagged)
    }
}

/// [`plan_forward`]'s path and geometry.
fn plan_forward_path(m: usize, n: usize, dt: DType, quant: bool, wave: u32, cus: u32) -> Plan {
    let kind = if quant {
        Kind::ForwardQuant
    } else {
        Kind::Forward
    };
    let ws = wave as usize;
    let vec = dt.vec() as usize;
    let (v, fast, rows) = row_shape(n, vec);
    if v <= FWD_ROWS_TILES[FWD_ROWS_TILES.len() - 1] as usize * ws {
        let t = FWD_ROWS_TILES
            .iter()
            .copied()
            .find(|&t| v <= t as usize * ws)
            .unwrap_or(1);
        let lanes = v.div_ceil(t as usize).next_power_of_two().min(ws);
        let cap = if quant || ws != 32 {
            ROWS_BLOCK as usize
        } else {
            2 * ws
        };
        return Plan {
            path: rows(t),
            ..rows_plan(m, t, lanes, cap, ws)
        };
    }
    let small_block = !quant && ws == 32 && dt.bytes() == 2 && (257..=512).contains(&v);
    let caps = if small_block {
        &[Some(128usize), Some(256), None][..]
    } else {
        &[Some(256), None][..]
    };
    // The quant forward's 8 tiles (which compute `y` twice, `quant_recomputes`) only for the
    // rows that its 2 and 4 tiles cannot hold: the tile counts in two tiers, each tier
    // through every cap.
    let tiles = fwd_fast_tiles(kind, dt, !multiple_of(n, vec));
    let split = tiles.iter().position(|&t| t == 8).unwrap_or(tiles.len());
    let tiers: [&[u32]; 2] = match quant {
        true => [&tiles[..split], &tiles[split..]],
        false => [tiles, &[]],
    };
    for (ts, &cap) in tiers
        .into_iter()
        .flat_map(|ts| caps.iter().map(move |c| (ts, c)))
    {
        let fits =
            |t: u32| v.div_ceil(t as usize) <= cap.unwrap_or(fast_max_block(kind, dt, t) as usize);
        if let Some(t) = ts.iter().copied().find(|&t| fits(t)) {
            let block = round_up(v.div_ceil(t as usize), ws);
            let cus = cus.max(1) as usize;
            let blocks = if !quant && ws == 32 && m <= 64 * cus {
                m.min(32 * cus)
            } else {
                m
            };
            return Plan {
                path: fast(t),
                cfg: LaunchConfig::linear(grid(blocks), block as u32),
                lanes: 0,
                keep_l2: false,
            };
        }
    }
    Plan {
        path: Path::Generic,
        cfg: LaunchConfig::linear(grid(m), GENERIC_THREADS),
        lanes: 0,
        keep_l2: false,
    }
}

/// The backward plan for `m` rows of `n` elements of `dt` on a device with waves of `wave`
/// lanes and `cus` compute units (`m, n >= 1`). The rules, each with its reason:
///
/// 1. **The fast path for every `n` it can hold**, ragged or not (a block keeps its columns'
///    weight-gradient partials in registers over all its rows, so the weight-gradient
///    reduction costs one partial row per block, whatever `m`). Rows that are not a
///    multiple of the vector width run the same kernels with element-wise loads (their row
///    starts are not 16-byte aligned; see `kernels/bwd.rs`): the generic path's per-element
///    read-modify-write of the partials (or per-element atomics) is far slower.
/// 2. **Tile count**: the smallest one keeping the block at <= 256 threads among the
///    row-resident tile counts (at most 16 elements a thread, `bwd_fast_resident` in
///    `kernels/config.rs`), else the smallest row-resident one within its block cap (2-byte
///    rows of 4096 < n <= 8192: 2 tiles in blocks of up to 512 threads), else the smallest
///    row-streaming one that is built (`bwd_fast_spill_free`): rows too long to stay in
///    registers are read twice, the second time from L2, so that only the partials stay
///    live. Fewer elements a thread in larger blocks keep more loads in flight per register.
/// 3. **Generic** only for rows no built fast kernel holds (`bwd_fast_spill_free`):
///    LayerNorm rows of more than 16384 2-byte or f32 elements, RMSNorm rows of more than
///    32768 2-byte / 16384 f32 elements; ragged rows: LayerNorm past 16384 2-byte / 8192 f32
///    elements, RMSNorm past 16384 2-byte / 16384 f32 elements. Ragged rows take the same
///    plan as aligned rows of the same vector count wherever their kernel is built.
/// 4. **Persistent grid**: every block writes one f32 partial row per weight gradient, which
///    the column-sum kernel then reads; so the grid is kept small, just enough blocks per
///    compute unit to keep about 64 KiB of `x` and `dy` loads in flight per unit (at least
///    1, at most 4, and within 2048 threads per unit), and the rows are split evenly over it.
///    A block of more than 256 threads counts as a whole unit: its kernel's 512-thread launch
///    bound lets a thread take 128 registers (sm_90; 256 VGPRs on AMD), so a second such
///    block need not fit, and the extra blocks would only run after the first ones, each
///    adding a partial row.
///
/// (At (4096, 16384) bf16 the earlier spilling 4-tile kernel ran LayerNorm at 670 GB/s and a
/// generic path with 128-bit loads at 213: `bench/fly-norm-dispatch.md`.)
///
/// ```
/// use fly_norm::{plan_backward, DType, Norm, Path};
/// let p = plan_backward(Norm::Rms, 32768, 8192, DType::BF16, 32, 132);
/// assert_eq!(p.path, Path::Fast(2));
/// assert_eq!(p.cfg.block, [512, 1, 1]);
/// // 1 block per SM, the rows split evenly: 249 per block.
/// assert_eq!(p.cfg.grid, [132, 1, 1]);
/// let p = plan_backward(Norm::Layer, 4096, 8192, DType::BF16, 32, 132);
/// assert_eq!(p.cfg.grid, [128, 1, 1]); // 32 rows per block
/// // f32 rows of 8192: 4 tiles of 4 elements (row-resident), 512 threads, 1 block per SM.
/// let p = plan_backward(Norm::Layer, 4096, 8192, DType::F32, 32, 132);
/// assert_eq!((p.path, p.cfg.block, p.cfg.grid), (Path::Fast(4), [512, 1, 1], [128, 1, 1]));
/// // 2 tiles in 256 threads: 4 blocks per SM (16 KiB of loads per block row).
/// let p = plan_backward(Norm::Rms, 32768, 4096, DType::BF16, 32, 132);
/// assert_eq!((p.path, p.cfg.block, p.cfg.grid), (Path::Fast(2), [256, 1, 1], [521, 1, 1]));
/// // 2-byte rows past 8192 stream the row twice with 4 tiles; RMSNorm's f32 ones with 8
/// // (LayerNorm has no 8-tile backward: its f32 rows past 8192 are generic).
/// assert_eq!(plan_backward(Norm::Layer, 4096, 16384, DType::BF16, 32, 132).path, Path::Fast(4));
/// assert_eq!(plan_backward(Norm::Rms, 4096, 16384, DType::F32, 32, 132).path, Path::Fast(8));
/// assert_eq!(plan_backward(Norm::Layer, 4096, 16384, DType::F32, 32, 132).path, Path::Generic);
/// // Ragged rows take the fast path too; only rows longer than every built kernel are generic.
/// assert_eq!(plan_backward(Norm::Rms, 8, 1021, DType::BF16, 32, 132).path, Path::Fast(1));
/// assert_eq!(plan_backward(Norm::Layer, 8, 16385, DType::BF16, 32, 132).path, Path::Generic);
/// assert_eq!(plan_backward(Norm::Rms, 8, 16392, DType::BF16, 32, 132).path, Path::Fast(8));
/// assert_eq!(plan_backward(Norm::Rms, 8, 16385, DType::BF16, 32, 132).path, Path::Generic);
/// ```
pub fn plan_backward(norm: Norm, m: usize, n: usize, dt: DType, wave: u32, cus: u32) -> Plan {
    use crate::config::bwd_fast_resident;
    let ws = wave.max(1) as usize;
    let vec = dt.vec() as usize;
    let v = n.div_ceil(vec);
    let ragged = ragged_rows(n, dt);
    // (block cap, row-resident tile counts only), in order of preference.
    for (cap, resident) in [(Some(256usize), true), (None, true), (None, false)] {
        let fits = |t: u32| {
            bwd_fast_spill_free(norm, dt, t, ragged)
                && (!resident || bwd_fast_resident(dt, t, true))
                && v.div_ceil(t as usize)
                    <= cap.unwrap_or(fast_max_block(Kind::Backward, dt, t) as usize)
        };
        if let Some(t) = fast_tiles(Kind::Backward)
            .iter()
            .copied()
            .find(|&t| fits(t))
        {
            let block = round_up(v.div_ceil(t as usize), ws);
            return bwd_plan(m, Path::Fast(t), block, 2 * block * t as usize * 16, cus);
        }
    }
    let b = GENERIC_THREADS as usize;
    bwd_plan(m, Path::Generic, b, 2 * b * dt.bytes() as usize, cus)
}

/// Whether rows of `n` elements of `dt` are ragged: not a multiple of the vector width, so
/// their starts are not 16-byte aligned (the backward's ragged kernels serve them).
pub(crate) fn ragged_rows(n: usize, dt: DType) -> bool {
    !multiple_of(n, dt.vec() as usize)
}

/// A backward plan on `path` with blocks of `block` threads, whose row step loads
/// `row_bytes` (x and dy), on the persistent grid of [`plan_backward`]'s rule 4.
pub(crate) fn bwd_plan(m: usize, path: Path, block: usize, row_bytes: usize, cus: u32) -> Plan {
    let per_cu = (64 * 1024usize)
        .div_ceil(row_bytes.max(1))
        .clamp(1, 4)
        .min((2048 / block.max(1)).max(1));
    let per_cu = if block > 256 { 1 } else { per_cu };
    let target = m.min(cus.max(1) as usize * per_cu).max(1);
    // Even split: the fewest blocks that give every block the same number of rows.
    let blocks = m.max(1).div_ceil(m.max(1).div_ceil(target));
    Plan {
        path,
        cfg: LaunchConfig::linear(grid(blocks), block as u32),
        lanes: 0,
        keep_l2: false,
    }
}

/// Every forward plan the kernels can run `m` rows of `n` elements of `dt` with (the int8
/// quant output when `quant`) on a device with waves of `wave` lanes: each fast-path tile count
/// with every block size that covers a row (multiples of the wave size up to the tile count's
/// block cap), each multi-row tile count with every power-of-two lane count whose groups hold a
/// row (in blocks of 256 threads and of 2 waves), and the generic path; grids as the dispatcher
/// sizes them (one row per block), and the dispatcher's keep-in-L2 setting. For benchmarks and
/// tuning (see [`norm_fwd_with_plan`](crate::norm_fwd_with_plan) and
/// `examples/fwd_sweep.rs`), not a stable API.
///
/// ```
/// use fly_norm::{forward_plans, plan_forward, DType, Norm, Path};
/// let plans = forward_plans(65536, 1024, DType::BF16, false, 32);
/// // The dispatcher's plan is among them (with few rows it caps the grid instead).
/// assert!(plans.contains(&plan_forward(Norm::Rms, 65536, 1024, DType::BF16, false, 32, 132)));
/// // 128 vectors a row: 2 tiles in blocks of 64..=256 threads, ...
/// assert_eq!(plans.iter().filter(|p| p.path == Path::Fast(2)).count(), 7);
/// // ... and one wave per row with 4 tiles a lane.
/// assert!(plans.iter().any(|p| p.path == Path::Rows(4) && p.lanes == 32));
/// ```
#[doc(hidden)]
pub fn forward_plans(m: usize, n: usize, dt: DType, quant: bool, wave: u32) -> Vec<Plan> {
    let kind = if quant {
        Kind::ForwardQuant
    } else {
        Kind::Forward
    };
    let ws = wave.max(1) as usize;
    let vec = dt.vec() as usize;
    let mut v = Vec::new();
    if n > 0 {
        let (nv, fast, rows) = row_shape(n, vec);
        for &t in fwd_fast_tiles(kind, dt, !multiple_of(n, vec)) {
            let cap = fast_max_block(kind, dt, t) as usize;
            let mut block = round_up(nv.div_ceil(t as usize), ws);
            while block <= cap {
                v.push(Plan {
                    path: fast(t),
                    cfg: LaunchConfig::linear(grid(m), block as u32),
                    lanes: 0,
                    keep_l2: false,
                });
                block += ws;
            }
        }
        for &t in &FWD_ROWS_TILES {
            let mut lanes = 1usize;
            while lanes <= ws {
                if nv <= lanes * t as usize {
                    let mut blocks = vec![ROWS_BLOCK as usize, 2 * ws];
                    blocks.dedup();
                    for cap in blocks {
                        let p = Plan {
                            path: rows(t),
                            ..rows_plan(m, t, lanes, cap, ws)
                        };
                        if !v.contains(&p) {
                            v.push(p);
                        }
                    }
                }
                lanes *= 2;
            }
        }
    }
    v.push(Plan {
        path: Path::Generic,
        cfg: LaunchConfig::linear(grid(m), GENERIC_THREADS),
        lanes: 0,
        keep_l2: false,
    });
    let keep_l2 = keeps_l2(m, n, dt);
    v.into_iter().map(|p| Plan { keep_l2, ..p }).collect()
}

/// Why `plan` cannot run the forward of `m` rows of `n` elements of `dt` (quant output when
/// `quant`) on waves of `wave` lanes, or `None` when it can: the path must be built for the
/// family, the grid 1-D with 1..=2^20 blocks, the block 1-D and a multiple of the wave size
/// within the path's launch bound; the fast path's block must cover a row
/// (`n <= block * tiles * vec`), the multi-row path's lane groups (a power of two up to the
/// wave size) must (`n <= lanes * tiles * vec`), and both need `n % vec == 0`; their ragged
/// forms take any `n` and must cover [`ragged_slots`] vectors; the generic path runs blocks
/// of exactly its thread count.
pub(crate) fn check_forward_plan(
    plan: &Plan,
    n: usize,
    dt: DType,
    quant: bool,
    wave: u32,
) -> Option<String> {
    let kind = if quant {
        Kind::ForwardQuant
    } else {
        Kind::Forward
    };
    let ws = wave.max(1);
    let vec = dt.vec() as usize;
    let (grid, block) = (plan.cfg.grid, plan.cfg.block);
    if grid[1] != 1 || grid[2] != 1 || block[1] != 1 || block[2] != 1 {
        return Some(format!(
            "the launch must be 1-D (grid {grid:?}, block {block:?}); use LaunchConfig::linear"
        ));
    }
    if grid[0] == 0 || grid[0] as usize > MAX_GRID {
        return Some(format!("grid {} must be in 1..={MAX_GRID}", grid[0]));
    }
    let b = block[0];
    let vector_rows = |what: &str| {
        (!multiple_of(n, vec))
            .then(|| format!("{what} needs n % {vec} == 0 for {dt:?} (n = {n}); use Path::FastRagged, Path::RowsRagged or Path::Generic"))
    };
    let in_block = |cap: u32| {
        (b == 0 || !multiple_of(b as usize, ws as usize) || b > cap)
            .then(|| format!("block {b} must be a multiple of the wave size {ws} in {ws}..={cap}"))
    };
    // The vectors a row needs on `path`, or why the path cannot take the row.
    let need = |path: Path| match path.is_ragged() {
        true => Ok(ragged_slots(n, vec)),
        false => match vector_rows(&format!("Path::{path:?}")) {
            Some(why) => Err(why),
            None => Ok(n / vec),
        },
    };
    match plan.path {
        Path::Fast(t) | Path::FastRagged(t) => {
            let built = fwd_fast_tiles(kind, dt, plan.path.is_ragged());
            if !built.contains(&t) {
                return Some(format!(
                    "no fast-path kernel with {t} tiles for {dt:?} here; built: {built:?}"
                ));
            }
            if plan.lanes != 0 {
                return Some(format!("lanes {} must be 0 off Path::Rows", plan.lanes));
            }
            let nv = match need(plan.path) {
                Ok(nv) => nv,
                Err(why) => return Some(why),
            };
            in_block(fast_max_block(kind, dt, t)).or_else(|| {
                let need = nv.div_ceil(t as usize);
                (need > b as usize).then(|| {
                    format!("block {b} does not cover a row: {need} threads x {t} tiles needed")
                })
            })
        }
        Path::Rows(t) | Path::RowsRagged(t) => {
            if !FWD_ROWS_TILES.contains(&t) {
                return Some(format!(
                    "no multi-row kernel with {t} tiles; built: {FWD_ROWS_TILES:?}"
                ));
            }
            let l = plan.lanes;
            if l == 0 || !l.is_power_of_two() || l > ws {
                return Some(format!(
                    "lanes {l} must be a power of two in 1..={ws} (the wave size)"
                ));
            }
            let nv = match need(plan.path) {
                Ok(nv) => nv,
                Err(why) => return Some(why),
            };
            in_block(ROWS_BLOCK).or_else(|| {
                (nv > (l * t) as usize).then(|| {
                    format!(
                        "{l} lanes x {t} tiles hold {} vectors, a row has {nv}",
                        l * t
                    )
                })
            })
        }
        Path::Generic => (b != GENERIC_THREADS || plan.lanes != 0).then(|| {
            format!(
                "the generic path runs blocks of exactly {GENERIC_THREADS} threads and lanes 0 \
                 (got block {b}, lanes {})",
                plan.lanes
            )
        }),
    }
}
