//! The per-workgroup state of the NVIDIA Hopper ops on the Sim (a leaf module: the
//! executor owns it, `nv_ops` runs the ops on it).

use std::collections::BTreeMap;

/// One mbarrier's state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mbar {
    pub count: u32,
    pub pending: u32,
    pub tx: i64,
    /// Completed phases.
    pub phase: u64,
}

/// Per-workgroup Hopper state.
#[derive(Default, Debug)]
pub(crate) struct NvState {
    /// Barriers by LDS byte address.
    pub bars: BTreeMap<usize, Mbar>,
    /// LDS byte ranges written by TMA and not yet waited for: (start, end, barrier, phase).
    pub pending: Vec<(usize, usize, usize, u64)>,
}

impl NvState {
    pub(crate) fn reset(&mut self) {
        self.bars.clear();
        self.pending.clear();
    }
}
