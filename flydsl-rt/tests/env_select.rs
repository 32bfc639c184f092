//! `FLYDSL_BACKEND` and `FLYDSL_SIM_TARGET` (one test per process: it sets environment
//! variables).

use flydsl_rt::{Backend, Device, Error, Target};

#[test]
fn environment_selects_backend_and_sim_target() {
    std::env::set_var("FLYDSL_BACKEND", "sim");
    std::env::set_var("FLYDSL_SIM_TARGET", "gfx1201");
    let d = Device::best().unwrap();
    assert_eq!(d.backend(), Backend::Sim);
    assert_eq!(d.target(), Target::Gfx1201);
    assert_eq!(d.name(), "flydsl Sim (gfx1201, wave32)");
    assert_eq!(Device::enumerate(Backend::Sim).unwrap(), vec![d.clone()]);

    std::env::set_var("FLYDSL_SIM_TARGET", "gfx9000");
    let err = Device::best().unwrap_err();
    assert!(
        matches!(err, Error::UnknownSimTarget(ref t) if t == "gfx9000"),
        "{err}"
    );

    std::env::set_var("FLYDSL_SIM_TARGET", "sm90");
    std::env::set_var("FLYDSL_BACKEND", "SIM");
    assert_eq!(Device::best().unwrap().target(), Target::Sm90);

    std::env::set_var("FLYDSL_BACKEND", "vulkan");
    let err = Device::best().unwrap_err();
    assert!(matches!(err, Error::UnknownBackend(_)), "{err}");
    assert!(err.to_string().contains("`vulkan`"), "{err}");
}
