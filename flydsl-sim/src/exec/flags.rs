//! Cross-agent flags: [`OpKind::FlagStore`] (a release store at system scope) and
//! [`OpKind::FlagWait`] (acquire polls until a value or a timeout), over the memory of this
//! Sim device and of the peers it enabled (`SimMemory::enable_peer`).
//!
//! The stores and polls are real host atomics (`Release` / `Acquire`), so the host's memory
//! model gives the kernels exactly the ordering the IR promises: writes made before a flag
//! store are visible to a thread whose wait saw the flag. A wait's timeout is measured in host
//! time and counted in the target's steady-counter ticks (`Target::steady_counter_hz`), so the
//! same timeout argument bounds a wait on a GPU and on the Sim. Kernels that wait run their
//! workgroups in order on the launching thread (see [`has_flag_wait`]).

use super::memops::Loc;
use super::Wg;
use crate::memory::Alloc;
use crate::SimError;
use flydsl_ir::{Block, Kernel, OpKind, ValueId};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether the kernel contains a [`OpKind::FlagWait`] (in any region).
///
/// Such a kernel's workgroups wait for other agents (another Sim device's kernel, running on
/// another host thread), so they must not occupy the shared worker pool, where a waiting
/// workgroup could keep the one it waits for from ever running: the launch runs them one
/// after another, in index order, on the calling thread.
pub(crate) fn has_flag_wait(k: &Kernel) -> bool {
    fn block(b: &Block) -> bool {
        b.ops.iter().any(|op| match &op.kind {
            OpKind::FlagWait { .. } => true,
            OpKind::If {
                then_block,
                else_block,
                ..
            } => block(then_block) || block(else_block),
            OpKind::For { body, .. } => block(body),
            _ => false,
        })
    }
    block(&k.body)
}

impl Wg<'_, '_> {
    /// The allocation and byte offset of lane `t`'s flag at `ptr[index]`.
    fn flag_word(
        &mut self,
        op: &'static str,
        ptr: ValueId,
        index: ValueId,
        t: u32,
    ) -> Result<Option<(Arc<Alloc>, u64)>, SimError> {
        let addr = self.val(ptr)[t as usize];
        let idx = self.index_of(index, t);
        match self.locate(addr, idx, 4, 4, op, t)? {
            Loc::Global(i, off) => {
                let a = Arc::clone(&self.cx.allocs[i]);
                if a.atomic_u32(off).is_none() {
                    return Err(self.fault(op, t, format!("misaligned flag at byte offset {off}")));
                }
                Ok(Some((a, off)))
            }
            Loc::Dropped => Ok(None),
            Loc::Lds(..) => Err(self.fault(op, t, "a flag must live in global memory")),
        }
    }

    /// `FlagStore`: a release store of each active lane's value.
    pub(super) fn flag_store(
        &mut self,
        ptr: ValueId,
        index: ValueId,
        value: ValueId,
        act: &[u32],
    ) -> Result<(), SimError> {
        for &t in act {
            let v = self.val(value)[t as usize] as u32;
            if let Some((a, off)) = self.flag_word("flag store", ptr, index, t)? {
                if let Some(w) = a.atomic_u32(off) {
                    w.store(v, Ordering::Release);
                }
            }
        }
        Ok(())
    }

    /// `FlagWait`: poll every active lane's flag until it holds the lane's expected value or
    /// the lane's timeout (in target ticks) has passed; the result is 1 where it was seen.
    pub(super) fn flag_wait(
        &mut self,
        res: ValueId,
        [ptr, index, expect, timeout]: [ValueId; 4],
        act: &[u32],
    ) -> Result<(), SimError> {
        let hz = self.cx.k.target.steady_counter_hz();
        let mut pending = Vec::with_capacity(act.len());
        for &t in act {
            let want = self.val(expect)[t as usize] as u32;
            let ticks = (self.val(timeout)[t as usize] as i64).max(0) as u128;
            let limit = Duration::from_nanos(
                u64::try_from(ticks * 1_000_000_000 / u128::from(hz)).unwrap_or(u64::MAX),
            );
            if let Some((a, off)) = self.flag_word("flag wait", ptr, index, t)? {
                pending.push((t, a, off, want, limit));
            }
        }
        let mut r = self.take(res);
        for &t in act {
            r[t as usize] = 0;
        }
        let start = Instant::now();
        let mut polls = 0u32;
        while !pending.is_empty() {
            let elapsed = start.elapsed();
            pending.retain(|(t, a, off, want, limit)| {
                let seen = a
                    .atomic_u32(*off)
                    .is_some_and(|w| w.load(Ordering::Acquire) == *want);
                if seen {
                    r[*t as usize] = 1;
                }
                !seen && elapsed <= *limit
            });
            polls = polls.saturating_add(1);
            if polls < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        self.put(res, r);
        Ok(())
    }
}
