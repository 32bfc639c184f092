//! The state of the asynchronous direct-to-LDS and Tensor Data Mover loads of one workgroup
//! (see `amd_ops`, `amd_tdm`), kept in a leaf module so the executor can hold it without
//! depending on the ops.

use std::collections::VecDeque;

/// One lane's pending direct-to-LDS write.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    /// The issuing thread (linear id in the workgroup).
    pub t: u32,
    /// Where it lands: LDS byte, LDS region id, byte offset in the region.
    pub byte: usize,
    pub region: usize,
    pub region_off: i64,
    /// The data (first `n` bytes).
    pub data: [u8; 16],
    pub n: usize,
}

/// Per-workgroup state of the asynchronous direct-to-LDS loads.
#[derive(Default)]
pub(crate) struct AmdState {
    /// Per wave, its issued direct-to-LDS instructions in order (retired by `WaitVmcnt`
    /// and barriers), each the writes of its active lanes.
    pub queues: Vec<VecDeque<Vec<Pending>>>,
    /// Per wave, its issued Tensor Data Mover loads in order (retired by `WaitTensorcnt`
    /// only), each the writes of the whole tile.
    pub tdm: Vec<VecDeque<Vec<Pending>>>,
    /// Per LDS byte, how many pending writes target it (empty until the first load).
    pub pending: Vec<u16>,
    /// Total pending instructions over all waves and both kinds.
    pub count: usize,
}

impl AmdState {
    /// Forget everything (a new workgroup).
    pub fn reset(&mut self) {
        for q in self.queues.iter_mut().chain(&mut self.tdm) {
            q.clear();
        }
        self.pending.fill(0);
        self.count = 0;
    }
}
