//! The CUDA backend (NVIDIA GPUs) over cudarc's driver bindings, loaded at run time.
//!
//! Layers: `cudarc::driver::sys` (raw, dynamically loaded), `cudarc::driver::result` (thin
//! `Result` wrappers), and the handle types here. Each device uses its primary context, made
//! current on the calling thread before every call; launches skip that when this thread last
//! made the same context current (and retry once after making it current if a launch fails,
//! in case other code changed the thread's context since).
//!
//! Launches pass `kernelParams`: one pointer per kernel argument, pointing into the packed
//! `KernelArgs` buffer at the slot offsets of the IR's kernarg layout. That
//! needs no assumption about how the driver rounds the size of a packed `extra` buffer, and the
//! PTX `.param` list is exactly the layout's slots in order.

use crate::error::{Error, Result};
use crate::launch::config::LaunchConfig;
use crate::launch::decode::Decoded;
use crate::types::{Backend, DeviceInfo};
use crate::variant::KernelResources;
use cudarc::driver::{result, sys};
use flydsl_ir::Target;
use std::ffi::{c_void, CString};

pub(super) fn driver(call: &'static str) -> impl FnOnce(result::DriverError) -> Error {
    move |e| Error::Driver {
        backend: Backend::Cuda,
        call,
        code: e.0 as i64,
        message: e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", e.0)),
    }
}

/// One CUDA device with its retained primary context.
#[derive(Debug)]
pub(crate) struct CudaDevice {
    pub(super) ctx: sys::CUcontext,
    /// The most shared memory a block may use with the opt-in (static plus dynamic).
    max_shared_optin: i32,
    /// The device supports memory pools: buffers are allocated and freed stream-ordered
    /// (`cuda_mem.rs`).
    pub(super) pools: bool,
}

// SAFETY: a CUcontext is an opaque driver handle that may be made current on any thread.
unsafe impl Send for CudaDevice {}
// SAFETY: as above; the driver API is thread-safe.
unsafe impl Sync for CudaDevice {}

/// Load the driver and list its devices. Devices that are not compute capability 9.x are
/// returned as errors in place.
pub(crate) fn enumerate() -> Result<Vec<Result<(CudaDevice, DeviceInfo)>>> {
    let unavailable = |reason: String| Error::BackendUnavailable {
        backend: Backend::Cuda,
        reason,
    };
    // SAFETY: only tries to open the library by its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err(unavailable(
            "libcuda.so (the NVIDIA driver library) was not found on the loader path".into(),
        ));
    }
    // cudarc panics when an entry point is missing from an old driver; turn that into an error.
    let init = std::panic::catch_unwind(result::init)
        .map_err(|_| unavailable("the CUDA driver library lacks cuInit".into()))?;
    init.map_err(|e| unavailable(format!("cuInit failed: {e}")))?;
    let count = result::device::get_count().map_err(|e| unavailable(e.to_string()))?;
    Ok((0..count.max(0)).map(|i| probe(i as usize)).collect())
}

fn probe(ordinal: usize) -> Result<(CudaDevice, DeviceInfo)> {
    use sys::CUdevice_attribute as A;
    let dev = result::device::get(ordinal as i32).map_err(driver("cuDeviceGet"))?;
    let name = result::device::get_name(dev).map_err(driver("cuDeviceGetName"))?;
    // SAFETY: `dev` came from cuDeviceGet.
    let attr = |a| {
        unsafe { result::device::get_attribute(dev, a) }.map_err(driver("cuDeviceGetAttribute"))
    };
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    if major != 9 {
        return Err(Error::UnsupportedDevice {
            backend: Backend::Cuda,
            ordinal,
            name,
            reason: format!(
                "unsupported NVIDIA compute capability {major}.{minor} (flydsl builds sm_90); use \
                 an H100/H200 or FLYDSL_BACKEND=sim"
            ),
        });
    }
    let info = DeviceInfo {
        arch: format!("sm_{major}{minor}"),
        name: name.into(),
        target: Target::Sm90,
        wave_size: attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?.max(1) as u32,
        // The opt-in limit: kernels with a dynamic region get it at load (see `load`).
        max_lds_bytes: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0)
            as u64,
        compute_units: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(0) as u32,
    };
    // SAFETY: `dev` came from cuDeviceGet; the primary context is released never (devices
    // live for the whole process once enumerated).
    let ctx =
        unsafe { result::primary_ctx::retain(dev) }.map_err(driver("cuDevicePrimaryCtxRetain"))?;
    let max_shared_optin = info.max_lds_bytes as i32;
    let pools = attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0;
    Ok((
        CudaDevice {
            ctx,
            max_shared_optin,
            pools,
        },
        info,
    ))
}

thread_local! {
    /// The context this thread last made current through [`CudaDevice::current`].
    static CURRENT: std::cell::Cell<sys::CUcontext> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

/// Kernel parameters passed from a stack array up to this many.
const INLINE_PARAMS: usize = 32;

impl CudaDevice {
    pub(super) fn current(&self) -> Result<()> {
        // SAFETY: `ctx` is a retained primary context, valid for the life of the process.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(driver("cuCtxSetCurrent"))?;
        CURRENT.with(|c| c.set(self.ctx));
        Ok(())
    }

    /// Make the context current unless this thread already did (see the module docs).
    fn current_cached(&self) -> Result<()> {
        if CURRENT.with(|c| c.get()) == self.ctx {
            return Ok(());
        }
        self.current()
    }

    /// # Safety
    /// The device range must lie inside a live allocation of this device.
    pub(crate) unsafe fn htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.current()?;
        // SAFETY: guaranteed by the caller.
        unsafe { result::memcpy_htod_sync(dst, src) }.map_err(driver("cuMemcpyHtoD"))
    }

    /// # Safety
    /// The device range must lie inside a live allocation of this device.
    pub(crate) unsafe fn dtoh(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        self.current()?;
        // SAFETY: guaranteed by the caller.
        unsafe { result::memcpy_dtoh_sync(dst, src) }.map_err(driver("cuMemcpyDtoH"))
    }

    /// # Safety
    /// The device range must lie inside a live allocation of this device.
    pub(crate) unsafe fn memset_zero(&self, dst: u64, bytes: u64) -> Result<()> {
        self.current()?;
        let bytes = usize::try_from(bytes).map_err(|_| Error::SizeOverflow {
            len: bytes,
            elem_bytes: 1,
        })?;
        // SAFETY: guaranteed by the caller.
        unsafe { result::memset_d8_sync(dst, 0, bytes) }.map_err(driver("cuMemsetD8"))
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        self.current()?;
        result::ctx::synchronize().map_err(driver("cuCtxSynchronize"))
    }

    pub(crate) fn stream(&self) -> Result<CudaStream> {
        self.current()?;
        let raw = result::stream::create(result::stream::StreamKind::Default)
            .map_err(driver("cuStreamCreate"))?;
        Ok(CudaStream {
            raw,
            owned: true,
            blocking: true,
        })
    }

    pub(crate) fn event(&self) -> Result<CudaEvent> {
        self.current()?;
        let raw = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(driver("cuEventCreate"))?;
        Ok(CudaEvent { raw })
    }

    /// Load `code` (PTX text, NUL-terminated here if it is not already).
    pub(crate) fn load(&self, code: &[u8], decoded: &Decoded) -> Result<CudaFunction> {
        self.current()?;
        let name = &decoded.kernel.name;
        let bad = |reason: &str| Error::BadVariant {
            kernel: name.clone(),
            reason: reason.into(),
        };
        let text = match code.iter().position(|&b| b == 0) {
            Some(end) => code[..end].to_vec(),
            None => code.to_vec(),
        };
        let image = CString::new(text).map_err(|_| bad("the PTX contains a NUL byte"))?;
        // SAFETY: `image` is a NUL-terminated PTX string that outlives the call.
        let module = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(driver("cuModuleLoadData"))?;
        let cname =
            CString::new(name.as_str()).map_err(|_| bad("the kernel name contains a NUL byte"))?;
        // SAFETY: `module` was just loaded.
        let function = match unsafe { result::module::get_function(module, cname) } {
            Ok(function) => function,
            Err(e) => {
                // SAFETY: `module` is live and no function of it escapes.
                let _ = unsafe { result::module::unload(module) };
                return Err(driver("cuModuleGetFunction")(e));
            }
        };
        if decoded.kernel.dynamic_lds.is_some() {
            // Dynamic shared memory past 48 KiB needs the per-function opt-in; allow all the
            // device has beyond the static arrays (launches are validated against the total).
            let dynamic_max = self.max_shared_optin - decoded.kernel.dynamic_lds_offset() as i32;
            // SAFETY: `function` belongs to the just-loaded, live module.
            let r = unsafe {
                sys::cuFuncSetAttribute(
                    function,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic_max.max(0),
                )
            }
            .result();
            if let Err(e) = r {
                // SAFETY: `module` is live and no function of it escapes.
                let _ = unsafe { result::module::unload(module) };
                return Err(driver("cuFuncSetAttribute")(e));
            }
        }
        Ok(CudaFunction { module, function })
    }

    /// # Safety
    /// `stream` and `f` must belong to this device; `args` must match `decoded`'s layout and
    /// every access the kernel makes must stay in bounds.
    pub(crate) unsafe fn launch(
        &self,
        stream: &CudaStream,
        f: &CudaFunction,
        decoded: &Decoded,
        cfg: &LaunchConfig,
        args: &[u8],
    ) -> Result<()> {
        self.current_cached()?;
        let (grid, block) = (cfg.grid, cfg.block);
        let slots = &decoded.layout.slots;
        let mut inline = [std::ptr::null_mut::<c_void>(); INLINE_PARAMS];
        let mut heap = Vec::new();
        let params: &mut [*mut c_void] = if slots.len() <= INLINE_PARAMS {
            &mut inline[..slots.len()]
        } else {
            heap.resize(slots.len(), std::ptr::null_mut());
            &mut heap
        };
        for (p, s) in params.iter_mut().zip(slots) {
            // Offsets are inside `args`: the launcher checked args.len() == layout.size.
            *p = args[s.offset as usize..].as_ptr() as *mut c_void;
        }
        let params = params.as_mut_ptr();
        let go = || {
            // SAFETY: `params` holds one pointer per PTX parameter into `args`, which outlives
            // the call (the driver copies the values before returning); handles are live; the
            // rest is guaranteed by the caller.
            unsafe {
                sys::cuLaunchKernel(
                    f.function,
                    grid[0],
                    grid[1],
                    grid[2],
                    block[0],
                    block[1],
                    block[2],
                    cfg.dynamic_lds_bytes,
                    stream.raw,
                    params,
                    std::ptr::null_mut(),
                )
            }
            .result()
        };
        match go() {
            Ok(()) => Ok(()),
            Err(_) => {
                // Another library may have changed this thread's context since we last set
                // it: make ours current and try once more (a failed launch enqueued nothing).
                self.current()?;
                go().map_err(driver("cuLaunchKernel"))
            }
        }
    }
}

/// A CUDA stream created with default flags (synchronises with the legacy default stream, so
/// the blocking copies are ordered after enqueued kernels).
#[derive(Debug)]
pub(crate) struct CudaStream {
    pub(crate) raw: sys::CUstream,
    /// Created here (destroyed on drop) or borrowed from other code (never destroyed).
    pub(super) owned: bool,
    /// Not created non-blocking: the legacy default stream waits for this stream's earlier
    /// work, and this stream's later work waits for the legacy stream's (CUDA's documented
    /// default-stream semantics), so no event is needed between the two (`cuda_mem.rs`).
    pub(super) blocking: bool,
}

// SAFETY: opaque driver handle; the driver API is thread-safe.
unsafe impl Send for CudaStream {}
// SAFETY: as above.
unsafe impl Sync for CudaStream {}

impl CudaStream {
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is live.
        unsafe { result::stream::synchronize(self.raw) }.map_err(driver("cuStreamSynchronize"))
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: `raw` is live and destroyed exactly once; work still queued on it
            // completes (the driver releases the stream afterwards).
            if let Err(e) = unsafe { result::stream::destroy(self.raw) } {
                crate::diag::report(format!("cuStreamDestroy failed: {e}"));
            }
        }
    }
}

/// A CUDA event (timing enabled).
#[derive(Debug)]
pub(crate) struct CudaEvent {
    pub(super) raw: sys::CUevent,
}

// SAFETY: opaque driver handle; the driver API is thread-safe.
unsafe impl Send for CudaEvent {}
// SAFETY: as above.
unsafe impl Sync for CudaEvent {}

impl CudaEvent {
    pub(crate) fn record(&self, stream: &CudaStream) -> Result<()> {
        // SAFETY: both handles are live.
        unsafe { result::event::record(self.raw, stream.raw) }.map_err(driver("cuEventRecord"))
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is live.
        unsafe { result::event::synchronize(self.raw) }.map_err(driver("cuEventSynchronize"))
    }

    pub(crate) fn elapsed_ms(&self, end: &CudaEvent) -> Result<f32> {
        // SAFETY: both handles are live.
        unsafe { result::event::elapsed(self.raw, end.raw) }.map_err(driver("cuEventElapsedTime"))
    }
}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        // SAFETY: `raw` is live and destroyed exactly once.
        let _ = unsafe { result::event::destroy(self.raw) };
    }
}

/// A loaded PTX module and its kernel function.
#[derive(Debug)]
pub(crate) struct CudaFunction {
    module: sys::CUmodule,
    function: sys::CUfunction,
}

// SAFETY: immutable after loading; usable from any thread.
unsafe impl Send for CudaFunction {}

impl CudaFunction {
    /// What the driver's compiler gave the kernel (`cuFuncGetAttribute`).
    pub(crate) fn resources(&self) -> Result<KernelResources> {
        use sys::CUfunction_attribute as A;
        let get = |attr: A| -> Result<u32> {
            let mut v = 0i32;
            // SAFETY: `function` is a live function of a loaded module; `v` outlives the call.
            unsafe { sys::cuFuncGetAttribute(&mut v, attr, self.function) }
                .result()
                .map_err(driver("cuFuncGetAttribute"))?;
            Ok(v.max(0) as u32)
        };
        Ok(KernelResources {
            registers: get(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            private_bytes: get(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            static_lds_bytes: get(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            max_threads: get(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        })
    }
}
// SAFETY: as above.
unsafe impl Sync for CudaFunction {}

impl Drop for CudaFunction {
    fn drop(&mut self) {
        // SAFETY: `module` is live and unloaded exactly once.
        let _ = unsafe { result::module::unload(self.module) };
    }
}

/// Encode a tiled tensor map with the driver (`cuTensorMapEncodeTiled`): elements of
/// `elem_bytes` moved as raw bits, byte strides of dimensions 1.., out-of-bounds elements
/// filled with zeros, L2 promotion of 256 B. The caller has checked the TMA rules.
pub(crate) fn encode_tensor_map(
    base: u64,
    elem_bytes: u32,
    dims: &[u64],
    byte_strides: &[u64],
    boxes: &[u32],
    swizzle128: bool,
) -> Result<[u8; 128]> {
    use sys::CUtensorMapDataType_enum as D;
    let dtype = match elem_bytes {
        1 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        2 => D::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        4 => D::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        _ => D::CU_TENSOR_MAP_DATA_TYPE_UINT64,
    };
    let swizzle = if swizzle128 {
        sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B
    } else {
        sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE
    };
    let elem_strides = vec![1u32; dims.len()];
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer refers to a live local of the length the rank implies (dims,
    // boxes and element strides have `rank` entries, byte strides `rank - 1`); the driver
    // only writes `map`. `base` is a device address the caller owns for the map's lifetime.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            dtype,
            dims.len() as u32,
            base as *mut c_void,
            dims.as_ptr(),
            byte_strides.as_ptr(),
            boxes.as_ptr(),
            elem_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    r.result().map_err(driver("cuTensorMapEncodeTiled"))?;
    let mut out = [0u8; 128];
    for (i, w) in map.opaque.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    Ok(out)
}
