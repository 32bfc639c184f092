//! A HIP library path that does not exist makes the backend unavailable (one test per
//! process: it sets environment variables).

use flydsl_rt::{Backend, Device, Error};

#[test]
fn missing_hip_library_is_backend_unavailable_and_best_falls_back() {
    std::env::set_var("FLYDSL_HIP_LIB", "/nonexistent/libamdhip64.so");
    let err = Device::enumerate(Backend::Hip).unwrap_err();
    match &err {
        Error::BackendUnavailable {
            backend: Backend::Hip,
            reason,
        } => {
            assert!(reason.contains("/nonexistent/libamdhip64.so"), "{reason}");
        }
        e => panic!("expected BackendUnavailable, got {e}"),
    }
    assert!(err.to_string().contains("FLYDSL_HIP_LIB"), "{err}");
    std::env::set_var("FLYDSL_BACKEND", "hip");
    assert!(matches!(
        Device::best(),
        Err(Error::BackendUnavailable { .. })
    ));
    std::env::remove_var("FLYDSL_BACKEND");
    // No HIP, and (on this machine) no CUDA: the Sim.
    let best = Device::best().unwrap();
    assert!(best.backend() != Backend::Hip);
}
