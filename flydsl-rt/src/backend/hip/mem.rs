//! Stream-ordered memory on HIP: `hipMallocAsync` / `hipFreeAsync` where the library has
//! them, cross-stream ordering through events (`hipStreamWaitEvent`), copies enqueued on a
//! stream and page-locked host memory (`hipHostMalloc`).
//!
//! Allocations are ordered on the null stream, which synchronises with every blocking stream;
//! a buffer's first use on any stream is also ordered after it by an event (`residency.rs`).
//! A library without the stream-ordered entry points (an old ROCm, the test fake) gets
//! documented blocking fallbacks: `hipMalloc`, and `hipFree` (which HIP documents to
//! synchronise the device) after waiting for the owner stream; without `hipStreamWaitEvent`
//! the host waits for the earlier stream instead.

use super::{result, sys, HipDevice, HipStream};
use crate::error::{Error, Result};
use std::ptr::null_mut;

/// The handle of an owner stream (`None`: the null stream).
fn handle(s: Option<&HipStream>) -> sys::hipStream_t {
    s.map_or(null_mut(), |s| s.raw)
}

impl HipDevice {
    /// Whether buffers are allocated and freed stream-ordered.
    fn stream_ordered(&self) -> bool {
        self.lib.opt.hipMallocAsync.is_some() && self.lib.opt.hipFreeAsync.is_some()
    }

    /// Allocate `bytes`, stream-ordered where the library can: on `on`, or (`None`) on the
    /// null stream.
    pub(crate) fn alloc(&self, bytes: u64, on: Option<&HipStream>) -> Result<u64> {
        let lib = self.current()?;
        let bytes = usize::try_from(bytes).map_err(|_| Error::SizeOverflow {
            len: bytes,
            elem_bytes: 1,
        })?;
        if self.stream_ordered() {
            // SAFETY: the null stream is always valid, and `on` is live (borrowed).
            Ok(unsafe { result::malloc_async(lib, bytes, handle(on)) }?)
        } else {
            Ok(result::malloc(lib, bytes)?)
        }
    }

    /// Free `ptr` after the work queued so far on `owner` (`None`: the null stream).
    ///
    /// # Safety
    /// `ptr` is a live allocation of this device made by [`alloc`](Self::alloc), freed once,
    /// and every use of it is ordered before the current end of `owner`.
    pub(crate) unsafe fn free(&self, ptr: u64, owner: Option<&HipStream>) -> Result<()> {
        let lib = self.current()?;
        if self.stream_ordered() {
            // SAFETY: guaranteed by the caller; the stream handle is live (borrowed).
            return Ok(unsafe { result::free_async(lib, ptr, handle(owner)) }?);
        }
        if let Some(s) = owner {
            s.synchronize()?;
        }
        // SAFETY: guaranteed by the caller; hipFree synchronises the device first.
        Ok(unsafe { result::free(lib, ptr) }?)
    }

    /// Make later work on `to` wait for the work queued so far on `from`.
    pub(crate) fn order(&self, from: Option<&HipStream>, to: Option<&HipStream>) -> Result<()> {
        let implied = match (from, to) {
            (None, None) => true,
            (None, Some(s)) | (Some(s), None) => s.blocking,
            (Some(_), Some(_)) => false,
        };
        if implied {
            return Ok(());
        }
        let lib = self.current()?;
        if lib.opt.hipStreamWaitEvent.is_none() {
            // SAFETY: the stream handle is live (borrowed) or null.
            return Ok(unsafe { result::stream_synchronize(lib, handle(from)) }?);
        }
        let ev = result::event_create(lib)?;
        // SAFETY: `ev` was just created; the stream handles are live (borrowed) or null.
        let r = unsafe { result::event_record(lib, ev, handle(from)) }
            // SAFETY: as above.
            .and_then(|()| unsafe { result::stream_wait_event(lib, handle(to), ev) });
        // SAFETY: `ev` is live and destroyed once; HIP keeps a waited-on event until the
        // wait is satisfied.
        let _ = unsafe { result::event_destroy(lib, ev) };
        Ok(r?)
    }

    /// # Safety
    /// See `CudaDevice::htod_async`.
    pub(crate) unsafe fn htod_async(
        &self,
        dst: u64,
        src: *const u8,
        bytes: usize,
        s: &HipStream,
    ) -> Result<()> {
        let lib = self.current()?;
        // SAFETY: guaranteed by the caller.
        Ok(unsafe { result::memcpy_htod_async(lib, dst, src, bytes, s.raw) }?)
    }

    /// # Safety
    /// See `CudaDevice::dtoh_async`.
    pub(crate) unsafe fn dtoh_async(
        &self,
        dst: *mut u8,
        src: u64,
        bytes: usize,
        s: &HipStream,
    ) -> Result<()> {
        let lib = self.current()?;
        // SAFETY: guaranteed by the caller.
        Ok(unsafe { result::memcpy_dtoh_async(lib, dst, src, bytes, s.raw) }?)
    }

    /// # Safety
    /// Both ranges lie in live allocations of this device.
    pub(crate) unsafe fn dtod_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        s: &HipStream,
    ) -> Result<()> {
        let lib = self.current()?;
        // SAFETY: guaranteed by the caller.
        Ok(unsafe { result::memcpy_dtod_async(lib, dst, src, bytes, s.raw) }?)
    }

    /// `bytes` of page-locked host memory.
    pub(crate) fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        Ok(result::host_malloc(self.current()?, bytes)?)
    }

    /// # Safety
    /// `ptr` came from [`host_alloc`](Self::host_alloc) and no copy using it is pending.
    pub(crate) unsafe fn host_free(&self, ptr: *mut u8) -> Result<()> {
        // SAFETY: guaranteed by the caller.
        Ok(unsafe { result::host_free(self.current()?, ptr) }?)
    }
}

impl HipDevice {
    /// A stream of other code, never destroyed by us.
    ///
    /// # Safety
    /// `raw` is a live stream of this device that outlives the handle.
    pub(crate) unsafe fn borrowed_stream(&self, raw: sys::hipStream_t) -> Result<HipStream> {
        Ok(HipStream {
            lib: self.lib,
            raw,
            owned: false,
            blocking: raw.is_null(),
        })
    }
}
