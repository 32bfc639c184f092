//! Split-K on the Hopper kernels: when a GEMM's tiles fill too few SMs (small M with N of a
//! few thousand: `table::split_k`), `splits` workgroups per tile each sum a slice of K into
//! an f32 workspace (`table::Out::Partial`), and a second kernel (`kernels/splitk.rs`) adds
//! the slices in order and applies scales, bias and activation. The workspace
//! (`splits * m * n` f32) is allocated per call from the device's stream-ordered pool and
//! freed after the reduce.

use crate::kernels::{self, PartialFn};
use crate::table::{self, Epilogue, Tile};
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, Element, LaunchConfig, Launcher, Result, Stream};

/// Rows the reduce's grid can hold (its y dimension).
const MAX_REDUCE_ROWS: usize = 65535;

/// One split-K GEMM's operands: the tensor maps' buffers over A and B, the scales of the 8-bit GEMM,
/// bias (or any `T` buffer when the epilogue reads none) and C.
pub(crate) struct Operands<'a, T: Element> {
    pub a_map: &'a DeviceBuffer<i8>,
    pub b_map: &'a DeviceBuffer<i8>,
    pub scales: Option<(&'a DeviceBuffer<f32>, &'a DeviceBuffer<f32>)>,
    pub bias: &'a DeviceBuffer<T>,
    pub c: &'a mut DeviceBuffer<T>,
}

/// Check a pinned split count: 1..=[`table::MAX_SPLITS`] and no more than the `bk`-element
/// K stages of `k`.
pub(crate) fn check_splits(call: &Call<'_>, splits: usize, k: usize, bk: u32) -> Result<()> {
    let stages = k.div_ceil(bk as usize);
    if splits == 0 || splits > table::MAX_SPLITS || splits > stages {
        return Err(call.error(
            "splits",
            splits,
            format_args!(
                "a split needs at least one K stage of {bk} elements: 1..={} for k = {k} \
                 (at most {})",
                stages.min(table::MAX_SPLITS),
                table::MAX_SPLITS
            ),
            "pass a split count in that range (1: no split)",
        ));
    }
    Ok(())
}

/// Run `partial` over `splits` K splits of `tile` (`bk`-element stages) into a workspace,
/// then the reduce of `epi` into C. `m >= 1`; the arguments were checked as for the
/// one-kernel launch.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch<T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    partial: &Launcher<usize, PartialFn>,
    ops: Operands<'_, T>,
    (m, n, k): (usize, usize, usize),
    tile: Tile,
    bk: u32,
    splits: usize,
    epi: Epilogue,
) -> Result<()> {
    let Some(reduce) = kernels::reduce::<T>(epi.index()) else {
        return Err(call.error(
            "T",
            T::DTYPE,
            "the split-K reduce writes bf16 or f16",
            "pass a bf16 or f16 C",
        ));
    };
    call.kernel(stream, partial.kernel)?;
    call.kernel(stream, reduce.kernel)?;
    if m > MAX_REDUCE_ROWS {
        return Err(call.error(
            "m",
            m,
            format_args!("split K takes at most {MAX_REDUCE_ROWS} rows"),
            "pass splits = 1 (large M fills the device without splitting K)",
        ));
    }
    let (kps, splits) = table::split_stages(k.div_ceil(bk as usize), splits);
    let len = splits
        .checked_mul(m)
        .and_then(|x| x.checked_mul(n))
        .ok_or_else(|| {
            call.fail(format!(
                "a workspace of {splits} x {m} x {n} f32 overflows usize"
            ))
        })?;
    let tiles = crate::grid::tile_grid(call, tile, m, n)?;
    let grid = crate::grid::persistent_grid(call, stream, tiles, splits as u32, kps)?;
    let cfg = LaunchConfig {
        grid: [grid, splits as u32, 1],
        ..LaunchConfig::linear(1, tile.threads())
    }
    .with_dynamic_lds(tile.lds_bytes());
    let per_block = (table::REDUCE_THREADS * table::REDUCE_VEC) as usize;
    let rcfg = LaunchConfig {
        grid: [n.div_ceil(per_block) as u32, m as u32, 1],
        ..LaunchConfig::linear(1, table::REDUCE_THREADS)
    };
    let mut ws = stream.alloc::<f32>(len)?;
    let i = |x: usize| x as i32;
    // SAFETY: the maps describe A and B exactly (checked by the caller); split y covers K
    // stages [y kps, min((y + 1) kps, stages)), none empty (split_stages), and writes rows
    // < m and columns < n of plane y of ws (splits * m * n f32); m, n, k fit in i32
    // (MAX_DIM).
    unsafe {
        (partial.launch)(
            stream,
            cfg,
            ops.a_map,
            ops.b_map,
            &mut ws,
            i(m),
            i(n),
            i(k),
            kps as i32,
        )
    }?;
    let (sa, sb, scaled) = match ops.scales {
        Some((sa, sb)) => (sa, sb, 1),
        // Unread (`scaled = 0`): any f32 buffer.
        None => (&ws, &ws, 0),
    };
    // SAFETY: the reduce reads the splits planes of ws written above, the m scale_a and n
    // scale_b values (when scaled), bias[n] (when the epilogue has one) and writes C's
    // m * n elements; m fits the grid's y (checked) and m, n in i32.
    unsafe {
        (reduce.launch)(
            stream,
            rcfg,
            &ws,
            sa,
            sb,
            ops.bias,
            ops.c,
            i(m),
            i(n),
            i(splits),
            scaled,
        )
    }
}
