//! The workgroup executor: all threads of one workgroup run in lockstep, op by op, over
//! per-thread value vectors, with an active list for structured divergence.

mod amd_lanes;
mod amd_ops;
mod amd_state;
mod amd_tdm;
mod arith;
mod cp_state;
mod flags;
pub(crate) use flags::has_flag_wait;
mod lifetimes;
mod memops;
mod mma_tables;
mod nv_async;
mod nv_matrix;
mod nv_ops;
mod nv_state;
mod wave;

use crate::memory::{Alloc, LdsInit};
use crate::numeric::{mask, sext};
use crate::race::RaceDetector;
use crate::{SimError, SimOptions, ThreadRef};
use flydsl_ir::{Block, Dim, Kernel, Op, OpKind, ScalarType, Special, Type, ValueId};
use std::sync::Arc;

/// Decoded type of one SSA value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VInfo {
    /// Element type.
    pub elem: ScalarType,
    /// Words (u64) per thread: vector lanes, 1 for a pointer (its address), 2 for a buffer
    /// resource (base address, valid element count).
    pub words: usize,
}

impl VInfo {
    fn of(t: Type) -> VInfo {
        match t {
            Type::Scalar(s) | Type::Ptr(_, s) => VInfo { elem: s, words: 1 },
            Type::Vector(s, n) => VInfo {
                elem: s,
                words: n as usize,
            },
            Type::BufferRsrc(s) => VInfo { elem: s, words: 2 },
        }
    }
}

/// A tensor parameter's buffer, for naming out-of-bounds accesses.
#[derive(Clone, Debug)]
pub(crate) struct ParamBuf {
    pub name: String,
    pub handle: u64,
    pub base_off: i64,
}

/// One addressable LDS region of a launch: a static array, or the dynamic region (its index
/// is the number of static arrays). LDS pointers carry the region's index as their handle.
#[derive(Clone, Debug)]
pub(crate) struct LdsRegion {
    pub name: String,
    /// Byte offset inside the workgroup's LDS.
    pub offset: usize,
    /// Size in bytes.
    pub bytes: usize,
    /// Element size for error messages (the dynamic region has none: its indices are bytes).
    pub elem_bytes: Option<u32>,
}

/// The LDS regions of `k` launched with `dynamic_bytes` of dynamic LDS, and the total bytes.
fn lds_regions(k: &Kernel, dynamic_bytes: u32) -> (Vec<LdsRegion>, usize) {
    let mut regions: Vec<LdsRegion> = k
        .lds
        .iter()
        .map(|a| LdsRegion {
            name: a.name.clone(),
            offset: a.offset as usize,
            bytes: a.len as usize * a.elem.size_bytes() as usize,
            elem_bytes: Some(a.elem.size_bytes()),
        })
        .collect();
    let mut total = k.lds_bytes() as usize;
    if let Some(d) = &k.dynamic_lds {
        let offset = k.dynamic_lds_offset() as usize;
        regions.push(LdsRegion {
            name: format!(
                "{} (dynamic region of {dynamic_bytes} bytes; index in bytes)",
                d.name
            ),
            offset,
            bytes: dynamic_bytes as usize,
            elem_bytes: None,
        });
        total = offset + dynamic_bytes as usize;
    }
    (regions, total)
}

/// Everything about a launch that is shared read-only by all workers (decoded once).
pub(crate) struct Ctx<'k> {
    pub k: &'k Kernel,
    pub info: Vec<VInfo>,
    pub wave: usize,
    pub block: [u32; 3],
    pub grid: [u32; 3],
    pub nthreads: usize,
    pub allocs: Vec<Arc<Alloc>>,
    pub params: Vec<ParamBuf>,
    /// Kernel-argument values: (value, bits).
    pub args: Vec<(ValueId, u64)>,
    pub memcheck: bool,
    pub racecheck: bool,
    /// Report reads of unwritten LDS (initcheck, with LDS present).
    pub initcheck: bool,
    /// Per value: the index into `index_sites` when the value is checked integer arithmetic
    /// feeding an address (empty with indexcheck off).
    pub index_checked: Vec<Option<u32>>,
    /// The checked arithmetic sites (see [`crate::addr`]).
    pub index_sites: Vec<crate::addr::Site>,
    /// Check 32-bit AMD buffer byte offsets (indexcheck on an AMD target).
    pub buffer_offset_check: bool,
    /// The target's float mode (see [`crate::fpmode`]).
    pub fp: crate::fpmode::FpMode,
    /// LDS regions (static arrays, then the dynamic region if any).
    pub lds: Vec<LdsRegion>,
    /// LDS bytes per workgroup (static and dynamic).
    pub lds_bytes: usize,
    /// When each value's storage is released (see [`lifetimes`]).
    pub lifetimes: lifetimes::Lifetimes,
}

impl<'k> Ctx<'k> {
    /// Decode the per-value types.
    pub fn value_info(k: &Kernel) -> Vec<VInfo> {
        k.values.iter().map(|&t| VInfo::of(t)).collect()
    }

    /// Build a context.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        k: &'k Kernel,
        grid: [u32; 3],
        block: [u32; 3],
        allocs: Vec<Arc<Alloc>>,
        params: Vec<ParamBuf>,
        args: Vec<(ValueId, u64)>,
        opts: &SimOptions,
        dynamic_lds_bytes: u32,
    ) -> Ctx<'k> {
        let (lds, lds_bytes) = lds_regions(k, dynamic_lds_bytes);
        let (index_checked, index_sites) = if opts.indexcheck {
            crate::addr::checked_arith(k)
        } else {
            (Vec::new(), Vec::new())
        };
        Ctx {
            k,
            info: Ctx::value_info(k),
            wave: k.target.wave_size() as usize,
            block,
            grid,
            nthreads: (block[0] * block[1] * block[2]) as usize,
            allocs,
            params,
            args,
            memcheck: opts.memcheck,
            racecheck: opts.racecheck && lds_bytes > 0,
            initcheck: opts.initcheck && lds_bytes > 0,
            index_checked,
            index_sites,
            buffer_offset_check: opts.indexcheck && k.target.is_amd(),
            fp: crate::fpmode::FpMode::of(k.target),
            lds,
            lds_bytes,
            lifetimes: lifetimes::Lifetimes::of(k),
        }
    }
}

/// Zeros for [`Wg::val`] of a value without storage: the most words one value can take
/// (1024 threads, 255 lanes). A zero-initialised static: it takes no memory until read.
static ZEROS: [u64; 1024 * 256] = [0; 1024 * 256];

/// One worker's state; reused across the workgroups it runs.
pub(crate) struct Wg<'c, 'k> {
    cx: &'c Ctx<'k>,
    /// Per value: its storage (`nthreads * words`), or empty while the value is dead (not
    /// yet computed, or past its last use; see [`lifetimes`]).
    vals: Vec<Vec<u64>>,
    /// Released storage by words per thread, reused before allocating.
    pool: Vec<Vec<Vec<u64>>>,
    /// Words of value storage allocated so far (held by values or pooled) and its peak.
    words: usize,
    /// The most words of value storage held at once.
    pub peak_words: usize,
    lds: Vec<u8>,
    race: Option<RaceDetector>,
    /// Written LDS bytes of the current workgroup (initcheck).
    lds_init: Option<LdsInit>,
    block_id: [u32; 3],
    alloc_hint: usize,
    /// Scratch per-thread activity mask.
    mask: Vec<bool>,
    /// The list of all threads.
    all: Vec<u32>,
    /// Matrix-atom coordinate tables, built on first use.
    mma_tables: Vec<mma_tables::MmaTables>,
    /// Pending direct-to-LDS loads (AMD-only ops).
    amd: amd_state::AmdState,
    /// Ops executed (per workgroup, not per thread).
    pub ops: u64,
    /// NVIDIA Hopper state (mbarriers, pending TMA bytes).
    nv: nv_state::NvState,
    /// cp.async commit groups and pending bytes.
    cp: cp_state::AsyncState,
}

impl<'c, 'k> Wg<'c, 'k> {
    /// A worker with the kernel arguments already broadcast.
    pub fn new(cx: &'c Ctx<'k>) -> Self {
        // Values get storage when first written and give it back after their last use, so
        // the memory follows the live set, not the kernel's size. Kernel arguments live for
        // the whole run.
        let mut vals: Vec<Vec<u64>> = vec![Vec::new(); cx.info.len()];
        let mut words = 0;
        for &(v, bits) in &cx.args {
            let w = cx.info[v.0 as usize].words;
            vals[v.0 as usize] = vec![bits; cx.nthreads * w];
            words += cx.nthreads * w;
        }
        let max_words = cx.info.iter().map(|i| i.words).max().unwrap_or(1);
        let lds_bytes = cx.lds_bytes;
        Wg {
            cx,
            vals,
            pool: vec![Vec::new(); max_words + 1],
            words,
            peak_words: words,
            lds: vec![0; lds_bytes],
            race: cx
                .racecheck
                .then(|| RaceDetector::new(lds_bytes, cx.nthreads)),
            lds_init: cx.initcheck.then(|| LdsInit::new(lds_bytes)),
            block_id: [0; 3],
            alloc_hint: 0,
            mask: vec![false; cx.nthreads],
            all: (0..cx.nthreads as u32).collect(),
            mma_tables: Vec::new(),
            amd: amd_state::AmdState::default(),
            ops: 0,
            nv: nv_state::NvState::default(),
            cp: cp_state::AsyncState::default(),
        }
    }

    /// Run workgroup number `idx` (x fastest).
    pub fn run(&mut self, idx: u64) -> Result<(), SimError> {
        let [gx, gy, _] = self.cx.grid;
        let (gx, gy) = (gx as u64, gy as u64);
        self.block_id = [
            (idx % gx) as u32,
            ((idx / gx) % gy) as u32,
            (idx / (gx * gy)) as u32,
        ];
        self.lds.fill(0);
        self.nv.reset();
        self.amd.reset();
        self.cp.reset();
        if let Some(r) = &mut self.race {
            r.reset();
        }
        if let Some(m) = &mut self.lds_init {
            m.reset();
        }
        let all = std::mem::take(&mut self.all);
        let r = self.run_block(&self.cx.k.body, &all, &[]);
        self.all = all;
        r
    }

    /// The position of linear thread `t`.
    pub(crate) fn thread_ref(&self, t: u32) -> ThreadRef {
        let [bx, by, _] = self.cx.block;
        ThreadRef {
            block: self.block_id,
            thread: [t % bx, (t / bx) % by, t / (bx * by)],
        }
    }

    pub(crate) fn kname(&self) -> String {
        self.cx.k.name.clone()
    }

    /// A run-time fault of thread `t` in `op`.
    pub(crate) fn fault(&self, op: &str, t: u32, reason: impl Into<String>) -> SimError {
        SimError::Fault {
            kernel: self.kname(),
            op: op.to_string(),
            reason: reason.into(),
            at: self.thread_ref(t),
        }
    }

    pub(crate) fn unsupported(&self, what: impl Into<String>) -> SimError {
        SimError::Unsupported {
            kernel: self.kname(),
            what: what.into(),
        }
    }

    #[inline]
    pub(crate) fn info(&self, v: ValueId) -> VInfo {
        self.cx.info[v.0 as usize]
    }

    /// The value's words for all threads. A value with no storage reads as zeros: the
    /// lifetimes make that impossible for a verified kernel, but the host never faults.
    #[inline]
    pub(crate) fn val(&self, v: ValueId) -> &[u64] {
        let s = &self.vals[v.0 as usize];
        if s.is_empty() {
            let n = self.cx.nthreads * self.info(v).words;
            ZEROS.get(..n).unwrap_or(&[])
        } else {
            s
        }
    }

    /// Take the storage of a result out (sized for all threads), to be put back with `put`.
    /// A value without storage gets zeroed storage from the pool (or a new allocation).
    pub(crate) fn take(&mut self, v: ValueId) -> Vec<u64> {
        let w = self.info(v).words;
        let n = self.cx.nthreads * w;
        let r = std::mem::take(&mut self.vals[v.0 as usize]);
        if r.len() == n {
            return r;
        }
        match self.pool[w].pop() {
            Some(mut r) => {
                r.fill(0);
                r
            }
            None => {
                self.words += n;
                self.peak_words = self.peak_words.max(self.words);
                vec![0; n]
            }
        }
    }

    /// Give the storage of `v` back to the pool (it is past its last use).
    #[inline]
    fn release(&mut self, v: ValueId) {
        let r = std::mem::take(&mut self.vals[v.0 as usize]);
        if !r.is_empty() {
            self.pool[self.cx.info[v.0 as usize].words].push(r);
        }
    }

    pub(crate) fn put(&mut self, v: ValueId, r: Vec<u64>) {
        self.vals[v.0 as usize] = r;
    }

    /// Set the scratch mask to the active list.
    pub(crate) fn set_mask(&mut self, act: &[u32]) {
        self.mask.fill(false);
        for &t in act {
            self.mask[t as usize] = true;
        }
    }

    /// Copy the words of `src` to `dst` for the active threads.
    fn copy_val(&mut self, dst: ValueId, src: ValueId, act: &[u32]) {
        if dst == src {
            return;
        }
        let w = self.info(dst).words;
        let mut r = self.take(dst);
        let s = self.val(src);
        for &t in act {
            let b = t as usize * w;
            r[b..b + w].copy_from_slice(&s[b..b + w]);
        }
        self.put(dst, r);
    }

    /// Run the ops of a block; a trailing `Yield` copies its values into `yield_to` (the
    /// `If` results or the `For` carried values) for the active threads. Each value defined
    /// in the block is released after its last use.
    fn run_block(
        &mut self,
        b: &'k Block,
        act: &[u32],
        yield_to: &[ValueId],
    ) -> Result<(), SimError> {
        let cx = self.cx;
        let plan = cx.lifetimes.block(b);
        for (i, op) in b.ops.iter().enumerate() {
            if let OpKind::Yield(ys) = &op.kind {
                self.copy_yield(yield_to, ys, act, plan.is_some_and(|p| p.yield_alias));
            } else {
                self.ops += 1;
                self.exec(op, act)?;
            }
            if let Some(p) = plan {
                for &v in p.release_after(i) {
                    self.release(v);
                }
            }
        }
        Ok(())
    }

    /// Copy yielded values `ys` into `dsts` for the active threads. With `alias` (a yield
    /// that passes a loop's carried value to another carried position) the sources are read
    /// before any is written.
    fn copy_yield(&mut self, dsts: &[ValueId], ys: &[ValueId], act: &[u32], alias: bool) {
        if alias {
            let srcs: Vec<Vec<u64>> = ys.iter().map(|&y| self.val(y).to_vec()).collect();
            for (&d, s) in dsts.iter().zip(&srcs) {
                let w = self.info(d).words;
                let mut r = self.take(d);
                for &t in act {
                    let b = t as usize * w;
                    r[b..b + w].copy_from_slice(&s[b..b + w]);
                }
                self.put(d, r);
            }
        } else {
            for (&d, &y) in dsts.iter().zip(ys) {
                self.copy_val(d, y, act);
            }
        }
    }

    fn exec(&mut self, op: &'k Op, act: &[u32]) -> Result<(), SimError> {
        let res = op.results.first().copied();
        let r = || res.ok_or_else(|| SimError::Other("op without result".into()));
        match &op.kind {
            OpKind::Const(c) => self.constant(r()?, *c, act),
            OpKind::Special(s) => self.special(r()?, *s, act),
            OpKind::Binary(bop, a, b) => self.binary(r()?, *bop, *a, *b, act)?,
            OpKind::Unary(uop, a) => self.unary(r()?, *uop, *a, act),
            OpKind::Fma(a, b, c) => self.fma(r()?, *a, *b, *c, act),
            OpKind::Cmp(p, a, b) => self.cmp(r()?, *p, *a, *b, act)?,
            OpKind::Select(c, a, b) => self.select(r()?, *c, *a, *b, act),
            OpKind::Cast(kind, a) => self.cast(r()?, *kind, *a, act)?,
            OpKind::Splat(a) => self.splat(r()?, *a, act),
            OpKind::Extract(v, i) => self.extract(r()?, *v, *i as usize, act),
            OpKind::Insert(v, s, i) => self.insert(r()?, *v, *s, *i as usize, act),
            OpKind::Build(vs) => self.build(r()?, vs, act),
            OpKind::Slice(v, s) => self.slice(r()?, *v, *s as usize, act),
            OpKind::LdsBase(id) => self.lds_base(r()?, *id, act),
            OpKind::DynLdsBase(off) => self.dyn_lds_base(r()?, *off, act),
            OpKind::PtrAdd(p, i) => self.ptr_add(r()?, *p, *i, act),
            OpKind::Load { ptr, index, flags } => {
                self.load(r()?, *ptr, *index, flags.align, act)?
            }
            OpKind::Store {
                ptr,
                index,
                value,
                flags,
            } => self.store(*ptr, *index, *value, flags.align, act)?,
            OpKind::MakeRsrc { ptr, num_elems } => self.make_rsrc(r()?, *ptr, *num_elems, act),
            OpKind::BufferLoad { rsrc, index, .. } => self.buffer_load(r()?, *rsrc, *index, act)?,
            OpKind::BufferStore {
                rsrc, index, value, ..
            } => self.buffer_store(*rsrc, *index, *value, act)?,
            OpKind::AtomicAdd { ptr, index, value } => {
                self.atomic_add(r()?, *ptr, *index, *value, act)?
            }
            OpKind::Barrier => self.barrier(act)?,
            // The host's stores are complete when issued; the flag ops carry the ordering.
            OpKind::FenceRelease => std::sync::atomic::fence(std::sync::atomic::Ordering::Release),
            OpKind::FlagStore { ptr, index, value } => {
                self.flag_store(*ptr, *index, *value, act)?
            }
            OpKind::FlagWait {
                ptr,
                index,
                expect,
                timeout,
            } => self.flag_wait(r()?, [*ptr, *index, *expect, *timeout], act)?,
            OpKind::Shuffle(mode, v, l) => self.shuffle(r()?, *mode, *v, *l, act),
            OpKind::ReadFirstLane(v) => self.read_first_lane(r()?, *v, act),
            OpKind::Mma(atom, a, b, c) => self.mma(r()?, *atom, [*a, *b, *c], None, act)?,
            OpKind::MmaScaled(atom, a, b, c, sa, sb) => {
                self.mma(r()?, *atom, [*a, *b, *c], Some((*sa, *sb)), act)?
            }
            OpKind::If {
                cond,
                then_block,
                else_block,
            } => self.if_op(&op.results, *cond, then_block, else_block, act)?,
            OpKind::For {
                lb,
                ub,
                step,
                init,
                body,
            } => self.for_op(&op.results, [*lb, *ub, *step], init, body, act)?,
            OpKind::Yield(_) => {}
            OpKind::LdsAddr(p) => self.lds_addr(r()?, *p, act)?,
            OpKind::Nv(nv) => self.nv_op(op, nv, act)?,
            OpKind::Amd(a) => self.amd_op(a, &op.results, act)?,
        }
        Ok(())
    }

    fn special(&mut self, res: ValueId, s: Special, act: &[u32]) {
        let [bx, by, bz] = self.cx.block;
        let [gx, gy, gz] = self.cx.grid;
        let pick = |d: Dim, v: [u32; 3]| match d {
            Dim::X => v[0],
            Dim::Y => v[1],
            Dim::Z => v[2],
        };
        let wave = self.cx.wave as u32;
        let bid = self.block_id;
        let mut r = self.take(res);
        for &t in act {
            r[t as usize] = match s {
                Special::ThreadId(d) => pick(d, [t % bx, (t / bx) % by, t / (bx * by)]),
                Special::BlockId(d) => pick(d, bid),
                Special::BlockDim(d) => pick(d, [bx, by, bz]),
                Special::GridDim(d) => pick(d, [gx, gy, gz]),
                Special::LaneId => t % wave,
            } as u64;
        }
        self.put(res, r);
    }

    fn barrier(&mut self, act: &[u32]) -> Result<(), SimError> {
        if act.len() != self.cx.nthreads {
            return Err(SimError::DivergentBarrier {
                kernel: self.kname(),
                block: self.block_id,
                active: act.len(),
                threads: self.cx.nthreads,
            });
        }
        self.complete_all_lds_loads()?;
        if let Some(r) = &mut self.race {
            r.barrier();
        }
        self.cp.barrier();
        Ok(())
    }

    fn if_op(
        &mut self,
        results: &[ValueId],
        cond: ValueId,
        then_b: &'k Block,
        else_b: &'k Block,
        act: &[u32],
    ) -> Result<(), SimError> {
        let c = self.val(cond);
        let (then_act, else_act): (Vec<u32>, Vec<u32>) =
            act.iter().partition(|&&t| c[t as usize] & 1 == 1);
        for (blk, sub) in [(then_b, then_act), (else_b, else_act)] {
            if sub.is_empty() {
                continue;
            }
            self.run_block(blk, &sub, results)?;
        }
        Ok(())
    }

    fn for_op(
        &mut self,
        results: &[ValueId],
        [lb, ub, step]: [ValueId; 3],
        init: &[ValueId],
        body: &'k Block,
        act: &[u32],
    ) -> Result<(), SimError> {
        let n = self.cx.nthreads;
        let iv = body.args[0];
        let carried = &body.args[1..];
        for (&c, &i) in carried.iter().zip(init) {
            self.copy_val(c, i, act);
        }
        // Per-thread counters as canonical bits of the bounds' width (i32 or i64), following
        // the `For` contract: enter if `lb < ub` (signed), go on while `ub - iv > step`
        // (unsigned), so `iv` never wraps.
        let bits = self.info(iv).elem.bits();
        let m = mask(bits);
        let mut cur = vec![0u64; n];
        let mut end = vec![0u64; n];
        let mut stp = vec![0u64; n];
        {
            let (l, u, s) = (self.val(lb), self.val(ub), self.val(step));
            for &t in act {
                let t = t as usize;
                cur[t] = l[t] & m;
                end[t] = u[t] & m;
                stp[t] = s[t] & m;
                let step = sext(stp[t], bits);
                if step <= 0 && sext(cur[t], bits) < sext(end[t], bits) {
                    return Err(self.fault(
                        "For",
                        t as u32,
                        format!("loop step is {step} (must be > 0)"),
                    ));
                }
            }
        }
        let mut live: Vec<u32> = act
            .iter()
            .copied()
            .filter(|&t| sext(cur[t as usize], bits) < sext(end[t as usize], bits))
            .collect();
        while !live.is_empty() {
            let mut ivv = self.take(iv);
            for &t in &live {
                ivv[t as usize] = cur[t as usize];
            }
            self.put(iv, ivv);
            self.run_block(body, &live, carried)?;
            live.retain(|&t| {
                let t = t as usize;
                let more = end[t].wrapping_sub(cur[t]) & m > stp[t];
                cur[t] = cur[t].wrapping_add(stp[t]) & m;
                more
            });
        }
        for (&r, &c) in results.iter().zip(carried) {
            self.copy_val(r, c, act);
        }
        // The loop counter and carried values are dead once the loop is done (they stay alive
        // across its iterations: threads that left early keep their final values there).
        for &a in &body.args {
            self.release(a);
        }
        Ok(())
    }
}
