//! flydsl-sim: a CPU executor of the kernel IR (INTERFACE STUB, being implemented).

use flydsl_ir::Kernel;

/// Device memory of the simulator. Thread-safe.
#[derive(Debug, Default)]
pub struct SimMemory {}

/// Options of one simulated launch.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Report out-of-bounds global and LDS accesses (otherwise they are still never UB on the host).
    pub memcheck: bool,
    /// Report LDS data races.
    pub racecheck: bool,
    /// Worker threads for workgroups (0 = all cores).
    pub threads: usize,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions { memcheck: true, racecheck: true, threads: 0 }
    }
}

/// A failure found by the simulator.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// Placeholder.
    #[error("sim: {0}")]
    Other(String),
}

impl SimMemory {
    /// New empty memory.
    pub fn new() -> Self {
        SimMemory {}
    }
    /// Allocate `bytes` (zero-filled); returns a non-zero device address.
    pub fn alloc(&self, _bytes: u64) -> Result<u64, SimError> {
        unimplemented!()
    }
    /// Free an allocation made by `alloc`.
    pub fn free(&self, _addr: u64) -> Result<(), SimError> {
        unimplemented!()
    }
    /// Copy host bytes to `addr` (may be inside an allocation).
    pub fn write(&self, _addr: u64, _data: &[u8]) -> Result<(), SimError> {
        unimplemented!()
    }
    /// Copy bytes at `addr` to the host.
    pub fn read(&self, _addr: u64, _out: &mut [u8]) -> Result<(), SimError> {
        unimplemented!()
    }
    /// Set `len` bytes at `addr` to `byte`.
    pub fn fill(&self, _addr: u64, _byte: u8, _len: u64) -> Result<(), SimError> {
        unimplemented!()
    }
}

/// Execute `kernel` over `grid` x `block` with the packed kernarg buffer `kernarg` (laid out by
/// `kernel.kernarg_layout()`, pointers are `SimMemory` addresses).
pub fn launch(
    _kernel: &Kernel,
    _grid: [u32; 3],
    _block: [u32; 3],
    _kernarg: &[u8],
    _mem: &SimMemory,
    _opts: &SimOptions,
) -> Result<(), SimError> {
    unimplemented!()
}
