//! flydsl-build: the build-script machinery of the kernel generator.
//!
//! A kernel crate's `build.rs` declares its kernels (closures written with `flydsl_dsl`) on a
//! [`Builder`], which builds each kernel's IR for every target, lowers it to LLVM IR
//! (`flydsl_codegen`), compiles it with [`toolchain`] (`llc` + `rust-lld`), keeps the code
//! objects in a content-hash [`cache`], runs the structural [`check`]s on them and writes the
//! Rust launch glue ([`glue`]) that the crate `include!`s.

pub use flydsl_ir as ir;

mod builder;
pub mod cache;
pub mod check;
pub mod glue;
pub mod toolchain;

pub use builder::{
    parse_targets, report_text, BuildReport, Builder, GenError, KernelSpec, VariantReport,
};
