//! Stream-ordered memory on CUDA: buffers from the device's default memory pool
//! (`cuMemAllocAsync` / `cuMemFreeAsync`), cross-stream ordering through events, copies
//! enqueued on a stream, page-locked host memory, and what the driver knows of a pointer.
//!
//! Allocations are ordered on the legacy default stream (`CU_STREAM_LEGACY`), which waits for
//! earlier work of every blocking stream and which later blocking-stream work waits for; a
//! buffer's first use on any stream is also ordered after it by an event (see
//! `residency.rs`), so non-blocking streams of other code are covered too. A device without
//! memory pools falls back to `cuMemAlloc` and, at free, waits for the buffer's owner stream
//! before `cuMemFree` (blocking, but only on the work ordered before the buffer's last use).

use super::cuda::{driver, CudaDevice, CudaStream};
use crate::error::{Error, Result};
use cudarc::driver::{result, sys};
use std::ffi::c_void;

/// The legacy default stream, `CU_STREAM_LEGACY` (`((CUstream)0x1)` in `cuda.h`).
fn legacy() -> sys::CUstream {
    1usize as sys::CUstream
}

/// The handle of an owner stream (`None`: the legacy default stream).
fn handle(s: Option<&CudaStream>) -> sys::CUstream {
    s.map_or_else(legacy, |s| s.raw)
}

fn usize_bytes(bytes: u64) -> Result<usize> {
    usize::try_from(bytes).map_err(|_| Error::SizeOverflow {
        len: bytes,
        elem_bytes: 1,
    })
}

impl CudaDevice {
    /// Allocate `bytes`, stream-ordered where pools exist: on `on`, or (`None`) on the
    /// legacy default stream.
    pub(crate) fn alloc(&self, bytes: u64, on: Option<&CudaStream>) -> Result<u64> {
        self.current()?;
        let bytes = usize_bytes(bytes)?;
        if self.pools {
            // SAFETY: allocation from the current context's default pool, ordered on a live
            // stream of this context (borrowed) or the legacy default stream.
            unsafe { result::malloc_async(handle(on), bytes) }.map_err(driver("cuMemAllocAsync"))
        } else {
            // SAFETY: plain allocation in the current context.
            unsafe { result::malloc_sync(bytes) }.map_err(driver("cuMemAlloc"))
        }
    }

    /// Free `ptr` after the work queued so far on `owner` (`None`: the legacy default
    /// stream). Never waits on the host where pools exist.
    ///
    /// # Safety
    /// `ptr` must be a live allocation of this device made by [`alloc`](Self::alloc), freed
    /// once, and every use of it must be ordered before the current end of `owner`.
    pub(crate) unsafe fn free(&self, ptr: u64, owner: Option<&CudaStream>) -> Result<()> {
        self.current()?;
        if self.pools {
            // SAFETY: guaranteed by the caller; the stream handle is live (borrowed).
            unsafe { result::free_async(ptr, handle(owner)) }.map_err(driver("cuMemFreeAsync"))
        } else {
            // SAFETY: the stream handle is live (borrowed).
            unsafe { result::stream::synchronize(handle(owner)) }
                .map_err(driver("cuStreamSynchronize"))?;
            // SAFETY: guaranteed by the caller; no work on `ptr` is pending any more.
            unsafe { result::free_sync(ptr) }.map_err(driver("cuMemFree"))
        }
    }

    /// Make later work on `to` wait for the work queued so far on `from` (an event recorded
    /// on `from` and waited for on `to`; the host does not wait).
    pub(crate) fn order(&self, from: Option<&CudaStream>, to: Option<&CudaStream>) -> Result<()> {
        // Between the legacy stream and a blocking stream the driver orders by itself.
        let implied = match (from, to) {
            (None, None) => true,
            (None, Some(s)) | (Some(s), None) => s.blocking,
            (Some(_), Some(_)) => false,
        };
        if implied {
            return Ok(());
        }
        self.current()?;
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(driver("cuEventCreate"))?;
        // SAFETY: `ev` was just created; the stream handles are live (borrowed).
        let r = unsafe { result::event::record(ev, handle(from)) }
            .map_err(driver("cuEventRecord"))
            .and_then(|()| {
                // SAFETY: as above.
                unsafe {
                    result::stream::wait_event(
                        handle(to),
                        ev,
                        sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                    )
                }
                .map_err(driver("cuStreamWaitEvent"))
            });
        // SAFETY: `ev` is live and destroyed once; a recorded event's resources are released
        // by the driver once the wait is satisfied.
        let _ = unsafe { result::event::destroy(ev) };
        r
    }

    /// Enqueue a copy of `bytes` from host `src` to device `dst` on `stream`.
    ///
    /// # Safety
    /// The device range lies in a live allocation of this device; `src` stays valid and
    /// unchanged until the copy has run.
    pub(crate) unsafe fn htod_async(
        &self,
        dst: u64,
        src: *const u8,
        bytes: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        self.current()?;
        // SAFETY: guaranteed by the caller.
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast::<c_void>(), bytes, stream.raw) }
            .result()
            .map_err(driver("cuMemcpyHtoDAsync"))
    }

    /// Enqueue a copy of `bytes` from device `src` to host `dst` on `stream`.
    ///
    /// # Safety
    /// The device range lies in a live allocation of this device; `dst` stays valid and
    /// untouched until the copy has run.
    pub(crate) unsafe fn dtoh_async(
        &self,
        dst: *mut u8,
        src: u64,
        bytes: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        self.current()?;
        // SAFETY: guaranteed by the caller.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast::<c_void>(), src, bytes, stream.raw) }
            .result()
            .map_err(driver("cuMemcpyDtoHAsync"))
    }

    /// Enqueue a device-to-device copy of `bytes` on `stream`.
    ///
    /// # Safety
    /// Both ranges lie in live allocations of this device.
    pub(crate) unsafe fn dtod_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        self.current()?;
        // SAFETY: guaranteed by the caller.
        unsafe { result::memcpy_dtod_async(dst, src, bytes, stream.raw) }
            .map_err(driver("cuMemcpyDtoDAsync"))
    }

    /// `bytes` of page-locked host memory (`cuMemHostAlloc`, portable to every context).
    pub(crate) fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        self.current()?;
        // SAFETY: plain allocation; the memory is written before it is read (zeroed by the
        // caller).
        unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map(|p| p.cast::<u8>())
            .map_err(driver("cuMemHostAlloc"))
    }

    /// # Safety
    /// `ptr` came from [`host_alloc`](Self::host_alloc) and no copy using it is pending.
    pub(crate) unsafe fn host_free(&self, ptr: *mut u8) -> Result<()> {
        self.current()?;
        // SAFETY: guaranteed by the caller.
        unsafe { result::free_host(ptr.cast::<c_void>()) }.map_err(driver("cuMemFreeHost"))
    }

    /// The device ordinal of the allocation holding `ptr` and that allocation's
    /// `(start, size)` (`cuPointerGetAttribute`); an error for a pointer the driver does not
    /// know as device memory.
    pub(crate) fn pointer_info(&self, ptr: u64) -> Result<(i32, u64, u64)> {
        self.current()?;
        use sys::CUpointer_attribute as P;
        let mut ordinal = -1i32;
        let (mut start, mut size) = (0u64, 0usize);
        // SAFETY: each out-pointer refers to a live local of the attribute's documented type
        // (int for the ordinal, CUdeviceptr for the start, size_t for the size).
        unsafe {
            sys::cuPointerGetAttribute(
                (&mut ordinal as *mut i32).cast(),
                P::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr,
            )
            .result()
            .map_err(driver("cuPointerGetAttribute(DEVICE_ORDINAL)"))?;
            sys::cuPointerGetAttribute(
                (&mut start as *mut u64).cast(),
                P::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                ptr,
            )
            .result()
            .map_err(driver("cuPointerGetAttribute(RANGE_START_ADDR)"))?;
            sys::cuPointerGetAttribute(
                (&mut size as *mut usize).cast(),
                P::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                ptr,
            )
            .result()
            .map_err(driver("cuPointerGetAttribute(RANGE_SIZE)"))?;
        }
        Ok((ordinal, start, size as u64))
    }
}

impl CudaDevice {
    /// A stream of other code, never destroyed by us.
    ///
    /// # Safety
    /// `raw` is a live stream of this device's primary context that outlives the handle.
    pub(crate) unsafe fn borrowed_stream(&self, raw: *mut c_void) -> Result<CudaStream> {
        let raw: sys::CUstream = raw.cast();
        // Null and CU_STREAM_LEGACY are the legacy stream itself; CU_STREAM_PER_THREAD (0x2)
        // is documented to synchronise with it like a blocking stream.
        let blocking = if (raw as usize) <= 2 {
            true
        } else {
            self.current()?;
            let mut flags = 0u32;
            // SAFETY: `raw` is a live stream (the caller's contract); `flags` outlives the call.
            unsafe { sys::cuStreamGetFlags(raw, &mut flags) }
                .result()
                .map_err(driver("cuStreamGetFlags"))?;
            flags & sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32 == 0
        };
        Ok(CudaStream {
            raw,
            owned: false,
            blocking,
        })
    }
}
