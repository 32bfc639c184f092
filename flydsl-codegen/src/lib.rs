//! Lowering of a verified kernel IR to LLVM IR module text for `llc`.
//!
//! [`lower`] turns one [`Kernel`] into a complete LLVM module for the kernel's target:
//! `amdgcn-amd-amdhsa` (gfx942, gfx950, gfx1201, gfx1250) or `nvptx64-nvidia-cuda` (sm_90).
//!
//! The work is split into small modules with one job each:
//!
//! - `func`: the function emitter (SSA names, blocks, scoped value map, declarations) and
//!   `TargetHooks`, the one trait through which everything vendor-specific is lowered;
//! - `ty`: LLVM spellings of IR types and constants;
//! - `arith`: elementwise arithmetic, compares, selects and casts;
//! - `vector`: splat / extract / insert / build / slice;
//! - `fp8`: branch-free fp8 <-> f32 conversions emitted inline;
//! - `memory`: loads, stores, pointer arithmetic, LDS, atomics and buffer resources;
//! - `control`: the walk over blocks, `If` and `For`;
//! - `amdgpu` / `nvptx`: the two `TargetHooks` implementations (geometry, fast math,
//!   barriers, shuffles, buffers and their NVPTX emulation, cache hints, atomic scopes,
//!   function attributes and module boilerplate);
//! - `mma`: matrix-core atoms;
//! - `nv_pipe`: the NVIDIA Hopper ops (mbarrier, TMA, wgmma, setmaxnreg) as inline PTX.
//! - `amd_pipe`: the AMD-only pipeline primitives (`flydsl_ir::AmdOp`).
//!
//! ```
//! use flydsl_ir::{Kernel, Target};
//! let ir = flydsl_codegen::lower(&Kernel::empty("noop", Target::Gfx942)).unwrap();
//! assert!(ir.contains("define amdgpu_kernel void @noop("));
//! ```

mod amd_pipe;
mod amdgpu;
mod arith;
mod control;
mod error;
mod fp8;
mod func;
mod memory;
mod mma;
mod nv_pipe;
mod nvptx;
mod ty;
mod vector;

pub use error::LowerError;
use flydsl_ir::Kernel;

/// Lower a kernel to LLVM IR module text that `llc-22` compiles for `kernel.target`.
///
/// The kernel is verified first ([`flydsl_ir::verify`]); a verification failure becomes a
/// [`LowerError`]. The explicit function arguments follow `kernel.kernarg_layout()` exactly.
pub fn lower(kernel: &Kernel) -> Result<String, LowerError> {
    flydsl_ir::verify(kernel)?;
    let hooks: &'static dyn func::TargetHooks = if kernel.target.is_amd() {
        &amdgpu::Amdgpu
    } else {
        &nvptx::Nvptx
    };
    let mut f = func::Func::new(kernel, hooks);
    let params = f.bind_params()?;
    f.start_block("entry");
    f.emit_entry_fixups();
    control::lower_block_ops(&mut f, &kernel.body)?;
    f.emit("ret void".to_string());
    Ok(f.finish_module(&params))
}
