//! The kernel IR of flydsl: a typed SSA form with structured control flow.
//!
//! This crate is shared by the generator (`flydsl-build`, which builds and lowers IR) and the
//! runtime (`flydsl-rt`, whose Sim backend executes it). It holds no toolchain code, so the
//! runtime does not pull in the generator's build-time machinery.
//!
//! ```
//! use flydsl_ir::{Target, ScalarType};
//! assert_eq!(Target::Gfx942.wave_size(), 64);
//! assert_eq!(ScalarType::BF16.size_bytes(), 2);
//! ```

mod dtype;
mod kernarg;
mod kernel;
mod ops_amd;
mod ops_nv;
mod srcloc;
pub mod target;
mod types;
pub mod uniform;
mod value;
mod verify;
mod wgmma_flow;

pub use dtype::DType;
pub use kernarg::{KernargLayout, KernargSlot};
pub use kernel::*;
pub use ops_amd::{sched_mask, AmdOp, DppCtrl, TdmDesc, MAX_VMCNT};
pub use ops_nv::{
    swizzle128, wgmma_acc_elem, wgmma_k, wgmma_operand_ok, NvOp, WgmmaB, WARPGROUP, WGMMA_K,
    WGMMA_M,
};
pub use srcloc::{SrcLoc, SrcLocs};
pub use target::Target;
pub use types::{AddrSpace, LanesError, ScalarType, Type};
pub use value::ValueId;
pub use verify::{loc_prefix, operands_of, verify, VerifyError};

/// Serialize a kernel to the compact binary form embedded for the Sim backend.
///
/// ```
/// # use flydsl_ir::*;
/// let k = Kernel::empty("k", Target::Sm90);
/// let bytes = to_bytes(&k);
/// assert_eq!(from_bytes(&bytes).unwrap().name, "k");
/// ```
pub fn to_bytes(kernel: &Kernel) -> Vec<u8> {
    postcard::to_stdvec(kernel).expect("kernel IR serialization cannot fail")
}

/// Deserialize a kernel embedded by [`to_bytes`].
pub fn from_bytes(bytes: &[u8]) -> Result<Kernel, DecodeError> {
    postcard::from_bytes(bytes).map_err(|e| DecodeError(e.to_string()))
}

/// The embedded IR could not be decoded (it was built by an incompatible generator version).
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot decode embedded kernel IR: {0}; rebuild the kernel crate with the same flydsl version"
)]
pub struct DecodeError(String);

#[cfg(feature = "codeobj")]
pub mod codeobj;
