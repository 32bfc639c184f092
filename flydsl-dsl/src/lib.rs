//! flydsl-dsl: the kernel-authoring API, Rust code that builds kernel IR.
//!
//! This is the one crate a kernel author reads. It holds the DSL (this module), the CuTe-style
//! layout algebra ([`layout`]), the matrix-atom lane layouts ([`atoms`]) and the building blocks
//! every kernel family shares (reductions, row loads: [`blocks`]); the kernel IR it
//! builds is [`ir`] (`flydsl-ir`). Lowering lives in `flydsl-codegen` and the build-script
//! machinery in `flydsl-build`.
//!
//! A kernel is written as a Rust closure that declares its parameters and then computes with
//! [`Val`]s (or [`Typed`] values, whose scalar type the Rust compiler checks). Compile-time
//! loops are plain Rust loops; run-time loops and branches are [`for_range_with`] and
//! [`if_then_else`], which carry named state of any [`Carry`] type (tuples, arrays, `Vec`s,
//! structs via [`carry_struct!`]); [`for_range`] and [`if_else`] are their positional forms.
//! Ops are recorded into the kernel being built through a thread-local context, so
//! arithmetic reads like ordinary Rust.
//!
//! Every DSL function that records an op is `#[track_caller]`: the kernel remembers the
//! `file:line:col` of the kernel source that wrote each op ([`ir::Kernel::src_locs`]), and
//! verifier and lowering errors start with it. Helpers of your own that build ops can be
//! `#[track_caller]` too, so errors point at their callers.
//!
//! ```
//! use flydsl_dsl::*;
//! use flydsl_dsl::ir::{ScalarType::F32, Target};
//! let k = KernelBuilder::new("vadd", Target::Gfx942, 256)
//!     .build(|k| {
//!         let a = k.tensor("a", F32);
//!         let b = k.tensor("b", F32);
//!         let c = k.tensor_mut("c", F32);
//!         let n = k.scalar("n", flydsl_dsl::ir::ScalarType::I32);
//!         let i = block_id_x() * 256 + thread_id_x();
//!         if_(i.lt(n), || c.store(i, a.load(i) + b.load(i)));
//!     })
//!     .unwrap();
//! assert_eq!(k.params.len(), 4);
//! ```

pub use flydsl_ir as ir;

mod amd;
pub mod atoms;
pub mod blocks;
mod builder;
mod context;
mod control;
mod index;
pub mod layout;
mod mem;
pub mod nv;
pub mod tile;
pub mod typed;
mod val;
mod wave;

pub use amd::{
    buffer_load_to_lds, cvt_pk_f32_fp8, cvt_pk_fp8, cvt_pk_fp8x4, dpp, lds_barrier, lds_read_tr16,
    permlane_swap, permlanex16, sched_barrier, sched_group_barrier, set_prio, tensor_load_to_lds,
    wait_tensorcnt, wait_vmcnt, PERMLANEX16_SWAP_ROWS,
};
pub use blocks::{block_reduce, wave_reduce, wave_reduce_max, wave_reduce_sum};
pub use builder::{KernelBuilder, KernelDef};
pub use context::{target, BuildError};
pub use control::{for_range, for_range_, for_range_with, if_, if_else, if_then_else, Carry, Cond};
pub use index::Idx;
pub use mem::{keep_l2_if, ptr_offset, DynLds, DynLdsArray, Lds, Rsrc, Tensor};
pub use typed::Typed;
pub use val::{
    block_dim_x, block_id, block_id_x, c_f32, c_i32, c_i64, cnst, grid_dim_x, lane_id, select,
    splat, thread_id, thread_id_x, vec_of, Operand, Val,
};
pub use wave::{
    barrier, fence_release, mma, mma_scaled, read_first_lane, shuffle_down, shuffle_idx,
    shuffle_xor, wave_size,
};
