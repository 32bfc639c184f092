//! The simulator's error type.

pub use crate::race::Access as LdsAccess;
use std::fmt;

/// A thread position in a launch: workgroup id and thread id within the workgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadRef {
    /// Workgroup (block) id `[x, y, z]`.
    pub block: [u32; 3],
    /// Thread id inside the workgroup `[x, y, z]`.
    pub thread: [u32; 3],
}

impl fmt::Display for ThreadRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        write!(f, "block ({bx},{by},{bz}) thread ({tx},{ty},{tz})")
    }
}

/// A failure found by the simulator: an invalid launch, a host-side memory misuse, or a bug
/// of the kernel (out-of-bounds access, LDS race, divergent barrier, division by zero, ...).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The kernel IR failed verification.
    #[error("sim: kernel IR is invalid: {0}")]
    Verify(#[from] flydsl_ir::VerifyError),
    /// The launch configuration or the kernel arguments are invalid.
    #[error("sim: invalid launch of kernel `{kernel}`: {reason}")]
    InvalidLaunch {
        /// Kernel name.
        kernel: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A host-side memory operation (alloc/free/read/write/fill) was invalid.
    #[error("sim memory: {0}")]
    Memory(String),
    /// A global-memory access outside its allocation.
    #[error(
        "sim: out-of-bounds {access} in kernel `{kernel}`: buffer `{buffer}`, element index \
         {index} (buffer holds {len} elements), {at}"
    )]
    OutOfBounds {
        /// Kernel name.
        kernel: String,
        /// The kernel parameter the pointer came from, or `unknown buffer`.
        buffer: String,
        /// `load`, `store`, `atomic` ...
        access: &'static str,
        /// Element index relative to the parameter's base pointer (or to the allocation).
        index: i64,
        /// Elements the buffer holds (allocation bytes / element size).
        len: i64,
        /// The offending thread.
        at: ThreadRef,
    },
    /// An LDS access outside the LDS array the pointer was derived from.
    #[error(
        "sim: LDS out-of-bounds {access} in kernel `{kernel}`: array `{array}`, element index \
         {index} (array holds {len} elements), {at}"
    )]
    LdsOutOfBounds {
        /// Kernel name.
        kernel: String,
        /// LDS array name.
        array: String,
        /// `load`, `store`, `atomic`.
        access: &'static str,
        /// Element index inside the array.
        index: i64,
        /// Array length in elements.
        len: i64,
        /// The offending thread.
        at: ThreadRef,
    },
    /// Two threads accessed the same LDS byte in one barrier epoch, at least one writing.
    #[error(
        "sim: LDS data race in kernel `{kernel}`: array `{array}` element {index}: {first_kind} \
         by {first} and {second_kind} by thread ({t2x},{t2y},{t2z}) with no barrier between",
        t2x = second.thread[0], t2y = second.thread[1], t2z = second.thread[2]
    )]
    LdsRace {
        /// Kernel name.
        kernel: String,
        /// LDS array name.
        array: String,
        /// Element index inside the array.
        index: i64,
        /// The earlier access.
        first: ThreadRef,
        /// Its kind.
        first_kind: LdsAccess,
        /// The later, conflicting access.
        second: ThreadRef,
        /// Its kind.
        second_kind: LdsAccess,
    },
    /// A load or atomic of LDS bytes this workgroup never wrote (initcheck): on a GPU it reads
    /// what an earlier workgroup left there.
    #[error(
        "sim: {access} of uninitialised LDS in kernel `{kernel}`: array `{array}` element \
         {index} was never written by this workgroup, {at}. Write every LDS element before \
         reading it (check the prologue that fills the buffer, and that reads of padding or a \
         ragged tail are masked)"
    )]
    LdsUninit {
        /// Kernel name.
        kernel: String,
        /// LDS array name.
        array: String,
        /// `load` or `atomic`.
        access: &'static str,
        /// Element index inside the array (of the first unwritten byte).
        index: i64,
        /// The offending thread.
        at: ThreadRef,
    },
    /// Integer arithmetic that feeds an address overflowed its IR type (indexcheck): the
    /// wrapped value would address the wrong element on the GPU.
    #[error(
        "sim: index overflow in kernel `{kernel}` at {at}: {op} computes {expr}; the result \
         feeds the {sink}, so the access would land at a wrapped address. Compute the index \
         in i64 (widen the operands before the op) or bound them"
    )]
    IndexOverflow {
        /// Kernel name.
        kernel: String,
        /// The op, as `Mul (op #12)` (numbered as the verifier counts).
        op: String,
        /// The exact result and the wrapped one, e.g. `65536 * 65536 = 4294967296, which is 0 in i32`.
        expr: String,
        /// The address use, e.g. `index of Load (op #15)`.
        sink: String,
        /// The offending thread.
        at: ThreadRef,
    },
    /// A barrier reached by only part of the workgroup.
    #[error(
        "sim: barrier in divergent control flow in kernel `{kernel}` (block ({bx},{by},{bz})): \
         only {active} of {threads} threads reached it",
        bx = block[0], by = block[1], bz = block[2]
    )]
    DivergentBarrier {
        /// Kernel name.
        kernel: String,
        /// Workgroup id.
        block: [u32; 3],
        /// Threads that reached the barrier.
        active: usize,
        /// Threads of the workgroup.
        threads: usize,
    },
    /// A run-time fault of one thread (division by zero, bad loop step, misaligned atomic,
    /// partial wave at a matrix atom, partially out-of-range vector buffer access, ...).
    #[error("sim: {op} in kernel `{kernel}` at {at}: {reason}")]
    Fault {
        /// Kernel name.
        kernel: String,
        /// The op's name.
        op: String,
        /// What went wrong.
        reason: String,
        /// The offending thread.
        at: ThreadRef,
    },
    /// The kernel uses something the simulator does not support.
    #[error("sim: kernel `{kernel}`: unsupported: {what}")]
    Unsupported {
        /// Kernel name.
        kernel: String,
        /// What is unsupported.
        what: String,
    },
    /// Any other failure.
    #[error("sim: {0}")]
    Other(String),
}
