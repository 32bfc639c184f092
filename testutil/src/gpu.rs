//! GPU test gating: a test that needs a GPU (or a build with its code objects) and cannot
//! run prints why and passes, except where `FLYDSL_REQUIRE_GPU` is set (to anything but
//! empty or `0`): there it fails, so that a GPU machine's run (the device bundle's `run.sh`
//! sets it) cannot pass silently without testing anything.
//!
//! ```
//! use flydsl_testutil::gpu;
//! let gpu_present = false; // e.g. `Device::enumerate(Backend::Cuda)` found nothing
//! if !gpu_present && !gpu::required() {
//!     gpu::skip("no CUDA device"); // prints `skipped: no CUDA device`
//! }
//! ```

/// The environment variable that turns a skipped GPU test into a failure.
pub const REQUIRE_GPU_VAR: &str = "FLYDSL_REQUIRE_GPU";

/// Whether `FLYDSL_REQUIRE_GPU` is set to something other than empty or `0`.
pub fn required() -> bool {
    std::env::var(REQUIRE_GPU_VAR).is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0")
}

/// Report that a GPU test cannot run because of `reason`: prints `skipped: {reason}` when
/// [`required`] is false (the caller then returns), panics naming the reason when it is true.
pub fn skip(reason: &str) {
    assert!(
        !required(),
        "{REQUIRE_GPU_VAR} is set, but this GPU test cannot run: {reason}"
    );
    println!("skipped: {reason}");
}
