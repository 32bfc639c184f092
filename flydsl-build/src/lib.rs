//! flydsl-build: the kernel generator (being implemented).
pub use flydsl_ir as ir;
pub mod layout;
pub mod lower;
pub mod inspect;
