//! `hipError_t` codes the fake returns, and their strings.

use std::ffi::{c_char, c_int, CStr};

/// `hipError_t`.
pub type HipError = c_int;

/// `hipSuccess`.
pub const SUCCESS: HipError = 0;
/// `hipErrorInvalidValue`.
pub const INVALID_VALUE: HipError = 1;
/// `hipErrorOutOfMemory`.
pub const OUT_OF_MEMORY: HipError = 2;
/// `hipErrorInvalidDevice`.
pub const INVALID_DEVICE: HipError = 101;
/// `hipErrorInvalidImage`.
pub const INVALID_IMAGE: HipError = 200;
/// `hipErrorNotFound`.
pub const NOT_FOUND: HipError = 500;
/// `hipErrorInvalidHandle`.
pub const INVALID_HANDLE: HipError = 400;
/// `hipErrorNotReady`.
pub const NOT_READY: HipError = 600;
/// `hipErrorIllegalAddress`.
pub const ILLEGAL_ADDRESS: HipError = 700;
/// `hipErrorLaunchFailure`.
pub const LAUNCH_FAILURE: HipError = 719;
/// `hipErrorNotSupported`.
pub const NOT_SUPPORTED: HipError = 801;

/// The message of a code, as a static C string.
///
/// ```
/// assert_eq!(amdhip64::codes::message(0).to_str().unwrap(), "hipSuccess");
/// ```
pub fn message(code: HipError) -> &'static CStr {
    match code {
        SUCCESS => c"hipSuccess",
        INVALID_VALUE => c"hipErrorInvalidValue",
        OUT_OF_MEMORY => c"hipErrorOutOfMemory",
        INVALID_DEVICE => c"hipErrorInvalidDevice",
        INVALID_IMAGE => c"hipErrorInvalidImage",
        NOT_FOUND => c"hipErrorNotFound",
        INVALID_HANDLE => c"hipErrorInvalidHandle",
        NOT_READY => c"hipErrorNotReady",
        ILLEGAL_ADDRESS => c"hipErrorIllegalAddress",
        LAUNCH_FAILURE => c"hipErrorLaunchFailure",
        NOT_SUPPORTED => c"hipErrorNotSupported",
        _ => c"hipErrorUnknown",
    }
}

/// Print why a call failed (the real runtime logs similarly with AMD_LOG_LEVEL) and return
/// the code.
pub fn fail(code: HipError, call: &str, why: impl std::fmt::Display) -> HipError {
    eprintln!(
        "fake libamdhip64: {call}: {}: {why}",
        message(code).to_string_lossy()
    );
    code
}

/// `hipGetErrorString`'s pointer form.
pub fn message_ptr(code: HipError) -> *const c_char {
    message(code).as_ptr()
}
