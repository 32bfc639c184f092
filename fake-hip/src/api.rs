//! The exported HIP entry points (the subset flydsl-rt uses).
//!
//! Handles (modules, functions, streams, events) are boxes whose addresses are registered;
//! a handle that is not registered is rejected with `hipErrorInvalidHandle`, never
//! dereferenced. Out-pointers and buffers are the caller's responsibility, as in HIP.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::codes::{self, fail, HipError, SUCCESS};
use crate::device::{self, attr, prop};
use crate::module::{read_image, FakeFunction, FakeModule};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

enum Handle {
    Module(Box<FakeModule>),
    Stream,
    Event(Option<Instant>),
}

fn handles() -> std::sync::MutexGuard<'static, HashMap<usize, Handle>> {
    static H: OnceLock<Mutex<HashMap<usize, Handle>>> = OnceLock::new();
    H.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0x1000);

fn new_handle(h: Handle) -> *mut c_void {
    let id = NEXT.fetch_add(16, std::sync::atomic::Ordering::Relaxed);
    handles().insert(id, h);
    id as *mut c_void
}

/// Functions are registered separately: their handle is the address of the boxed function,
/// valid while its module is loaded.
fn functions() -> std::sync::MutexGuard<'static, HashMap<usize, usize>> {
    static F: OnceLock<Mutex<HashMap<usize, usize>>> = OnceLock::new();
    F.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

macro_rules! out {
    ($p:expr, $v:expr, $call:expr) => {{
        if $p.is_null() {
            return fail(codes::INVALID_VALUE, $call, "null out-pointer");
        }
        // SAFETY: non-null out-pointer supplied by the caller per the HIP API contract.
        unsafe { *$p = $v };
    }};
}

#[no_mangle]
pub unsafe extern "C" fn hipInit(_flags: c_uint) -> HipError {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> HipError {
    out!(count, 1, "hipGetDeviceCount");
    SUCCESS
}

fn check_device(d: c_int, call: &str) -> Result<(), HipError> {
    if d == 0 {
        Ok(())
    } else {
        Err(fail(
            codes::INVALID_DEVICE,
            call,
            format!("device {d} does not exist (the fake has 1)"),
        ))
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipSetDevice(d: c_int) -> HipError {
    match check_device(d, "hipSetDevice") {
        Ok(()) => SUCCESS,
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetAttribute(value: *mut c_int, a: c_int, d: c_int) -> HipError {
    if let Err(e) = check_device(d, "hipDeviceGetAttribute") {
        return e;
    }
    let (warp, lds, cus) = device::properties();
    let v = match a {
        attr::WARP_SIZE => warp,
        attr::MAX_SHARED_MEMORY_PER_BLOCK => lds,
        attr::MULTIPROCESSOR_COUNT => cus,
        _ => {
            return fail(
                codes::INVALID_VALUE,
                "hipDeviceGetAttribute",
                format!("attribute {a} is not emulated"),
            )
        }
    };
    out!(value, v, "hipDeviceGetAttribute");
    SUCCESS
}

fn copy_c_string(dst: *mut c_char, cap: usize, s: &str) {
    let n = s.len().min(cap.saturating_sub(1));
    // SAFETY: the caller provides `cap` writable bytes at `dst` (checked non-null, cap >= 1).
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), dst.cast::<u8>(), n);
        *dst.add(n) = 0;
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetName(name: *mut c_char, len: c_int, d: c_int) -> HipError {
    if let Err(e) = check_device(d, "hipDeviceGetName") {
        return e;
    }
    if name.is_null() || len <= 0 {
        return fail(
            codes::INVALID_VALUE,
            "hipDeviceGetName",
            "null buffer or non-positive length",
        );
    }
    copy_c_string(name, len as usize, device::NAME);
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipGetDevicePropertiesR0600(props: *mut c_void, d: c_int) -> HipError {
    if let Err(e) = check_device(d, "hipGetDevicePropertiesR0600") {
        return e;
    }
    if props.is_null() {
        return fail(
            codes::INVALID_VALUE,
            "hipGetDevicePropertiesR0600",
            "null props",
        );
    }
    let base = props.cast::<u8>();
    let (warp, lds, cus) = device::properties();
    // SAFETY: the caller provides a hipDeviceProp_tR0600 (prop::SIZE bytes); every write
    // below is inside it.
    unsafe {
        std::ptr::write_bytes(base, 0, prop::SIZE);
        copy_c_string(base.add(prop::NAME).cast(), 256, device::NAME);
        copy_c_string(
            base.add(prop::GCN_ARCH_NAME).cast(),
            256,
            &device::arch_name(),
        );
        base.add(prop::SHARED_MEM_PER_BLOCK)
            .cast::<usize>()
            .write_unaligned(lds as usize);
        base.add(prop::WARP_SIZE)
            .cast::<c_int>()
            .write_unaligned(warp);
        base.add(prop::MULTIPROCESSOR_COUNT)
            .cast::<c_int>()
            .write_unaligned(cus);
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipDeviceSynchronize() -> HipError {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> HipError {
    if size == 0 {
        out!(ptr, std::ptr::null_mut(), "hipMalloc");
        return SUCCESS;
    }
    match device::memory().alloc(size as u64) {
        Ok(a) => {
            out!(ptr, a as *mut c_void, "hipMalloc");
            SUCCESS
        }
        Err(e) => fail(codes::OUT_OF_MEMORY, "hipMalloc", e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipFree(ptr: *mut c_void) -> HipError {
    if ptr.is_null() {
        return SUCCESS;
    }
    match device::memory().free(ptr as u64) {
        Ok(()) => SUCCESS,
        Err(e) => fail(codes::INVALID_VALUE, "hipFree", e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipMemcpyHtoD(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
) -> HipError {
    if bytes == 0 {
        return SUCCESS;
    }
    if src.is_null() {
        return fail(codes::INVALID_VALUE, "hipMemcpyHtoD", "null host pointer");
    }
    // SAFETY: the caller provides `bytes` readable host bytes at `src`.
    let data = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), bytes) };
    match device::memory().write(dst as u64, data) {
        Ok(()) => SUCCESS,
        Err(e) => fail(codes::INVALID_VALUE, "hipMemcpyHtoD", e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoH(
    dst: *mut c_void,
    src: *mut c_void,
    bytes: usize,
) -> HipError {
    if bytes == 0 {
        return SUCCESS;
    }
    if dst.is_null() {
        return fail(codes::INVALID_VALUE, "hipMemcpyDtoH", "null host pointer");
    }
    // SAFETY: the caller provides `bytes` writable host bytes at `dst`.
    let out = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), bytes) };
    match device::memory().read(src as u64, out) {
        Ok(()) => SUCCESS,
        Err(e) => fail(codes::INVALID_VALUE, "hipMemcpyDtoH", e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipMemsetD8(dst: *mut c_void, value: u8, count: usize) -> HipError {
    match device::memory().fill(dst as u64, value, count as u64) {
        Ok(()) => SUCCESS,
        Err(e) => fail(codes::INVALID_VALUE, "hipMemsetD8", e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipStreamCreate(stream: *mut *mut c_void) -> HipError {
    out!(stream, new_handle(Handle::Stream), "hipStreamCreate");
    SUCCESS
}

fn is_stream(s: *mut c_void) -> bool {
    s.is_null() || matches!(handles().get(&(s as usize)), Some(Handle::Stream))
}

#[no_mangle]
pub unsafe extern "C" fn hipStreamSynchronize(stream: *mut c_void) -> HipError {
    if !is_stream(stream) {
        return fail(
            codes::INVALID_HANDLE,
            "hipStreamSynchronize",
            "unknown stream",
        );
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipStreamDestroy(stream: *mut c_void) -> HipError {
    match handles().remove(&(stream as usize)) {
        Some(Handle::Stream) => SUCCESS,
        _ => fail(codes::INVALID_HANDLE, "hipStreamDestroy", "unknown stream"),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipEventCreate(event: *mut *mut c_void) -> HipError {
    out!(event, new_handle(Handle::Event(None)), "hipEventCreate");
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipEventRecord(event: *mut c_void, stream: *mut c_void) -> HipError {
    if !is_stream(stream) {
        return fail(codes::INVALID_HANDLE, "hipEventRecord", "unknown stream");
    }
    match handles().get_mut(&(event as usize)) {
        Some(Handle::Event(t)) => {
            *t = Some(Instant::now());
            SUCCESS
        }
        _ => fail(codes::INVALID_HANDLE, "hipEventRecord", "unknown event"),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipEventSynchronize(event: *mut c_void) -> HipError {
    match handles().get(&(event as usize)) {
        Some(Handle::Event(_)) => SUCCESS,
        _ => fail(
            codes::INVALID_HANDLE,
            "hipEventSynchronize",
            "unknown event",
        ),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> HipError {
    let h = handles();
    let (Some(Handle::Event(a)), Some(Handle::Event(b))) =
        (h.get(&(start as usize)), h.get(&(end as usize)))
    else {
        return fail(
            codes::INVALID_HANDLE,
            "hipEventElapsedTime",
            "unknown event",
        );
    };
    let (Some(a), Some(b)) = (a, b) else {
        return fail(
            codes::INVALID_HANDLE,
            "hipEventElapsedTime",
            "event not recorded",
        );
    };
    let v = if b >= a {
        (*b - *a).as_secs_f32() * 1e3
    } else {
        -((*a - *b).as_secs_f32() * 1e3)
    };
    drop(h);
    out!(ms, v, "hipEventElapsedTime");
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipEventDestroy(event: *mut c_void) -> HipError {
    match handles().remove(&(event as usize)) {
        Some(Handle::Event(_)) => SUCCESS,
        _ => fail(codes::INVALID_HANDLE, "hipEventDestroy", "unknown event"),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadData(
    module: *mut *mut c_void,
    image: *const c_void,
) -> HipError {
    if image.is_null() {
        return fail(codes::INVALID_VALUE, "hipModuleLoadData", "null image");
    }
    // SAFETY: the caller passes a complete ELF image (the API contract).
    let Some(bytes) = (unsafe { read_image(image.cast()) }) else {
        return fail(
            codes::INVALID_IMAGE,
            "hipModuleLoadData",
            "not an ELF64 code object",
        );
    };
    match FakeModule::parse(&bytes) {
        Ok(m) => {
            out!(
                module,
                new_handle(Handle::Module(Box::new(m))),
                "hipModuleLoadData"
            );
            SUCCESS
        }
        Err(e) => fail(codes::INVALID_IMAGE, "hipModuleLoadData", e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipModuleUnload(module: *mut c_void) -> HipError {
    match handles().remove(&(module as usize)) {
        Some(Handle::Module(m)) => {
            let mut f = functions();
            for func in &m.functions {
                f.remove(&(&**func as *const FakeFunction as usize));
            }
            SUCCESS
        }
        _ => fail(codes::INVALID_HANDLE, "hipModuleUnload", "unknown module"),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipModuleGetFunction(
    function: *mut *mut c_void,
    module: *mut c_void,
    name: *const c_char,
) -> HipError {
    if name.is_null() {
        return fail(codes::INVALID_VALUE, "hipModuleGetFunction", "null name");
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    let mut h = handles();
    let Some(Handle::Module(m)) = h.get_mut(&(module as usize)) else {
        return fail(
            codes::INVALID_HANDLE,
            "hipModuleGetFunction",
            "unknown module",
        );
    };
    match m.function(&name) {
        Ok(f) => {
            let f = Box::new(f);
            let addr = &*f as *const FakeFunction as usize;
            m.functions.push(f);
            functions().insert(addr, module as usize);
            out!(function, addr as *mut c_void, "hipModuleGetFunction");
            SUCCESS
        }
        Err((true, e)) => fail(codes::NOT_FOUND, "hipModuleGetFunction", e),
        Err((false, e)) => fail(codes::INVALID_IMAGE, "hipModuleGetFunction", e),
    }
}

/// Decode the `extra` array: (buffer pointer, size).
///
/// # Safety
/// `extra` must be a HIP launch config array ending in `HIP_LAUNCH_PARAM_END`.
unsafe fn parse_extra(extra: *mut *mut c_void) -> Result<(*const u8, usize), String> {
    let (mut buf, mut size) = (None, None);
    let mut i = 0;
    loop {
        if i > 16 {
            return Err("extra has no HIP_LAUNCH_PARAM_END within 16 entries".into());
        }
        // SAFETY: entries up to END are readable (caller's contract).
        let key = unsafe { *extra.add(i) } as usize;
        match key {
            0x03 => break,
            0x01 => buf = Some(unsafe { *extra.add(i + 1) } as *const u8),
            0x02 => {
                // SAFETY: the value of BUFFER_SIZE is a pointer to a size_t.
                let p = unsafe { *extra.add(i + 1) } as *const usize;
                if p.is_null() {
                    return Err("HIP_LAUNCH_PARAM_BUFFER_SIZE points to null".into());
                }
                size = Some(unsafe { *p });
            }
            k => return Err(format!("unknown extra key {k:#x}")),
        }
        i += 2;
    }
    match (buf, size) {
        (Some(b), Some(s)) if !b.is_null() || s == 0 => Ok((b, s)),
        _ => Err("extra lacks HIP_LAUNCH_PARAM_BUFFER_POINTER or _SIZE".into()),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipModuleLaunchKernel(
    function: *mut c_void,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared_mem_bytes: c_uint,
    stream: *mut c_void,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> HipError {
    const CALL: &str = "hipModuleLaunchKernel";
    if !kernel_params.is_null() {
        return fail(
            codes::NOT_SUPPORTED,
            CALL,
            "kernelParams is not emulated: pass the packed buffer in extra",
        );
    }
    if extra.is_null() {
        return fail(
            codes::INVALID_VALUE,
            CALL,
            "both kernelParams and extra are null",
        );
    }
    if !is_stream(stream) {
        return fail(codes::INVALID_HANDLE, CALL, "unknown stream");
    }
    if !functions().contains_key(&(function as usize)) {
        return fail(codes::INVALID_HANDLE, CALL, "unknown function");
    }
    // SAFETY: registered: the box is alive while its module is loaded, and it is never
    // mutated after registration.
    let f = unsafe { &*(function as *const FakeFunction) };
    // SAFETY: the caller passes a HIP extra array.
    let (buf, size) = match unsafe { parse_extra(extra) } {
        Ok(v) => v,
        Err(e) => return fail(codes::INVALID_VALUE, CALL, e),
    };
    if let Err(e) = f.check_kernarg_size(size) {
        return fail(codes::INVALID_VALUE, CALL, e);
    }
    let args: &[u8] = if size == 0 {
        &[]
    } else {
        // SAFETY: the caller's buffer holds `size` bytes.
        unsafe { std::slice::from_raw_parts(buf, size) }
    };
    let opts = flydsl_sim::SimOptions::default();
    match flydsl_sim::launch_with_lds(
        &f.kernel,
        [gx, gy, gz],
        [bx, by, bz],
        shared_mem_bytes,
        args,
        device::memory(),
        &opts,
    ) {
        Ok(_) => SUCCESS,
        Err(e) => fail(codes::LAUNCH_FAILURE, CALL, e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipGetErrorString(code: HipError) -> *const c_char {
    codes::message_ptr(code)
}

/// Marks this library as flydsl's test-only fake: the real HIP backend uses it only when
/// `FLYDSL_HIP_LIB` names it explicitly.
#[no_mangle]
pub extern "C" fn flydsl_fake_hip() -> u32 {
    1
}
