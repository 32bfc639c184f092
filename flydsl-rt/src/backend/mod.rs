//! The three backends behind one enum-dispatched interface used by the safe layer.
//!
//! Every function here takes device addresses that the safe layer has already bounds-checked
//! against a live [`DeviceBuffer`](crate::DeviceBuffer), which is what the `unsafe` backend
//! calls require.

#[cfg(feature = "cuda")]
pub(crate) mod cuda;
#[cfg(feature = "cuda")]
mod cuda_mem;
#[cfg(feature = "cuda")]
pub(crate) mod cuda_peer;
#[cfg(feature = "hip")]
pub(crate) mod hip;
#[cfg(any(not(feature = "cuda"), not(feature = "hip")))]
#[macro_use]
mod off;
#[cfg(not(feature = "cuda"))]
off_backend!(
    cuda,
    crate::types::Backend::Cuda,
    "cuda",
    CudaDevice,
    CudaStream,
    CudaEvent,
    CudaFunction
);
#[cfg(not(feature = "hip"))]
off_backend!(
    hip,
    crate::types::Backend::Hip,
    "hip",
    HipDevice,
    HipStream,
    HipEvent,
    HipFunction
);
#[cfg(feature = "sim")]
pub(crate) mod sim;
#[cfg(not(feature = "sim"))]
#[path = "sim_off.rs"]
pub(crate) mod sim;

use crate::error::{Error, Result};
use crate::launch::config::LaunchConfig;
use crate::launch::decode::Decoded;
use crate::variant::KernelResources;
use std::time::Instant;

/// A device of one backend.
#[derive(Debug)]
pub(crate) enum RawDevice {
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    Sim(sim::SimDevice),
    Hip(hip::HipDevice),
    Cuda(cuda::CudaDevice),
}

/// A stream of one backend (Sim streams are synchronous and hold nothing).
#[derive(Debug)]
pub(crate) enum RawStream {
    Sim,
    Hip(hip::HipStream),
    Cuda(cuda::CudaStream),
}

/// An event of one backend.
#[derive(Debug)]
pub(crate) enum RawEvent {
    Sim(sim::SimEvent),
    Hip(hip::HipEvent),
    Cuda(cuda::CudaEvent),
}

/// A kernel loaded on one device (Sim runs the decoded IR directly).
#[derive(Debug)]
pub(crate) enum RawFunction {
    Sim,
    Hip(hip::HipFunction),
    Cuda(cuda::CudaFunction),
}

impl RawFunction {
    /// The loaded kernel's resources, where the backend reports them (CUDA).
    pub(crate) fn resources(&self) -> Result<Option<KernelResources>> {
        match self {
            RawFunction::Cuda(f) => f.resources().map(Some),
            RawFunction::Sim | RawFunction::Hip(_) => Ok(None),
        }
    }
}

fn mismatch() -> Error {
    Error::BadVariant {
        kernel: String::from("<internal>"),
        reason: "handles of different backends were combined".into(),
    }
}

impl RawDevice {
    /// Allocate `bytes`, stream-ordered where the backend can: on `on`, or (`None`) on the
    /// default stream (see `residency.rs`).
    pub(crate) fn alloc(&self, bytes: u64, on: Option<&RawStream>) -> Result<u64> {
        match (self, on) {
            (RawDevice::Sim(d), None | Some(RawStream::Sim)) => d.alloc(bytes),
            (RawDevice::Hip(d), None) => d.alloc(bytes, None),
            (RawDevice::Hip(d), Some(RawStream::Hip(s))) => d.alloc(bytes, Some(s)),
            (RawDevice::Cuda(d), None) => d.alloc(bytes, None),
            (RawDevice::Cuda(d), Some(RawStream::Cuda(s))) => d.alloc(bytes, Some(s)),
            _ => Err(mismatch()),
        }
    }

    /// Free `ptr` once the work queued so far on `owner` (`None`: the default stream) has
    /// run, without waiting on the host where the backend can (see `residency.rs`).
    ///
    /// # Safety
    /// `ptr` must be a live allocation of this device made by [`alloc`](Self::alloc), freed
    /// once, and every use of it must be ordered before the current end of `owner`.
    pub(crate) unsafe fn free(&self, ptr: u64, owner: Option<&RawStream>) -> Result<()> {
        match (self, owner) {
            (RawDevice::Sim(d), None | Some(RawStream::Sim)) => d.free(ptr),
            // SAFETY: guaranteed by the caller.
            (RawDevice::Hip(d), None) => unsafe { d.free(ptr, None) },
            // SAFETY: guaranteed by the caller.
            (RawDevice::Hip(d), Some(RawStream::Hip(s))) => unsafe { d.free(ptr, Some(s)) },
            // SAFETY: guaranteed by the caller.
            (RawDevice::Cuda(d), None) => unsafe { d.free(ptr, None) },
            // SAFETY: guaranteed by the caller.
            (RawDevice::Cuda(d), Some(RawStream::Cuda(s))) => unsafe { d.free(ptr, Some(s)) },
            _ => Err(mismatch()),
        }
    }

    /// Make later work on `to` wait for the work queued so far on `from` (`None`: the
    /// default stream). The host does not wait where the backend can avoid it.
    pub(crate) fn order(&self, from: Option<&RawStream>, to: Option<&RawStream>) -> Result<()> {
        fn hip(s: Option<&RawStream>) -> Result<Option<&hip::HipStream>> {
            match s {
                None => Ok(None),
                Some(RawStream::Hip(s)) => Ok(Some(s)),
                Some(_) => Err(mismatch()),
            }
        }
        fn cuda(s: Option<&RawStream>) -> Result<Option<&cuda::CudaStream>> {
            match s {
                None => Ok(None),
                Some(RawStream::Cuda(s)) => Ok(Some(s)),
                Some(_) => Err(mismatch()),
            }
        }
        match self {
            // Sim work is synchronous: everything queued has already run.
            RawDevice::Sim(_) => Ok(()),
            RawDevice::Hip(d) => d.order(hip(from)?, hip(to)?),
            RawDevice::Cuda(d) => d.order(cuda(from)?, cuda(to)?),
        }
    }

    /// Enqueue a host-to-device copy of `bytes` from `src` on `stream` (Sim: done at once).
    ///
    /// # Safety
    /// `[dst, dst + bytes)` lies in a live allocation of this device; `src` is valid for
    /// `bytes` and stays valid and unchanged until the copy has run.
    pub(crate) unsafe fn htod_async(
        &self,
        dst: u64,
        src: *const u8,
        bytes: usize,
        stream: &RawStream,
    ) -> Result<()> {
        match (self, stream) {
            (RawDevice::Sim(d), RawStream::Sim) => {
                // SAFETY: `src` is valid for `bytes` (guaranteed by the caller).
                d.htod(dst, unsafe { std::slice::from_raw_parts(src, bytes) })
            }
            // SAFETY: guaranteed by the caller.
            (RawDevice::Hip(d), RawStream::Hip(s)) => unsafe { d.htod_async(dst, src, bytes, s) },
            // SAFETY: guaranteed by the caller.
            (RawDevice::Cuda(d), RawStream::Cuda(s)) => unsafe { d.htod_async(dst, src, bytes, s) },
            _ => Err(mismatch()),
        }
    }

    /// Enqueue a device-to-host copy of `bytes` into `dst` on `stream` (Sim: done at once).
    ///
    /// # Safety
    /// `[src, src + bytes)` lies in a live allocation of this device; `dst` is valid for
    /// `bytes` of writes and is not touched otherwise until the copy has run.
    pub(crate) unsafe fn dtoh_async(
        &self,
        dst: *mut u8,
        src: u64,
        bytes: usize,
        stream: &RawStream,
    ) -> Result<()> {
        match (self, stream) {
            (RawDevice::Sim(d), RawStream::Sim) => {
                // SAFETY: `dst` is valid for `bytes` of writes (guaranteed by the caller).
                d.dtoh(src, unsafe { std::slice::from_raw_parts_mut(dst, bytes) })
            }
            // SAFETY: guaranteed by the caller.
            (RawDevice::Hip(d), RawStream::Hip(s)) => unsafe { d.dtoh_async(dst, src, bytes, s) },
            // SAFETY: guaranteed by the caller.
            (RawDevice::Cuda(d), RawStream::Cuda(s)) => unsafe { d.dtoh_async(dst, src, bytes, s) },
            _ => Err(mismatch()),
        }
    }

    /// Enqueue a device-to-device copy of `bytes` on `stream` (Sim: done at once).
    ///
    /// # Safety
    /// Both ranges lie in live allocations of this device.
    pub(crate) unsafe fn dtod_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: &RawStream,
    ) -> Result<()> {
        match (self, stream) {
            (RawDevice::Sim(d), RawStream::Sim) => d.dtod(dst, src, bytes),
            // SAFETY: guaranteed by the caller.
            (RawDevice::Hip(d), RawStream::Hip(s)) => unsafe { d.dtod_async(dst, src, bytes, s) },
            // SAFETY: guaranteed by the caller.
            (RawDevice::Cuda(d), RawStream::Cuda(s)) => unsafe { d.dtod_async(dst, src, bytes, s) },
            _ => Err(mismatch()),
        }
    }

    /// `bytes` (> 0) of zeroed host memory that copies on this device's streams may use
    /// asynchronously: page-locked on GPUs, 64-byte aligned heap memory on the Sim.
    pub(crate) fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        let p = match self {
            RawDevice::Sim(d) => d.host_alloc(bytes)?,
            RawDevice::Hip(d) => d.host_alloc(bytes)?,
            RawDevice::Cuda(d) => d.host_alloc(bytes)?,
        };
        // SAFETY: `p` is a fresh allocation of `bytes` bytes.
        unsafe { std::ptr::write_bytes(p, 0, bytes) };
        Ok(p)
    }

    /// # Safety
    /// `ptr` came from [`host_alloc`](Self::host_alloc) of this device with `bytes`, and no
    /// copy using it is pending.
    pub(crate) unsafe fn host_free(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        match self {
            // SAFETY: guaranteed by the caller.
            RawDevice::Sim(d) => unsafe { d.host_free(ptr, bytes) },
            // SAFETY: guaranteed by the caller.
            RawDevice::Hip(d) => unsafe { d.host_free(ptr) },
            // SAFETY: guaranteed by the caller.
            RawDevice::Cuda(d) => unsafe { d.host_free(ptr) },
        }
    }

    /// # Safety
    /// `[dst, dst + src.len())` must lie inside a live allocation of this device.
    pub(crate) unsafe fn htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        match self {
            RawDevice::Sim(d) => d.htod(dst, src),
            // SAFETY: guaranteed by the caller.
            RawDevice::Hip(d) => unsafe { d.htod(dst, src) },
            // SAFETY: guaranteed by the caller.
            RawDevice::Cuda(d) => unsafe { d.htod(dst, src) },
        }
    }

    /// # Safety
    /// `[src, src + dst.len())` must lie inside a live allocation of this device.
    pub(crate) unsafe fn dtoh(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        match self {
            RawDevice::Sim(d) => d.dtoh(src, dst),
            // SAFETY: guaranteed by the caller.
            RawDevice::Hip(d) => unsafe { d.dtoh(src, dst) },
            // SAFETY: guaranteed by the caller.
            RawDevice::Cuda(d) => unsafe { d.dtoh(src, dst) },
        }
    }

    /// # Safety
    /// `[dst, dst + bytes)` must lie inside a live allocation of this device.
    pub(crate) unsafe fn memset_zero(&self, dst: u64, bytes: u64) -> Result<()> {
        match self {
            RawDevice::Sim(d) => d.memset_zero(dst, bytes),
            // SAFETY: guaranteed by the caller.
            RawDevice::Hip(d) => unsafe { d.memset_zero(dst, bytes) },
            // SAFETY: guaranteed by the caller.
            RawDevice::Cuda(d) => unsafe { d.memset_zero(dst, bytes) },
        }
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        match self {
            RawDevice::Sim(_) => Ok(()),
            RawDevice::Hip(d) => d.synchronize(),
            RawDevice::Cuda(d) => d.synchronize(),
        }
    }

    pub(crate) fn stream(&self) -> Result<RawStream> {
        Ok(match self {
            RawDevice::Sim(_) => RawStream::Sim,
            RawDevice::Hip(d) => RawStream::Hip(d.stream()?),
            RawDevice::Cuda(d) => RawStream::Cuda(d.stream()?),
        })
    }

    pub(crate) fn event(&self) -> Result<RawEvent> {
        Ok(match self {
            RawDevice::Sim(d) => RawEvent::Sim(d.event()?),
            RawDevice::Hip(d) => RawEvent::Hip(d.event()?),
            RawDevice::Cuda(d) => RawEvent::Cuda(d.event()?),
        })
    }

    /// Load a kernel's code object (`code` is `None` only for Sim, which needs none).
    pub(crate) fn load(&self, code: Option<&[u8]>, decoded: &Decoded) -> Result<RawFunction> {
        let missing = || Error::BadVariant {
            kernel: decoded.kernel.name.clone(),
            reason: "the variant has no code object".into(),
        };
        Ok(match self {
            RawDevice::Sim(_) => RawFunction::Sim,
            RawDevice::Hip(d) => RawFunction::Hip(d.load(code.ok_or_else(missing)?, decoded)?),
            RawDevice::Cuda(d) => RawFunction::Cuda(d.load(code.ok_or_else(missing)?, decoded)?),
        })
    }

    /// # Safety
    /// `stream` and `f` belong to this device; `args` matches `decoded`'s layout; the kernel's
    /// accesses through the pointers in `args` stay inside their buffers (Sim checks this).
    pub(crate) unsafe fn launch(
        &self,
        stream: &RawStream,
        f: &RawFunction,
        decoded: &Decoded,
        cfg: &LaunchConfig,
        args: &[u8],
    ) -> Result<()> {
        match (self, stream, f) {
            (RawDevice::Sim(d), RawStream::Sim, RawFunction::Sim) => {
                d.launch(&decoded.kernel, cfg, args)
            }
            (RawDevice::Hip(d), RawStream::Hip(s), RawFunction::Hip(f)) => {
                // SAFETY: guaranteed by the caller.
                unsafe { d.launch(s, f, decoded, cfg, args) }
            }
            (RawDevice::Cuda(d), RawStream::Cuda(s), RawFunction::Cuda(f)) => {
                // SAFETY: guaranteed by the caller.
                unsafe { d.launch(s, f, decoded, cfg, args) }
            }
            _ => Err(mismatch()),
        }
    }
}

impl RawStream {
    pub(crate) fn synchronize(&self) -> Result<()> {
        match self {
            RawStream::Sim => Ok(()),
            RawStream::Hip(s) => s.synchronize(),
            RawStream::Cuda(s) => s.synchronize(),
        }
    }
}

impl RawEvent {
    pub(crate) fn record(&self, stream: &RawStream) -> Result<()> {
        match (self, stream) {
            (RawEvent::Sim(e), RawStream::Sim) => {
                e.record();
                Ok(())
            }
            (RawEvent::Hip(e), RawStream::Hip(s)) => e.record(s),
            (RawEvent::Cuda(e), RawStream::Cuda(s)) => e.record(s),
            _ => Err(mismatch()),
        }
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        match self {
            RawEvent::Sim(_) => Ok(()),
            RawEvent::Hip(e) => e.synchronize(),
            RawEvent::Cuda(e) => e.synchronize(),
        }
    }

    pub(crate) fn elapsed_ms(&self, end: &RawEvent) -> Result<f32> {
        match (self, end) {
            (RawEvent::Sim(a), RawEvent::Sim(b)) => {
                let (Some(a), Some(b)) = (a.time(), b.time()) else {
                    return Err(Error::EventNotRecorded("Event::elapsed_ms"));
                };
                Ok(signed_ms(a, b))
            }
            (RawEvent::Hip(a), RawEvent::Hip(b)) => a.elapsed_ms(b),
            (RawEvent::Cuda(a), RawEvent::Cuda(b)) => a.elapsed_ms(b),
            _ => Err(mismatch()),
        }
    }
}

fn signed_ms(a: Instant, b: Instant) -> f32 {
    if b >= a {
        (b - a).as_secs_f32() * 1e3
    } else {
        -((a - b).as_secs_f32() * 1e3)
    }
}
