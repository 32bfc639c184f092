//! CUDA memory shared across devices and processes (peer access, `cuMemAlloc` allocations
//! that peer access and IPC handles reach, IPC handles) and stream capture into graphs.
//!
//! Stream-ordered pool memory (`cuMemAllocAsync`, what `DeviceBuffer` uses) is reached by
//! neither `cuCtxEnablePeerAccess` nor `cuIpcGetMemHandle`, so shared memory is a plain
//! `cuMemAlloc`, zeroed and freed synchronously: it is allocated once, at set-up.

use super::cuda::{driver, CudaDevice, CudaStream};
use crate::error::Result;
use cudarc::driver::{result, sys};

/// Bytes of a CUDA IPC memory handle.
pub(crate) const IPC_HANDLE_BYTES: usize = 64;

impl CudaDevice {
    /// Let this device's kernels access `peer`'s memory (already enabled: no error).
    pub(crate) fn enable_peer(&self, peer: &CudaDevice) -> Result<()> {
        self.current()?;
        // SAFETY: both contexts are retained primary contexts, live for the process.
        let r = unsafe { sys::cuCtxEnablePeerAccess(peer.ctx, 0) };
        match r {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
                Ok(())
            }
            e => Err(driver("cuCtxEnablePeerAccess")(result::DriverError(e))),
        }
    }

    /// `bytes` (> 0) of zeroed device memory that peers and other processes can map.
    pub(crate) fn alloc_shareable(&self, bytes: usize) -> Result<u64> {
        self.current()?;
        // SAFETY: plain allocation in the current context.
        let p = unsafe { result::malloc_sync(bytes) }.map_err(driver("cuMemAlloc"))?;
        // SAFETY: `p` is a fresh allocation of `bytes` bytes; the memset is synchronous.
        unsafe { sys::cuMemsetD8_v2(p, 0, bytes) }
            .result()
            .map_err(driver("cuMemsetD8"))?;
        self.synchronize()?;
        Ok(p)
    }

    /// # Safety
    /// `ptr` came from [`alloc_shareable`](Self::alloc_shareable) of this device and no work
    /// that uses it is pending or will be enqueued.
    pub(crate) unsafe fn free_shareable(&self, ptr: u64) -> Result<()> {
        self.current()?;
        // SAFETY: guaranteed by the caller.
        unsafe { result::free_sync(ptr) }.map_err(driver("cuMemFree"))
    }

    /// The IPC handle of the allocation starting at `ptr`.
    pub(crate) fn ipc_handle(&self, ptr: u64) -> Result<[u8; IPC_HANDLE_BYTES]> {
        self.current()?;
        let mut h = sys::CUipcMemHandle_st { reserved: [0; 64] };
        // SAFETY: `h` outlives the call; `ptr` is a live allocation (the caller's buffer).
        unsafe { sys::cuIpcGetMemHandle(&mut h, ptr) }
            .result()
            .map_err(driver("cuIpcGetMemHandle"))?;
        Ok(h.reserved.map(|c| c as u8))
    }

    /// Map another process's allocation from its IPC handle; returns its address here.
    pub(crate) fn ipc_open(&self, handle: &[u8; IPC_HANDLE_BYTES]) -> Result<u64> {
        self.current()?;
        let h = sys::CUipcMemHandle_st {
            reserved: handle.map(|b| b as ::core::ffi::c_char),
        };
        let mut p = 0u64;
        // SAFETY: `p` outlives the call; the driver validates the handle.
        unsafe {
            sys::cuIpcOpenMemHandle_v2(
                &mut p,
                h,
                sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
            )
        }
        .result()
        .map_err(driver("cuIpcOpenMemHandle"))?;
        Ok(p)
    }

    /// # Safety
    /// `ptr` came from [`ipc_open`](Self::ipc_open) on this device and no work that uses it
    /// is pending or will be enqueued.
    pub(crate) unsafe fn ipc_close(&self, ptr: u64) -> Result<()> {
        self.current()?;
        // SAFETY: guaranteed by the caller.
        unsafe { sys::cuIpcCloseMemHandle(ptr) }
            .result()
            .map_err(driver("cuIpcCloseMemHandle"))
    }
}

/// An instantiated graph captured from a stream.
#[derive(Debug)]
pub(crate) struct CudaGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

// SAFETY: opaque driver handles; the driver API is thread-safe.
unsafe impl Send for CudaGraph {}
// SAFETY: as above.
unsafe impl Sync for CudaGraph {}

impl CudaStream {
    /// Start capturing this stream's work into a graph (relaxed mode: other threads may
    /// still call unsafe-to-capture APIs).
    pub(crate) fn begin_capture(&self) -> Result<()> {
        // SAFETY: `raw` is live.
        unsafe {
            sys::cuStreamBeginCapture_v2(
                self.raw,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
            )
        }
        .result()
        .map_err(driver("cuStreamBeginCapture"))
    }

    /// End the capture and instantiate the graph.
    pub(crate) fn end_capture(&self) -> Result<CudaGraph> {
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: `raw` is live and capturing; `graph` outlives the call.
        unsafe { sys::cuStreamEndCapture(self.raw, &mut graph) }
            .result()
            .map_err(driver("cuStreamEndCapture"))?;
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: `graph` is the live graph just captured; `exec` outlives the call.
        let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) }.result();
        if let Err(e) = r {
            // SAFETY: the graph is ours and not instantiated.
            unsafe { sys::cuGraphDestroy(graph) };
            return Err(driver("cuGraphInstantiateWithFlags")(e));
        }
        Ok(CudaGraph { graph, exec })
    }
}

impl CudaGraph {
    /// Enqueue one replay of the graph on `stream`.
    pub(crate) fn launch(&self, stream: &CudaStream) -> Result<()> {
        // SAFETY: both handles are live.
        unsafe { sys::cuGraphLaunch(self.exec, stream.raw) }
            .result()
            .map_err(driver("cuGraphLaunch"))
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: the handles are ours, destroyed once; the driver keeps a launched graph's
        // resources alive until its work is done.
        let r = unsafe { sys::cuGraphExecDestroy(self.exec) }.result();
        // SAFETY: as above.
        let r = r.and_then(|()| unsafe { sys::cuGraphDestroy(self.graph) }.result());
        if let Err(e) = r {
            crate::diag::report(format!("cuGraphExecDestroy / cuGraphDestroy failed: {e:?}"));
        }
    }
}
