//! Raw HIP FFI: the subset of `libamdhip64` the runtime uses, loaded at run time with
//! `libloading` (no ROCm needed to build).
//!
//! Library search order: `$FLYDSL_HIP_LIB` (an explicit path; when set, nothing else is tried),
//! then `$ROCM_PATH/lib/libamdhip64.so.7`, `.so.6`, `.so`, then `libamdhip64.so.7`, `.so.6`,
//! `.so` through the dynamic loader's search path.

#![allow(non_camel_case_types, non_snake_case)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Mutex;

/// `hipError_t` (a C enum, `int` sized).
pub type hipError_t = c_int;
/// `hipDeviceptr_t`.
pub type hipDeviceptr_t = *mut c_void;
/// `hipStream_t`.
pub type hipStream_t = *mut c_void;
/// `hipEvent_t`.
pub type hipEvent_t = *mut c_void;
/// `hipModule_t`.
pub type hipModule_t = *mut c_void;
/// `hipFunction_t`.
pub type hipFunction_t = *mut c_void;

/// `hipSuccess`.
pub const HIP_SUCCESS: hipError_t = 0;
/// `hipDeviceAttributeMultiprocessorCount` (ROCm 6 `hipDeviceAttribute_t`).
pub const ATTR_MULTIPROCESSOR_COUNT: c_int = 63;
/// `hipDeviceAttributeMaxSharedMemoryPerBlock`.
pub const ATTR_MAX_SHARED_MEMORY_PER_BLOCK: c_int = 74;
/// `hipDeviceAttributeWarpSize`.
pub const ATTR_WARP_SIZE: c_int = 87;
/// `HIP_LAUNCH_PARAM_BUFFER_POINTER`.
pub const LAUNCH_PARAM_BUFFER_POINTER: usize = 0x01;
/// `HIP_LAUNCH_PARAM_BUFFER_SIZE`.
pub const LAUNCH_PARAM_BUFFER_SIZE: usize = 0x02;
/// `HIP_LAUNCH_PARAM_END`.
pub const LAUNCH_PARAM_END: usize = 0x03;

/// Size of ROCm 6's `hipDeviceProp_tR0600` (1472 bytes); the runtime hands
/// `hipGetDevicePropertiesR0600` a zeroed buffer of [`DEVICE_PROP_BUFFER_BYTES`] so that a
/// slightly larger future struct cannot overrun it.
pub const DEVICE_PROP_R0600_BYTES: usize = 1472;
/// Size of the zeroed buffer handed to `hipGetDevicePropertiesR0600`.
pub const DEVICE_PROP_BUFFER_BYTES: usize = 4096;
/// Byte offset of `char gcnArchName[256]` in `hipDeviceProp_tR0600`.
///
/// Derived from the ROCm 6 header by summing the fields in order at their natural alignment:
/// `name[256]` 0, `uuid` 256, `luid[8]` 272, `luidDeviceNodeMask` 280, `totalGlobalMem` 288, ...,
/// `unifiedFunctionPointers` 776, `reserved[63]` 780, `hipReserved[32]` 1032, `gcnArchName` 1160;
/// cross-checked against the offsets in a generated ctypes binding of the same header.
pub const GCN_ARCH_NAME_OFFSET: usize = 1160;
const _: () = assert!(DEVICE_PROP_BUFFER_BYTES >= DEVICE_PROP_R0600_BYTES + 256);

/// The loaded library and its entry points.
pub struct HipLib {
    /// Where it was loaded from.
    pub path: String,
    /// True for flydsl's test-only fake (it exports `flydsl_fake_hip`): used only when
    /// `FLYDSL_HIP_LIB` names it, never picked up from the loader path by accident.
    pub is_test_fake: bool,
    _lib: libloading::Library,
    pub hipInit: unsafe extern "C" fn(c_uint) -> hipError_t,
    pub hipGetDeviceCount: unsafe extern "C" fn(*mut c_int) -> hipError_t,
    pub hipSetDevice: unsafe extern "C" fn(c_int) -> hipError_t,
    pub hipDeviceGetAttribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> hipError_t,
    pub hipDeviceGetName: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> hipError_t,
    pub hipGetDevicePropertiesR0600: unsafe extern "C" fn(*mut c_void, c_int) -> hipError_t,
    pub hipDeviceSynchronize: unsafe extern "C" fn() -> hipError_t,
    pub hipMalloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> hipError_t,
    pub hipFree: unsafe extern "C" fn(*mut c_void) -> hipError_t,
    pub hipMemcpyHtoD: unsafe extern "C" fn(hipDeviceptr_t, *const c_void, usize) -> hipError_t,
    pub hipMemcpyDtoH: unsafe extern "C" fn(*mut c_void, hipDeviceptr_t, usize) -> hipError_t,
    pub hipMemsetD8: unsafe extern "C" fn(hipDeviceptr_t, u8, usize) -> hipError_t,
    pub hipStreamCreate: unsafe extern "C" fn(*mut hipStream_t) -> hipError_t,
    pub hipStreamSynchronize: unsafe extern "C" fn(hipStream_t) -> hipError_t,
    pub hipStreamDestroy: unsafe extern "C" fn(hipStream_t) -> hipError_t,
    pub hipEventCreate: unsafe extern "C" fn(*mut hipEvent_t) -> hipError_t,
    pub hipEventRecord: unsafe extern "C" fn(hipEvent_t, hipStream_t) -> hipError_t,
    pub hipEventSynchronize: unsafe extern "C" fn(hipEvent_t) -> hipError_t,
    pub hipEventElapsedTime: unsafe extern "C" fn(*mut f32, hipEvent_t, hipEvent_t) -> hipError_t,
    pub hipEventDestroy: unsafe extern "C" fn(hipEvent_t) -> hipError_t,
    pub hipModuleLoadData: unsafe extern "C" fn(*mut hipModule_t, *const c_void) -> hipError_t,
    pub hipModuleUnload: unsafe extern "C" fn(hipModule_t) -> hipError_t,
    pub hipModuleGetFunction:
        unsafe extern "C" fn(*mut hipFunction_t, hipModule_t, *const c_char) -> hipError_t,
    pub hipModuleLaunchKernel: unsafe extern "C" fn(
        hipFunction_t,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        hipStream_t,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> hipError_t,
    pub hipGetErrorString: unsafe extern "C" fn(hipError_t) -> *const c_char,
    /// The stream-ordered and asynchronous entry points, optional: a library without them
    /// (an old ROCm, the test fake) gets the blocking fallbacks of `mem.rs`.
    pub opt: HipOptional,
}

/// Entry points that may be missing (see [`HipLib::opt`]).
#[derive(Default)]
pub struct HipOptional {
    pub hipMallocAsync:
        Option<unsafe extern "C" fn(*mut *mut c_void, usize, hipStream_t) -> hipError_t>,
    pub hipFreeAsync: Option<unsafe extern "C" fn(*mut c_void, hipStream_t) -> hipError_t>,
    pub hipStreamWaitEvent:
        Option<unsafe extern "C" fn(hipStream_t, hipEvent_t, c_uint) -> hipError_t>,
    pub hipMemcpyHtoDAsync: Option<
        unsafe extern "C" fn(hipDeviceptr_t, *const c_void, usize, hipStream_t) -> hipError_t,
    >,
    pub hipMemcpyDtoHAsync:
        Option<unsafe extern "C" fn(*mut c_void, hipDeviceptr_t, usize, hipStream_t) -> hipError_t>,
    pub hipMemcpyDtoDAsync: Option<
        unsafe extern "C" fn(hipDeviceptr_t, hipDeviceptr_t, usize, hipStream_t) -> hipError_t,
    >,
    pub hipHostMalloc: Option<unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> hipError_t>,
    pub hipHostFree: Option<unsafe extern "C" fn(*mut c_void) -> hipError_t>,
}

impl std::fmt::Debug for HipLib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipLib")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The library file names to try, in order (see the module docs).
pub fn candidates() -> Vec<String> {
    if let Some(p) = std::env::var_os("FLYDSL_HIP_LIB") {
        return vec![p.to_string_lossy().into_owned()];
    }
    let mut out = Vec::new();
    if let Some(root) = std::env::var_os("ROCM_PATH") {
        let root = std::path::PathBuf::from(root);
        for suffix in [".7", ".6", ""] {
            out.push(
                root.join(format!("lib/libamdhip64.so{suffix}"))
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    for suffix in [".7", ".6", ""] {
        out.push(format!("libamdhip64.so{suffix}"));
    }
    out
}

/// Load (once per path, for the life of the process) the first candidate that opens and has
/// every entry point. The error lists every path tried and why it failed.
pub fn load() -> Result<&'static HipLib, String> {
    static LOADED: Mutex<Option<HashMap<String, &'static HipLib>>> = Mutex::new(None);
    let mut reasons = Vec::new();
    for path in candidates() {
        let mut cache = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        let cache = cache.get_or_insert_with(HashMap::new);
        if let Some(lib) = cache.get(&path) {
            return Ok(lib);
        }
        match open(&path) {
            Ok(lib) if lib.is_test_fake && std::env::var_os("FLYDSL_HIP_LIB").is_none() => {
                reasons.push(format!(
                    "{path}: is flydsl's test-only fake libamdhip64 (found on the loader path); \
                     set FLYDSL_HIP_LIB to its path to use it on purpose"
                ));
            }
            Ok(lib) => {
                // Leaked on purpose: HIP's runtime must not be unloaded while the process may
                // still hold device memory, streams or modules of it.
                let lib: &'static HipLib = Box::leak(Box::new(lib));
                cache.insert(path, lib);
                return Ok(lib);
            }
            Err(e) => reasons.push(format!("{path}: {e}")),
        }
    }
    Err(format!(
        "could not load libamdhip64 ({}); set ROCM_PATH to the ROCm install or FLYDSL_HIP_LIB to \
         the library's path",
        reasons.join("; ")
    ))
}

fn open(path: &str) -> Result<HipLib, libloading::Error> {
    // SAFETY: loading a shared library runs its initialisers; libamdhip64 (or a stand-in with
    // the same ABI) is the library the caller asked for through the documented search order.
    let lib = unsafe { libloading::Library::new(path)? };
    macro_rules! sym {
        ($name:ident) => {
            // SAFETY: the symbol is looked up by its exact C name and the field's function
            // pointer type is the documented C prototype of that HIP function; the pointer
            // stays valid because `_lib` is stored next to it and never dropped before it.
            unsafe { *lib.get(concat!(stringify!($name), "\0").as_bytes())? }
        };
    }
    macro_rules! opt {
        ($name:ident) => {
            // SAFETY: as for `sym!`; a missing symbol is `None`.
            unsafe { lib.get(concat!(stringify!($name), "\0").as_bytes()) }
                .ok()
                .map(|s| *s)
        };
    }
    // SAFETY: only the symbol's presence is checked; it is never called through this lookup.
    let is_test_fake =
        unsafe { lib.get::<unsafe extern "C" fn() -> u32>(b"flydsl_fake_hip\0") }.is_ok();
    Ok(HipLib {
        is_test_fake,
        path: path.to_string(),
        hipInit: sym!(hipInit),
        hipGetDeviceCount: sym!(hipGetDeviceCount),
        hipSetDevice: sym!(hipSetDevice),
        hipDeviceGetAttribute: sym!(hipDeviceGetAttribute),
        hipDeviceGetName: sym!(hipDeviceGetName),
        hipGetDevicePropertiesR0600: sym!(hipGetDevicePropertiesR0600),
        hipDeviceSynchronize: sym!(hipDeviceSynchronize),
        hipMalloc: sym!(hipMalloc),
        hipFree: sym!(hipFree),
        hipMemcpyHtoD: sym!(hipMemcpyHtoD),
        hipMemcpyDtoH: sym!(hipMemcpyDtoH),
        hipMemsetD8: sym!(hipMemsetD8),
        hipStreamCreate: sym!(hipStreamCreate),
        hipStreamSynchronize: sym!(hipStreamSynchronize),
        hipStreamDestroy: sym!(hipStreamDestroy),
        hipEventCreate: sym!(hipEventCreate),
        hipEventRecord: sym!(hipEventRecord),
        hipEventSynchronize: sym!(hipEventSynchronize),
        hipEventElapsedTime: sym!(hipEventElapsedTime),
        hipEventDestroy: sym!(hipEventDestroy),
        hipModuleLoadData: sym!(hipModuleLoadData),
        hipModuleUnload: sym!(hipModuleUnload),
        hipModuleGetFunction: sym!(hipModuleGetFunction),
        hipModuleLaunchKernel: sym!(hipModuleLaunchKernel),
        hipGetErrorString: sym!(hipGetErrorString),
        opt: HipOptional {
            hipMallocAsync: opt!(hipMallocAsync),
            hipFreeAsync: opt!(hipFreeAsync),
            hipStreamWaitEvent: opt!(hipStreamWaitEvent),
            hipMemcpyHtoDAsync: opt!(hipMemcpyHtoDAsync),
            hipMemcpyDtoHAsync: opt!(hipMemcpyDtoHAsync),
            hipMemcpyDtoDAsync: opt!(hipMemcpyDtoDAsync),
            hipHostMalloc: opt!(hipHostMalloc),
            hipHostFree: opt!(hipHostFree),
        },
        _lib: lib,
    })
}
