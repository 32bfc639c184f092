//! The choice between the one-stage and the two-stage kernel.

use crate::config::THREADS;

/// The custom all-reduce's algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Every rank reads every peer's whole message and reduces all of it: one pass, the
    /// least latency; each rank reads `ws` times the message over the links.
    OneStage,
    /// Reduce-scatter (rank r reduces the r-th part) and all-gather: each rank reads about
    /// twice the message, for messages where bandwidth dominates.
    TwoStage,
}

/// Messages of at least this many bytes take the two-stage kernel, per world size (index 0:
/// 2 ranks, 1: 4, 2: 8). The reference's values (NVLink): 2 ranks always one-stage, 4 ranks
/// from 512 KiB, 8 ranks from 256 KiB. **Not measured on our kernels yet**: the bench
/// `examples/allreduce_bench.rs` times both algorithms at every size and prints the
/// crossover; `FLY_COMM_TWO_STAGE_MIN_BYTES` overrides it for a process.
pub const TWO_STAGE_MIN_BYTES: [u64; 3] = [u64::MAX, 512 << 10, 256 << 10];

/// The environment variable that overrides [`TWO_STAGE_MIN_BYTES`] (a byte count; every
/// rank must see the same value: ranks that pick different algorithms report a
/// `CommError::PeerMismatch`).
pub const TWO_STAGE_ENV: &str = "FLY_COMM_TWO_STAGE_MIN_BYTES";

/// The switch point for `world` ranks: the environment's, else the table's.
///
/// ```
/// assert_eq!(fly_comm::two_stage_min_bytes(4), std::env::var("FLY_COMM_TWO_STAGE_MIN_BYTES")
///     .ok().and_then(|v| v.trim().parse().ok()).unwrap_or(512 << 10));
/// ```
pub fn two_stage_min_bytes(world: usize) -> u64 {
    if let Some(v) = std::env::var(TWO_STAGE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return v;
    }
    match world {
        2 => TWO_STAGE_MIN_BYTES[0],
        4 => TWO_STAGE_MIN_BYTES[1],
        _ => TWO_STAGE_MIN_BYTES[2],
    }
}

/// The algorithm for `bytes` over `world` ranks with switch point `min_two_stage`. The
/// two-stage kernel needs at least one 16-byte pack per rank.
pub(crate) fn pick(bytes: u64, world: usize, min_two_stage: u64) -> Algorithm {
    if bytes >= min_two_stage && bytes / 16 >= world as u64 {
        Algorithm::TwoStage
    } else {
        Algorithm::OneStage
    }
}

/// Workgroups for `packs` 16-byte packs, at most `max_blocks`.
pub(crate) fn grid(packs: u64, max_blocks: u32) -> u32 {
    let want = packs.div_ceil(u64::from(THREADS)).max(1);
    want.min(u64::from(max_blocks)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_two_stage_only_past_the_switch_and_with_a_pack_per_rank() {
        assert_eq!(pick(1 << 20, 4, 512 << 10), Algorithm::TwoStage);
        assert_eq!(pick(1 << 10, 4, 512 << 10), Algorithm::OneStage);
        assert_eq!(pick(48, 4, 0), Algorithm::OneStage);
        assert_eq!(pick(64, 4, 0), Algorithm::TwoStage);
        assert_eq!(grid(1, 36), 1);
        assert_eq!(grid(1 << 20, 36), 36);
    }
}
