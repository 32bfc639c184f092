//! Reading built code objects: AMDGPU ELF code objects (`.hsaco`) and PTX text.
//!
//! This module is light on purpose (only `object` and `rmpv`), because the runtime's HIP
//! backend uses it at run time to read the kernarg layout and resource usage of an embedded
//! code object, and the generator uses it to check what it built.
//!
//! - [`parse_hsaco`] reads the ELF header (`EM_AMDGPU`, `ELFOSABI_AMDGPU_HSA`, the `e_flags`
//!   processor and xnack/sramecc settings, the code object version) and decodes the
//!   `NT_AMDGPU_METADATA` note (msgpack) into a [`CodeObject`] with one [`KernelMeta`] per
//!   kernel.
//! - [`check_kernarg_layout`] compares a kernel's explicit arguments with the
//!   [`KernargLayout`](crate::KernargLayout) the launcher packs.
//! - [`occupancy`] computes waves per SIMD from registers and LDS.
//! - [`parse_ptx`] reads the `.entry` signatures of a PTX module, and
//!   [`check_kernarg_layout_ptx`] does the same layout check for NVIDIA.
//!
//! ```
//! use flydsl_ir::codeobj::{parse_hsaco, CodeObjectError};
//! // Anything that is not an AMDGPU code object is an error, never a panic.
//! assert!(matches!(parse_hsaco(b"\x7fELF"), Err(CodeObjectError::Elf(_))));
//! ```

mod elf;
mod layout;
mod meta;
mod msgpack;
mod occupancy;
mod ptx;

pub use elf::{parse_hsaco, CodeObject, GfxArch, TargetFeature};
pub use layout::{check_kernarg_layout, explicit_args};
pub use meta::{Access, AddressSpace, KernelArg, KernelMeta, ValueKind};
pub use occupancy::{occupancy, OccupancyLimits};
pub use ptx::{
    check_kernarg_layout_ptx, parse_ptx, PtxEntry, PtxError, PtxModule, PtxParam, PtxShared,
};

/// Why a byte string is not a usable AMDGPU code object.
///
/// ```
/// use flydsl_ir::codeobj::{parse_hsaco, CodeObjectError};
/// let err = parse_hsaco(&[]).unwrap_err();
/// assert!(matches!(err, CodeObjectError::Elf(_)));
/// assert!(err.to_string().contains("ELF"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeObjectError {
    /// Not an ELF file, or a truncated / inconsistent one.
    #[error("not a valid ELF code object: {0}")]
    Elf(String),
    /// An ELF file for another machine.
    #[error("ELF e_machine is {machine}, not EM_AMDGPU (224): this is not an AMDGPU code object")]
    NotAmdgpu {
        /// The `e_machine` that was found.
        machine: u16,
    },
    /// An AMDGPU ELF for another OS ABI than HSA (e.g. a Mesa/PAL object).
    #[error(
        "ELF OS/ABI is {os_abi}, not ELFOSABI_AMDGPU_HSA (64): not an HSA code object \
         (build with -mtriple=amdgcn-amd-amdhsa)"
    )]
    NotHsa {
        /// The `e_ident[EI_OSABI]` that was found.
        os_abi: u8,
    },
    /// No `NT_AMDGPU_METADATA` note (type 32, owner `AMDGPU`).
    #[error(
        "no NT_AMDGPU_METADATA note (type 32, owner \"AMDGPU\") in the code object: \
         it is not a code object v3+ built by LLVM's AMDGPU backend"
    )]
    NoMetadata,
    /// The note's msgpack could not be decoded.
    #[error("the AMDGPU metadata note is not valid msgpack: {0}")]
    Msgpack(String),
    /// The msgpack decoded but a field is missing or has the wrong type.
    #[error("bad AMDGPU metadata at {at}: {what}")]
    Metadata {
        /// Where (`amdhsa.kernels[0] (vadd).vgpr_count`).
        at: String,
        /// What is wrong.
        what: String,
    },
}
