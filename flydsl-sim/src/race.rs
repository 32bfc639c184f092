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

/// Kind of an LDS access (in race reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A plain store.
    Write,
    /// An atomic read-modify-write.
    Atomic,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Atomic => "atomic",
        })
    }
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Rec {
    epoch: u32,
    writer: u32,
    writer_atomic: bool,
    writer2: u32,
    r1: u32,
    r2: u32,
}

const EMPTY: Rec = Rec {
    epoch: 0,
    writer: NONE,
    writer_atomic: false,
    writer2: NONE,
    r1: NONE,
    r2: NONE,
};

/// A conflict: the other thread (linear id) and the kind of its access.
pub(crate) struct Conflict {
    pub other: u32,
    pub other_kind: Access,
}

/// Per-workgroup race state over the LDS block.
pub(crate) struct RaceDetector {
    epoch: u32,
    recs: Vec<Rec>,
}

impl RaceDetector {
    pub fn new(lds_bytes: usize) -> RaceDetector {
        RaceDetector {
            epoch: 1,
            recs: vec![EMPTY; lds_bytes],
        }
    }

    /// Start a new epoch (at a barrier or a new workgroup).
    pub fn barrier(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.recs.fill(EMPTY);
            self.epoch = 1;
        }
    }

    /// Record an access of `n` bytes at `byte` by thread `t`; report the first conflict.
    pub fn access(&mut self, byte: usize, n: usize, t: u32, kind: Access) -> Option<Conflict> {
        let epoch = self.epoch;
        for r in self.recs.get_mut(byte..byte + n)? {
            if r.epoch != epoch {
                *r = Rec { epoch, ..EMPTY };
            }
            let other_writer = |r: &Rec| {
                if r.writer != NONE && r.writer != t {
                    Some((r.writer, r.writer_atomic))
                } else if r.writer2 != NONE && r.writer2 != t {
                    Some((r.writer2, true))
                } else {
                    None
                }
            };
            let other_reader = |r: &Rec| {
                if r.r1 != NONE && r.r1 != t {
                    Some(r.r1)
                } else if r.r2 != NONE && r.r2 != t {
                    Some(r.r2)
                } else {
                    None
                }
            };
            let wkind = |atomic| {
                if atomic {
                    Access::Atomic
                } else {
                    Access::Write
                }
            };
            match kind {
                Access::Read => {
                    if let Some((w, a)) = other_writer(r) {
                        return Some(Conflict {
                            other: w,
                            other_kind: wkind(a),
                        });
                    }
                    if r.r1 == NONE {
                        r.r1 = t;
                    } else if r.r1 != t && r.r2 == NONE {
                        r.r2 = t;
                    }
                }
                Access::Write => {
                    if let Some((w, a)) = other_writer(r) {
                        return Some(Conflict {
                            other: w,
                            other_kind: wkind(a),
                        });
                    }
                    if let Some(o) = other_reader(r) {
                        return Some(Conflict {
                            other: o,
                            other_kind: Access::Read,
                        });
                    }
                    r.writer = t;
                    r.writer_atomic = false;
                }
                Access::Atomic => {
                    if r.writer != NONE && r.writer != t && !r.writer_atomic {
                        return Some(Conflict {
                            other: r.writer,
                            other_kind: Access::Write,
                        });
                    }
                    if let Some(o) = other_reader(r) {
                        return Some(Conflict {
                            other: o,
                            other_kind: Access::Read,
                        });
                    }
                    if r.writer == NONE {
                        r.writer = t;
                        r.writer_atomic = true;
                    } else if r.writer != t && r.writer2 == NONE {
                        r.writer2 = t;
                    }
                }
            }
        }
        None
    }
}
