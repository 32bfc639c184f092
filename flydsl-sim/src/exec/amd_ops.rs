//! The AMD-only ops ([`AmdOp`]): the LDS-only barrier, vector-memory waits, scheduling
//! controls (no-ops here) and direct-to-LDS loads, whose LDS writes stay pending per wave
//! until a wait retires them or a barrier completes them (see the contracts in
//! `flydsl_ir::AmdOp`).

use super::amd_state::Pending;
use super::memops::{BufRange, Loc};
use super::Wg;
use crate::race::Access;
use crate::SimError;
use flydsl_ir::{AmdOp, DppCtrl, ValueId};
use std::collections::VecDeque;

impl Wg<'_, '_> {
    /// Execute an AMD-only op.
    pub(super) fn amd_op(
        &mut self,
        op: &AmdOp,
        results: &[ValueId],
        act: &[u32],
    ) -> Result<(), SimError> {
        match *op {
            AmdOp::LdsBarrier => self.barrier(act),
            AmdOp::WaitVmcnt(n) => {
                let wave = self.cx.wave;
                let mut waves: Vec<usize> = act.iter().map(|&t| t as usize / wave).collect();
                waves.dedup();
                for w in waves {
                    self.retire(w, n as usize)?;
                }
                Ok(())
            }
            AmdOp::SchedBarrier(_) | AmdOp::SchedGroupBarrier { .. } | AmdOp::SetPrio(_) => Ok(()),
            AmdOp::WaitTensorcnt(n) => {
                let wave = self.cx.wave;
                let mut waves: Vec<usize> = act.iter().map(|&t| t as usize / wave).collect();
                waves.dedup();
                for w in waves {
                    self.retire_tdm(w, n as usize)?;
                }
                Ok(())
            }
            AmdOp::TensorLoadToLds { ref groups } => self.tensor_load_to_lds(groups, act),
            AmdOp::BufferLoadToLds {
                rsrc,
                index,
                lds,
                bytes,
            } => self.buffer_load_to_lds(rsrc, index, lds, bytes as usize, act),
            AmdOp::Dpp { value, ctrl } => match results {
                [r] => self.dpp(*r, value, ctrl, act),
                _ => Err(self.unsupported("Dpp without its one result")),
            },
            AmdOp::LdsReadTr16 { ptr, index } => match results {
                [r] => self.lds_read_tr16(*r, ptr, index, act),
                _ => Err(self.unsupported("LdsReadTr16 without its one result")),
            },
            AmdOp::CvtPkFp8 { a, b, old, hi, to } => match results {
                [r] => {
                    self.cvt_pk_fp8(*r, [a, b, old], hi, to, act);
                    Ok(())
                }
                _ => Err(self.unsupported("CvtPkFp8 without its one result")),
            },
            AmdOp::CvtPkF32Fp8 { src, hi, from } => match results {
                [r] => {
                    self.cvt_pk_f32_fp8(*r, src, hi, from, act);
                    Ok(())
                }
                _ => Err(self.unsupported("CvtPkF32Fp8 without its one result")),
            },
            AmdOp::PermlaneSwap { a, b, rows } => match results {
                [ra, rb] => self.permlane_swap([*ra, *rb], [a, b], rows, act),
                _ => Err(self.unsupported("PermlaneSwap without its two results")),
            },
            AmdOp::PermlaneX16 { value, sel } => match results {
                [r] => self.permlanex16(*r, value, sel, act),
                _ => Err(self.unsupported("PermlaneX16 without its one result")),
            },
        }
    }

    /// Complete every pending direct-to-LDS write of the workgroup (at a barrier: each wave
    /// waits for its own before arriving).
    pub(super) fn complete_all_lds_loads(&mut self) -> Result<(), SimError> {
        if self.amd.count == 0 {
            return Ok(());
        }
        for w in 0..self.amd.queues.len() {
            self.retire(w, 0)?;
        }
        Ok(())
    }

    /// Retire the oldest pending direct-to-LDS instructions of wave `w` until at most `keep`
    /// remain.
    fn retire(&mut self, w: usize, keep: usize) -> Result<(), SimError> {
        self.retire_in(false, w, keep)
    }

    /// Retire the oldest pending Tensor Data Mover loads of wave `w` until at most `keep`
    /// remain.
    pub(super) fn retire_tdm(&mut self, w: usize, keep: usize) -> Result<(), SimError> {
        self.retire_in(true, w, keep)
    }

    fn retire_in(&mut self, tdm: bool, w: usize, keep: usize) -> Result<(), SimError> {
        loop {
            let qs = if tdm {
                &mut self.amd.tdm
            } else {
                &mut self.amd.queues
            };
            let Some(q) = qs.get_mut(w) else {
                return Ok(());
            };
            if q.len() <= keep {
                return Ok(());
            }
            let Some(writes) = q.pop_front() else {
                return Ok(());
            };
            self.amd.count -= 1;
            for p in &writes {
                for c in &mut self.amd.pending[p.byte..p.byte + p.n] {
                    *c -= 1;
                }
            }
            for p in writes {
                let loc = Loc::Lds(p.byte, p.region, p.region_off);
                self.race_record(loc, p.n, p.t, Access::Write)?;
                self.lds[p.byte..p.byte + p.n].copy_from_slice(&p.data[..p.n]);
                self.mark_init(p.byte, p.n);
            }
        }
    }

    /// With racecheck on, an access of LDS bytes that a direct-to-LDS load has not written yet
    /// is a race (on the GPU it sees the old or the new bytes, in no defined order).
    pub(super) fn check_lds_pending(
        &self,
        byte: usize,
        n: usize,
        t: u32,
        kind: Access,
    ) -> Result<(), SimError> {
        if self.amd.count == 0 || self.race.is_none() {
            return Ok(());
        }
        let Some(hit) = (byte..byte + n).find(|&b| self.amd.pending.get(b).is_some_and(|&c| c > 0))
        else {
            return Ok(());
        };
        let issuer = self
            .amd
            .queues
            .iter()
            .chain(&self.amd.tdm)
            .flatten()
            .flatten()
            .find(|p| (p.byte..p.byte + p.n).contains(&hit));
        let (who, what) = match issuer {
            Some(p) => {
                let r = &self.cx.lds[p.region];
                let es = r.elem_bytes.unwrap_or(1).max(1) as i64;
                let idx = (p.region_off + (hit - p.byte) as i64) / es;
                (
                    format!("thread {:?}", self.thread_ref(p.t).thread),
                    format!("LDS array `{}` element {idx}", r.name),
                )
            }
            None => ("another thread".into(), format!("LDS byte {hit}")),
        };
        Err(self.fault(
            "LDS access",
            t,
            format!(
                "{kind} of {what}, which a direct-to-LDS or tensor load by {who} has not written \
                 yet: retire it first in the issuing wave (WaitVmcnt for BufferLoadToLds, \
                 WaitTensorcnt for TensorLoadToLds), then a Barrier or LdsBarrier before other \
                 threads touch it"
            ),
        ))
    }

    /// Issue a direct-to-LDS buffer load: read now, write to LDS when retired.
    fn buffer_load_to_lds(
        &mut self,
        rsrc: ValueId,
        index: ValueId,
        lds: ValueId,
        bytes: usize,
        act: &[u32],
    ) -> Result<(), SimError> {
        const OP: &str = "BufferLoadToLds";
        let wave = self.cx.wave;
        let elem = self.info(rsrc).elem;
        let es = elem.size_bytes() as usize;
        let w = bytes / es;
        if bytes > 16 || w == 0 || !bytes.is_multiple_of(es) {
            return Err(self.unsupported(format!("{OP} of {bytes} bytes of {elem}")));
        }
        let nwaves = self.cx.nthreads.div_ceil(wave);
        if self.amd.queues.len() < nwaves {
            self.amd.queues.resize_with(nwaves, VecDeque::new);
        }
        if self.amd.pending.len() < self.lds.len() {
            self.amd.pending.resize(self.lds.len(), 0);
        }
        let mut writes: Vec<(usize, Pending)> = Vec::with_capacity(act.len());
        let mut first_of_wave: Vec<Option<(u32, u64)>> = vec![None; nwaves];
        for &t in act {
            let wv = t as usize / wave;
            let lane = t as usize % wave;
            let dst = self.val(lds)[t as usize];
            match first_of_wave[wv] {
                None => first_of_wave[wv] = Some((t, dst)),
                Some((t0, d0)) if d0 != dst => {
                    return Err(self.fault(
                        OP,
                        t,
                        format!(
                            "the LDS pointer differs between lanes of one wave (thread {:?} \
                             has another): it must be wave-uniform (it goes to M0)",
                            self.thread_ref(t0).thread
                        ),
                    ));
                }
                Some(_) => {}
            }
            let (base, num) = {
                let v = self.val(rsrc);
                (v[2 * t as usize], v[2 * t as usize + 1] as i64)
            };
            let idx = self.index_of(index, t);
            let range = Self::buffer_range(idx, w as i64, num);
            if !matches!(range, BufRange::Out) {
                self.check_buffer_offset(OP, t, idx, w, es as u32)?;
            }
            let mut vals = [0u64; 16];
            match range {
                BufRange::In => self.read_elems(base, idx, elem, &mut vals[..w], "load", t)?,
                BufRange::Out => {}
                BufRange::Partial if self.cx.memcheck => {
                    return Err(self.partial_fault(OP, t, idx, w, num))
                }
                BufRange::Partial => {
                    for (e, v) in vals[..w].iter_mut().enumerate() {
                        let j = idx + e as i64;
                        if j >= 0 && j < num {
                            self.read_elems(base, j, elem, std::slice::from_mut(v), "load", t)?;
                        }
                    }
                }
            }
            let mut data = [0u8; 16];
            for (e, v) in vals[..w].iter().enumerate() {
                data[e * es..(e + 1) * es].copy_from_slice(&v.to_le_bytes()[..es]);
            }
            let at = (lane * bytes) as i64;
            match self.locate(dst, at, 1, bytes as u64, "store", t)? {
                Loc::Lds(byte, region, region_off) => writes.push((
                    wv,
                    Pending {
                        t,
                        byte,
                        region,
                        region_off,
                        data,
                        n: bytes,
                    },
                )),
                Loc::Dropped => {}
                Loc::Global(..) => {
                    return Err(self.fault(OP, t, "the destination is not an LDS pointer"))
                }
            }
        }
        // One pending instruction per wave that had an active lane.
        let mut per_wave: Vec<Vec<Pending>> = vec![Vec::new(); nwaves];
        for (wv, p) in writes {
            for c in &mut self.amd.pending[p.byte..p.byte + p.n] {
                *c = c.saturating_add(1);
            }
            per_wave[wv].push(p);
        }
        for (wv, ps) in per_wave.into_iter().enumerate() {
            if first_of_wave[wv].is_some() {
                self.amd.queues[wv].push_back(ps);
                self.amd.count += 1;
            }
        }
        Ok(())
    }

    /// `ds_read_b64_tr_b16`: each lane reads 4 elements, then every 16-lane group
    /// transposes them (lane `j` gets element `j % 4` of lanes `4i + j / 4`, `i` in `0..4`).
    fn lds_read_tr16(
        &mut self,
        res: ValueId,
        ptr: ValueId,
        index: ValueId,
        act: &[u32],
    ) -> Result<(), SimError> {
        const OP: &str = "LdsReadTr16";
        const GROUP: usize = 16;
        let elem = self.info(res).elem;
        self.set_mask(act);
        for &t in act {
            let g = t as usize / GROUP * GROUP;
            if let Some(off) = (g..g + GROUP).find(|&u| !self.mask.get(u).copied().unwrap_or(false))
            {
                return Err(self.fault(
                    OP,
                    t,
                    format!(
                        "lane group {g}..{} is partly active (thread {off} is not): the \
                         transposing read exchanges data across all 16 lanes of a group, so \
                         every lane of the group must run it",
                        g + GROUP
                    ),
                ));
            }
        }
        let mut data = vec![0u64; self.cx.nthreads * 4];
        for &t in act {
            let addr = self.val(ptr)[t as usize];
            let idx = self.index_of(index, t);
            if let Loc::Lds(byte, ..) = self.locate(addr, idx, 2, 8, "load", t)? {
                if !byte.is_multiple_of(8) {
                    return Err(self.fault(
                        OP,
                        t,
                        format!("LDS byte address {byte} is not 8-byte aligned"),
                    ));
                }
            }
            let b = t as usize * 4;
            self.read_elems(addr, idx, elem, &mut data[b..b + 4], "load", t)?;
        }
        let mut r = self.take(res);
        for &t in act {
            let (g, j) = (t as usize / GROUP * GROUP, t as usize % GROUP);
            for i in 0..4 {
                r[t as usize * 4 + i] = data[(g + 4 * i + j / 4) * 4 + j % 4];
            }
        }
        self.put(res, r);
        Ok(())
    }

    /// `v_mov_b32_dpp` within rows of 16 lanes (see `AmdOp::Dpp`).
    fn dpp(
        &mut self,
        res: ValueId,
        value: ValueId,
        ctrl: DppCtrl,
        act: &[u32],
    ) -> Result<(), SimError> {
        const ROW: usize = 16;
        self.set_mask(act);
        for &t in act {
            let row = t as usize / ROW * ROW;
            if let Some(off) =
                (row..row + ROW).find(|&u| !self.mask.get(u).copied().unwrap_or(false))
            {
                return Err(self.fault(
                    "Dpp",
                    t,
                    format!(
                        "row {row}..{} is partly active (thread {off} is not): a DPP move \
                         reads lanes of the whole row, so every lane of the row must run it",
                        row + ROW
                    ),
                ));
            }
        }
        let mut r = self.take(res);
        let v = self.val(value);
        for &t in act {
            let (row, i) = (t as usize / ROW * ROW, t as usize % ROW);
            r[t as usize] = match ctrl.source(i as u32) {
                Some(src) => v[row + src as usize],
                None => v[t as usize],
            };
        }
        self.put(res, r);
        Ok(())
    }
}
