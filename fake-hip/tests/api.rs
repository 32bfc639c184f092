//! The fake's entry points called directly (the end-to-end test through flydsl-rt lives in
//! flydsl-rt/tests/hip_fake.rs).

use amdhip64::api::*;
use amdhip64::codes;
use amdhip64::module::FakeFunction;
use flydsl_ir::codeobj::{KernelArg, KernelMeta, ValueKind};
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;

#[test]
fn device_queries_and_errors() {
    // SAFETY: every pointer passed is a valid local.
    unsafe {
        let mut n = 0;
        assert_eq!(hipGetDeviceCount(&mut n), codes::SUCCESS);
        assert_eq!(n, 1);
        assert_eq!(hipSetDevice(1), codes::INVALID_DEVICE);
        let mut v = 0;
        assert_eq!(hipDeviceGetAttribute(&mut v, 87, 0), codes::SUCCESS);
        assert_eq!(v, 64);
        assert_eq!(hipDeviceGetAttribute(&mut v, 9999, 0), codes::INVALID_VALUE);
        let mut props = vec![0u8; 2048];
        assert_eq!(
            hipGetDevicePropertiesR0600(props.as_mut_ptr().cast(), 0),
            codes::SUCCESS
        );
        let arch = CStr::from_bytes_until_nul(&props[1160..]).unwrap();
        assert_eq!(arch.to_str().unwrap(), "gfx942:sramecc+:xnack-");
        assert_eq!(i32::from_le_bytes(props[308..312].try_into().unwrap()), 64);
        let msg = CStr::from_ptr(hipGetErrorString(codes::INVALID_IMAGE));
        assert_eq!(msg.to_str().unwrap(), "hipErrorInvalidImage");
    }
}

#[test]
fn memory_round_trip() {
    // SAFETY: pointers are valid locals; the device range is the allocation.
    unsafe {
        let mut p: *mut c_void = null_mut();
        assert_eq!(hipMalloc(&mut p, 16), codes::SUCCESS);
        assert!(!p.is_null());
        let src = [7u8; 16];
        assert_eq!(hipMemcpyHtoD(p, src.as_ptr().cast(), 16), codes::SUCCESS);
        assert_eq!(hipMemsetD8(p, 1, 4), codes::SUCCESS);
        let mut dst = [0u8; 16];
        assert_eq!(
            hipMemcpyDtoH(dst.as_mut_ptr().cast(), p, 16),
            codes::SUCCESS
        );
        assert_eq!(&dst[..5], &[1, 1, 1, 1, 7]);
        assert_eq!(hipFree(p), codes::SUCCESS);
    }
}

#[test]
fn bad_images_and_handles_are_rejected() {
    // SAFETY: pointers are valid locals; unknown handles are never dereferenced by the fake.
    unsafe {
        let garbage = [0u8; 128];
        let mut m: *mut c_void = null_mut();
        assert_eq!(
            hipModuleLoadData(&mut m, garbage.as_ptr().cast()),
            codes::INVALID_IMAGE
        );
        let mut f: *mut c_void = null_mut();
        assert_eq!(
            hipModuleGetFunction(&mut f, 0x42 as *mut c_void, c"k".as_ptr()),
            codes::INVALID_HANDLE
        );
        let mut size = 0usize;
        let mut extra = [
            std::ptr::without_provenance_mut(1), // HIP_LAUNCH_PARAM_BUFFER_POINTER
            null_mut(),
            std::ptr::without_provenance_mut(2),
            (&mut size as *mut usize).cast(),
            std::ptr::without_provenance_mut(3),
        ];
        let rc = hipModuleLaunchKernel(
            0x42 as *mut c_void,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            null_mut(),
            null_mut(),
            extra.as_mut_ptr(),
        );
        assert_eq!(rc, codes::INVALID_HANDLE);
        let mut s: *mut c_void = null_mut();
        assert_eq!(hipStreamCreate(&mut s), codes::SUCCESS);
        assert_eq!(hipStreamDestroy(s), codes::SUCCESS);
        assert_eq!(hipStreamDestroy(s), codes::INVALID_HANDLE);
    }
}

#[test]
fn short_kernarg_buffers_are_rejected() {
    let arg = |offset, size, value_kind| KernelArg {
        offset,
        size,
        value_kind,
        ..Default::default()
    };
    let meta = KernelMeta {
        name: "k".into(),
        args: vec![
            arg(0, 8, ValueKind::GlobalBuffer),
            arg(8, 8, ValueKind::ByValue),
            arg(16, 4, ValueKind::ByValue),
            arg(24, 8, ValueKind::Hidden("hidden_block_count_x".into())),
        ],
        ..Default::default()
    };
    let f = FakeFunction {
        meta,
        kernel: flydsl_ir::Kernel::empty("k", flydsl_ir::Target::Gfx942),
    };
    assert!(
        f.check_kernarg_size(24).is_ok(),
        "hidden arguments are the runtime's"
    );
    assert!(f.check_kernarg_size(20).is_ok());
    let err = f.check_kernarg_size(16).unwrap_err();
    assert!(err.contains("16 bytes") && err.contains("16..20"), "{err}");
}
