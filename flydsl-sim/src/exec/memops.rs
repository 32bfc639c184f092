//! Memory ops: global and LDS loads/stores, buffer-resource accesses and atomics, with bounds
//! checking (memcheck), LDS race detection (racecheck) and unwritten-LDS reads (initcheck).

use super::Wg;
use crate::fpmode::ftz;
use crate::memory::{split, LDS_HANDLE_BASE};
use crate::numeric::{mask, sext};
use crate::race::Access;
use crate::SimError;
use flydsl_ir::{ScalarType, ValueId};
use std::sync::atomic::Ordering;

/// Where an access lands.
#[derive(Clone, Copy, Debug)]
pub(super) enum Loc {
    /// Allocation index in the launch snapshot and byte offset.
    Global(usize, u64),
    /// Byte in the LDS block, the LDS array id and the byte offset inside that array.
    Lds(usize, usize, i64),
    /// Out of bounds with memcheck off: loads read 0, stores are dropped.
    Dropped,
}

impl Wg<'_, '_> {
    fn find_alloc(&mut self, handle: u64) -> Option<usize> {
        let allocs = &self.cx.allocs;
        if let Some(a) = allocs.get(self.alloc_hint) {
            if a.handle == handle {
                return Some(self.alloc_hint);
            }
        }
        let i = allocs.binary_search_by_key(&handle, |a| a.handle).ok()?;
        self.alloc_hint = i;
        Some(i)
    }

    /// Locate an access of `n` bytes at element `index` (of `es` bytes) from `addr`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn locate(
        &mut self,
        addr: u64,
        index: i64,
        es: u64,
        n: u64,
        access: &'static str,
        t: u32,
    ) -> Result<Loc, SimError> {
        let (h, off) = split(addr);
        let byte = off as i128 + index as i128 * es as i128;
        let byte = i64::try_from(byte).unwrap_or(i64::MIN);
        if h >= LDS_HANDLE_BASE {
            let id = (h - LDS_HANDLE_BASE) as usize;
            let (name, esz, arr_bytes, base) = match self.cx.lds.get(id) {
                Some(r) => (
                    r.name.as_str(),
                    r.elem_bytes.unwrap_or(1) as i64,
                    r.bytes as i64,
                    r.offset,
                ),
                None => ("<unknown LDS array>", es as i64, 0, 0),
            };
            if byte >= 0 && byte.saturating_add(n as i64) <= arr_bytes {
                return Ok(Loc::Lds(base + byte as usize, id, byte));
            }
            let len = arr_bytes / esz.max(1);
            if !self.cx.memcheck {
                return Ok(Loc::Dropped);
            }
            return Err(SimError::LdsOutOfBounds {
                kernel: self.kname(),
                array: name.to_string(),
                access,
                index: byte.div_euclid(esz.max(1)),
                len,
                at: self.thread_ref(t),
            });
        }
        let found = self.find_alloc(h);
        if let Some(i) = found {
            if self.cx.allocs[i].contains(byte, n) {
                return Ok(Loc::Global(i, byte as u64));
            }
        }
        if !self.cx.memcheck {
            return Ok(Loc::Dropped);
        }
        let es = es as i64;
        let param = self.cx.params.iter().find(|p| p.handle == h);
        let (buffer, base_off) = match param {
            Some(p) => (p.name.clone(), p.base_off),
            None if h == 0 => ("null pointer".to_string(), 0),
            None if found.is_none() => ("unknown buffer (freed or invalid pointer)".to_string(), 0),
            None => ("unknown buffer".to_string(), 0),
        };
        let alloc_len = found.map(|i| self.cx.allocs[i].len as i64).unwrap_or(0);
        Err(SimError::OutOfBounds {
            kernel: self.kname(),
            buffer,
            access,
            index: (byte - base_off).div_euclid(es),
            len: (alloc_len - base_off).max(0) / es,
            at: self.thread_ref(t),
        })
    }

    /// Read `out.len()` bytes of global memory at `addr` (memcheck applies; an access out of
    /// bounds with memcheck off reads zeros).
    pub(super) fn read_global_bytes(
        &mut self,
        addr: u64,
        out: &mut [u8],
        access: &'static str,
        t: u32,
    ) -> Result<(), SimError> {
        match self.locate(addr, 0, 1, out.len() as u64, access, t)? {
            Loc::Global(i, off) => self.cx.allocs[i].read(off, out),
            Loc::Lds(..) => {
                return Err(self.fault(access, t, "expected a global pointer, got LDS"))
            }
            Loc::Dropped => out.fill(0),
        }
        Ok(())
    }

    pub(super) fn race(
        &mut self,
        loc: Loc,
        n: usize,
        t: u32,
        kind: Access,
    ) -> Result<(), SimError> {
        let Loc::Lds(byte, ..) = loc else {
            return Ok(());
        };
        self.check_lds_pending(byte, n, t, kind)?;
        self.race_record(loc, n, t, kind)
    }

    /// Record an LDS access in the race detector (no pending direct-to-LDS check).
    pub(super) fn race_record(
        &mut self,
        loc: Loc,
        n: usize,
        t: u32,
        kind: Access,
    ) -> Result<(), SimError> {
        let Loc::Lds(byte, id, arr_off) = loc else {
            return Ok(());
        };
        let Some(rd) = &mut self.race else {
            return Ok(());
        };
        if let Some(c) = rd.access(byte, n, t, kind) {
            let arr = &self.cx.lds[id];
            return Err(SimError::LdsRace {
                kernel: self.kname(),
                array: arr.name.clone(),
                index: arr_off / arr.elem_bytes.unwrap_or(1).max(1) as i64,
                first: self.thread_ref(c.other),
                first_kind: c.other_kind,
                second: self.thread_ref(t),
                second_kind: kind,
            });
        }
        Ok(())
    }

    /// initcheck: every byte of an LDS read of `n` bytes at `loc` was written by this
    /// workgroup. Every op that reads LDS calls it (with `mark_init` for every op that writes
    /// LDS: stores, atomics, and asynchronous copies into LDS when their data lands).
    pub(super) fn check_init(
        &self,
        loc: Loc,
        n: usize,
        t: u32,
        access: &'static str,
    ) -> Result<(), SimError> {
        let (Loc::Lds(byte, id, arr_off), Some(m)) = (loc, &self.lds_init) else {
            return Ok(());
        };
        let Some(first) = m.first_unwritten(byte, n) else {
            return Ok(());
        };
        let arr = &self.cx.lds[id];
        Err(SimError::LdsUninit {
            kernel: self.kname(),
            array: arr.name.clone(),
            access,
            index: (arr_off + (first - byte) as i64) / arr.elem_bytes.unwrap_or(1).max(1) as i64,
            at: self.thread_ref(t),
        })
    }

    /// initcheck: record a write of `n` bytes at LDS byte `byte`.
    pub(super) fn mark_init(&mut self, byte: usize, n: usize) {
        if let Some(m) = &mut self.lds_init {
            m.mark(byte, n);
        }
    }

    /// Read `out.len()` elements of `elem` at `addr[index..]` into `out` (bits).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_elems(
        &mut self,
        addr: u64,
        index: i64,
        elem: ScalarType,
        out: &mut [u64],
        access: &'static str,
        t: u32,
    ) -> Result<(), SimError> {
        let es = elem.size_bytes() as usize;
        let n = es * out.len();
        // The verifier limits accesses to 16 bytes.
        let mut buf = [0u8; 16];
        if n > buf.len() {
            return Err(self.unsupported(format!("memory access of {n} bytes")));
        }
        let loc = self.locate(addr, index, es as u64, n as u64, access, t)?;
        match loc {
            Loc::Global(i, off) => self.cx.allocs[i].read(off, &mut buf[..n]),
            Loc::Lds(byte, ..) => {
                self.race(loc, n, t, Access::Read)?;
                self.check_init(loc, n, t, access)?;
                self.check_pending(byte, n, t, access)?;
                buf[..n].copy_from_slice(&self.lds[byte..byte + n]);
            }
            Loc::Dropped => {}
        }
        for (e, o) in out.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w[..es].copy_from_slice(&buf[e * es..(e + 1) * es]);
            let v = u64::from_le_bytes(w);
            *o = if elem == ScalarType::I1 {
                (v != 0) as u64
            } else {
                v & mask(elem.bits())
            };
        }
        Ok(())
    }

    /// Write the element bits `vals` at `addr[index..]`.
    fn write_elems(
        &mut self,
        addr: u64,
        index: i64,
        elem: ScalarType,
        vals: &[u64],
        access: &'static str,
        t: u32,
    ) -> Result<(), SimError> {
        let es = elem.size_bytes() as usize;
        let n = es * vals.len();
        let mut buf = [0u8; 16];
        if n > buf.len() {
            return Err(self.unsupported(format!("memory access of {n} bytes")));
        }
        for (e, v) in vals.iter().enumerate() {
            buf[e * es..(e + 1) * es].copy_from_slice(&v.to_le_bytes()[..es]);
        }
        let loc = self.locate(addr, index, es as u64, n as u64, access, t)?;
        match loc {
            Loc::Global(i, off) => self.cx.allocs[i].write(off, &buf[..n]),
            Loc::Lds(byte, ..) => {
                self.race(loc, n, t, Access::Write)?;
                self.mark_init(byte, n);
                self.lds[byte..byte + n].copy_from_slice(&buf[..n]);
            }
            Loc::Dropped => {}
        }
        Ok(())
    }

    pub(super) fn index_of(&self, index: ValueId, t: u32) -> i64 {
        let bits = self.info(index).elem.bits();
        sext(self.val(index)[t as usize], bits)
    }

    /// With memcheck on, an access the kernel declared `align`-byte aligned (its
    /// `MemFlags::align`) must be: a misaligned vector access faults on NVIDIA GPUs and reads
    /// or writes the wrong LDS bytes on AMD. Global offsets count from the allocation's
    /// start (device allocations are at least 256-byte aligned), LDS offsets from the
    /// workgroup's LDS base.
    fn check_align(
        &self,
        addr: u64,
        index: i64,
        es: u64,
        align: u32,
        access: &'static str,
        t: u32,
    ) -> Result<(), SimError> {
        if !self.cx.memcheck || align <= 1 {
            return Ok(());
        }
        let (h, off) = split(addr);
        let mut byte = off as i128 + index as i128 * es as i128;
        let space = if h >= LDS_HANDLE_BASE {
            let id = (h - LDS_HANDLE_BASE) as usize;
            byte += self.cx.lds.get(id).map_or(0, |r| r.offset) as i128;
            "LDS"
        } else {
            "global"
        };
        if byte.rem_euclid(align as i128) == 0 {
            return Ok(());
        }
        Err(self.fault(
            access,
            t,
            format!(
                "misaligned {space} {access}: byte offset {byte} is not a multiple of the \
                 {align}-byte alignment the access declares (a vector access needs its \
                 address aligned to its width)"
            ),
        ))
    }

    pub(super) fn load(
        &mut self,
        res: ValueId,
        ptr: ValueId,
        index: ValueId,
        align: u32,
        act: &[u32],
    ) -> Result<(), SimError> {
        let i = self.info(res);
        let es = i.elem.size_bytes() as u64;
        let mut r = self.take(res);
        let mut out = Ok(());
        for &t in act {
            let addr = self.val(ptr)[t as usize];
            let idx = self.index_of(index, t);
            let b = t as usize * i.words;
            let res = self
                .check_align(addr, idx, es, align, "load", t)
                .and_then(|()| {
                    self.read_elems(addr, idx, i.elem, &mut r[b..b + i.words], "load", t)
                });
            if let Err(e) = res {
                out = Err(e);
                break;
            }
        }
        self.put(res, r);
        out
    }

    pub(super) fn store(
        &mut self,
        ptr: ValueId,
        index: ValueId,
        value: ValueId,
        align: u32,
        act: &[u32],
    ) -> Result<(), SimError> {
        let i = self.info(value);
        let es = i.elem.size_bytes() as u64;
        let mut tmp = [0u64; 32];
        for &t in act {
            let addr = self.val(ptr)[t as usize];
            let idx = self.index_of(index, t);
            self.check_align(addr, idx, es, align, "store", t)?;
            let b = t as usize * i.words;
            tmp[..i.words].copy_from_slice(&self.val(value)[b..b + i.words]);
            self.write_elems(addr, idx, i.elem, &tmp[..i.words], "store", t)?;
        }
        Ok(())
    }

    pub(super) fn make_rsrc(&mut self, res: ValueId, ptr: ValueId, n: ValueId, act: &[u32]) {
        let mut r = self.take(res);
        let (vp, vn) = (self.val(ptr), self.val(n));
        for &t in act {
            let t = t as usize;
            r[2 * t] = vp[t];
            r[2 * t + 1] = vn[t];
        }
        self.put(res, r);
    }

    /// Classify a buffer access of `w` elements at `idx` against `num` valid elements.
    pub(super) fn buffer_range(idx: i64, w: i64, num: i64) -> BufRange {
        let end = idx as i128 + w as i128;
        if idx >= 0 && end <= num as i128 {
            BufRange::In
        } else if end <= 0 || idx >= num {
            BufRange::Out
        } else {
            BufRange::Partial
        }
    }

    /// AMD lowers a buffer access's element index to a 32-bit byte offset (`idx * size`,
    /// unsigned in the hardware's range check): an access whose last byte lies past
    /// `u32::MAX` would wrap to another element there (indexcheck).
    pub(super) fn check_buffer_offset(
        &self,
        op: &str,
        t: u32,
        idx: i64,
        w: usize,
        es: u32,
    ) -> Result<(), SimError> {
        if !self.cx.buffer_offset_check || idx < 0 {
            return Ok(());
        }
        let end = (idx as i128 + w as i128) * es as i128;
        if end <= u32::MAX as i128 {
            return Ok(());
        }
        Err(self.fault(
            op,
            t,
            format!(
                "element index {idx} of a buffer resource is byte offset {} (access ends at \
                 byte {end}): past the 32-bit buffer offset the AMD code computes, so the \
                 GPU would access another element. Index it with a global Load/Store and an \
                 i64 index, or make the resource over a base pointer nearer the element",
                idx as i128 * es as i128
            ),
        ))
    }

    pub(super) fn partial_fault(&self, op: &str, t: u32, idx: i64, w: usize, num: i64) -> SimError {
        self.fault(
            op,
            t,
            format!(
                "partially out-of-range vector buffer access: elements {idx}..{} of a resource \
                 with {num} valid elements (hardware behaviour unspecified; guard the tail or \
                 use scalar accesses there)",
                idx + w as i64
            ),
        )
    }

    pub(super) fn buffer_load(
        &mut self,
        res: ValueId,
        rsrc: ValueId,
        index: ValueId,
        act: &[u32],
    ) -> Result<(), SimError> {
        let i = self.info(res);
        let w = i.words;
        let es = i.elem.size_bytes();
        let mut r = self.take(res);
        let mut out = Ok(());
        for &t in act {
            let (base, num) = {
                let v = self.val(rsrc);
                (v[2 * t as usize], v[2 * t as usize + 1] as i64)
            };
            let idx = self.index_of(index, t);
            let b = t as usize * w;
            let range = Self::buffer_range(idx, w as i64, num);
            if !matches!(range, BufRange::Out) {
                if let Err(e) = self.check_buffer_offset("BufferLoad", t, idx, w, es) {
                    out = Err(e);
                    break;
                }
            }
            let res = match range {
                BufRange::In => self.read_elems(base, idx, i.elem, &mut r[b..b + w], "load", t),
                BufRange::Out => {
                    r[b..b + w].fill(0);
                    Ok(())
                }
                BufRange::Partial if self.cx.memcheck => {
                    Err(self.partial_fault("BufferLoad", t, idx, w, num))
                }
                BufRange::Partial => {
                    let mut res = Ok(());
                    for e in 0..w {
                        let j = idx + e as i64;
                        if j >= 0 && j < num {
                            res = res.and(self.read_elems(
                                base,
                                j,
                                i.elem,
                                &mut r[b + e..b + e + 1],
                                "load",
                                t,
                            ));
                        } else {
                            r[b + e] = 0;
                        }
                    }
                    res
                }
            };
            if let Err(e) = res {
                out = Err(e);
                break;
            }
        }
        self.put(res, r);
        out
    }

    pub(super) fn buffer_store(
        &mut self,
        rsrc: ValueId,
        index: ValueId,
        value: ValueId,
        act: &[u32],
    ) -> Result<(), SimError> {
        let i = self.info(value);
        let w = i.words;
        let mut tmp = [0u64; 32];
        for &t in act {
            let (base, num) = {
                let v = self.val(rsrc);
                (v[2 * t as usize], v[2 * t as usize + 1] as i64)
            };
            let idx = self.index_of(index, t);
            let b = t as usize * w;
            tmp[..w].copy_from_slice(&self.val(value)[b..b + w]);
            let range = Self::buffer_range(idx, w as i64, num);
            if !matches!(range, BufRange::Out) {
                self.check_buffer_offset("BufferStore", t, idx, w, i.elem.size_bytes())?;
            }
            match range {
                BufRange::In => self.write_elems(base, idx, i.elem, &tmp[..w], "store", t)?,
                BufRange::Out => {}
                BufRange::Partial if self.cx.memcheck => {
                    return Err(self.partial_fault("BufferStore", t, idx, w, num))
                }
                BufRange::Partial => {
                    for (e, v) in tmp[..w].iter().enumerate() {
                        let j = idx + e as i64;
                        if j >= 0 && j < num {
                            self.write_elems(base, j, i.elem, &[*v], "store", t)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn atomic_add(
        &mut self,
        res: ValueId,
        ptr: ValueId,
        index: ValueId,
        value: ValueId,
        act: &[u32],
    ) -> Result<(), SimError> {
        let elem = self.info(value).elem;
        let is_f32 = elem == ScalarType::F32;
        // f32 atomic adds flush denormal inputs and results on every target (crate::fpmode).
        let add = |old: u32, v: u32| {
            if is_f32 {
                ftz(ftz(f32::from_bits(old)) + ftz(f32::from_bits(v))).to_bits()
            } else {
                old.wrapping_add(v)
            }
        };
        let mut r = self.take(res);
        let mut out = Ok(());
        for &t in act {
            let addr = self.val(ptr)[t as usize];
            let v = self.val(value)[t as usize] as u32;
            let idx = self.index_of(index, t);
            let loc = match self.locate(addr, idx, 4, 4, "atomic", t) {
                Ok(l) => l,
                Err(e) => {
                    out = Err(e);
                    break;
                }
            };
            let old = match loc {
                Loc::Global(i, off) => {
                    let Some(a) = self.cx.allocs[i].atomic_u32(off) else {
                        out = Err(self.fault(
                            "AtomicAdd",
                            t,
                            format!("misaligned atomic at byte offset {off}"),
                        ));
                        break;
                    };
                    if is_f32 {
                        let mut cur = a.load(Ordering::Relaxed);
                        loop {
                            match a.compare_exchange_weak(
                                cur,
                                add(cur, v),
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            ) {
                                Ok(o) => break o,
                                Err(o) => cur = o,
                            }
                        }
                    } else {
                        a.fetch_add(v, Ordering::Relaxed)
                    }
                }
                Loc::Lds(byte, ..) => {
                    if let Err(e) = self
                        .race(loc, 4, t, Access::Atomic)
                        .and_then(|()| self.check_init(loc, 4, t, "atomic"))
                    {
                        out = Err(e);
                        break;
                    }
                    self.mark_init(byte, 4);
                    let mut w = [0u8; 4];
                    w.copy_from_slice(&self.lds[byte..byte + 4]);
                    let old = u32::from_le_bytes(w);
                    self.lds[byte..byte + 4].copy_from_slice(&add(old, v).to_le_bytes());
                    old
                }
                Loc::Dropped => 0,
            };
            r[t as usize] = old as u64;
        }
        self.put(res, r);
        out
    }
}

pub(super) enum BufRange {
    In,
    Out,
    Partial,
}
