//! A fake `libamdhip64` for tests: the HIP subset that flydsl-rt uses, backed by the flydsl
//! simulator.
//!
//! - One device, whose `gcnArchName` is `<$FLYDSL_FAKE_HIP_ARCH or gfx942>:sramecc+:xnack-`.
//! - Device memory is a [`flydsl_sim::SimMemory`]; `hipMalloc` returns its addresses.
//! - `hipModuleLoadData` parses the real HSACO ([`flydsl_ir::codeobj`]) and keeps its metadata;
//!   `hipModuleGetFunction` reads the kernel IR from
//!   `$FLYDSL_FAKE_HIP_IR_DIR/<kernel symbol>.<arch>.ir` (bytes of [`flydsl_ir::to_bytes`]) and
//!   checks the metadata's explicit arguments against the IR's kernarg layout.
//! - `hipModuleLaunchKernel` takes the packed argument buffer through `extra`, checks it covers
//!   every explicit argument of the metadata, and runs the kernel with [`flydsl_sim::launch`].
//! - Failures return the proper `hipError_t` and print the reason on stderr.
//!
//! Building the workspace produces `target/<profile>/libamdhip64.so`; point `FLYDSL_HIP_LIB`
//! at it.
//!
//! ```
//! use amdhip64::api::*;
//! let mut n = 0;
//! // SAFETY: valid out-pointer.
//! assert_eq!(unsafe { hipGetDeviceCount(&mut n) }, 0);
//! assert_eq!(n, 1);
//! ```

pub mod api;
pub mod codes;
pub mod device;
pub mod module;
