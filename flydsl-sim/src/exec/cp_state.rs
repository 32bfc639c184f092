//! The per-workgroup state of `cp.async` on the Sim (kept apart from `nv_async.rs`, which
//! runs the ops on a `Wg`, so the executor can own it without depending on the ops).

/// Who last wrote an LDS byte through `cp.async`, and whether that copy has landed.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Tag {
    /// Issuing thread + 1 (0: no cp.async bytes here).
    pub owner: u32,
    /// The issuing thread's commit group of the copy.
    pub group: u64,
    /// The issuing thread waited for it (visible to others after the next barrier).
    pub landed: bool,
}

/// Per-workgroup cp.async state (empty until a workgroup issues its first copy).
#[derive(Default, Debug)]
pub(crate) struct AsyncState {
    /// Per LDS byte.
    pub(super) tags: Vec<Tag>,
    /// Per thread: commits so far (the open group's number).
    pub(super) commits: Vec<u64>,
    /// Per thread: copies in flight, as (LDS byte, bytes, group).
    pub(super) inflight: Vec<Vec<(usize, usize, u64)>>,
    /// Landed copies awaiting a barrier: (LDS byte, bytes).
    pub(super) landed: Vec<(usize, usize)>,
}

impl AsyncState {
    /// Forget everything (a new workgroup).
    pub(crate) fn reset(&mut self) {
        if self.tags.is_empty() {
            return;
        }
        self.tags.fill(Tag::default());
        self.commits.fill(0);
        self.inflight.iter_mut().for_each(Vec::clear);
        self.landed.clear();
    }

    pub(super) fn ensure(&mut self, lds_bytes: usize, threads: usize) {
        if self.tags.is_empty() {
            self.tags = vec![Tag::default(); lds_bytes];
            self.commits = vec![0; threads];
            self.inflight = vec![Vec::new(); threads];
        }
    }

    /// A workgroup barrier: landed copies become visible to every thread.
    pub(crate) fn barrier(&mut self) {
        for (s, n) in self.landed.drain(..) {
            for tag in &mut self.tags[s..s + n] {
                if tag.landed {
                    *tag = Tag::default();
                }
            }
        }
    }
}
