//! Which kernel family runs a call, and how many key splits it uses.
//!
//! Today every target runs the portable tile-layer kernel ([`Family::Portable`]). The seam
//! for a target-specific family is [`family`]: the Hopper wgmma + TMA kernel is to take
//! sm90 with bf16/f16 and head dims 64 and 128 (`Family::Hopper`, not built yet); the
//! dispatcher then routes those calls to it and everything else stays on the portable one.

use crate::table::{head_tile, BM, MAX_SPLITS};
use flydsl_rt::{DType, Device, Target};

/// A kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Family {
    /// The tile-layer kernel (`kernels/fwd.rs`) with the target's native 16-bit atom, on
    /// every target; head-dim tile as given.
    Portable {
        /// The compiled head-dimension tile (`table::HEAD_TILES`).
        head_tile: usize,
    },
}

/// The family for a call on `target` with `dtype` and head dim `d` (already validated), or
/// `None` when no family covers it.
///
/// The place where the sm90 wgmma kernel plugs in: `Target::Sm90` with bf16/f16 and `d`
/// in {64, 128} is to return its family once it exists.
///
/// ```
/// use fly_attn::dispatch::{family, Family};
/// use flydsl_rt::{DType, Target};
/// assert_eq!(family(Target::Gfx942, DType::BF16, 96), Some(Family::Portable { head_tile: 128 }));
/// assert_eq!(family(Target::Sm90, DType::F16, 48), None);
/// ```
pub fn family(target: Target, dtype: DType, d: usize) -> Option<Family> {
    let _ = (target, dtype); // every target and 16-bit dtype runs the portable kernel today
    head_tile(d).map(|head_tile| Family::Portable { head_tile })
}

/// The automatic number of key splits: 1 when `batch * heads_q * q tiles` workgroups fill
/// the device (at least two per compute unit), else enough splits to fill it, each keeping
/// at least two key tiles of 32 (`max_seqlen_kv / 64`), at most `MAX_SPLITS`.
///
/// ```
/// use fly_attn::dispatch::auto_splits;
/// // Decode: 1 query, 16k keys, 8 heads on a 132-CU device: split.
/// assert!(auto_splits(132, 1, 8, 1, 16384) > 1);
/// // Prefill fills the device: no split.
/// assert_eq!(auto_splits(132, 16, 16, 4096, 4096), 1);
/// ```
pub fn auto_splits(
    compute_units: u32,
    batch: usize,
    heads_q: usize,
    max_seqlen_q: usize,
    max_seqlen_kv: usize,
) -> usize {
    let blocks = batch
        .saturating_mul(heads_q)
        .saturating_mul(max_seqlen_q.div_ceil(BM));
    let want = 2 * compute_units.max(1) as usize;
    if blocks == 0 || blocks >= want {
        return 1;
    }
    let by_fill = want.div_ceil(blocks);
    let by_keys = (max_seqlen_kv / 64).max(1);
    by_fill.min(by_keys).clamp(1, MAX_SPLITS)
}

/// [`auto_splits`] for a device.
pub(crate) fn auto_splits_on(
    dev: &Device,
    batch: usize,
    heads_q: usize,
    sq: usize,
    skv: usize,
) -> usize {
    auto_splits(dev.compute_units(), batch, heads_q, sq, skv)
}
