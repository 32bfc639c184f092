//! Split rows ([`Path::Split`], kernels in `kernels/split.rs`): when the dispatcher splits a
//! call's rows, how each row is cut into chunks, and the workspace the two kernels share.
//!
//! The workspace is allocated by the call itself (as fly-attn's split-K does): `2 * m *
//! chunks` f32 forward, `m * chunks` backward, at most [`MAX_CHUNKS`] chunks a row and only
//! for `m` below [`SPLIT_ROWS_PER_CU`] rows per compute unit (a few hundred KiB at most on
//! the dispatcher's path). It is released when the call returns; the runtime orders the free
//! after the launches that use it (`flydsl_rt`'s residency tracking).

use crate::plan::{path_for, Variant, MAX_GRID};
use crate::table::{Kind, Path, CONFIGS, SPLIT_UNROLL};
use flydsl_rt::{Device, Element};

/// The dispatcher splits rows when there are fewer than this many rows per compute unit
/// (`m < 2 * compute units`: 264 rows on the H200) and a row holds at least two chunks of
/// [`MIN_CHUNK`]. Below it, one block per row leaves most of the device idle: a row-looping
/// block keeps one 128-bit load in flight per thread, and on the H200 such shapes reached
/// 31-62% of copy bandwidth.
///
/// ```
/// assert_eq!(fly_softmax::split::SPLIT_ROWS_PER_CU, 2);
/// ```
pub const SPLIT_ROWS_PER_CU: usize = 2;

/// Blocks a split launch aims for per compute unit (eight 256-thread blocks: a full H200 SM).
pub const SPLIT_BLOCKS_PER_CU: usize = 8;

/// The shortest chunk, in elements (one loop step of a 256-thread block of 128-bit bf16
/// accesses: [`SPLIT_UNROLL`] strides): shorter chunks spend more on the per-chunk statistics
/// than they gain.
pub const MIN_CHUNK: usize = 8192;

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

/// The split configuration of `kind` (the default one).
///
/// ```
/// use fly_softmax::{split::split_variant, table::{Kind, Path}};
/// assert_eq!(split_variant(Kind::Backward).config.path, Path::Split);
/// ```
pub fn split_variant(kind: Kind) -> Variant {
    CONFIGS
        .iter()
        .enumerate()
        .find(|(_, c)| c.kind == kind && c.path == Path::Split && c.default)
        .map(|(index, config)| Variant { index, config })
        .expect("the table has a default split configuration per kind")
}

/// Whether `m` rows are few enough on `device` to split ([`SPLIT_ROWS_PER_CU`]) and rows of
/// `n` long enough to make two chunks.
///
/// ```
/// use fly_softmax::split::few_long_rows;
/// use flydsl_rt::{Device, Target};
/// let h200 = Device::sim(Target::Sm90); // 132 compute units
/// assert!(few_long_rows(&h200, 263, 16384) && !few_long_rows(&h200, 264, 16384));
/// assert!(!few_long_rows(&h200, 1, 16383));
/// ```
pub fn few_long_rows(device: &Device, m: usize, n: usize) -> bool {
    m < SPLIT_ROWS_PER_CU * device.compute_units().max(1) as usize && n >= 2 * MIN_CHUNK
}

/// Whether the split configuration is the dispatcher's default for `m` rows of `n` elements
/// of `T` on `device`: rows too long for registers (the looped paths, which also read the
/// input twice, so splitting costs no extra traffic) and [`few_long_rows`]. For few rows that
/// fit in registers splitting trades the resident path's single read for parallelism, which
/// needs a measurement: there it is only a tuner candidate.
///
/// ```
/// use fly_softmax::{split::split_by_default, table::Kind};
/// use flydsl_rt::{Device, Target};
/// let h200 = Device::sim(Target::Sm90);
/// assert!(split_by_default::<half::bf16>(Kind::Forward, &h200, 4, 150_001));
/// assert!(!split_by_default::<half::bf16>(Kind::Forward, &h200, 4, 32_768));
/// assert!(!split_by_default::<half::bf16>(Kind::Forward, &h200, 4096, 150_001));
/// ```
pub fn split_by_default<T: Element>(kind: Kind, device: &Device, m: usize, n: usize) -> bool {
    path_for::<T>(kind, n).is_loop() && few_long_rows(device, m, n)
}
