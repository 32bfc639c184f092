//! Which kernel family runs a call, and how many key splits it uses.
//!
//! Three families: the portable tile-layer kernel ([`Family::Portable`], every target, every
//! layout and split count), the split-KV decode kernel ([`Family::Decode`], every target,
//! bf16/f16, dense and varlen, for few query rows per kv head) and the Hopper wgmma + TMA
//! kernel ([`Family::Hopper`], sm90, dense BSHD, head dims 64, 128 and 256, one pass over
//! the keys). [`family`] decides from the call ([`Problem`]) and the caller's
//! [`AttnKernel`]: `Auto` (what [`crate::flash_attn_fwd`] uses) or a pinned family
//! ([`crate::flash_attn_fwd_with`]).

use crate::table::{
    decode_rows, head_tile, HopperTile, BM, HOPPER_HEAD_DIMS, HOPPER_MAX_SEQLEN, MAX_SPLITS,
};
use flydsl_rt::{DType, Device, Target};

/// Which kernel runs a call: the dispatcher's choice or a pinned family.
///
/// ```
/// use fly_attn::AttnKernel;
/// assert_eq!(AttnKernel::default(), AttnKernel::Auto);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttnKernel {
    /// The dispatcher's choice ([`family`]).
    #[default]
    Auto,
    /// The portable tile-layer kernel, on every target.
    Portable,
    /// The Hopper wgmma + TMA kernel: sm90 (and its Sim), bf16/f16, dense BSHD, head dim
    /// 64, 128 or 256, one key split; anything else is an error.
    Hopper,
    /// The split-KV decode kernel (`kernels/decode.rs`), on every target: bf16/f16, dense
    /// or varlen, any shape (fast for few query rows per kv head: [`decode_applies`]);
    /// fp8 inputs or bases that are not 16-byte aligned are an error ([`decode_mismatch`]).
    Decode,
}

/// A kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Family {
    /// The tile-layer kernel (`kernels/fwd.rs`) with the target's native 16-bit atom, on
    /// every target; head-dim tile as given.
    Portable {
        /// The compiled head-dimension tile (`table::HEAD_TILES`).
        head_tile: usize,
    },
    /// The Hopper kernel (`kernels/wgmma.rs`: TMA K/V pipeline, SS wgmma for `Q K^T`,
    /// register-A wgmma for `P V`) on sm90, dense BSHD, one key split.
    Hopper {
        /// The head dim (one of `table::HOPPER_HEAD_DIMS`, compiled exactly).
        head_dim: usize,
    },
    /// The split-KV decode kernel (`kernels/decode.rs`): one workgroup per (row group, kv
    /// head, sequence, split), K and V streamed once per kv head and row group.
    Decode {
        /// The compiled head-dimension tile (`table::HEAD_TILES`).
        head_tile: usize,
        /// The compiled row block (`table::DECODE_ROW_BLOCKS`).
        rows: usize,
        /// Row groups per kv head (`ceil(seqlen_q * heads_q / heads_kv / rows)`).
        row_groups: usize,
    },
}

/// Whether [`AttnKernel::Auto`] takes the Hopper kernel where it applies ([`family`] says
/// when and why); flipping this constant is the whole change of the default. On since the
/// Hopper kernel passed its H200 tests and ran 2.6-7.4x faster than the portable kernel at
/// every shape of `bench/attn-h200.md`.
pub const AUTO_TAKES_HOPPER: bool = true;

/// What the dispatcher knows about one call (after the shape checks of the API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The stream's device target.
    pub target: Target,
    /// The element type of out (and of q, k and v unless `fp8`).
    pub dtype: DType,
    /// q, k and v are OCP fp8 e4m3fn with descales (out bf16:
    /// [`crate::flash_attn_fp8_fwd`]); only the portable kernel takes them.
    pub fp8: bool,
    /// Sequences.
    pub batch: usize,
    /// Queries per sequence (varlen: the longest).
    pub seqlen_q: usize,
    /// Keys per sequence (varlen: the longest).
    pub seqlen_kv: usize,
    /// Query heads.
    pub heads_q: usize,
    /// Key/value heads.
    pub heads_kv: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Packed varlen layout (else dense BSHD).
    pub varlen: bool,
    /// The key splits asked for (`num_kv_splits`, already in 1 ..= 64); `None` is automatic.
    pub splits: Option<usize>,
    /// What the automatic choice gives for the portable kernel ([`auto_splits`]).
    pub auto_splits: usize,
    /// What the automatic choice gives for the decode kernel ([`decode_auto_splits`]).
    pub decode_splits: usize,
    /// q, k and v start at 16-byte aligned device addresses (a `DeviceSlice` at an odd
    /// element offset does not), as the Hopper kernel's TMA maps and the decode kernel's
    /// 128-bit loads need.
    pub tma_aligned: bool,
}

/// Why a family does not take a call: the parts of a `validate::Call` error (the argument,
/// its value, the rule it breaks and the fix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The argument.
    pub arg: &'static str,
    /// Its value.
    pub value: String,
    /// The rule it breaks.
    pub rule: String,
    /// What to do instead.
    pub fix: String,
}

impl Mismatch {
    fn new(
        arg: &'static str,
        value: impl ToString,
        rule: impl ToString,
        fix: impl ToString,
    ) -> Mismatch {
        Mismatch {
            arg,
            value: value.to_string(),
            rule: rule.to_string(),
            fix: fix.to_string(),
        }
    }
}

const HOPPER_FIX: &str = "pass AttnKernel::Auto or AttnKernel::Portable";

/// Why the Hopper kernel does not take `p` (`None`: it does). The split count is judged
/// as asked: `num_kv_splits: None` is one pass over the keys for a pinned Hopper kernel.
///
/// ```
/// use fly_attn::dispatch::{hopper_mismatch, Problem};
/// use flydsl_rt::{DType, Target};
/// let p = Problem { target: Target::Sm90, dtype: DType::BF16, fp8: false, batch: 2,
///     seqlen_q: 100, seqlen_kv: 300, heads_q: 8, heads_kv: 2, head_dim: 128, varlen: false,
///     splits: None, auto_splits: 4, decode_splits: 4, tma_aligned: true };
/// assert_eq!(hopper_mismatch(&p), None);
/// assert_eq!(hopper_mismatch(&Problem { head_dim: 96, ..p }).unwrap().arg, "head_dim");
/// assert_eq!(hopper_mismatch(&Problem { target: Target::Gfx942, ..p }).unwrap().arg, "stream");
/// assert_eq!(hopper_mismatch(&Problem { splits: Some(2), ..p }).unwrap().arg, "num_kv_splits");
/// assert_eq!(hopper_mismatch(&Problem { fp8: true, ..p }).unwrap().arg, "q");
/// ```
pub fn hopper_mismatch(p: &Problem) -> Option<Mismatch> {
    if p.fp8 {
        return Some(Mismatch::new(
            "q",
            "fp8 e4m3fn data",
            "the Hopper kernel is 16-bit only (bf16, f16 q, k, v)",
            format_args!("{HOPPER_FIX} (the portable kernel takes fp8 inputs)"),
        ));
    }
    if p.target != Target::Sm90 {
        return Some(Mismatch::new(
            "stream",
            format_args!("a stream on a {} device", p.target),
            "AttnKernel::Hopper (wgmma + TMA) runs on sm90 only",
            format_args!("{HOPPER_FIX}, or a stream on an sm90 device (Device::sim(Target::Sm90) on the Sim)"),
        ));
    }
    if p.dtype != DType::BF16 && p.dtype != DType::F16 {
        return Some(Mismatch::new(
            "q",
            format_args!("{} data", p.dtype),
            "the Hopper kernel exists for bf16 and f16",
            "convert q, k and v to bf16 or f16",
        ));
    }
    if p.varlen {
        return Some(Mismatch::new(
            "kernel",
            "AttnKernel::Hopper with packed varlen tensors",
            "the Hopper kernel takes the dense BSHD layout only (flash_attn_fwd_with)",
            format_args!("{HOPPER_FIX} for varlen calls"),
        ));
    }
    if HopperTile::of(p.head_dim).is_none() {
        let padded = head_tile(p.head_dim)
            .map(|t| {
                format!(
                    " (the portable kernel runs head_dim {} in its {t} tile)",
                    p.head_dim
                )
            })
            .unwrap_or_default();
        return Some(Mismatch::new(
            "head_dim",
            p.head_dim,
            format_args!(
                "AttnKernel::Hopper is compiled for head_dim {HOPPER_HEAD_DIMS:?} exactly"
            ),
            format_args!("{HOPPER_FIX}{padded}, or pad the head dim with zeros to 64, 128 or 256"),
        ));
    }
    if let Some(n) = p.splits.filter(|&n| n != 1) {
        return Some(Mismatch::new(
            "num_kv_splits",
            n,
            "AttnKernel::Hopper makes one pass over the keys (no split-K)",
            format_args!("pass None or Some(1), or {HOPPER_FIX} for split-K"),
        ));
    }
    if !p.tma_aligned {
        return Some(Mismatch::new(
            "q, k, v",
            "tensors at device addresses that are not all 16-byte aligned",
            "the Hopper kernel reads q, k and v by TMA, which needs 16-byte aligned bases",
            format_args!(
                "{HOPPER_FIX}, or pass tensors (slices) starting at a multiple of 8 elements"
            ),
        ));
    }
    for (arg, v) in [("seqlen_q", p.seqlen_q), ("seqlen_kv", p.seqlen_kv)] {
        if v > HOPPER_MAX_SEQLEN {
            return Some(Mismatch::new(
                arg,
                v,
                format_args!(
                    "the Hopper kernel's row and key positions are i32: at most \
                     {HOPPER_MAX_SEQLEN} (2^31 - 2^16)"
                ),
                format_args!("{HOPPER_FIX}, or split the sequence"),
            ));
        }
    }
    // TMA global strides (one sequence of all heads, in bytes) must stay below 2^40.
    let elem = p.dtype.bytes();
    for (arg, s, h) in [
        ("seqlen_q * heads_q * head_dim", p.seqlen_q, p.heads_q),
        ("seqlen_kv * heads_kv * head_dim", p.seqlen_kv, p.heads_kv),
    ] {
        let bytes = (s as u128) * (h as u128) * (p.head_dim as u128) * elem as u128;
        if bytes >= 1 << 40 {
            return Some(Mismatch::new(
                arg,
                s.saturating_mul(h).saturating_mul(p.head_dim),
                "the Hopper kernel's TMA maps need one sequence of all heads below 2^40 bytes",
                format_args!("{HOPPER_FIX}, or split the sequences or the heads"),
            ));
        }
    }
    for (arg, v, what) in [
        ("batch", p.batch, "z (one layer per sequence)"),
        ("heads_q", p.heads_q, "y (one row per query head)"),
    ] {
        if v > 65535 {
            return Some(Mismatch::new(
                arg,
                v,
                format_args!("the Hopper kernel's grid {what} must be at most 65535"),
                format_args!("{HOPPER_FIX}, or split the call"),
            ));
        }
    }
    None
}

/// The family for a call and the number of key splits it runs with, or why the
/// requested kernel cannot take it (also for a head dim no kernel has: not a multiple of
/// 32 in 32 ..= 256).
///
/// `AttnKernel::Portable` takes every validated call, with the splits asked for (or the
/// automatic [`auto_splits`]). `AttnKernel::Decode` takes what [`decode_mismatch`] accepts,
/// with the splits asked for (or [`decode_auto_splits`]). `AttnKernel::Hopper` takes what
/// [`hopper_mismatch`] accepts, with one split (never fp8 inputs). `AttnKernel::Auto`, in
/// this order:
///
/// 1. the decode kernel where [`decode_applies`] (few query rows per kv head: the portable
///    kernel would pad its 64-row tiles and re-read K and V for every query head, the
///    Hopper kernel its 128/192-row tiles) and [`decode_mismatch`] accepts the call;
/// 2. with [`AUTO_TAKES_HOPPER`] set (it is), the Hopper kernel for every call it accepts
///    whose split count, asked for or automatic, is 1;
/// 3. the portable kernel for the rest: varlen with many rows, other head dims, fp8 inputs,
///    split-K prefill shapes, other targets.
///
/// ```
/// use fly_attn::dispatch::{family, Family, Problem, AUTO_TAKES_HOPPER};
/// use fly_attn::AttnKernel;
/// use flydsl_rt::{DType, Target};
/// let p = Problem { target: Target::Sm90, dtype: DType::F16, fp8: false, batch: 1,
///     seqlen_q: 512, seqlen_kv: 512, heads_q: 16, heads_kv: 16, head_dim: 96, varlen: false,
///     splits: None, auto_splits: 1, decode_splits: 1, tma_aligned: true };
/// let portable = Family::Portable { head_tile: 128 };
/// assert_eq!(family(&p, AttnKernel::Auto), Ok((portable, 1)));
/// assert!(family(&p, AttnKernel::Hopper).is_err()); // D = 96
/// let p = Problem { head_dim: 128, ..p };
/// let hopper = Family::Hopper { head_dim: 128 };
/// assert_eq!(family(&p, AttnKernel::Hopper), Ok((hopper, 1)));
/// assert_eq!(family(&p, AttnKernel::Portable), Ok((portable, 1)));
/// let auto = if AUTO_TAKES_HOPPER { hopper } else { portable };
/// assert_eq!(family(&p, AttnKernel::Auto), Ok((auto, 1)));
/// // fp8 inputs: the portable kernel only.
/// let f8 = Problem { fp8: true, ..p };
/// assert_eq!(family(&f8, AttnKernel::Auto), Ok((portable, 1)));
/// assert_eq!(family(&f8, AttnKernel::Hopper).unwrap_err().arg, "q");
/// // Prefill that needs key splits: Auto stays portable; a pinned Hopper kernel makes one
/// // pass.
/// let p = Problem { auto_splits: 8, ..p };
/// assert_eq!(family(&p, AttnKernel::Auto), Ok((portable, 8)));
/// assert_eq!(family(&p, AttnKernel::Hopper), Ok((hopper, 1)));
/// assert_eq!(family(&Problem { head_dim: 48, ..p }, AttnKernel::Auto).unwrap_err().arg, "head_dim");
/// // Decode: one query row of 32 query heads over 8 kv heads (4 rows per kv head).
/// let d = Problem { seqlen_q: 1, seqlen_kv: 32768, heads_q: 32, heads_kv: 8, decode_splits: 33, ..p };
/// let dec = Family::Decode { head_tile: 128, rows: 4, row_groups: 1 };
/// assert_eq!(family(&d, AttnKernel::Auto), Ok((dec, 33)));
/// assert_eq!(family(&Problem { splits: Some(3), ..d }, AttnKernel::Auto), Ok((dec, 3)));
/// assert_eq!(family(&Problem { fp8: true, ..d }, AttnKernel::Auto), Ok((portable, 8)));
/// assert_eq!(family(&Problem { fp8: true, ..d }, AttnKernel::Decode).unwrap_err().arg, "q");
/// ```
pub fn family(p: &Problem, kernel: AttnKernel) -> Result<(Family, usize), Mismatch> {
    let tile = portable_tile(p.head_dim)?;
    let portable = (
        Family::Portable { head_tile: tile },
        p.splits.unwrap_or(p.auto_splits),
    );
    let hopper = (
        Family::Hopper {
            head_dim: p.head_dim,
        },
        1,
    );
    let (rows, row_groups) = decode_rows(decode_rows_per_kv_head(p));
    let decode = (
        Family::Decode {
            head_tile: tile,
            rows,
            row_groups,
        },
        p.splits.unwrap_or(p.decode_splits),
    );
    match kernel {
        AttnKernel::Portable => Ok(portable),
        AttnKernel::Hopper => match hopper_mismatch(p) {
            None => Ok(hopper),
            Some(m) => Err(m),
        },
        AttnKernel::Decode => match decode_mismatch(p) {
            None => Ok(decode),
            Some(m) => Err(m),
        },
        AttnKernel::Auto => {
            if decode_applies(p) && decode_mismatch(p).is_none() {
                return Ok(decode);
            }
            let takes = AUTO_TAKES_HOPPER && hopper_mismatch(p).is_none() && portable.1 == 1;
            Ok(if takes { hopper } else { portable })
        }
    }
}

/// Query rows per kv head: `seqlen_q * heads_q / heads_kv` (varlen: the longest sequence).
fn decode_rows_per_kv_head(p: &Problem) -> usize {
    p.seqlen_q
        .saturating_mul(p.heads_q / p.heads_kv.max(1))
        .max(1)
}

/// The most query rows per kv head (`seqlen_q * heads_q / heads_kv`) for which
/// [`AttnKernel::Auto`] takes the decode kernel (besides every `seqlen_q = 1` call): up to
/// two row groups of 8. Each row group reads K and V once and does `2 * rows` f32 FMAs per
/// element read, which on an H200 (about 33 T FMA/s of f32 against 4 TB/s) stays
/// memory-bound up to about 8 rows; beyond 16 rows the portable kernel's matrix atoms do
/// the same work at a fraction of the issue cost. (A settled bound needs the H200 sweep:
/// `attn_bench`'s decode section with `Auto` against `Portable`.)
pub const DECODE_AUTO_ROWS: usize = 16;

/// Whether [`AttnKernel::Auto`] prefers the decode kernel for `p`: 16-bit inputs and either
/// one query per sequence (the portable kernel would pad 63 of its 64 tile rows and read K
/// and V once per query head) or at most [`DECODE_AUTO_ROWS`] query rows per kv head.
///
/// ```
/// use fly_attn::dispatch::{decode_applies, Problem};
/// use flydsl_rt::{DType, Target};
/// let p = Problem { target: Target::Gfx942, dtype: DType::BF16, fp8: false, batch: 4,
///     seqlen_q: 1, seqlen_kv: 65536, heads_q: 64, heads_kv: 8, head_dim: 64, varlen: false,
///     splits: None, auto_splits: 4, decode_splits: 16, tma_aligned: true };
/// assert!(decode_applies(&p)); // 8 rows per kv head
/// assert!(decode_applies(&Problem { seqlen_q: 2, ..p })); // 16
/// assert!(!decode_applies(&Problem { seqlen_q: 3, ..p })); // 24
/// assert!(decode_applies(&Problem { heads_kv: 1, ..p })); // one query: always
/// assert!(!decode_applies(&Problem { fp8: true, ..p }));
/// ```
pub fn decode_applies(p: &Problem) -> bool {
    !p.fp8 && (p.seqlen_q == 1 || decode_rows_per_kv_head(p) <= DECODE_AUTO_ROWS)
}

const DECODE_FIX: &str = "pass AttnKernel::Auto or AttnKernel::Portable";

/// Longest key sequence and most query rows per kv head the decode kernel takes: its key
/// positions (up to one unrolled step of at most 256 keys past the split) and row indices
/// (up to one row block past the rows) are i32.
pub const DECODE_MAX_INDEX: usize = (1 << 31) - (1 << 10);

/// Why the decode kernel does not take `p` (`None`: it does, whatever the row count).
///
/// ```
/// use fly_attn::dispatch::{decode_mismatch, Problem};
/// use flydsl_rt::{DType, Target};
/// let p = Problem { target: Target::Gfx1201, dtype: DType::F16, fp8: false, batch: 2,
///     seqlen_q: 1, seqlen_kv: 300, heads_q: 8, heads_kv: 1, head_dim: 96, varlen: true,
///     splits: None, auto_splits: 4, decode_splits: 1, tma_aligned: true };
/// assert_eq!(decode_mismatch(&p), None);
/// assert_eq!(decode_mismatch(&Problem { fp8: true, ..p }).unwrap().arg, "q");
/// assert_eq!(decode_mismatch(&Problem { tma_aligned: false, ..p }).unwrap().arg, "q, k, v");
/// assert_eq!(decode_mismatch(&Problem { heads_kv: 70000, heads_q: 70000, ..p }).unwrap().arg, "heads_kv");
/// assert_eq!(decode_mismatch(&Problem { seqlen_kv: 1 << 31, ..p }).unwrap().arg, "seqlen_kv");
/// ```
pub fn decode_mismatch(p: &Problem) -> Option<Mismatch> {
    if p.fp8 {
        return Some(Mismatch::new(
            "q",
            "fp8 e4m3fn data",
            "the decode kernel is 16-bit only (bf16, f16 q, k, v)",
            format_args!("{DECODE_FIX} (the portable kernel takes fp8 inputs)"),
        ));
    }
    if p.dtype != DType::BF16 && p.dtype != DType::F16 {
        return Some(Mismatch::new(
            "q",
            format_args!("{} data", p.dtype),
            "the decode kernel exists for bf16 and f16",
            "convert q, k and v to bf16 or f16",
        ));
    }
    if !p.tma_aligned {
        return Some(Mismatch::new(
            "q, k, v",
            "tensors at device addresses that are not all 16-byte aligned",
            "the decode kernel reads q, k and v with 128-bit loads",
            format_args!(
                "{DECODE_FIX}, or pass tensors (slices) starting at a multiple of 8 elements"
            ),
        ));
    }
    for (arg, v, what) in [
        ("heads_kv", p.heads_kv, "y (one row per kv head)"),
        ("batch", p.batch, "z (one layer per sequence)"),
    ] {
        if v > 65535 {
            return Some(Mismatch::new(
                arg,
                v,
                format_args!("the decode kernel's grid {what} must be at most 65535"),
                format_args!("{DECODE_FIX}, or split the call"),
            ));
        }
    }
    // Key positions run up to one unrolled step (at most 256 keys) past the sequence, and
    // row indices up to a row block past the rows: both i32 in the kernel.
    for (arg, v) in [
        ("seqlen_kv", p.seqlen_kv),
        ("seqlen_q * heads_q / heads_kv", decode_rows_per_kv_head(p)),
    ] {
        if v > DECODE_MAX_INDEX {
            return Some(Mismatch::new(
                arg,
                v,
                format_args!(
                    "the decode kernel's key and row positions are i32: at most \
                     {DECODE_MAX_INDEX} (2^31 - 2^10)"
                ),
                format_args!("{DECODE_FIX}, or split the call"),
            ));
        }
    }
    let (_, groups) = decode_rows(decode_rows_per_kv_head(p));
    let x = groups.saturating_mul(p.splits.unwrap_or(p.decode_splits));
    if x > i32::MAX as usize {
        return Some(Mismatch::new(
            "seqlen_q * heads_q / heads_kv",
            decode_rows_per_kv_head(p),
            "the decode kernel's grid x (row groups of 8 times key splits) must stay below 2^31",
            format_args!("{DECODE_FIX}"),
        ));
    }
    None
}

/// Keys a decode split keeps at least (a split is one workgroup's pass; shorter ones cost
/// more in the combine and launch than they gain in parallelism).
pub const DECODE_MIN_SPLIT_KEYS: usize = 256;

/// The decode kernel's automatic number of key splits: 1 when `batch * heads_kv *
/// row_groups` workgroups already give every compute unit four, else enough splits for
/// four per compute unit (several workgroups per CU keep enough 128-bit loads in flight
/// to cover the memory latency), each keeping at least [`DECODE_MIN_SPLIT_KEYS`] keys, at
/// most `MAX_SPLITS`.
///
/// ```
/// use fly_attn::dispatch::decode_auto_splits;
/// // B = 1, 8 kv heads, 32k keys on a 132-SM H200: 64 splits of 512 keys.
/// assert_eq!(decode_auto_splits(132, 1, 8, 1, 32768), 64);
/// // B = 8: 9 splits.
/// assert_eq!(decode_auto_splits(132, 8, 8, 1, 8192), 9);
/// // Short sequences never split below 256 keys.
/// assert_eq!(decode_auto_splits(132, 1, 1, 1, 300), 1);
/// ```
pub fn decode_auto_splits(
    compute_units: u32,
    batch: usize,
    heads_kv: usize,
    row_groups: usize,
    max_seqlen_kv: usize,
) -> usize {
    let blocks = batch.saturating_mul(heads_kv).saturating_mul(row_groups);
    let want = 4 * compute_units.max(1) as usize;
    if blocks == 0 || blocks >= want {
        return 1;
    }
    let by_fill = want.div_ceil(blocks);
    let by_keys = (max_seqlen_kv / DECODE_MIN_SPLIT_KEYS).max(1);
    by_fill.min(by_keys).clamp(1, MAX_SPLITS)
}

/// [`decode_auto_splits`] for a device and a call's shape.
pub(crate) fn decode_splits_on(
    dev: &Device,
    batch: usize,
    heads_q: usize,
    heads_kv: usize,
    sq: usize,
    skv: usize,
) -> usize {
    let rows = sq.saturating_mul(heads_q / heads_kv.max(1)).max(1);
    decode_auto_splits(
        dev.compute_units(),
        batch,
        heads_kv,
        decode_rows(rows).1,
        skv,
    )
}

/// The portable head tile of `d`, or the error of a head dim no kernel has.
pub(crate) fn portable_tile(d: usize) -> Result<usize, Mismatch> {
    head_tile(d).ok_or_else(|| {
        Mismatch::new(
            "head_dim",
            d,
            "head_dim must be a multiple of 32 in 32 ..= 256",
            "pad the head dimension with zeros up to the next multiple of 32",
        )
    })
}

/// The automatic number of key splits: 1 when `batch * heads_q * q tiles` workgroups fill
/// the device (at least two per compute unit), else enough splits to fill it, each keeping
/// at least two key tiles of 32 (`max_seqlen_kv / 64`), at most `MAX_SPLITS`.
///
/// ```
/// use fly_attn::dispatch::auto_splits;
/// // Decode: 1 query, 16k keys, 8 heads on a 132-CU device: split.
/// assert!(auto_splits(132, 1, 8, 1, 16384) > 1);
/// // Prefill fills the device: no split.
/// assert_eq!(auto_splits(132, 16, 16, 4096, 4096), 1);
/// ```
pub fn auto_splits(
    compute_units: u32,
    batch: usize,
    heads_q: usize,
    max_seqlen_q: usize,
    max_seqlen_kv: usize,
) -> usize {
    let blocks = batch
        .saturating_mul(heads_q)
        .saturating_mul(max_seqlen_q.div_ceil(BM));
    let want = 2 * compute_units.max(1) as usize;
    if blocks == 0 || blocks >= want {
        return 1;
    }
    let by_fill = want.div_ceil(blocks);
    let by_keys = (max_seqlen_kv / 64).max(1);
    by_fill.min(by_keys).clamp(1, MAX_SPLITS)
}

/// [`auto_splits`] for a device.
pub(crate) fn auto_splits_on(
    dev: &Device,
    batch: usize,
    heads_q: usize,
    sq: usize,
    skv: usize,
) -> usize {
    auto_splits(dev.compute_units(), batch, heads_q, sq, skv)
}
