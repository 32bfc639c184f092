//! What the build script and the library share: the kernels that exist (kind, world size,
//! dtype), their names, launch shapes, and the layout of each rank's shared memory.
//!
//! Included by `build.rs` (with `crate::DType` = `flydsl_build::ir::DType`) and by
//! `src/config.rs` (with `crate::DType` = `flydsl_rt::DType`): the same enum, re-exported.

use crate::DType;

/// World sizes the kernels are built for (the peers are compile-time unrolled).
pub const WORLD_SIZES: [u32; 3] = [2, 4, 8];
/// The largest world size.
pub const MAX_WORLD: u32 = 8;
/// Most workgroups of one launch: each has its own flag slots.
pub const MAX_BLOCKS: u32 = 64;
/// Threads per workgroup of the all-reduce kernels.
pub const THREADS: u32 = 512;
/// Threads per workgroup of the fused all-reduce + RMSNorm kernel (one row per workgroup).
pub const FUSED_THREADS: u32 = 256;
/// Dtypes of the kernels.
pub const DTYPES: [DType; 3] = DType::ALL;

/// Barrier phases: the start (with the descriptor check), the middle of the two-stage
/// kernel, the end.
pub const PHASES: u32 = 3;
/// Word offset (`i32` units) of the flags in a rank's signal area:
/// `flags[phase][block][source rank]`, written by the source rank.
pub const FLAGS_OFF: u32 = 0;
/// Word offset of the descriptors: `desc[block][source rank]`, the source rank's call
/// descriptor, written before its start flag.
pub const DESC_OFF: u32 = FLAGS_OFF + PHASES * MAX_BLOCKS * MAX_WORLD;
/// Word offset of the per-workgroup call counters (the last flag value used).
pub const COUNTER_OFF: u32 = DESC_OFF + MAX_BLOCKS * MAX_WORLD;
/// Word offset of the status words: [`STATUS_TIMEOUTS`], [`STATUS_MISMATCHES`].
pub const STATUS_OFF: u32 = COUNTER_OFF + MAX_BLOCKS;
/// Status word: waits that timed out (poisons the rank: later calls skip their work).
pub const STATUS_TIMEOUTS: u32 = 0;
/// Status word: calls whose descriptor differed from a peer's.
pub const STATUS_MISMATCHES: u32 = 1;
/// Words of the signal area.
pub const SIGNAL_WORDS: u32 = STATUS_OFF + 4;
/// Bytes reserved for the signal area at the start of a rank's shared memory (the staging
/// area follows, 256-byte aligned, then the two-stage scratch area of the same size).
pub const SIGNAL_BYTES: u64 = (SIGNAL_WORDS as u64 * 4).next_multiple_of(256);

/// The kernel families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Every rank reads every peer's whole message and reduces all of it.
    OneStage,
    /// Reduce-scatter (rank r reduces the r-th part into its scratch area), then
    /// all-gather of the parts.
    TwoStage,
    /// One-stage all-reduce of `[m, n]` rows, + residual, then RMSNorm, in one kernel.
    FusedRmsNorm,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 3] = [Kind::OneStage, Kind::TwoStage, Kind::FusedRmsNorm];

    /// Short name used in kernel names.
    pub fn tag(self) -> &'static str {
        match self {
            Kind::OneStage => "1stage",
            Kind::TwoStage => "2stage",
            Kind::FusedRmsNorm => "fused_rmsnorm",
        }
    }

    /// Threads per workgroup.
    pub fn threads(self) -> u32 {
        match self {
            Kind::FusedRmsNorm => FUSED_THREADS,
            _ => THREADS,
        }
    }
}

/// One kernel: a kind for a world size and dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Spec {
    /// The family.
    pub kind: Kind,
    /// Ranks.
    pub world: u32,
    /// Element type.
    pub dt: DType,
}

impl Spec {
    /// The kernel symbol name.
    pub fn name(self) -> String {
        format!(
            "comm_allreduce_{}_ws{}_{}",
            self.kind.tag(),
            self.world,
            self.dt.name()
        )
    }
    /// Elements per 128-bit access.
    pub fn vec(self) -> u32 {
        self.dt.vec()
    }
}

/// Every kernel the crate builds.
pub fn specs() -> Vec<Spec> {
    let mut v = Vec::new();
    for kind in Kind::ALL {
        for world in WORLD_SIZES {
            for dt in DTYPES {
                v.push(Spec { kind, world, dt });
            }
        }
    }
    v
}
