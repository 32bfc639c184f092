//! Proof kernels of the generator, compiled by this crate's build script for the selected
//! targets (IR always embedded for Sim), with their generated launchers.

#![allow(missing_docs)]
/// Generated variant tables and launchers.
pub mod proof {
    include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));
}
