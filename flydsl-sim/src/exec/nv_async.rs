//! `cp.async` ([`NvOp::CpAsync`], its commit groups and waits) on the Sim.
//!
//! A copy is written into LDS when it is issued, but its bytes stay *pending* on the issuing
//! thread's commit group: an LDS read of them (by any thread) before that thread's covering
//! `cp.async.wait_group` is reported, and so is a read by another thread after the wait but
//! before the next workgroup barrier. The destination is also recorded as a write of the
//! issuing thread for the race detector, so overwriting a stage another thread still reads in
//! the same barrier epoch is a reported race.

use super::cp_state::Tag;
use super::memops::Loc;
use super::Wg;
use crate::race::Access;
use crate::SimError;
use flydsl_ir::NvOp;

impl Wg<'_, '_> {
    /// Report thread `t`'s read of LDS bytes `[byte, byte + n)` that a `cp.async` wrote and
    /// that are not yet visible to `t`.
    pub(super) fn check_cp_async(
        &self,
        byte: usize,
        n: usize,
        t: u32,
        op: &str,
    ) -> Result<(), SimError> {
        let Some(tags) = self.cp.tags.get(byte..byte + n) else {
            return Ok(());
        };
        for (i, tag) in tags.iter().enumerate() {
            if tag.owner == 0 || (tag.landed && tag.owner - 1 == t) {
                continue;
            }
            let who = if tag.owner - 1 == t {
                "this thread".to_string()
            } else {
                self.thread_ref(tag.owner - 1).to_string()
            };
            let why = if tag.landed {
                format!(
                    "reads LDS byte {} that a cp.async of {who} wrote, after that thread's \
                     cp.async.wait_group but with no workgroup barrier since the wait",
                    byte + i
                )
            } else {
                format!(
                    "reads LDS byte {} that a cp.async of {who} (its commit group {}) is still \
                     writing: wait for the group with cp.async.wait_group (and a barrier, for \
                     other threads) before reading",
                    byte + i,
                    tag.group
                )
            };
            return Err(self.fault(op, t, why));
        }
        Ok(())
    }

    /// Run a cp.async op over the active threads.
    pub(super) fn cp_async_op(&mut self, nv: &NvOp, act: &[u32]) -> Result<(), SimError> {
        let (lds_bytes, threads) = (self.lds.len(), self.cx.nthreads);
        self.cp.ensure(lds_bytes, threads);
        match nv {
            NvOp::CpAsync {
                dst,
                src,
                index,
                bytes,
                src_bytes,
            } => {
                for &t in act {
                    self.cp_async_one(t, [*dst, *src], *index, *bytes, *src_bytes)?;
                }
            }
            NvOp::CpAsyncCommit => {
                for &t in act {
                    self.cp.commits[t as usize] += 1;
                }
            }
            NvOp::CpAsyncWait { pending } => {
                for &t in act {
                    let c = self.cp.commits[t as usize];
                    let owner = t + 1;
                    let mut fl = std::mem::take(&mut self.cp.inflight[t as usize]);
                    fl.retain(|&(s, n, g)| {
                        if g + (*pending as u64) >= c {
                            return true;
                        }
                        for tag in &mut self.cp.tags[s..s + n] {
                            if tag.owner == owner && tag.group == g {
                                tag.landed = true;
                            }
                        }
                        self.cp.landed.push((s, n));
                        false
                    });
                    self.cp.inflight[t as usize] = fl;
                }
            }
            _ => return Err(self.unsupported(format!("{nv:?} is not a cp.async op"))),
        }
        Ok(())
    }

    fn cp_async_one(
        &mut self,
        t: u32,
        [dst, src]: [flydsl_ir::ValueId; 2],
        index: Option<flydsl_ir::ValueId>,
        bytes: u32,
        src_bytes: flydsl_ir::ValueId,
    ) -> Result<(), SimError> {
        const OP: &str = "CpAsync";
        let n = bytes as usize;
        let sb = self.val(src_bytes)[t as usize] as u32 as i32;
        if sb < 0 || sb as u32 > bytes {
            return Err(self.fault(
                OP,
                t,
                format!("src_bytes is {sb}; it must be in 0..={bytes} (the copy's size)"),
            ));
        }
        let dloc = self.locate(
            self.val(dst)[t as usize],
            0,
            1,
            n as u64,
            "cp.async store",
            t,
        )?;
        let byte = match dloc {
            Loc::Lds(byte, ..) => byte,
            Loc::Dropped => return Ok(()),
            Loc::Global(..) => {
                return Err(self.fault(OP, t, "the destination is not an LDS pointer"))
            }
        };
        if !byte.is_multiple_of(n) {
            return Err(self.fault(
                OP,
                t,
                format!("destination LDS byte {byte} is not {bytes}-byte aligned"),
            ));
        }
        let mut buf = [0u8; 16];
        if sb > 0 {
            let es = self.info(src).elem.size_bytes() as u64;
            let i = match index {
                None => 0,
                Some(i) => {
                    let bits = self.info(i).elem.bits();
                    crate::numeric::sext(self.val(i)[t as usize], bits)
                }
            };
            let sloc = self.locate(
                self.val(src)[t as usize],
                i,
                es,
                sb as u64,
                "cp.async load",
                t,
            )?;
            match sloc {
                Loc::Global(a, off) => {
                    if !off.is_multiple_of(bytes as u64) {
                        return Err(self.fault(
                            OP,
                            t,
                            format!("source byte offset {off} is not {bytes}-byte aligned"),
                        ));
                    }
                    self.cx.allocs[a].read(off, &mut buf[..sb as usize]);
                }
                Loc::Dropped => {}
                Loc::Lds(..) => {
                    return Err(self.fault(OP, t, "the source is not a global pointer"))
                }
            }
        }
        self.race(dloc, n, t, Access::Write)?;
        self.lds[byte..byte + n].copy_from_slice(&buf[..n]);
        self.mark_init(byte, n);
        let group = self.cp.commits[t as usize];
        for tag in &mut self.cp.tags[byte..byte + n] {
            *tag = Tag {
                owner: t + 1,
                group,
                landed: false,
            };
        }
        self.cp.inflight[t as usize].push((byte, n, group));
        Ok(())
    }
}
