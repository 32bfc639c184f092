//! Tensors with layouts (CuTe style): a tensor is an engine (a global pointer or AMD buffer
//! resource, an LDS array, or registers) plus a layout from tile coordinates to elements.
//!
//! - [`GTensor`] / [`GTile`]: a row-major global matrix with run-time extents, and one
//!   statically shaped tile of it ([`GTensor::local_tile`]) that knows how much of it is in
//!   bounds, so copies out of it are predicated (ragged edges read zeros, stores are dropped).
//! - [`STensor`]: an LDS tile with a composed swizzle ([`smem_xor16`], [`smem_sw128`]) and
//!   any number of pipeline stages.
//! - [`Frag`]: register fragments, a set of [`Val`](crate::Val)s with a layout.
//! - [`Tv`]: thread-value layouts (which thread holds which tile element), split into row
//!   and column parts with [`Layout::split_rows`](crate::layout::Layout::split_rows) so
//!   run-time thread ids cost no division by the tile height.
//! - [`TiledCopy`] with [`CopyAtom`]s and [`copy`] (register-staged, `cp.async`, AMD
//!   direct-to-LDS); [`TmaCopy`] (sm_90a TMA box loads) and [`TdmCopy`] (gfx1250 Tensor
//!   Data Mover) for whole-tile copies; [`TiledMma`] over the matrix atoms of
//!   [`atoms`](crate::atoms), with [`TiledMma::partition_a`] / `_b` / `_c` and
//!   [`TiledMma::gemm`]; [`c_to_a`], the accumulator-to-operand re-layout derived with the
//!   layout algebra.
//!
//! Coordinates follow CuTe: a tile of `R` rows and `C` columns is indexed column-major,
//! `row + R * col`, by every layout here. Index arithmetic is i32; the global tensors rebase
//! their pointer in i64 per tile, so only offsets inside one row panel of a tile
//! (`tile rows * row stride`) need to stay below 2^31 ([`GTensor::local_tile`]).

mod copy;
mod frag;
mod global;
mod ldsm;
mod mma;
mod relayout;
mod smem;
mod tdm;
#[cfg(test)]
mod tests;
mod tma;
mod tv;

pub use copy::{copy, CopyAtom, ThrCopy, TiledCopy};
pub use frag::Frag;
pub use global::{GTensor, GTile};
pub use mma::{split_runs, AtomTv, ThrMma, TiledMma};
pub use relayout::{c_to_a, c_to_a_map, ReLayout, Slot};
pub use smem::{smem_row_major, smem_sw128, smem_xor16, STensor, SView};
pub use tdm::TdmCopy;
pub use tma::TmaCopy;
pub use tv::Tv;

use crate::layout::LayoutError;

/// A tile-layer description was refused: names the function, the argument, its value and
/// the rule it broke.
///
/// ```
/// use flydsl_dsl::tile::{TileError, TiledCopy, CopyAtom};
/// use flydsl_dsl::ir::ScalarType::BF16;
/// let e = TiledCopy::new(CopyAtom::Vec128, BF16, 100, (64, 32)).unwrap_err();
/// assert!(e.to_string().contains("TiledCopy::new"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TileError {
    /// An argument breaks a rule.
    #[error("{func}: {arg} = {value}: {rule}")]
    Invalid {
        /// The public function.
        func: &'static str,
        /// The argument.
        arg: &'static str,
        /// Its value, printed.
        value: String,
        /// The rule and the fix.
        rule: String,
    },
    /// The layout algebra refused a step.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

pub(crate) fn invalid(
    func: &'static str,
    arg: &'static str,
    value: impl std::fmt::Display,
    rule: impl Into<String>,
) -> TileError {
    TileError::Invalid {
        func,
        arg,
        value: value.to_string(),
        rule: rule.into(),
    }
}

/// Record a tile-layer error in the kernel being built (the build then fails with it).
pub(crate) fn fail(e: TileError) {
    crate::context::with(|s| s.fail(e.to_string()));
}
