//! Building blocks shared by every kernel family: the one set of reductions and row helpers
//! that `fly-norm`, `fly-softmax` and later families build on, so that none of them writes
//! its own.
//!
//! - Reductions: the lanes of a vector ([`hreduce`], [`hfold`], [`hsum`],
//!   [`hmax`]), aligned groups of lanes of a wave of any power-of-two size, fixed at build
//!   time or given at run time ([`group_reduce`], [`group_reduce_n`], [`group_reduce_across`]),
//!   and the threads of a block, one value or several in one LDS exchange
//!   ([`block_reduce_n`], [`team_reduce`], [`block_reduce`]). The combine op is a parameter:
//!   an [`Op`] (sum, max, min) or any associative closure (a tuple merge such as Chan's).
//! - Rows: loading and storing rows through buffer resources (bounds-checked
//!   on every target, buffer instructions on AMD) in 128-bit pieces, with the keep-in-L2 hint
//!   switched by a run-time flag ([`load_vec`], [`store_vec`], [`load_row`], [`row_rsrc`]);
//!   and the element helpers around them ([`widen`], [`opaque`]). The dtype map is
//!   [`ir::DType::scalar`](crate::ir::DType::scalar).
//!
//! They are the counterparts of the reference implementation's common kernel helpers (its
//! `reduce` module's vector and block reductions, the two-value block reduction, and the
//! buffer load helpers); the names follow this crate.
//!
//! # Reductions
//!
//! ```
//! use flydsl_dsl::blocks::{group_reduce, hsum, Group, Op};
//! use flydsl_dsl::ir::{ScalarType::F32, Target};
//! use flydsl_dsl::*;
//! let k = KernelBuilder::new("row_sums", Target::Gfx942, 64)
//!     .build(|k| {
//!         let x = k.tensor("x", F32);
//!         let y = k.tensor_mut("y", F32);
//!         // Groups of 16 lanes each sum 16 vectors of 4.
//!         let v = x.load_vec(thread_id_x() * 4, 4, 16);
//!         let s = group_reduce(hsum(v), Group::Lanes(16), |a, b| Op::Sum.apply(a, b));
//!         if_((lane_id() & 15).eq(0), || y.store(thread_id_x() / 16, s));
//!     })
//!     .unwrap();
//! assert!(k.params.len() == 2);
//! ```
//!
//! # Rows
//!
//! ```
//! use flydsl_dsl::blocks::{load_row, row_rsrc};
//! use flydsl_dsl::ir::{ScalarType::{F16, I32}, Target};
//! use flydsl_dsl::*;
//! let k = KernelBuilder::new("copy_rows", Target::Sm90, 128)
//!     .build(|k| {
//!         let x = k.tensor("x", F16);
//!         let y = k.tensor_mut("y", F16);
//!         let n = k.scalar("n", I32);
//!         let keep = k.scalar("keep_l2", I32).ne(0);
//!         let (xr, yr) = (row_rsrc(&x, block_id_x(), n, None), row_rsrc(&y, block_id_x(), n, None));
//!         let idx = [thread_id_x() * 8];
//!         let v = load_row(xr, &idx, 8, 16, keep)[0];
//!         yr.store_aligned(idx[0], v, 16, false);
//!     })
//!     .unwrap();
//! assert_eq!(k.params.len(), 4);
//! ```

mod reduce;
mod rows;

pub use reduce::{
    block_reduce, block_reduce_n, group_reduce, group_reduce_across, group_reduce_n, hfold, hmax,
    hreduce, hsum, team_reduce, wave_reduce, wave_reduce_max, wave_reduce_sum, Group, Op, Scratch,
};
pub use rows::{load_row, load_vec, opaque, row_rsrc, store_vec, widen};
