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

    pub(crate) fn free(&self, ptr: u64) -> Result<()> {
        self.mem.free(ptr).map_err(Error::sim_mem)
    }

    /// The process-unique id of this device's memory (`SimMemory::id`).
    pub(crate) fn memory_id(&self) -> u64 {
        self.mem.id()
    }

    /// Let this device's kernels reach the memory with id `peer` (`SimMemory::enable_peer`).
    pub(crate) fn enable_peer(&self, peer: u64) -> Result<()> {
        self.mem.enable_peer(peer).map_err(Error::sim_mem)
    }

    /// The Sim's copies are synchronous; a device-to-device copy goes through the host.
    pub(crate) fn dtod(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        let mut tmp = vec![0u8; bytes];
        self.mem.read(src, &mut tmp).map_err(Error::sim_mem)?;
        self.mem.write(dst, &tmp).map_err(Error::sim_mem)
    }

    /// The size of the live allocation holding `addr` and `addr`'s offset in it.
    pub(crate) fn allocation_of(&self, addr: u64) -> Option<(u64, u64)> {
        self.mem.allocation_of(addr)
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

impl SimDevice {
    /// A new, unrecorded event.
    pub(crate) fn event(&self) -> Result<SimEvent> {
        Ok(SimEvent::default())
    }

    /// See [`host_alloc`].
    pub(crate) fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        host_alloc(bytes)
    }

    /// # Safety
    /// See [`host_free`].
    pub(crate) unsafe fn host_free(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { host_free(ptr, bytes) }
    }
}

/// The alignment of the Sim's host buffers (every `DeviceRepr` type's alignment divides it).
const HOST_ALIGN: usize = 64;

fn host_layout(bytes: usize) -> Result<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(bytes, HOST_ALIGN).map_err(|_| Error::SizeOverflow {
        len: bytes as u64,
        elem_bytes: 1,
    })
}

/// `bytes` (> 0) of host memory for the Sim's "page-locked" buffers.
fn host_alloc(bytes: usize) -> Result<*mut u8> {
    let layout = host_layout(bytes)?;
    // SAFETY: `layout` has a non-zero size (the caller allocates nothing for empty buffers).
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    Ok(p)
}

/// # Safety
/// `ptr` came from [`host_alloc`] with the same `bytes`.
unsafe fn host_free(ptr: *mut u8, bytes: usize) -> Result<()> {
    let layout = host_layout(bytes)?;
    // SAFETY: guaranteed by the caller.
    unsafe { std::alloc::dealloc(ptr, layout) };
    Ok(())
}
