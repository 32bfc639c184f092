//! NVIDIA Hopper ops ([`NvOp`]) on the Sim: mbarrier phases and transaction counts, TMA tile
//! loads through [`SimTensorMap`]s, and wgmma over 128-byte-swizzled LDS tiles.
//!
//! TMA data is written into LDS when the copy is issued, but the bytes stay *pending* on
//! their mbarrier phase: an LDS read of pending bytes before a wait that observed the phase
//! complete is reported. Waits run in lockstep (see `NvOp::MbarWait`): one that cannot pass
//! when every thread reaches it is a deadlock.
//!
//! With racecheck on, TMA writes, wgmma operand reads and mbarrier arrive/wait edges go to
//! the LDS race detector (its rules are in `crate::race`): wgmma reads stay in flight until
//! the `wgmma.wait_group` that retires their batch (batches are counted per warpgroup by
//! `wgmma.commit_group`).

use super::nv_state::{InFlight, Mbar};
use super::Wg;
use crate::memory::{split, LDS_HANDLE_BASE};
use crate::numeric::{float_bits, float_val, int_bits, sext};
use crate::race::Access;
use crate::tensor_map::{SimTensorMap, TENSOR_MAP_BYTES};
use crate::SimError;
use flydsl_ir::{
    swizzle128, wgmma_acc_elem, wgmma_k, NvOp, Op, ScalarType, ValueId, WgmmaB, WARPGROUP, WGMMA_K,
    WGMMA_M,
};

impl Wg<'_, '_> {
    /// The workgroup LDS byte address of LDS pointer operand `p` for thread `t`.
    fn lds_byte(&self, p: ValueId, t: u32, op: &str) -> Result<usize, SimError> {
        let (h, off) = split(self.val(p)[t as usize]);
        let region = h
            .checked_sub(LDS_HANDLE_BASE)
            .and_then(|id| self.cx.lds.get(id as usize));
        match region {
            Some(r) if off >= 0 && (off as usize) < r.bytes.max(1) => Ok(r.offset + off as usize),
            _ => Err(self.fault(op, t, "not a pointer into an LDS array")),
        }
    }

    /// `LdsAddr`: the pointer's byte address in the workgroup's LDS.
    pub(super) fn lds_addr(&mut self, r: ValueId, p: ValueId, act: &[u32]) -> Result<(), SimError> {
        let mut out = self.take(r);
        for &t in act {
            let (h, off) = split(self.val(p)[t as usize]);
            let base = h
                .checked_sub(LDS_HANDLE_BASE)
                .and_then(|id| self.cx.lds.get(id as usize))
                .map(|r| r.offset as i64);
            let Some(base) = base else {
                return Err(self.fault("LdsAddr", t, "not an LDS pointer"));
            };
            out[t as usize] = ((base + off) as u32) as u64;
        }
        self.put(r, out);
        Ok(())
    }

    /// Report a read of LDS bytes `[byte, byte + n)` still pending on an mbarrier.
    pub(super) fn check_pending(
        &self,
        byte: usize,
        n: usize,
        t: u32,
        op: &str,
    ) -> Result<(), SimError> {
        self.check_cp_async(byte, n, t, op)?;
        let hit = self
            .nv
            .pending
            .iter()
            .find(|&&(s, e, _, _)| byte < e && s < byte + n);
        match hit {
            None => Ok(()),
            Some(&(_, _, bar, phase)) => Err(self.fault(
                op,
                t,
                format!(
                    "reads LDS byte {byte} written by a TMA copy that signals the mbarrier at LDS \
                     byte {bar} (phase {phase}) before waiting on that barrier"
                ),
            )),
        }
    }

    fn bar_mut(&mut self, bar: usize, t: u32, op: &str) -> Result<&mut Mbar, SimError> {
        if !self.nv.bars.contains_key(&bar) {
            return Err(self.fault(
                op,
                t,
                format!("mbarrier at LDS byte {bar} was never initialised"),
            ));
        }
        Ok(self.nv.bars.get_mut(&bar).expect("checked above"))
    }

    /// Complete the barrier's phase if nothing is left in it.
    fn settle(&mut self, bar: usize) {
        if let Some(b) = self.nv.bars.get_mut(&bar) {
            if b.pending == 0 && b.tx == 0 {
                b.phase += 1;
                b.pending = b.count;
                b.done = std::mem::take(&mut b.arrivals);
            }
        }
    }

    fn arrive(&mut self, bar: usize, tx: i64, t: u32, op: &str) -> Result<(), SimError> {
        // Racecheck: the arrival releases the thread's earlier reads.
        let stamp = self.race.as_mut().map(|r| r.release(t));
        let b = self.bar_mut(bar, t, op)?;
        if b.pending == 0 {
            return Err(self.fault(
                op,
                t,
                "more arrivals than the mbarrier's count in one phase",
            ));
        }
        b.tx += tx;
        b.pending -= 1;
        if let Some(s) = stamp {
            b.arrivals.push((t, s));
        }
        self.settle(bar);
        Ok(())
    }

    /// Racecheck: thread `t` passed a wait on the barrier at `bar`, so it is ordered after
    /// the arrivals of the phase it saw complete.
    fn acquire(&mut self, bar: usize, t: u32) {
        if let (Some(r), Some(b)) = (self.race.as_mut(), self.nv.bars.get(&bar)) {
            r.acquire(t, &b.done);
        }
    }

    /// A race between LDS byte `byte` accessed by thread `t` as `kind` and `c`.
    fn nv_race(&self, byte: usize, t: u32, kind: Access, c: crate::race::Conflict) -> SimError {
        let region = self
            .cx
            .lds
            .iter()
            .rev()
            .find(|r| r.offset <= byte && byte < r.offset + r.bytes.max(1));
        let (array, index) = match region {
            Some(r) => (
                r.name.clone(),
                (byte - r.offset) as i64 / r.elem_bytes.unwrap_or(1).max(1) as i64,
            ),
            None => ("LDS".to_string(), byte as i64),
        };
        SimError::LdsRace {
            kernel: self.kname(),
            array,
            index,
            first: self.thread_ref(c.other),
            first_kind: c.other_kind,
            second: self.thread_ref(t),
            second_kind: kind,
        }
    }

    /// Racecheck: `wgmma.commit_group` by the active threads closes their warpgroups' batch.
    fn wgmma_commit(&mut self, act: &[u32]) {
        if self.race.is_none() {
            return;
        }
        let mut last = u32::MAX;
        for &t in act {
            let g = t / WARPGROUP;
            if g != last {
                last = g;
                let c = &mut self.nv.commits;
                if c.len() <= g as usize {
                    c.resize(g as usize + 1, 0);
                }
                c[g as usize] += 1;
            }
        }
    }

    /// Racecheck: `wgmma.wait_group pending` by the active threads retires their warpgroups'
    /// batches older than the `pending` newest committed ones: their operand reads leave the
    /// in-flight set and are recorded as reads in the current epoch.
    fn wgmma_retire(&mut self, pending: u32, act: &[u32]) -> Result<(), SimError> {
        let Some(race) = self.race.as_mut() else {
            return Ok(());
        };
        let mut groups: Vec<u32> = act.iter().map(|t| t / WARPGROUP).collect();
        groups.dedup();
        let commits = &self.nv.commits;
        let done = |f: &InFlight| {
            groups.contains(&f.group)
                && f.batch + pending < commits.get(f.group as usize).copied().unwrap_or(0)
        };
        let (retired, kept): (Vec<InFlight>, Vec<InFlight>) =
            std::mem::take(&mut self.nv.in_flight)
                .into_iter()
                .partition(|f| done(f));
        self.nv.in_flight = kept;
        let mut conflict = None;
        for f in &retired {
            for &c in &f.chunks {
                race.in_flight(c, 16, f.group, false);
                if conflict.is_none() {
                    conflict = race
                        .access(c, 16, f.group, Access::WgmmaRead)
                        .map(|x| (c, f.group, x));
                }
            }
        }
        match conflict {
            Some((c, g, x)) => Err(self.nv_race(c, g * WARPGROUP, Access::WgmmaRead, x)),
            None => Ok(()),
        }
    }

    /// Run one Hopper op over the active threads.
    pub(super) fn nv_op(&mut self, op: &Op, nv: &NvOp, act: &[u32]) -> Result<(), SimError> {
        let name = format!("{nv:?}");
        let name = name
            .split([' ', '{', '('])
            .next()
            .unwrap_or("Nv")
            .to_string();
        match nv {
            NvOp::MbarInit { bar, count } => {
                for &t in act {
                    let b = self.lds_byte(*bar, t, &name)?;
                    self.nv.bars.insert(
                        b,
                        Mbar {
                            count: *count,
                            pending: *count,
                            tx: 0,
                            phase: 0,
                            arrivals: Vec::new(),
                            done: Vec::new(),
                        },
                    );
                    self.nv.pending.retain(|p| p.2 != b);
                }
            }
            NvOp::MbarArriveExpectTx { bar, bytes } => {
                for &t in act {
                    let b = self.lds_byte(*bar, t, &name)?;
                    let n = self.val(*bytes)[t as usize] as u32 as i32;
                    if n < 0 {
                        return Err(self.fault(&name, t, format!("expect-tx of {n} bytes")));
                    }
                    self.arrive(b, n as i64, t, &name)?;
                }
            }
            NvOp::MbarArrive { bar } => {
                for &t in act {
                    let b = self.lds_byte(*bar, t, &name)?;
                    self.arrive(b, 0, t, &name)?;
                }
            }
            NvOp::MbarWait { bar, parity } => {
                for &t in act {
                    let b = self.lds_byte(*bar, t, &name)?;
                    let p = self.val(*parity)[t as usize] & 1;
                    let phase = self.bar_mut(b, t, &name)?.phase;
                    if phase % 2 == p {
                        return Err(self.fault(
                            &name,
                            t,
                            format!(
                                "waits for phase parity {p} of the mbarrier at LDS byte {b}, \
                                 which has completed {phase} phases: the wait can never pass \
                                 in lockstep execution (a missing arrive or TMA, a wrong \
                                 parity, or a warp-specialized kernel, which the Sim does \
                                 not run)"
                            ),
                        ));
                    }
                    self.nv.pending.retain(|x| !(x.2 == b && x.3 < phase));
                    self.acquire(b, t);
                }
            }
            NvOp::FenceProxyAsync | NvOp::SetMaxNReg { .. } | NvOp::WgmmaFence => {}
            NvOp::WgmmaCommit => self.wgmma_commit(act),
            NvOp::ElectOne => {
                let r = op.results[0];
                let mut out = self.take(r);
                let ws = self.cx.wave;
                let mut last_wave = usize::MAX;
                for &t in act {
                    let w = t as usize / ws;
                    out[t as usize] = (w != last_wave) as u64;
                    last_wave = w;
                }
                self.put(r, out);
            }
            NvOp::TmaLoad {
                tmap,
                dst,
                bar,
                coords,
            } => {
                for &t in act {
                    self.tma_load(&name, t, *tmap, *dst, *bar, coords)?;
                }
            }
            NvOp::CpAsync { .. } | NvOp::CpAsyncCommit | NvOp::CpAsyncWait { .. } => {
                self.cp_async_op(nv, act)?
            }
            NvOp::LdMatrix { .. } | NvOp::StMatrix { .. } => self.matrix_op(op, nv, act)?,
            NvOp::Wgmma { n, a, b, acc } => self.wgmma(op.results[0], *n, [*a, *b, *acc], act)?,
            NvOp::WgmmaRs {
                n,
                a,
                b,
                b_layout,
                acc,
            } => self.wgmma_rs(op.results[0], *n, [*a, *b, *acc], *b_layout, act)?,
            NvOp::WgmmaWait { values, pending } => {
                self.wgmma_retire(*pending, act)?;
                for (&v, &r) in values.iter().zip(&op.results) {
                    let w = self.info(v).words;
                    let mut out = self.take(r);
                    let src = self.val(v);
                    for &t in act {
                        let s = t as usize * w;
                        out[s..s + w].copy_from_slice(&src[s..s + w]);
                    }
                    self.put(r, out);
                }
            }
        }
        Ok(())
    }

    fn tma_load(
        &mut self,
        name: &str,
        t: u32,
        tmap: ValueId,
        dst: ValueId,
        bar: ValueId,
        coords: &[ValueId],
    ) -> Result<(), SimError> {
        let mut bytes = [0u8; TENSOR_MAP_BYTES];
        self.read_global_bytes(
            self.val(tmap)[t as usize],
            &mut bytes,
            "TMA tensor map read",
            t,
        )?;
        let Some(m) = SimTensorMap::decode(&bytes) else {
            return Err(self.fault(
                name,
                t,
                "the tensor map is not one made by flydsl_rt::TensorMap for the Sim",
            ));
        };
        if coords.len() != m.rank as usize {
            return Err(self.fault(
                name,
                t,
                format!(
                    "{} coordinates for a rank-{} tensor map",
                    coords.len(),
                    m.rank
                ),
            ));
        }
        let d = self.lds_byte(dst, t, name)?;
        let b = self.lds_byte(bar, t, name)?;
        let align = if m.swizzle128 { 1024 } else { 128 };
        if d % align != 0 {
            return Err(self.fault(
                name,
                t,
                format!("TMA destination at LDS byte {d} is not {align}-byte aligned"),
            ));
        }
        let total = m.box_bytes() as usize;
        if d + total > self.lds.len() {
            return Err(self.fault(name, t, "TMA box runs past the end of LDS"));
        }
        if let Some(race) = self.race.as_mut() {
            // The box's 16-byte chunks (the swizzle moves whole chunks).
            for lin in (d..d + total).step_by(16) {
                let at = if m.swizzle128 {
                    swizzle128(lin as u64) as usize
                } else {
                    lin
                };
                let n = 16.min(d + total - lin);
                if let Some(c) = race.access(at, n, t, Access::TmaWrite) {
                    return Err(self.nv_race(at, t, Access::TmaWrite, c));
                }
            }
        }
        let c: Vec<i64> = coords
            .iter()
            .map(|&v| self.val(v)[t as usize] as u32 as i32 as i64)
            .collect();
        let es = m.elem_bytes as usize;
        let rank = m.rank as usize;
        let elems = total / es;
        let mut idx = [0u64; 5];
        let mut buf = vec![0u8; es];
        for e in 0..elems {
            // Element e of the box: its coordinates, innermost fastest.
            let mut rest = e as u64;
            for (i, x) in idx.iter_mut().enumerate().take(rank) {
                *x = rest % m.boxes[i] as u64;
                rest /= m.boxes[i] as u64;
            }
            let mut inside = true;
            let mut off = 0u64;
            for i in 0..rank {
                let g = c[i] + idx[i] as i64;
                if g < 0 || g as u64 >= m.dims[i] {
                    inside = false;
                    break;
                }
                off += g as u64 * m.strides[i];
            }
            buf.fill(0);
            if inside {
                self.read_global_bytes(m.base + off, &mut buf, "TMA load", t)?;
            }
            let lin = (d + e * es) as u64;
            let at = if m.swizzle128 { swizzle128(lin) } else { lin } as usize;
            self.lds[at..at + es].copy_from_slice(&buf);
            self.mark_init(at, es);
        }
        let phase = self.bar_mut(b, t, name)?.phase;
        self.nv.pending.push((d, d + total, b, phase));
        self.bar_mut(b, t, name)?.tx -= total as i64;
        self.settle(b);
        Ok(())
    }

    /// Racecheck: the operand reads of one wgmma of warpgroup `g` (issued by `t0`): checked
    /// against writers now and in flight until a wait retires its batch.
    fn wgmma_reads(
        &mut self,
        op: &str,
        t0: u32,
        g: u32,
        operands: [(ValueId, usize); 2],
    ) -> Result<(), SimError> {
        let elem = self.info(operands[0].0).elem;
        let row_bytes = elem.size_bytes() as usize * wgmma_k(elem) as usize;
        let mut chunks = Vec::new();
        for (p, rows) in operands {
            let base = self.lds_byte(p, t0, op)?;
            for row in 0..rows {
                for c in (0..row_bytes).step_by(16) {
                    chunks.push(swizzle128((base + 128 * row + c) as u64) as usize);
                }
            }
        }
        self.wgmma_read_chunks(t0, g, chunks)
    }

    /// Racecheck: the 16-byte LDS chunks (swizzled addresses) one wgmma of warpgroup `g`
    /// reads, checked now and kept in flight until a wait retires their batch.
    fn wgmma_read_chunks(&mut self, t0: u32, g: u32, chunks: Vec<usize>) -> Result<(), SimError> {
        let batch = self.nv.commits.get(g as usize).copied().unwrap_or(0);
        let race = self.race.as_mut().expect("racecheck is on");
        for &c in &chunks {
            if let Some(x) = race.access(c, 16, g, Access::WgmmaRead) {
                return Err(self.nv_race(c, t0, Access::WgmmaRead, x));
            }
            race.in_flight(c, 16, g, true);
        }
        self.nv.in_flight.push(InFlight {
            group: g,
            batch,
            chunks,
        });
        Ok(())
    }

    fn wgmma(
        &mut self,
        r: ValueId,
        n: u32,
        [a, b, acc]: [ValueId; 3],
        act: &[u32],
    ) -> Result<(), SimError> {
        let elem = self.info(a).elem;
        let op = format!("Wgmma(m64n{n}k{} {elem})", wgmma_k(elem));
        let wg = WARPGROUP as usize;
        let es = elem.size_bytes() as usize;
        let (m, n, k) = (WGMMA_M as usize, n as usize, wgmma_k(elem) as usize);
        // s8 accumulates exactly in s32 (wrapping); the float forms in f64, rounded once (fp8
        // then truncated to Hopper's 13 accumulator mantissa bits: `hopper_fp8_acc_bits`).
        let int = wgmma_acc_elem(elem) == ScalarType::I32;
        let fp8 = matches!(elem, ScalarType::F8E4M3FN | ScalarType::F8E5M2);
        let mut out = self.take(r);
        let mut i = 0;
        while i < act.len() {
            let g = act[i] as usize / wg;
            if act.len() < i + wg
                || act[i + wg - 1] as usize / wg != g
                || !(act[i] as usize).is_multiple_of(wg)
            {
                return Err(self.fault(
                    &op,
                    act[i],
                    "wgmma needs all 128 threads of its warpgroup active",
                ));
            }
            let t0 = act[i];
            let read = |wgp: &Self, p: ValueId, rows: usize| -> Result<Vec<f64>, SimError> {
                let base = wgp.lds_byte(p, t0, &op)?;
                if base % 16 != 0 || base % 1024 >= 128 {
                    return Err(wgp.fault(
                        &op,
                        t0,
                        format!(
                            "operand at LDS byte {base}: needs 16-byte alignment and \
                             address % 1024 < 128 (a K-slice of a 1024-byte-aligned SW128 tile)"
                        ),
                    ));
                }
                let mut v = vec![0.0; rows * k];
                for row in 0..rows {
                    for kk in 0..k {
                        let at = swizzle128((base + 128 * row + es * kk) as u64) as usize;
                        if at + es > wgp.lds.len() {
                            return Err(wgp.fault(&op, t0, "operand runs past the end of LDS"));
                        }
                        wgp.check_pending(at, es, t0, &op)?;
                        let mut w = [0u8; 8];
                        w[..es].copy_from_slice(&wgp.lds[at..at + es]);
                        v[row * k + kk] = float_val(elem, u64::from_le_bytes(w));
                    }
                }
                Ok(v)
            };
            let va = read(self, a, m)?;
            let vb = read(self, b, n)?;
            if self.race.is_some() {
                self.wgmma_reads(&op, t0, g as u32, [(a, m), (b, n)])?;
            }
            let cw = n / 2;
            let cv = self.val(acc);
            for tl in 0..wg {
                let t = g * wg + tl;
                let (w, l) = (tl / 32, tl % 32);
                for reg in 0..cw {
                    let (j, q) = (reg / 4, reg % 4);
                    let row = 16 * w + l / 4 + 8 * (q / 2);
                    let col = 8 * j + 2 * (l % 4) + q % 2;
                    let c = cv[t * cw + reg];
                    out[t * cw + reg] = if int {
                        let mut s = sext(c, 32);
                        for kk in 0..k {
                            s += (va[row * k + kk] * vb[col * k + kk]) as i64;
                        }
                        int_bits(ScalarType::I32, s)
                    } else {
                        let mut s = float_val(ScalarType::F32, c);
                        for kk in 0..k {
                            s += va[row * k + kk] * vb[col * k + kk];
                        }
                        if fp8 {
                            hopper_fp8_acc_bits(s)
                        } else {
                            float_bits(ScalarType::F32, s)
                        }
                    };
                }
            }
            i += wg;
        }
        self.put(r, out);
        Ok(())
    }

    /// Check that `act` covers whole warpgroups; returns their first threads.
    fn whole_warpgroups(&self, op: &str, act: &[u32]) -> Result<Vec<u32>, SimError> {
        let wg = WARPGROUP as usize;
        let mut firsts = Vec::new();
        let mut i = 0;
        while i < act.len() {
            let g = act[i] as usize / wg;
            if act.len() < i + wg
                || act[i + wg - 1] as usize / wg != g
                || !(act[i] as usize).is_multiple_of(wg)
            {
                return Err(self.fault(
                    op,
                    act[i],
                    "wgmma needs all 128 threads of its warpgroup active",
                ));
            }
            firsts.push(act[i]);
            i += wg;
        }
        Ok(firsts)
    }

    /// `WgmmaRs`: A (64 x 16) gathered from the warpgroup's register fragments (see
    /// `NvOp::WgmmaRs`), B (16 x N) read from LDS as `layout` says.
    fn wgmma_rs(
        &mut self,
        r: ValueId,
        n: u32,
        [a, b, acc]: [ValueId; 3],
        layout: WgmmaB,
        act: &[u32],
    ) -> Result<(), SimError> {
        let op = format!("WgmmaRs(m64n{n}k16)");
        let wg = WARPGROUP as usize;
        let elem = self.info(b).elem;
        let es = elem.size_bytes() as usize;
        let (m, n, k) = (WGMMA_M as usize, n as usize, WGMMA_K as usize);
        let mut out = self.take(r);
        for t0 in self.whole_warpgroups(&op, act)? {
            let g = t0 as usize / wg;
            // A[row][kk] from lane (row % 16 / ... ) of warp row / 16.
            let fa = self.val(a);
            let mut va = vec![0.0; m * k];
            for row in 0..m {
                for kk in 0..k {
                    let (w, rr) = (row / 16, row % 16);
                    let lane = 4 * (rr % 8) + (kk % 8) / 2;
                    let reg = rr / 8 + 2 * (kk / 8);
                    let t = g * wg + 32 * w + lane;
                    let word = fa[t * 4 + reg] as u32;
                    let bits = if kk % 2 == 0 {
                        word & 0xffff
                    } else {
                        word >> 16
                    };
                    va[row * k + kk] = float_val(elem, bits as u64);
                }
            }
            let base = self.lds_byte(b, t0, &op)?;
            let align_ok = match layout {
                WgmmaB::KMajor => base % 16 == 0 && base % 1024 < 128,
                WgmmaB::MnMajor { .. } => base % 1024 == 0,
            };
            if !align_ok {
                return Err(self.fault(
                    &op,
                    t0,
                    format!(
                        "B operand at LDS byte {base}: {}",
                        match layout {
                            WgmmaB::KMajor => "needs 16-byte alignment and address % 1024 < 128",
                            WgmmaB::MnMajor { .. } => "an MN-major B needs 1024-byte alignment",
                        }
                    ),
                ));
            }
            let mut vb = vec![0.0; k * n];
            let mut chunks = Vec::new();
            for kk in 0..k {
                for col in 0..n {
                    let lin = base as u64 + layout.offset(kk as u64, col as u64, es as u64);
                    let at = swizzle128(lin) as usize;
                    if at + es > self.lds.len() {
                        return Err(self.fault(&op, t0, "operand runs past the end of LDS"));
                    }
                    self.check_pending(at, es, t0, &op)?;
                    let mut w = [0u8; 8];
                    w[..es].copy_from_slice(&self.lds[at..at + es]);
                    vb[kk * n + col] = float_val(elem, u64::from_le_bytes(w));
                    chunks.push(at & !15);
                }
            }
            if self.race.is_some() {
                chunks.sort_unstable();
                chunks.dedup();
                self.wgmma_read_chunks(t0, g as u32, chunks)?;
            }
            let cw = n / 2;
            let cv = self.val(acc);
            for tl in 0..wg {
                let t = g * wg + tl;
                let (w, l) = (tl / 32, tl % 32);
                for reg in 0..cw {
                    let (j, q) = (reg / 4, reg % 4);
                    let row = 16 * w + l / 4 + 8 * (q / 2);
                    let col = 8 * j + 2 * (l % 4) + q % 2;
                    let mut s = float_val(ScalarType::F32, cv[t * cw + reg]);
                    for kk in 0..k {
                        s += va[row * k + kk] * vb[kk * n + col];
                    }
                    out[t * cw + reg] = float_bits(ScalarType::F32, s);
                }
            }
        }
        self.put(r, out);
        Ok(())
    }
}

/// The f32 bits an fp8 wgmma leaves in an accumulator whose exact new value is `s`: Hopper
/// keeps an fp8 wgmma's sum with 13 mantissa bits (e8m13), truncated toward zero (the
/// PyTorch and DeepSeek-V3 reports: clearing the 10 low mantissa bits of the f32 result
/// reproduces the hardware). So a long K accumulated in one register set loses the small
/// products, and kernels promote partial sums into f32 (`fly-gemm`'s
/// `kernels/wgmma_scaled.rs`). The truncation inside one instruction (products aligned to
/// the largest) is not modelled, so the hardware can lose more than this model does.
fn hopper_fp8_acc_bits(s: f64) -> u64 {
    let x = s as f32;
    if !x.is_finite() {
        return x.to_bits() as u64;
    }
    // Round to f32, then truncate toward zero to 13 mantissa bits (sign-magnitude: clearing
    // low bits moves toward zero; subnormals lose the same bits).
    (x.to_bits() & !0x3FF) as u64
}
