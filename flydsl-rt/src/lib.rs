//! flydsl-rt: devices, streams, typed buffers and kernel launches (being implemented).

pub use flydsl_sim as sim;
mod variant;
pub use variant::{KernelVariant, KernelVariants};
