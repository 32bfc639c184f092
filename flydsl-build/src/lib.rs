//! flydsl-build: the kernel generator.
//!
//! A Rust kernel-authoring DSL ([`dsl`]) builds typed kernel IR ([`ir`]); [`lower`] turns it
//! into LLVM IR for AMDGPU or NVPTX; [`toolchain`] drives `llc` and `rust-lld`; [`cache`]
//! keeps compiled code objects by content hash; [`inspect`] and [`check`] read them back;
//! [`Builder`] ties it together for build scripts and writes the Rust launch glue ([`glue`]).
//! [`layout`] is the CuTe-style layout algebra and [`proof`] holds the proof kernels.

pub use flydsl_ir as ir;

mod builder;
pub mod cache;
pub mod check;
pub mod dsl;
pub mod glue;
pub mod inspect;
pub mod layout;
pub mod lower;
pub mod proof;
pub mod toolchain;

pub use builder::{
    parse_targets, report_text, BuildReport, Builder, GenError, KernelSpec, VariantReport,
};
