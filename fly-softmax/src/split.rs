//! Split rows ([`crate::table::Path::Split`], kernels in `kernels/split.rs`): how each row
//! of a split call is cut into chunks, and the workspace the two kernels share. When the
//! dispatcher splits is [`crate::plan::split_by_default`].
//!
//! The workspace is allocated by the call itself (as fly-attn's split-K does): `2 * m *
//! chunks` f32 forward, `m * chunks` backward, at most [`MAX_CHUNKS`] chunks a row and, on
//! the dispatcher's path, `m` below [`crate::plan::SPLIT_ROWS_PER_CU`] rows per compute unit
//! (a few hundred KiB at most). It is released when the call returns; the runtime orders the
//! free after the launches that use it (`flydsl_rt`'s residency tracking).

use crate::plan::{Variant, MAX_GRID, MIN_CHUNK};
use crate::table::SPLIT_UNROLL;
use flydsl_rt::Element;

/// Blocks a split launch aims for per compute unit (eight 256-thread blocks: a full H200 SM).
pub const SPLIT_BLOCKS_PER_CU: usize = 8;

/// The most chunks a row is cut into (bounds the finish kernel's fold and the workspace).
pub const MAX_CHUNKS: usize = 256;

/// How a split launch cuts its rows: `chunks` chunks of `clen` elements of each row's aligned
/// body (the last one shorter; the row's head goes with chunk 0 and its tail with the last).
///
/// ```
/// use fly_softmax::split::SplitPlan;
/// let p = SplitPlan { chunks: 3, clen: 4096 };
/// assert_eq!(p.pairs(5), 15);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPlan {
    /// Chunks per row.
    pub chunks: usize,
    /// Body elements per chunk: a multiple of the kernels' loop step ([`SPLIT_UNROLL`] block
    /// strides of `threads` 128-bit accesses), so every chunk starts on the 16-byte grid;
    /// `chunks * clen >= n`.
    pub clen: usize,
}

impl SplitPlan {
    /// The plan for `m` rows of `n` elements of `T` with split configuration `v` on a device
    /// of `compute_units`: about [`SPLIT_BLOCKS_PER_CU`] blocks per compute unit over all
    /// rows, chunks of at least [`MIN_CHUNK`] elements (one chunk for shorter rows), at most
    /// [`MAX_CHUNKS`] a row and `m * chunks <= max(m, MAX_GRID)` (the kernels' i32 counter).
    ///
    /// ```
    /// use fly_softmax::{plan::variant_by_name, split::SplitPlan};
    /// let v = variant_by_name::<half::bf16>("softmax_fwd_bf16_sp_t256_g256_e0_w0").unwrap();
    /// let p = SplitPlan::new::<half::bf16>(&v, 132, 4, 150_001);
    /// assert!(p.chunks > 1 && p.clen % 8192 == 0 && p.chunks * p.clen >= 150_001);
    /// assert_eq!(SplitPlan::new::<half::bf16>(&v, 132, 4, 100).chunks, 1);
    /// ```
    pub fn new<T: Element>(v: &Variant, compute_units: u32, m: usize, n: usize) -> SplitPlan {
        let stride = (v.config.threads * T::DTYPE.vec() * SPLIT_UNROLL) as usize;
        let m = m.max(1);
        let want = (SPLIT_BLOCKS_PER_CU * compute_units.max(1) as usize).div_ceil(m);
        let chunks = want
            .min(n.div_ceil(MIN_CHUNK))
            .min(MAX_CHUNKS)
            .min(MAX_GRID as usize / m)
            .max(1);
        let clen = n.div_ceil(chunks).div_ceil(stride) * stride;
        SplitPlan {
            chunks: n.div_ceil(clen),
            clen,
        }
    }

    /// The (row, chunk) pairs of `m` rows: the blocks of a launch (capped at `MAX_GRID`;
    /// blocks stride over the rest).
    pub fn pairs(&self, m: usize) -> usize {
        m * self.chunks
    }
}
