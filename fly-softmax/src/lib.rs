//! fly-softmax: row softmax forward and backward kernels for AMD Instinct / Radeon (gfx942,
//! gfx950, gfx1201, gfx1250) and NVIDIA Hopper (sm_90), built at `cargo build` time, with an
//! autotuned dispatcher. The Sim backend runs every kernel on the CPU with no GPU feature.
//!
//! ```
//! use flydsl_rt::{Device, DeviceBuffer, Target};
//! use fly_softmax::{softmax, softmax_backward, SoftmaxArgs};
//! use half::bf16;
//! let dev = Device::sim(Target::Gfx942); // or Device::best()?
//! let s = dev.stream()?;
//! let (m, n) = (3, 1000);
//! let host: Vec<bf16> = (0..m * n).map(|i| bf16::from_f32((i % 7) as f32 * 0.25)).collect();
//! let x = DeviceBuffer::from_slice(&dev, &host)?;
//! let mut y = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;
//! softmax(&s, &x, &mut y, SoftmaxArgs { m, n })?;
//! let row: f32 = y.to_vec()?[..n].iter().map(|v| v.to_f32()).sum();
//! assert!((row - 1.0).abs() < 2e-2);
//! let mut dx = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;
//! softmax_backward(&s, &y, &x, &mut dx, SoftmaxArgs { m, n })?;
//! # Ok::<(), flydsl_rt::Error>(())
//! ```
//!
//! # Paths
//!
//! Every dtype (`f32`, `f16`, `bf16`) has, per target (see [`table::CONFIGS`]):
//! - a **vector** path (rows up to 32768 elements, `n` a multiple of the 128-bit vector
//!   width): the row stays in registers, 128-bit buffer loads/stores, one read of `x` and one
//!   write of `y`; short rows pack several rows per block (8 to 128 threads per row, shuffle
//!   reductions only; `n <= 128` has 8 or 16 threads per row);
//! - a **ragged** path for other `n` up to 32768: rows start off the 16-byte grid, so each
//!   row's unaligned head (up to the first 16-byte boundary) and its tail (after the last
//!   whole vector) are one element per lane, and the body between is aligned 128-bit
//!   vectors held in registers as on the vector path;
//! - **looped** paths (vector, ragged, and scalar) for any longer row;
//! - **split** rows ([`split`]) for few long rows: each row is cut into chunks over several
//!   blocks (two kernels: partial statistics into an f32 workspace the call allocates, then
//!   the output), so that even one row fills the device;
//! - a **masked scalar** path up to 16384 (no longer dispatched by default: the tuner's
//!   alternative for odd `n`).
//!
//! The dispatcher's rules are written on [`plan::path_for`] (path from `n` and the dtype),
//! [`plan::candidates`] (the size class and its alternatives) and
//! [`plan::split_by_default`] (when to split, from `m` and the device's compute units).
//!
//! Backward keeps `y` and `dy` in registers up to 16384 elements, only `y` up to 32768, and
//! loops beyond.
//!
//! # Tuning
//!
//! `FLYDSL_AUTOTUNE=1` makes the first call of each shape class search the class's compiled
//! alternatives on the current device (validated against the default's output, timed with
//! events, median of 10, the default wins ties within 2%) and persist the winner
//! (`$FLYDSL_TUNE_CACHE`, else `$XDG_CACHE_HOME/flydsl/tune.txt`, else
//! `~/.cache/flydsl/tune.txt`; see [`flydsl_rt::tune`]). Other calls never search.
//!
//! # Aliasing
//!
//! Outputs are `&mut DeviceBuffer` and inputs `&DeviceBuffer`, so the borrow checker rules out
//! in-place calls; the kernels are out-of-place by contract.

mod api;
mod array;
mod kernels;
pub mod plan;
pub mod select;
pub mod split;
pub mod table;
pub mod validate;

pub use api::{
    softmax, softmax_backward, softmax_backward_unchecked, softmax_backward_with,
    softmax_unchecked, softmax_with, SoftmaxArgs,
};
pub use array::{softmax_array, softmax_backward_array};
/// The forward reads inputs larger than this with the keep-in-L2 hint (see
/// [`flydsl_rt::hints`]).
pub use flydsl_rt::hints::KEEP_L2_MIN_BYTES;
/// The element types and dtype enum of every kernel crate.
pub use flydsl_rt::{DType, Element};
pub use select::Dispatch;
