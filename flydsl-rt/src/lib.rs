//! flydsl-rt: devices, streams, typed buffers and kernel launches (being implemented).

pub mod sim;
mod variant;
pub use variant::{KernelVariant, KernelVariants};
