//! Every backward plan the kernels can run (for the plan sweep and tuning) and the check a
//! caller-chosen plan passes before [`norm_bwd_with_plan`](crate::norm_bwd_with_plan) runs it.

use crate::config::{
    bwd_fast_spill_free, fast_max_block, fast_tiles, DType, Kind, Norm, Path, GENERIC_THREADS,
    MAX_GRID,
};
use crate::dispatch::{bwd_plan, plan_backward, ragged_rows, Plan};

/// Every backward plan of `norm` for `m` rows of `n` elements of `dt` on a device with waves
/// of `wave` lanes and `cus` compute units: each built fast-path tile count with every block
/// size that covers a row (multiples of the wave size up to the tile count's block cap), and
/// the generic path, each on the dispatcher's persistent grid for that block; plus the
/// dispatcher's own plan, first. For benchmarks and tuning (see
/// [`norm_bwd_with_plan`](crate::norm_bwd_with_plan) and `examples/bwd_sweep.rs`), not a
/// stable API.
///
/// ```
/// use fly_norm::{backward_plans, plan_backward, DType, Norm, Path};
/// let plans = backward_plans(Norm::Layer, 4096, 16384, DType::BF16, 32, 132);
/// assert_eq!(plans[0], plan_backward(Norm::Layer, 4096, 16384, DType::BF16, 32, 132));
/// // 2048 vectors a row: 4 tiles in 512 threads (the cap), and the generic path.
/// assert_eq!(plans.iter().filter(|p| p.path == Path::Fast(4)).count(), 1);
/// assert!(plans.iter().any(|p| p.path == Path::Generic));
/// ```
#[doc(hidden)]
pub fn backward_plans(norm: Norm, m: usize, n: usize, dt: DType, wave: u32, cus: u32) -> Vec<Plan> {
    let ws = wave.max(1) as usize;
    let nv = n.div_ceil(dt.vec() as usize);
    let ragged = ragged_rows(n, dt);
    let mut v = vec![plan_backward(norm, m, n, dt, wave, cus)];
    let mut push = |p: Plan| {
        if !v.contains(&p) {
            v.push(p);
        }
    };
    for &t in fast_tiles(Kind::Backward) {
        if !bwd_fast_spill_free(norm, dt, t, ragged) {
            continue;
        }
        let cap = fast_max_block(Kind::Backward, dt, t) as usize;
        let mut block = nv.div_ceil(t as usize).div_ceil(ws).max(1) * ws;
        while block <= cap {
            push(bwd_plan(
                m,
                Path::Fast(t),
                block,
                2 * block * t as usize * 16,
                cus,
            ));
            block += ws;
        }
    }
    let b = GENERIC_THREADS as usize;
    push(bwd_plan(
        m,
        Path::Generic,
        b,
        2 * b * dt.bytes() as usize,
        cus,
    ));
    v
}

/// Why `plan` cannot run the backward of `norm` for rows of `n` elements of `dt` on waves of
/// `wave` lanes, or `None` when it can: the path must be built for the family (see
/// `bwd_fast_spill_free` in `kernels/config.rs`), the grid 1-D with 1..=2^20 blocks, the
/// block 1-D; a fast-path block a multiple of the wave size within the tile count's launch
/// bound that covers a row (`ceil(n / vec) <= block * tiles`); the generic path runs blocks
/// of exactly its thread count. Any grid is correct (blocks loop over the rows; the
/// two-stage workspace holds one partial row per block).
pub(crate) fn check_backward_plan(
    plan: &Plan,
    norm: Norm,
    n: usize,
    dt: DType,
    wave: u32,
) -> Option<String> {
    let ws = wave.max(1);
    let (grid, block) = (plan.cfg.grid, plan.cfg.block);
    if grid[1] != 1 || grid[2] != 1 || block[1] != 1 || block[2] != 1 {
        return Some(format!(
            "the launch must be 1-D (grid {grid:?}, block {block:?}); use LaunchConfig::linear"
        ));
    }
    if grid[0] == 0 || grid[0] > MAX_GRID {
        return Some(format!("grid {} must be in 1..={MAX_GRID}", grid[0]));
    }
    if plan.lanes != 0 {
        return Some(format!("lanes {} must be 0 for the backward", plan.lanes));
    }
    let b = block[0];
    match plan.path {
        Path::Fast(t) => {
            let ragged = ragged_rows(n, dt);
            if !fast_tiles(Kind::Backward).contains(&t) || !bwd_fast_spill_free(norm, dt, t, ragged)
            {
                let rows = if ragged { " for ragged rows" } else { "" };
                return Some(format!(
                    "no {} backward fast-path kernel with {t} tiles of {dt:?}{rows}",
                    norm.name()
                ));
            }
            let cap = fast_max_block(Kind::Backward, dt, t);
            if b == 0 || b % ws != 0 || b > cap {
                return Some(format!(
                    "block {b} must be a multiple of the wave size {ws} in {ws}..={cap}"
                ));
            }
            let need = n.div_ceil(dt.vec() as usize).div_ceil(t as usize);
            (need > b as usize).then(|| {
                format!("block {b} does not cover a row: {need} threads x {t} tiles needed")
            })
        }
        Path::Generic => (b != GENERIC_THREADS).then(|| {
            format!("the generic path runs blocks of exactly {GENERIC_THREADS} threads (got {b})")
        }),
        // The backward runs the fast path (its ragged kernels by `n`) and the generic one.
        _ => Some(format!(
            "the backward has no {:?} kernels; use Path::Fast or Path::Generic",
            plan.path
        )),
    }
}
