//! Thin `Result` wrappers over the raw HIP entry points: one function per call, error codes
//! turned into a [`HipError`] with HIP's own description. This layer knows nothing of the
//! safe layer above it (which turns a `HipError` into `crate::Error::Driver`).

use super::sys::{self, hipError_t, HipLib};
use std::ffi::{c_int, c_void, CStr};
use std::fmt;
use std::ptr::null_mut;

/// A failed HIP call: the entry point, HIP's error code and its description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HipError {
    /// The HIP function (`hipMalloc`).
    pub call: &'static str,
    /// The `hipError_t` it returned.
    pub code: hipError_t,
    /// `hipGetErrorString` of the code.
    pub message: String,
}

impl fmt::Display for HipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HIP call {} failed with error {} ({})",
            self.call, self.code, self.message
        )
    }
}

/// The result of a HIP call.
pub(crate) type Result<T> = std::result::Result<T, HipError>;

fn check(lib: &HipLib, call: &'static str, code: hipError_t) -> Result<()> {
    if code == sys::HIP_SUCCESS {
        return Ok(());
    }
    // SAFETY: hipGetErrorString accepts any code and returns a pointer to a static C string
    // (or null, which is handled).
    let ptr = unsafe { (lib.hipGetErrorString)(code) };
    let message = if ptr.is_null() {
        String::from("unknown HIP error")
    } else {
        // SAFETY: non-null, NUL-terminated static string owned by the library.
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    };
    Err(HipError {
        call,
        code,
        message,
    })
}

/// `hipInit(0)`.
pub fn init(lib: &HipLib) -> Result<()> {
    // SAFETY: no pointer arguments.
    check(lib, "hipInit", unsafe { (lib.hipInit)(0) })
}

/// `hipGetDeviceCount`.
pub fn device_count(lib: &HipLib) -> Result<usize> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-pointer.
    check(lib, "hipGetDeviceCount", unsafe {
        (lib.hipGetDeviceCount)(&mut n)
    })?;
    Ok(n.max(0) as usize)
}

/// `hipSetDevice` (makes `ordinal` current on the calling thread).
pub fn set_device(lib: &HipLib, ordinal: c_int) -> Result<()> {
    // SAFETY: no pointer arguments.
    check(lib, "hipSetDevice", unsafe { (lib.hipSetDevice)(ordinal) })
}

/// `hipDeviceGetAttribute`.
pub fn attribute(lib: &HipLib, attr: c_int, ordinal: c_int) -> Result<i32> {
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid out-pointer.
    check(lib, "hipDeviceGetAttribute", unsafe {
        (lib.hipDeviceGetAttribute)(&mut v, attr, ordinal)
    })?;
    Ok(v)
}

/// `hipDeviceGetName`.
pub fn device_name(lib: &HipLib, ordinal: c_int) -> Result<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is 256 bytes and its length is passed; HIP NUL-terminates within it.
    check(lib, "hipDeviceGetName", unsafe {
        (lib.hipDeviceGetName)(buf.as_mut_ptr().cast(), buf.len() as c_int, ordinal)
    })?;
    Ok(c_string_in(&buf))
}

/// The `gcnArchName` of a device (e.g. `gfx942:sramecc+:xnack-`), read from
/// `hipGetDevicePropertiesR0600` at [`sys::GCN_ARCH_NAME_OFFSET`]. If that field does not hold a
/// `gfx` name (an unexpected struct layout), the buffer is searched for the first NUL-terminated
/// string starting with `gfx` instead.
pub fn arch_name(lib: &HipLib, ordinal: c_int) -> Result<String> {
    let mut buf = vec![0u8; sys::DEVICE_PROP_BUFFER_BYTES];
    // SAFETY: the zeroed buffer is larger than hipDeviceProp_tR0600 (1472 bytes), the struct
    // this versioned entry point writes.
    check(lib, "hipGetDevicePropertiesR0600", unsafe {
        (lib.hipGetDevicePropertiesR0600)(buf.as_mut_ptr().cast(), ordinal)
    })?;
    let at = &buf[sys::GCN_ARCH_NAME_OFFSET..sys::GCN_ARCH_NAME_OFFSET + 256];
    let name = c_string_in(at);
    if name.starts_with("gfx") {
        return Ok(name);
    }
    let found = buf
        .windows(3)
        .position(|w| w == b"gfx")
        .map(|p| c_string_in(&buf[p..]))
        .unwrap_or_default();
    Ok(found)
}

fn c_string_in(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// `hipDeviceSynchronize`.
pub fn device_synchronize(lib: &HipLib) -> Result<()> {
    // SAFETY: no arguments.
    check(lib, "hipDeviceSynchronize", unsafe {
        (lib.hipDeviceSynchronize)()
    })
}

/// `hipMalloc` of `bytes` (> 0) bytes.
pub fn malloc(lib: &HipLib, bytes: usize) -> Result<u64> {
    let mut p: *mut c_void = null_mut();
    // SAFETY: `p` is a valid out-pointer.
    check(lib, "hipMalloc", unsafe { (lib.hipMalloc)(&mut p, bytes) })?;
    Ok(p as u64)
}

/// `hipFree`.
///
/// # Safety
/// `ptr` must come from [`malloc`] of the same library and not be freed yet.
pub unsafe fn free(lib: &HipLib, ptr: u64) -> Result<()> {
    // SAFETY: the caller guarantees `ptr` is a live allocation.
    check(lib, "hipFree", unsafe { (lib.hipFree)(ptr as *mut c_void) })
}

/// `hipMemcpyHtoD`.
///
/// # Safety
/// `[dst, dst + src.len())` must lie inside a live device allocation.
pub unsafe fn memcpy_htod(lib: &HipLib, dst: u64, src: &[u8]) -> Result<()> {
    // SAFETY: `src` is a valid host range; the caller guarantees the device range.
    check(lib, "hipMemcpyHtoD", unsafe {
        (lib.hipMemcpyHtoD)(dst as *mut c_void, src.as_ptr().cast(), src.len())
    })
}

/// `hipMemcpyDtoH`.
///
/// # Safety
/// `[src, src + dst.len())` must lie inside a live device allocation.
pub unsafe fn memcpy_dtoh(lib: &HipLib, dst: &mut [u8], src: u64) -> Result<()> {
    // SAFETY: `dst` is a valid, writable host range; the caller guarantees the device range.
    check(lib, "hipMemcpyDtoH", unsafe {
        (lib.hipMemcpyDtoH)(dst.as_mut_ptr().cast(), src as *mut c_void, dst.len())
    })
}

/// `hipMemsetD8`.
///
/// # Safety
/// `[dst, dst + bytes)` must lie inside a live device allocation.
pub unsafe fn memset_d8(lib: &HipLib, dst: u64, value: u8, bytes: usize) -> Result<()> {
    // SAFETY: the caller guarantees the device range.
    check(lib, "hipMemsetD8", unsafe {
        (lib.hipMemsetD8)(dst as *mut c_void, value, bytes)
    })
}

/// `hipStreamCreate`.
pub fn stream_create(lib: &HipLib) -> Result<sys::hipStream_t> {
    let mut s: sys::hipStream_t = null_mut();
    // SAFETY: `s` is a valid out-pointer.
    check(lib, "hipStreamCreate", unsafe {
        (lib.hipStreamCreate)(&mut s)
    })?;
    Ok(s)
}

/// `hipStreamSynchronize`.
///
/// # Safety
/// `s` must be a live stream of `lib`.
pub unsafe fn stream_synchronize(lib: &HipLib, s: sys::hipStream_t) -> Result<()> {
    // SAFETY: the caller guarantees `s` is live.
    check(lib, "hipStreamSynchronize", unsafe {
        (lib.hipStreamSynchronize)(s)
    })
}

/// `hipStreamDestroy`.
///
/// # Safety
/// `s` must be a live stream of `lib`, not used afterwards.
pub unsafe fn stream_destroy(lib: &HipLib, s: sys::hipStream_t) -> Result<()> {
    // SAFETY: the caller guarantees `s` is live and unused afterwards.
    check(lib, "hipStreamDestroy", unsafe {
        (lib.hipStreamDestroy)(s)
    })
}

/// `hipEventCreate`.
pub fn event_create(lib: &HipLib) -> Result<sys::hipEvent_t> {
    let mut e: sys::hipEvent_t = null_mut();
    // SAFETY: `e` is a valid out-pointer.
    check(lib, "hipEventCreate", unsafe {
        (lib.hipEventCreate)(&mut e)
    })?;
    Ok(e)
}

/// `hipEventRecord`.
///
/// # Safety
/// `e` and `s` must be live handles of `lib`.
pub unsafe fn event_record(lib: &HipLib, e: sys::hipEvent_t, s: sys::hipStream_t) -> Result<()> {
    // SAFETY: the caller guarantees both handles are live.
    check(lib, "hipEventRecord", unsafe { (lib.hipEventRecord)(e, s) })
}

/// `hipEventSynchronize`.
///
/// # Safety
/// `e` must be a live event of `lib`.
pub unsafe fn event_synchronize(lib: &HipLib, e: sys::hipEvent_t) -> Result<()> {
    // SAFETY: the caller guarantees `e` is live.
    check(lib, "hipEventSynchronize", unsafe {
        (lib.hipEventSynchronize)(e)
    })
}

/// `hipEventElapsedTime` in milliseconds.
///
/// # Safety
/// Both events must be live events of `lib`.
pub unsafe fn event_elapsed(
    lib: &HipLib,
    start: sys::hipEvent_t,
    end: sys::hipEvent_t,
) -> Result<f32> {
    let mut ms = 0f32;
    // SAFETY: `ms` is a valid out-pointer; the caller guarantees both events are live.
    check(lib, "hipEventElapsedTime", unsafe {
        (lib.hipEventElapsedTime)(&mut ms, start, end)
    })?;
    Ok(ms)
}

/// `hipEventDestroy`.
///
/// # Safety
/// `e` must be a live event of `lib`, not used afterwards.
pub unsafe fn event_destroy(lib: &HipLib, e: sys::hipEvent_t) -> Result<()> {
    // SAFETY: the caller guarantees `e` is live and unused afterwards.
    check(lib, "hipEventDestroy", unsafe { (lib.hipEventDestroy)(e) })
}

/// `hipModuleLoadData` of a complete code object.
pub fn module_load_data(lib: &HipLib, image: &[u8]) -> Result<sys::hipModule_t> {
    let mut m: sys::hipModule_t = null_mut();
    // SAFETY: `image` is a readable byte range holding a whole ELF code object (HIP reads its
    // size from the ELF headers); `m` is a valid out-pointer.
    check(lib, "hipModuleLoadData", unsafe {
        (lib.hipModuleLoadData)(&mut m, image.as_ptr().cast())
    })?;
    Ok(m)
}

/// `hipModuleUnload`.
///
/// # Safety
/// `m` must be a live module of `lib` whose functions are not used afterwards.
pub unsafe fn module_unload(lib: &HipLib, m: sys::hipModule_t) -> Result<()> {
    // SAFETY: the caller guarantees `m` is live and unused afterwards.
    check(lib, "hipModuleUnload", unsafe { (lib.hipModuleUnload)(m) })
}

/// `hipModuleGetFunction`.
///
/// # Safety
/// `m` must be a live module of `lib`.
pub unsafe fn module_get_function(
    lib: &HipLib,
    m: sys::hipModule_t,
    cname: &CStr,
) -> Result<sys::hipFunction_t> {
    let mut f: sys::hipFunction_t = null_mut();
    // SAFETY: `f` is a valid out-pointer, `cname` a NUL-terminated string, `m` live (caller).
    check(lib, "hipModuleGetFunction", unsafe {
        (lib.hipModuleGetFunction)(&mut f, m, cname.as_ptr())
    })?;
    Ok(f)
}

/// `hipModuleLaunchKernel` of `grid` workgroups of `block` threads with `shared_bytes` of
/// dynamic LDS, the packed argument buffer passed through `extra`
/// (`HIP_LAUNCH_PARAM_BUFFER_POINTER` / `_SIZE` / `_END`).
///
/// # Safety
/// `f` and `s` must be live handles of `lib`, `args` must be laid out as the kernel expects and
/// every pointer inside must be valid for the kernel's accesses.
pub unsafe fn module_launch_kernel(
    lib: &HipLib,
    f: sys::hipFunction_t,
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    s: sys::hipStream_t,
    args: &[u8],
) -> Result<()> {
    let mut size: usize = args.len();
    let mut extra: [*mut c_void; 5] = [
        sys::LAUNCH_PARAM_BUFFER_POINTER as *mut c_void,
        args.as_ptr() as *mut c_void,
        sys::LAUNCH_PARAM_BUFFER_SIZE as *mut c_void,
        (&mut size as *mut usize).cast(),
        sys::LAUNCH_PARAM_END as *mut c_void,
    ];
    // SAFETY: `extra` is the documented 5-entry config array; the buffer and size it points to
    // outlive the call (HIP copies the arguments before returning); the caller guarantees the
    // handles and the argument contents.
    check(lib, "hipModuleLaunchKernel", unsafe {
        (lib.hipModuleLaunchKernel)(
            f,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            shared_bytes,
            s,
            null_mut(),
            extra.as_mut_ptr(),
        )
    })
}

/// The optional entry point `f`, or the error a call of a missing one gives.
fn present<F: Copy>(f: Option<F>, call: &'static str) -> Result<F> {
    f.ok_or_else(|| HipError {
        call,
        code: -1,
        message: "the loaded libamdhip64 does not export it".into(),
    })
}

/// `hipMallocAsync` of `bytes` on `stream`.
///
/// # Safety
/// `stream` is live (or null, the default stream).
pub unsafe fn malloc_async(lib: &HipLib, bytes: usize, stream: sys::hipStream_t) -> Result<u64> {
    let f = present(lib.opt.hipMallocAsync, "hipMallocAsync")?;
    let mut p: *mut c_void = null_mut();
    // SAFETY: `p` is a valid out-pointer; the caller guarantees the stream.
    check(lib, "hipMallocAsync", unsafe { f(&mut p, bytes, stream) })?;
    Ok(p as u64)
}

/// `hipFreeAsync` of `ptr` on `stream`.
///
/// # Safety
/// `ptr` came from [`malloc_async`] and is freed once; every use is ordered before the free.
pub unsafe fn free_async(lib: &HipLib, ptr: u64, stream: sys::hipStream_t) -> Result<()> {
    let f = present(lib.opt.hipFreeAsync, "hipFreeAsync")?;
    // SAFETY: guaranteed by the caller.
    check(lib, "hipFreeAsync", unsafe {
        f(ptr as *mut c_void, stream)
    })
}

/// `hipStreamWaitEvent(stream, event, 0)`.
///
/// # Safety
/// Both handles are live (the stream may be null, the default stream).
pub unsafe fn stream_wait_event(
    lib: &HipLib,
    stream: sys::hipStream_t,
    e: sys::hipEvent_t,
) -> Result<()> {
    let f = present(lib.opt.hipStreamWaitEvent, "hipStreamWaitEvent")?;
    // SAFETY: guaranteed by the caller.
    check(lib, "hipStreamWaitEvent", unsafe { f(stream, e, 0) })
}

/// `hipMemcpyHtoDAsync`.
///
/// # Safety
/// The device range lies in a live allocation; `src` stays valid until the copy has run.
pub unsafe fn memcpy_htod_async(
    lib: &HipLib,
    dst: u64,
    src: *const u8,
    bytes: usize,
    stream: sys::hipStream_t,
) -> Result<()> {
    let f = present(lib.opt.hipMemcpyHtoDAsync, "hipMemcpyHtoDAsync")?;
    // SAFETY: guaranteed by the caller.
    check(lib, "hipMemcpyHtoDAsync", unsafe {
        f(dst as *mut c_void, src.cast(), bytes, stream)
    })
}

/// `hipMemcpyDtoHAsync`.
///
/// # Safety
/// The device range lies in a live allocation; `dst` stays valid until the copy has run.
pub unsafe fn memcpy_dtoh_async(
    lib: &HipLib,
    dst: *mut u8,
    src: u64,
    bytes: usize,
    stream: sys::hipStream_t,
) -> Result<()> {
    let f = present(lib.opt.hipMemcpyDtoHAsync, "hipMemcpyDtoHAsync")?;
    // SAFETY: guaranteed by the caller.
    check(lib, "hipMemcpyDtoHAsync", unsafe {
        f(dst.cast(), src as *mut c_void, bytes, stream)
    })
}

/// `hipMemcpyDtoDAsync`.
///
/// # Safety
/// Both device ranges lie in live allocations.
pub unsafe fn memcpy_dtod_async(
    lib: &HipLib,
    dst: u64,
    src: u64,
    bytes: usize,
    stream: sys::hipStream_t,
) -> Result<()> {
    let f = present(lib.opt.hipMemcpyDtoDAsync, "hipMemcpyDtoDAsync")?;
    // SAFETY: guaranteed by the caller.
    check(lib, "hipMemcpyDtoDAsync", unsafe {
        f(dst as *mut c_void, src as *mut c_void, bytes, stream)
    })
}

/// `hipHostMalloc(bytes, hipHostMallocDefault)`: page-locked host memory.
pub fn host_malloc(lib: &HipLib, bytes: usize) -> Result<*mut u8> {
    let f = present(lib.opt.hipHostMalloc, "hipHostMalloc")?;
    let mut p: *mut c_void = null_mut();
    // SAFETY: `p` is a valid out-pointer.
    check(lib, "hipHostMalloc", unsafe { f(&mut p, bytes, 0) })?;
    Ok(p.cast())
}

/// `hipHostFree`.
///
/// # Safety
/// `ptr` came from [`host_malloc`] and no copy using it is pending.
pub unsafe fn host_free(lib: &HipLib, ptr: *mut u8) -> Result<()> {
    let f = present(lib.opt.hipHostFree, "hipHostFree")?;
    // SAFETY: guaranteed by the caller.
    check(lib, "hipHostFree", unsafe { f(ptr.cast()) })
}
