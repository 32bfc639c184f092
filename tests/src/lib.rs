//! Proof kernels of the generator, compiled by this crate's build script for the selected
//! targets (IR always embedded for Sim), with their generated launchers.

#![allow(missing_docs)]
/// Generated variant tables and launchers.
pub mod proof {
    include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));
}

/// Where the build script wrote every proof kernel's serialized IR as `<kernel>.<target>.ir`
/// (the naming the test-only fake `libamdhip64` reads through `FLYDSL_FAKE_HIP_IR_DIR`).
pub const IR_DIR: &str = env!("OUT_DIR");
