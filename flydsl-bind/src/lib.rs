//! The binding core of the `flydsl` Python package: every kernel family of flydsl-rs on
//! tensors that other code owns, described by plain values (device address, shape, strides,
//! dtype name, device; [`Tensor`]) and run on other code's stream ([`Env`]). The PyO3 crate
//! (`flydsl-py`) only converts Python objects to these values and errors to exceptions;
//! everything that can be checked is checked here, where `cargo test` reaches it on the Sim.
//!
//! Each call validates every tensor before anything is enqueued or written: a dtype the
//! function takes, the call's device type (and one device for all tensors), contiguous
//! row-major strides (torch's rule), a 16-byte aligned start ([`ALIGN`]), a byte size that
//! fits 64 bits, the shapes the function's layout needs, and no output overlapping another
//! tensor of the call. Errors name the public Python function (`flydsl.rms_norm`), the
//! argument, its value, the rule and the fix ([`BindError`]). Outputs the caller leaves out
//! are made by the caller's [`Alloc`] after the inputs passed.
//!
//! # Safety contract of the `unsafe` entry points
//!
//! The kernels read and write the tensors' memory through raw device addresses, so the
//! caller guarantees, for the duration of the call and of the work it enqueues:
//! - each [`Tensor`] describes memory of the named device that holds its elements (its
//!   `ptr`, shape and strides are those of a live allocation: for torch, the tensor is alive
//!   and `data_ptr()` was read from it) and stays allocated until the enqueued work has run
//!   (torch's caching allocator keeps a freed block for later work on the tensor's
//!   allocation stream; using a tensor on another stream needs `tensor.record_stream`, as
//!   for any torch op);
//! - other code's writes to the inputs are ordered before the end of the stream's queue
//!   (they ran on that stream, as torch ops on the current stream do, or completed), and no
//!   other code writes the tensors while the enqueued work runs;
//! - [`Env::stream`] is a live stream of the device's primary context (the context the CUDA
//!   runtime and torch use) that stays alive for the rest of the process: the binding caches
//!   one wrapper per stream handle, and kernel crates' cached workspaces remember the last
//!   stream that used them. Streams torch creates (`torch.cuda.current_stream()`, its stream
//!   pool) are never destroyed; a `torch.cuda.ExternalStream` must live as long.

#![warn(missing_docs)]

pub mod attn;
mod call;
mod desc;
mod error;
pub mod gemm;
pub mod norm;
pub mod softmax;

pub use call::{contiguous, Alloc, Call, Ctx, NoAlloc, View, ALIGN};
pub use desc::{Dtype, Env, Gpu, Tensor};
pub use error::{BindError, ErrorKind, Result};

/// An internal-invariant error of call `ctx` (a bug of this crate, reported, never a panic).
pub(crate) fn internal(ctx: &Ctx, what: impl std::fmt::Display) -> BindError {
    BindError::new(
        ErrorKind::Runtime,
        format!("{}: {what} (a flydsl-bind bug; please report it)", ctx.op()),
    )
}

/// `match` on a float dtype (`float32`, `float16`, `bfloat16`) with `$T` the Rust element
/// type in `$body`; any other dtype is an internal error of `$ctx`.
#[macro_export]
#[doc(hidden)]
macro_rules! float_type {
    ($ctx:expr, $dt:expr, $T:ident, $body:block) => {
        match $dt {
            $crate::Dtype::F32 => {
                type $T = f32;
                $body
            }
            $crate::Dtype::F16 => {
                type $T = ::flydsl_rt::half::f16;
                $body
            }
            $crate::Dtype::BF16 => {
                type $T = ::flydsl_rt::half::bf16;
                $body
            }
            other => Err($crate::internal_pub(&$ctx, other)),
        }
    };
}

#[doc(hidden)]
/// [`internal`] for the macro.
pub fn internal_pub(ctx: &Ctx, what: impl std::fmt::Display) -> BindError {
    internal(ctx, what)
}
