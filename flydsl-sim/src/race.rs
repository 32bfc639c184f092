//! LDS race detection.
//!
//! Every LDS byte remembers, for the current barrier epoch, which thread wrote it (and a
//! second distinct atomic writer) and up to two distinct readers. Two accesses of the same byte
//! by different threads in one epoch race when at least one is a write; two atomics do not.
//!
//! This is deliberately stricter than AMD's wave-synchronous execution, where lanes of one wave
//! run in lockstep and may exchange data through LDS without a barrier: it matches NVIDIA's
//! independent thread scheduling (and the CUDA memory model), so a kernel that is clean here is
//! correct on every target. Exchange data within a wave with shuffles, or put a barrier
//! between the write and the read.
//!
//! # Async copies and wgmma (sm_90)
//!
//! - A **TMA write** ([`Access::TmaWrite`], by the issuing thread) races with a read or write
//!   of its bytes by another thread in the same epoch unless that access is ordered before
//!   the issue, and with any read by a wgmma still in flight. It is not recorded as a writer:
//!   reading its bytes before the mbarrier wait is the pending-bytes check of the Sim's
//!   Hopper ops.
//! - A **wgmma operand read** ([`Access::WgmmaRead`]) belongs to the whole warpgroup: it is
//!   checked against writers when the wgmma is issued and stays *in flight* until a
//!   `wgmma.wait_group` of that warpgroup retires its batch; any write (a store, an atomic or
//!   a TMA) to an in-flight byte races, barrier or not (a barrier does not wait for wgmma).
//!   When the batch retires, the read is recorded in the then-current epoch, so a later
//!   write by a thread of another warpgroup needs a barrier (or an mbarrier, below) first.
//!   Threads of the reading warpgroup are ordered after it by the wait itself.
//! - **mbarrier phases as epochs**: a thread's mbarrier arrive releases its earlier reads
//!   (and its warpgroup's retired wgmma reads, for the warpgroup's first thread); a thread
//!   whose mbarrier wait sees that phase complete acquires them, so its later writes to those
//!   bytes do not race with them (the "empty barrier" that lets a producer refill a stage the
//!   consumers have released). Only direct arrive-to-wait edges count, within one barrier
//!   epoch, and only for reads followed by writes; a write then read across threads still
//!   needs a workgroup barrier. Missing an ordering can only report more, never less: the
//!   rule is sound for the Sim's lockstep execution, where every op of a thread runs in
//!   program order and a wait passes only after the arrivals it needs.

use std::collections::HashMap;

/// Kind of an LDS access (in race reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A plain store.
    Write,
    /// An atomic read-modify-write.
    Atomic,
    /// A wgmma operand read (by a whole warpgroup; reported as its first thread).
    WgmmaRead,
    /// A wgmma operand read still in flight (its batch not yet retired by a
    /// `wgmma.wait_group`).
    WgmmaInFlight,
    /// A TMA tile load writing LDS (by the thread that issued it).
    TmaWrite,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Atomic => "atomic",
            Access::WgmmaRead => "wgmma operand read",
            Access::WgmmaInFlight => {
                "read by a wgmma still in flight (before its wgmma.wait_group)"
            }
            Access::TmaWrite => "TMA write",
        })
    }
}

const NONE: u32 = u32::MAX;
/// Reader ids with this bit set name a warpgroup (its wgmma operand reads), not a thread.
const GROUP: u32 = 1 << 31;
/// Threads per warpgroup.
const WG: u32 = flydsl_ir::WARPGROUP;

#[derive(Clone, Copy)]
struct Rec {
    epoch: u32,
    writer: u32,
    writer_atomic: bool,
    writer2: u32,
    r1: u32,
    r2: u32,
    /// The readers' release stamps at the read (see [`RaceDetector::release`]).
    s1: u32,
    s2: u32,
}

const EMPTY: Rec = Rec {
    epoch: 0,
    writer: NONE,
    writer_atomic: false,
    writer2: NONE,
    r1: NONE,
    r2: NONE,
    s1: 0,
    s2: 0,
};

/// A conflict: the other thread (linear id) and the kind of its access.
pub(crate) struct Conflict {
    pub other: u32,
    pub other_kind: Access,
}

/// The thread that stands for reader id `r`.
fn thread_of(r: u32) -> u32 {
    if r & GROUP != 0 {
        (r & !GROUP) * WG
    } else {
        r
    }
}

/// Whether accesses by reader ids `a` and `b` are ordered by program order: the same thread,
/// or a thread and its own warpgroup's retired wgmma reads.
fn same_agent(a: u32, b: u32) -> bool {
    let group = |x: u32| {
        if x & GROUP != 0 {
            Some(x & !GROUP)
        } else {
            None
        }
    };
    match (group(a), group(b)) {
        (None, None) | (Some(_), Some(_)) => a == b,
        (Some(g), None) => b / WG == g,
        (None, Some(g)) => a / WG == g,
    }
}

/// Per-workgroup race state over the LDS block.
pub(crate) struct RaceDetector {
    epoch: u32,
    recs: Vec<Rec>,
    /// Per thread: mbarrier arrivals in this epoch (its release stamp).
    stamps: Vec<u32>,
    /// (acquiring thread, releasing thread) -> the newest release stamp acquired this epoch.
    acquired: HashMap<(u32, u32), u32>,
    /// Per 16-byte chunk: wgmma operand reads in flight over it, and the warpgroup of one of
    /// them (wgmma reads whole chunks).
    in_flight: Vec<(u16, u16)>,
}

impl RaceDetector {
    pub fn new(lds_bytes: usize, threads: usize) -> RaceDetector {
        RaceDetector {
            epoch: 1,
            recs: vec![EMPTY; lds_bytes],
            stamps: vec![0; threads],
            acquired: HashMap::new(),
            in_flight: Vec::new(),
        }
    }

    /// Forget everything (a new workgroup).
    pub fn reset(&mut self) {
        self.barrier();
        self.in_flight.clear();
    }

    /// Start a new epoch (at a barrier or a new workgroup).
    pub fn barrier(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.recs.fill(EMPTY);
            self.epoch = 1;
        }
        self.stamps.fill(0);
        self.acquired.clear();
    }

    /// Thread `t` arrives on an mbarrier: its reads so far are released. Returns the stamp
    /// the arrival carries.
    pub fn release(&mut self, t: u32) -> u32 {
        let s = &mut self.stamps[t as usize];
        *s = s.saturating_add(1);
        *s
    }

    /// Thread `t` passed an mbarrier wait whose phase had `arrivals` (thread, stamp).
    pub fn acquire(&mut self, t: u32, arrivals: &[(u32, u32)]) {
        for &(r, s) in arrivals {
            if r != t {
                let e = self.acquired.entry((t, r)).or_insert(0);
                *e = (*e).max(s);
            }
        }
    }

    /// Whether `t` is ordered after reader id `r`'s read with release stamp `s`.
    fn ordered_after(&self, t: u32, r: u32, s: u32) -> bool {
        same_agent(r, t)
            || (!self.acquired.is_empty()
                && self
                    .acquired
                    .get(&(t, thread_of(r)))
                    .is_some_and(|&a| a > s))
    }

    /// Mark `n` bytes at `byte` as read by an in-flight wgmma of warpgroup `g` (`add`), or
    /// retire such a read.
    pub fn in_flight(&mut self, byte: usize, n: usize, g: u32, add: bool) {
        if self.in_flight.is_empty() {
            self.in_flight = vec![(0, 0); self.recs.len().div_ceil(16)];
        }
        let chunks = byte / 16..(byte + n).div_ceil(16);
        for f in self.in_flight.get_mut(chunks).into_iter().flatten() {
            if add {
                *f = (f.0.saturating_add(1), g as u16);
            } else {
                f.0 = f.0.saturating_sub(1);
            }
        }
    }

    /// Record an access of `n` bytes at `byte` by thread `t` (for [`Access::WgmmaRead`]:
    /// warpgroup `t`); report the first conflict.
    pub fn access(&mut self, byte: usize, n: usize, t: u32, kind: Access) -> Option<Conflict> {
        let epoch = self.epoch;
        // Reader id and release stamp of this access.
        let (me, my_stamp) = match kind {
            Access::WgmmaRead | Access::WgmmaInFlight => (
                GROUP | t,
                self.stamps.get((t * WG) as usize).copied().unwrap_or(0),
            ),
            _ => (t, self.stamps.get(t as usize).copied().unwrap_or(0)),
        };
        let writes = matches!(kind, Access::Write | Access::Atomic | Access::TmaWrite);
        if writes && !self.in_flight.is_empty() {
            let chunks = byte / 16..(byte + n).div_ceil(16);
            let fs = self.in_flight.get(chunks).unwrap_or(&[]);
            if let Some(f) = fs.iter().find(|f| f.0 > 0) {
                return Some(Conflict {
                    other: u32::from(f.1) * WG,
                    other_kind: Access::WgmmaInFlight,
                });
            }
        }
        for i in byte..(byte + n).min(self.recs.len()) {
            let r = self.recs[i];
            let r = if r.epoch != epoch {
                Rec { epoch, ..EMPTY }
            } else {
                r
            };
            let other_writer = |r: &Rec| {
                if r.writer != NONE && !same_agent(r.writer, me) {
                    Some((r.writer, r.writer_atomic))
                } else if r.writer2 != NONE && !same_agent(r.writer2, me) {
                    Some((r.writer2, true))
                } else {
                    None
                }
            };
            // A reader this write is not ordered after.
            let other_reader = |r: &Rec| {
                [(r.r1, r.s1), (r.r2, r.s2)]
                    .into_iter()
                    .find(|&(x, s)| x != NONE && !self.ordered_after(t, x, s))
                    .map(|(x, _)| Conflict {
                        other: thread_of(x),
                        other_kind: if x & GROUP != 0 {
                            Access::WgmmaRead
                        } else {
                            Access::Read
                        },
                    })
            };
            let wkind = |atomic| {
                if atomic {
                    Access::Atomic
                } else {
                    Access::Write
                }
            };
            let mut r = r;
            match kind {
                Access::Read | Access::WgmmaRead | Access::WgmmaInFlight => {
                    if let Some((w, a)) = other_writer(&r) {
                        return Some(Conflict {
                            other: w,
                            other_kind: wkind(a),
                        });
                    }
                    if r.r1 == NONE || r.r1 == me {
                        (r.r1, r.s1) = (me, my_stamp);
                    } else if r.r2 == NONE || r.r2 == me {
                        (r.r2, r.s2) = (me, my_stamp);
                    }
                }
                Access::Write | Access::TmaWrite => {
                    if let Some((w, a)) = other_writer(&r) {
                        return Some(Conflict {
                            other: w,
                            other_kind: wkind(a),
                        });
                    }
                    if let Some(c) = other_reader(&r) {
                        return Some(c);
                    }
                    if kind == Access::Write {
                        r.writer = t;
                        r.writer_atomic = false;
                    }
                }
                Access::Atomic => {
                    if r.writer != NONE && r.writer != t && !r.writer_atomic {
                        return Some(Conflict {
                            other: r.writer,
                            other_kind: Access::Write,
                        });
                    }
                    if let Some(c) = other_reader(&r) {
                        return Some(c);
                    }
                    if r.writer == NONE {
                        r.writer = t;
                        r.writer_atomic = true;
                    } else if r.writer != t && r.writer2 == NONE {
                        r.writer2 = t;
                    }
                }
            }
            self.recs[i] = r;
        }
        None
    }
}
