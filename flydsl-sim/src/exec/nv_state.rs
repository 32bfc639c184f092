//! The per-workgroup state of the NVIDIA Hopper ops on the Sim (a leaf module: the
//! executor owns it, `nv_ops` runs the ops on it).

use std::collections::BTreeMap;

/// One mbarrier's state.
#[derive(Clone, Debug)]
pub(crate) struct Mbar {
    pub count: u32,
    pub pending: u32,
    pub tx: i64,
    /// Completed phases.
    pub phase: u64,
    /// Racecheck: the (thread, release stamp) arrivals of the current phase and of the last
    /// completed one.
    pub arrivals: Vec<(u32, u32)>,
    pub done: Vec<(u32, u32)>,
}

/// The LDS operand bytes (16-byte chunks) of one wgmma in flight.
#[derive(Debug)]
pub(crate) struct InFlight {
    /// Warpgroup.
    pub group: u32,
    /// Its batch: the warpgroup's commits before it was issued.
    pub batch: u32,
    /// Start bytes of its 16-byte operand chunks.
    pub chunks: Vec<usize>,
}

/// Per-workgroup Hopper state.
#[derive(Default, Debug)]
pub(crate) struct NvState {
    /// Barriers by LDS byte address.
    pub bars: BTreeMap<usize, Mbar>,
    /// LDS byte ranges written by TMA and not yet waited for: (start, end, barrier, phase).
    pub pending: Vec<(usize, usize, usize, u64)>,
    /// Racecheck: `wgmma.commit_group`s per warpgroup.
    pub commits: Vec<u32>,
    /// Racecheck: wgmma operand reads not yet retired by a `wgmma.wait_group`.
    pub in_flight: Vec<InFlight>,
}

impl NvState {
    pub(crate) fn reset(&mut self) {
        self.bars.clear();
        self.pending.clear();
        self.commits.clear();
        self.in_flight.clear();
    }
}
