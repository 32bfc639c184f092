//! flydsl-sim: a CPU executor of the flydsl kernel IR with exact wave semantics.
//!
//! All threads of a workgroup run in lockstep, op by op, with an active mask for structured
//! divergence (`If`/`For`); cross-lane ops (shuffles, readfirstlane, matrix atoms) act within
//! waves of the target's size. Workgroups run in parallel on the host's cores.
//!
//! Checks (see [`SimOptions`]):
//! - **memcheck**: every global access must lie inside its allocation, every LDS access inside
//!   the LDS array its pointer was derived from; violations are reported with the kernel
//!   parameter (or LDS array), element index and thread. With memcheck off, out-of-bounds
//!   loads read 0 and stores are dropped; host memory is never touched out of bounds.
//! - **racecheck**: two threads touching one LDS byte in one barrier epoch, at least one
//!   writing, is a race. This is stricter than AMD's wave-synchronous execution on purpose
//!   (it matches NVIDIA's independent thread scheduling), so a clean kernel is correct on
//!   every target.
//! - **indexcheck**: integer `Add`/`Sub`/`Mul`/`Shl` whose result flows into an address (the
//!   index of a load, store, buffer access, atomic or `PtrAdd`, a dynamic LDS offset) must not
//!   overflow its IR type (signed): an i32 index product that wraps is reported as
//!   [`SimError::IndexOverflow`], naming the op, the values and the address it feeds. The flow
//!   stops at bit-pattern ops (`And`, `Or`, `Xor`, right shifts, unsigned `UDiv`/`URem`), so
//!   hashing that wraps on purpose and is then masked or reduced is not reported. On AMD
//!   targets it also reports a buffer access whose byte offset (`index * size`, 32 bits in the
//!   lowered code) cannot reach the element.
//! - **initcheck**: a load (or atomic) of an LDS byte the workgroup has not written is
//!   [`SimError::LdsUninit`], naming the array, the element and the thread. LDS is not
//!   cleared between workgroups on a GPU, so such a read sees stale data there; with the check
//!   off the Sim reads zeros (as it always did), which can hide a prologue bug.
//!
//! Arithmetic is bit-exact per type, at the IR width: integers wrap in two's complement (an
//! i32 `Add`/`Sub`/`Mul`/`Shl` gives what a GPU's 32-bit instruction gives), shift amounts are
//! taken modulo the width, signed `Div`/`Rem` truncate toward zero (the remainder has the
//! dividend's sign), and signed division by zero or overflow (`MIN / -1`) and unsigned
//! division by zero are a [`SimError::Fault`]. `For` loops count at their bounds' width with
//! the overflow-free exit test of [`flydsl_ir::OpKind::For`]. f16/bf16 round to nearest even
//! after every op; `Exp2`/`Log2`/`Rsqrt`/`Rcp` model the hardware approximations (f64 then
//! f32, denormals flushed); fp8 conversions saturate ([`fp8`]).
//!
//! Denormals follow the target: on AMD targets f32 (and bf16, computed in f32) arithmetic
//! flushes denormal inputs and results to a zero of the same sign, as the code objects do
//! (their FP32 denormal mode is flush); on sm_90 they are kept, as the PTX is compiled; f32
//! atomic adds flush on both. The op-by-op list is in the source of the `fpmode` module.
//!
//! ```
//! # use flydsl_sim::SimOptions;
//! let opts = SimOptions::default();
//! assert!(opts.memcheck && opts.racecheck && opts.indexcheck && opts.initcheck);
//! ```
//!
//! ```
//! use flydsl_sim::{SimMemory, SimOptions, launch};
//! use flydsl_ir::{Kernel, Target};
//! let k = Kernel::empty("nop", Target::Gfx942);
//! let mem = SimMemory::new();
//! launch(&k, [4, 1, 1], [64, 1, 1], &[], &mem, &SimOptions::default()).unwrap();
//! ```

mod addr;
mod error;
mod exec;
pub mod fp8;
mod fpmode;
mod launch;
mod memory;
mod minifloat;
pub mod mma_layout;
mod numeric;
mod race;
mod tensor_map;

pub use error::{LdsAccess, SimError, ThreadRef};
pub use launch::{launch_report, launch_with_lds, LaunchReport};
pub use memory::SimMemory;
pub use tensor_map::{SimTensorMap, MAX_RANK as TENSOR_MAP_MAX_RANK, TENSOR_MAP_BYTES};

use flydsl_ir::Kernel;

/// Options of one simulated launch.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Report out-of-bounds global and LDS accesses (otherwise they are still never UB on the host).
    pub memcheck: bool,
    /// Report LDS data races.
    pub racecheck: bool,
    /// Report integer arithmetic that overflows while computing an address (see the crate
    /// docs), and AMD buffer accesses whose 32-bit byte offset cannot reach the element.
    pub indexcheck: bool,
    /// Report loads and atomics of LDS bytes the workgroup never wrote (see the crate docs).
    pub initcheck: bool,
    /// Worker threads for workgroups (0 = all cores).
    pub threads: usize,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            memcheck: true,
            racecheck: true,
            indexcheck: true,
            initcheck: true,
            threads: 0,
        }
    }
}

/// Execute `kernel` over `grid` x `block` with the packed kernarg buffer `kernarg` (laid out by
/// `kernel.kernarg_layout()`, pointers are `SimMemory` addresses).
///
/// The kernel is verified first; a zero-size grid is a no-op. The first error found (by the
/// lowest workgroup index among those that ran) is returned.
pub fn launch(
    kernel: &Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    kernarg: &[u8],
    mem: &SimMemory,
    opts: &SimOptions,
) -> Result<(), SimError> {
    launch_report(kernel, grid, block, kernarg, mem, opts).map(|_| ())
}
