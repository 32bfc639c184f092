//! The Sim backend: device memory is a [`flydsl_sim::SimMemory`], kernels run on the CPU through
//! [`flydsl_sim::launch`]. Streams are synchronous (a launch returns once the kernel has run),
//! so events record host wall-clock time.

use crate::error::{Error, Result};
use crate::launch::config::LaunchConfig;
use flydsl_ir::{Kernel, Target};
use flydsl_sim::{SimMemory, SimOptions};
use std::sync::Mutex;
use std::time::Instant;

/// One simulated device: its own memory and emulated target.
#[derive(Debug)]
pub(crate) struct SimDevice {
    mem: SimMemory,
    opts: SimOptions,
}

impl SimDevice {
    /// A fresh device with empty memory and memcheck + racecheck on.
    pub(crate) fn new() -> SimDevice {
        SimDevice {
            mem: SimMemory::new(),
            opts: SimOptions::default(),
        }
    }

    pub(crate) fn alloc(&self, bytes: u64) -> Result<u64> {
        self.mem.alloc(bytes).map_err(Error::sim_mem)
    }

    pub(crate) fn free(&self, ptr: u64) {
        // A failed free can only mean a double free, which the safe layer rules out.
        let _ = self.mem.free(ptr);
    }

    pub(crate) fn htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.mem.write(dst, src).map_err(Error::sim_mem)
    }

    pub(crate) fn dtoh(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        self.mem.read(src, dst).map_err(Error::sim_mem)
    }

    pub(crate) fn memset_zero(&self, dst: u64, bytes: u64) -> Result<()> {
        self.mem.fill(dst, 0, bytes).map_err(Error::sim_mem)
    }

    pub(crate) fn launch(&self, kernel: &Kernel, cfg: &LaunchConfig, args: &[u8]) -> Result<()> {
        flydsl_sim::launch_with_lds(
            kernel,
            cfg.grid,
            cfg.block,
            cfg.dynamic_lds_bytes,
            args,
            &self.mem,
            &self.opts,
        )
        .map(|_| ())
        .map_err(|source| Error::Sim {
            kernel: kernel.name.clone(),
            source: Box::new(source),
        })
    }
}

/// Nominal compute-unit counts of the emulated products (used by dispatchers that size grids
/// by the CU count): MI300X, MI355X, R9700, a gfx1250 part and the H200.
pub(crate) fn nominal_compute_units(target: Target) -> u32 {
    match target {
        Target::Gfx942 => 304,
        Target::Gfx950 => 256,
        Target::Gfx1201 => 64,
        Target::Gfx1250 => 256,
        Target::Sm90 => 132,
    }
}

/// A Sim event: the host time at which it was recorded.
#[derive(Debug, Default)]
pub(crate) struct SimEvent {
    at: Mutex<Option<Instant>>,
}

impl SimEvent {
    pub(crate) fn record(&self) {
        *self.at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    pub(crate) fn time(&self) -> Option<Instant> {
        *self.at.lock().unwrap_or_else(|e| e.into_inner())
    }
}
