//! Inspection of built code objects: metadata, kernarg layout, occupancy (re-exported from
//! [`flydsl_ir::codeobj`]), disassembly through `llvm-objdump`, and instruction counts.
//!
//! ```
//! use flydsl_devtools::inspect::{count_instructions, count_ptx_instructions};
//! let disasm = "\tv_mfma_f32_16x16x16_f16 a[0:3], v[0:1], v[0:1], 0\n\ts_endpgm\n";
//! assert_eq!(count_instructions(disasm, "v_mfma"), 1);
//! assert_eq!(count_ptx_instructions("\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {..};\n", "mma.sync"), 1);
//! ```

mod count;
mod hot_loop;
mod objdump;

pub use count::{count_instructions, count_ptx_instructions, mnemonics, ptx_mnemonics};
pub use flydsl_ir::codeobj::*;
pub use hot_loop::{hot_loop_mix, InstructionMix};
pub use objdump::{disassemble, disassemble_with, find_objdump, ObjectInput};

use std::path::PathBuf;

/// Why a code object could not be disassembled.
///
/// ```
/// use flydsl_devtools::inspect::InspectError;
/// let e = InspectError::ToolNotFound { tried: vec!["llvm-objdump-22 on PATH".into()] };
/// assert!(e.to_string().contains("llvm-22"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// No `llvm-objdump` was found.
    #[error(
        "no llvm-objdump found (tried: {}); install LLVM 22 (`apt-get install llvm-22`), or set \
         FLYDSL_OBJDUMP to an llvm-objdump that knows your GPU target",
        tried.join(", ")
    )]
    ToolNotFound {
        /// The places that were looked at, in order.
        tried: Vec<String>,
    },
    /// Writing the temporary object file or starting the tool failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or tool involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The tool does not know the `--mcpu` value.
    #[error("{} does not know processor `{mcpu}`: use an LLVM >= 22 llvm-objdump (FLYDSL_OBJDUMP)", tool.display())]
    UnknownCpu {
        /// The tool that was run.
        tool: PathBuf,
        /// The processor asked for.
        mcpu: String,
    },
    /// The tool ran and failed.
    #[error("{} failed ({status}): {stderr}", tool.display())]
    ToolFailed {
        /// The tool that was run.
        tool: PathBuf,
        /// Its exit status.
        status: String,
        /// Its standard error, trimmed.
        stderr: String,
    },
}
