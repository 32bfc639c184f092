//! Property tests (issue 12, item 9) of every public function of fly-attn on the Sim of a
//! wave64 (gfx942) and two wave32 (gfx1201, sm_90) targets: `flash_attn_fwd`,
//! `flash_attn_fwd_unchecked`, `flash_attn_varlen_fwd` and `flash_attn_varlen_fwd_unchecked`
//! (offsets from the host or a device buffer, for q and kv independently), and
//! `flash_attn_array` (views in row-major, column-major, permuted and strided memory), and the
//! fp8 entries `flash_attn_fp8_fwd` / `_with` (dense; inputs quantized per tensor, descales of
//! the wrong length or on another device among the mistakes, the fp8 tolerances); with and
//! without the LSE, causal or not, MHA / GQA / MQA, the default or an explicit softmax scale,
//! automatic or explicit key splits (1 ..= 64); and the dispatch helpers
//! `dispatch::auto_splits`, `dispatch::family`, `table::head_tile`.
//!
//! Generated: shapes (batch 0 ..= 3; sequence lengths 0 where legal, 1, odd, both sides of the
//! 64-query and 32-key tiles, up to 130; Sq != Skv both ways, causal with Sq > Skv, zero-length
//! varlen sequences, `max_seqlen_*` above the longest sequence; head dims 64 and the other
//! multiples of 32 up to 256), dtypes (bf16, f16, and f32, which has no kernel), argument
//! mistakes (a wrong length or another device for any one buffer, head counts with
//! `heads_q % heads_kv != 0` or 0, head dims that are not a multiple of 32 in 32 ..= 256, a
//! scale that is 0, negative or not finite, splits of 0 or past 64, shapes past `MAX_ROWS` and
//! the i32 bounds, offsets that do not start at 0, decrease, end elsewhere than at the tensors'
//! rows or exceed `max_seqlen_*`, offset arrays of different lengths or too short, arrays whose
//! batch, head dim or k / v shapes disagree) and value distributions (q and k normal at scales
//! 2^-6 ..= 2^2, logits ramping up along the keys, one dominant key; v normal at scales
//! 2^-10 ..= 2^10 (2^-30 ..= 2^30 for bf16)). The `_unchecked` entries get buffers and device
//! offsets that are valid (their contract), with the mistakes they still check.
//!
//! Asserted: no panic; an error (naming the function called) exactly when the arguments are
//! invalid per the docs; on error every output bit-identical to its sentinel; otherwise every
//! element of out and the LSE written (they start as signalling-NaN sentinels), out within the
//! testutil attention tolerances (`check_out_rounded`: max abs error beyond the output's own
//! rounding, and per-row cosine; after dividing out v's power-of-two scale, which every step
//! of the computation commutes with) of the f64 reference, rows that see no key exactly zero with LSE `-inf`, and the LSE within
//! `lse_atol`.
//!
//! Seed and case count: printed at the start of each test; `FUZZ_SEED`, `FUZZ_CASES`.

mod fuzz_common;

use fly_attn::{AttnArgs, AttnOptions, CuSeqlens, VarlenArgs, MAX_ROWS};
use fly_gemm::QuantElement;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::F8E4M3FN;
use flydsl_rt::{Device, DeviceBuffer, DeviceRepr};
use flydsl_testutil::attn::{
    attn_ref, check_out, check_out_rounded, lse_atol, lse_err, AttnShape, FP8_MIN_COSINE,
    FP8_OUT_ATOL,
};
use flydsl_testutil::rng::Rng;
use fuzz_common::*;
use proptest::prelude::*;
use proptest::sample::select;

/// Most `heads_q * seqlen_q * seqlen_kv * head_dim` of one case (summed over the sequences):
/// the Sim runs about 4 * 10^7 of them a second (the largest case takes about 0.1 s).
const WORK: usize = 1_500_000;

// ---- shapes and options --------------------------------------------------------------------

/// A sequence length: 1, odd, both sides of the 64-query and 32-key tiles, or anything up to
/// 130 (0 comes from the callers).
fn len_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => select(vec![1usize, 2, 17, 31, 32, 33, 63, 64, 65, 97, 127, 128, 129]),
        2 => 1usize..=130,
    ]
}

/// Valid `(heads_q, heads_kv)`: MHA, GQA, MQA.
const HEADS: [(usize, usize); 8] = [
    (1, 1),
    (2, 1),
    (2, 2),
    (3, 1),
    (3, 3),
    (4, 1),
    (4, 2),
    (6, 2),
];
/// Invalid ones: `heads_q % heads_kv != 0`, or a zero.
const BAD_HEADS: [(usize, usize); 5] = [(4, 3), (2, 4), (0, 1), (1, 0), (0, 0)];

fn head_dim_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![12 => Just(64usize), 3 => select(vec![32usize, 96, 128]), 1 => select(vec![160usize, 256])]
}

fn scale_strategy() -> impl Strategy<Value = Option<f32>> {
    prop_oneof![3 => Just(None), 2 => select(vec![0.05f32, 0.125, 0.5, 2.0]).prop_map(Some)]
}

fn splits_strategy() -> impl Strategy<Value = Option<usize>> {
    prop_oneof![
        2 => Just(None),
        2 => Just(Some(1usize)),
        2 => (2usize..=5).prop_map(Some),
        1 => (6usize..=64).prop_map(Some),
    ]
}

/// How q and k are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
enum QkDist {
    /// `2^log2 * N(0, 1)`.
    Normal { log2: i8 },
    /// Normal (scale 2) with k's rows scaled from -1 to 3 along the keys: the running max
    /// grows tile by tile over a range of hundreds.
    Ramp,
    /// Normal with one key per 64 scaled by 8: one dominant logit.
    Spike,
}

fn qk_strategy() -> impl Strategy<Value = QkDist> {
    prop_oneof![
        6 => select(vec![-6i8, -2, 0, 0, 1, 2]).prop_map(|log2| QkDist::Normal { log2 }),
        1 => Just(QkDist::Ramp),
        1 => Just(QkDist::Spike),
    ]
}

/// An argument mistake (applied to a buffer only when the call uses it).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mistake {
    None,
    /// Buffer `slot` one element longer or shorter.
    Len {
        slot: u8,
        longer: bool,
    },
    /// Buffer `slot` on another device.
    Device {
        slot: u8,
    },
    /// Head counts from [`BAD_HEADS`].
    Heads(u8),
    /// A head dim that is not a multiple of 32 in 32 ..= 256.
    HeadDim(usize),
    /// A softmax scale that is 0, negative or not finite.
    Scale(f32),
    /// Splits outside 1 ..= 64.
    Splits(usize),
    /// Dense: batch (0), seqlen_q (1), seqlen_kv (2), heads_q (3) of the arguments replaced
    /// by `value`; varlen: max_seqlen_q (0, 1), max_seqlen_kv (2), heads_q (3). Buffers for
    /// the real shape.
    Huge {
        what: u8,
        value: usize,
    },
    /// Varlen offsets of q (`kv` false) or kv: 0 not starting at 0, 1 decreasing, 2 ending
    /// past the tensor's rows, 3 a sequence longer than `max_seqlen_*`, 4 one more offset than
    /// the other array, 5 a single offset each, 6 a negative offset.
    Cu {
        kind: u8,
        kv: bool,
    },
    /// f32 data (no kernel).
    F32,
    /// `flash_attn_array`: v's shape differs from k's (0), k's batch (1) or head dim (2) from
    /// q's.
    ArrayShape(u8),
}

// Buffer slots.
const Q: u8 = 0;
const K: u8 = 1;
const V: u8 = 2;
const OUT: u8 = 3;
const LSE: u8 = 4;
const CUQ: u8 = 5;
const CUKV: u8 = 6;

fn mistake_strategy(varlen: bool) -> impl Strategy<Value = Mistake> {
    let slots = if varlen { 7u8 } else { 5 };
    prop_oneof![
        14 => Just(Mistake::None),
        2 => (0..slots.min(5), any::<bool>()).prop_map(|(slot, longer)| Mistake::Len { slot, longer }),
        2 => (0..slots).prop_map(|slot| Mistake::Device { slot }),
        1 => (0..BAD_HEADS.len() as u8).prop_map(Mistake::Heads),
        1 => select(vec![0usize, 16, 33, 48, 80, 288, 320]).prop_map(Mistake::HeadDim),
        1 => select(vec![0.0f32, -0.0, -1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY])
            .prop_map(Mistake::Scale),
        1 => select(vec![0usize, 65, 1000]).prop_map(Mistake::Splits),
        1 => (
            0u8..4,
            select(vec![MAX_ROWS + 1, i32::MAX as usize, 1usize << 40, usize::MAX])
        )
            .prop_map(|(what, value)| Mistake::Huge { what, value }),
        4 => (0u8..7, any::<bool>()).prop_map(|(kind, kv)| Mistake::Cu { kind, kv }),
        1 => Just(Mistake::F32),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry {
    /// `flash_attn_fwd`.
    Dense,
    /// `flash_attn_fwd_unchecked`.
    DenseUnchecked,
    /// `flash_attn_array`, inputs in memory order 0 (row-major), 1 (column-major), 2 (a
    /// permuted [b, h, s, d] array), 3 (every other element of a wider array).
    Array { order: u8 },
    /// `flash_attn_varlen_fwd` with device (true) or host offsets for q and kv.
    Varlen { q_dev: bool, kv_dev: bool },
    /// `flash_attn_varlen_fwd_unchecked`.
    VarlenUnchecked { q_dev: bool, kv_dev: bool },
}

impl Entry {
    fn op(self) -> &'static str {
        match self {
            Entry::Dense => "fly_attn::flash_attn_fwd",
            Entry::DenseUnchecked => "fly_attn::flash_attn_fwd_unchecked",
            Entry::Array { .. } => "fly_attn::flash_attn_array",
            Entry::Varlen { .. } => "fly_attn::flash_attn_varlen_fwd",
            Entry::VarlenUnchecked { .. } => "fly_attn::flash_attn_varlen_fwd_unchecked",
        }
    }
    fn varlen(self) -> bool {
        matches!(self, Entry::Varlen { .. } | Entry::VarlenUnchecked { .. })
    }
    fn unchecked(self) -> bool {
        matches!(self, Entry::DenseUnchecked | Entry::VarlenUnchecked { .. })
    }
}

#[derive(Clone, Debug)]
struct Case {
    target: usize,
    /// 0 bf16, 1 f16.
    dt: u8,
    entry: Entry,
    lse: bool,
    causal: bool,
    /// Dense: `batch` copies of `dense`; varlen: one `(seqlen_q, seqlen_kv)` per sequence.
    lens: Vec<(usize, usize)>,
    /// Dense: `(seqlen_q, seqlen_kv)` (kept for batch 0).
    dense: (usize, usize),
    heads: (usize, usize),
    head_dim: usize,
    scale: Option<f32>,
    splits: Option<usize>,
    /// Varlen: `max_seqlen_*` minus the longest sequence.
    slack: (usize, usize),
    qk: QkDist,
    /// v's scale: `2^v_log2`.
    v_log2: i8,
    mistake: Mistake,
    seed: u64,
}

impl Case {
    fn batch(&self) -> usize {
        self.lens.len()
    }
    fn heads(&self) -> (usize, usize) {
        match self.mistake {
            Mistake::Heads(i) => BAD_HEADS[i as usize],
            _ => self.heads,
        }
    }
    fn head_dim(&self) -> usize {
        match self.mistake {
            Mistake::HeadDim(d) => d,
            _ => self.head_dim,
        }
    }
    fn scale(&self) -> Option<f32> {
        match self.mistake {
            Mistake::Scale(s) => Some(s),
            _ => self.scale,
        }
    }
    fn splits(&self) -> Option<usize> {
        match self.mistake {
            Mistake::Splits(n) => Some(n),
            _ => self.splits,
        }
    }
    /// The work of the case (see [`WORK`]).
    fn work(&self) -> usize {
        self.lens
            .iter()
            .map(|&(q, k)| q * k.max(1) * self.heads.0 * self.head_dim)
            .sum()
    }
}

fn strategy(varlen: bool) -> impl Strategy<Value = Case> {
    let entry = if varlen {
        prop_oneof![
            3 => (any::<bool>(), any::<bool>()).prop_map(|(q_dev, kv_dev)| Entry::Varlen { q_dev, kv_dev }),
            1 => (any::<bool>(), any::<bool>()).prop_map(|(q_dev, kv_dev)| Entry::VarlenUnchecked { q_dev, kv_dev }),
        ]
        .boxed()
    } else {
        prop_oneof![
            4 => Just(Entry::Dense),
            1 => Just(Entry::DenseUnchecked),
            2 => (0u8..4).prop_map(|order| Entry::Array { order }),
        ]
        .boxed()
    };
    let kind = (
        0..TARGETS.len(),
        0u8..2,
        entry,
        prop_oneof![3 => Just(true), 1 => Just(false)],
        any::<bool>(),
    );
    // Dense: batch 0 ..= 3 of one (sq, skv), sq = 0 sometimes, causal Sq > Skv often enough;
    // varlen: 1 ..= 4 sequences with zero lengths mixed in.
    let seq = prop_oneof![3 => len_strategy(), 1 => Just(0usize)];
    let lens = if varlen {
        proptest::collection::vec((seq.clone(), seq), 1..=4)
            .prop_map(|v| (v, (0, 0)))
            .boxed()
    } else {
        (
            prop_oneof![1 => Just(0usize), 4 => Just(1usize), 3 => 2usize..=3],
            prop_oneof![6 => len_strategy(), 1 => Just(0usize)],
            prop_oneof![9 => len_strategy(), 1 => Just(0usize)],
        )
            .prop_map(|(b, q, k)| (vec![(q, k); b], (q, k)))
            .boxed()
    };
    let opts = (
        lens,
        0..HEADS.len(),
        head_dim_strategy(),
        scale_strategy(),
        splits_strategy(),
        (
            prop_oneof![3 => Just(0usize), 1 => Just(1usize), 1 => Just(40usize)],
            prop_oneof![3 => Just(0usize), 1 => Just(1usize), 1 => Just(40usize)],
        ),
    );
    let values = (
        qk_strategy(),
        -10i8..=10,
        mistake_strategy(varlen),
        any::<u64>(),
    );
    (kind, opts, values).prop_map(
        |(
            (target, dt, entry, lse, causal),
            ((lens, dense), heads, head_dim, scale, splits, slack),
            (qk, v_log2, mistake, seed),
        )| {
            let mut c = Case {
                dense,
                target,
                dt,
                entry,
                lse,
                causal,
                lens,
                heads: HEADS[heads],
                head_dim,
                scale,
                splits,
                slack,
                qk,
                v_log2: if dt == 0 { v_log2 * 3 } else { v_log2 },
                mistake,
                seed,
            };
            // Fit the work: fewer heads, then shorter sequences.
            while c.work() > WORK && c.heads.0 > 1 {
                c.heads = (1, 1);
            }
            while c.work() > WORK {
                for l in c.lens.iter_mut().chain(std::iter::once(&mut c.dense)) {
                    *l = (l.0 * 3 / 4, l.1 * 3 / 4);
                }
            }
            normalise(&mut c);
            c
        },
    )
}

/// Restrict the mistake to what the entry can take: the `_unchecked` entries only get
/// mistakes they still check, with buffers and device offsets that are valid; the array
/// entry only mistakes expressible with arrays.
fn normalise(c: &mut Case) {
    let host_side = |kv: bool, e: Entry| match e {
        Entry::VarlenUnchecked { q_dev, kv_dev } => !(if kv { kv_dev } else { q_dev }),
        _ => true,
    };
    c.mistake = match (c.entry, c.mistake) {
        (e, Mistake::Cu { .. }) if !e.varlen() => Mistake::None,
        (Entry::Array { .. }, Mistake::Len { slot, .. } | Mistake::Device { slot }) => {
            Mistake::ArrayShape(slot % 3)
        }
        (Entry::Array { .. }, Mistake::Huge { .. } | Mistake::F32) => Mistake::None,
        (e, Mistake::Len { .. } | Mistake::Huge { .. } | Mistake::F32) if e.unchecked() => {
            Mistake::None
        }
        (e, Mistake::Device { slot }) if e.unchecked() && slot < CUQ => Mistake::None,
        // Host offsets are validated by the unchecked entry except for their end; the
        // offset-array lengths always.
        (e, Mistake::Cu { kind, kv }) if e.unchecked() => {
            if matches!(kind, 4 | 5) || (matches!(kind, 0 | 3 | 6) && host_side(kv, e)) {
                Mistake::Cu { kind, kv }
            } else {
                Mistake::None
            }
        }
        (_, m) => m,
    };
    // Device offsets on another device need device offsets.
    if let (Mistake::Device { slot }, Entry::Varlen { q_dev, kv_dev })
    | (Mistake::Device { slot }, Entry::VarlenUnchecked { q_dev, kv_dev }) = (c.mistake, c.entry)
    {
        if (slot == CUQ && !q_dev) || (slot == CUKV && !kv_dev) {
            c.mistake = Mistake::None;
        }
    }
}

// ---- validity (the documented rules) ---------------------------------------------------------

/// The checks every entry shares: head counts, head dim, scale, splits.
fn options_invalid(c: &Case) -> Option<String> {
    let (hq, hkv) = c.heads();
    let d = c.head_dim();
    if hq == 0 || hkv == 0 || hq % hkv != 0 {
        Some(format!("heads {hq}, {hkv}"))
    } else if d == 0 || !d.is_multiple_of(32) || d > 256 {
        Some(format!("head_dim {d}"))
    } else if c.scale().is_some_and(|s| !(s.is_finite() && s > 0.0)) {
        Some(format!("scale {:?}", c.scale()))
    } else if c.splits().is_some_and(|n| !(1..=64).contains(&n)) {
        Some(format!("splits {:?}", c.splits()))
    } else {
        None
    }
}

/// Whether the mistake makes buffer `slot` wrong.
fn hits(m: Mistake, slot: u8) -> bool {
    matches!(m, Mistake::Len { slot: s, .. } | Mistake::Device { slot: s } if s == slot)
}

/// Offsets as documented: at least 2, starting at 0, non-decreasing, no sequence longer than
/// `max_len`, and (`rows`) ending at the tensor's row count.
fn cu_invalid(cu: &[i32], rows: Option<usize>, max_len: usize) -> Option<String> {
    if cu.len() < 2 {
        return Some("fewer than 2 offsets".into());
    }
    if cu[0] != 0 {
        return Some("offsets not starting at 0".into());
    }
    for w in cu.windows(2) {
        if w[1] < w[0] {
            return Some("decreasing offsets".into());
        }
        if (w[1] - w[0]) as usize > max_len {
            return Some("a sequence longer than max_seqlen".into());
        }
    }
    match rows {
        Some(r) if cu[cu.len() - 1] as usize != r => Some("offsets not ending at the rows".into()),
        _ => None,
    }
}

// ---- values and buffers ---------------------------------------------------------------------

/// The packed tensors of a case (dense: BSHD, which is the packed layout of equal lengths).
struct Inputs<T> {
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    /// The reference's shape (the real one, before any mistake).
    shape: AttnShape,
}

fn inputs<T: Elem>(c: &Case, rng: &mut Rng) -> Inputs<T> {
    let (hq, hkv) = c.heads();
    let d = c.head_dim();
    let (lq, lk): (Vec<usize>, Vec<usize>) = c.lens.iter().copied().unzip();
    let mut shape = if c.entry.varlen() {
        AttnShape::varlen(&lq, &lk, hq.max(1), hkv.max(1), d, c.causal)
    } else {
        let (sq, skv) = c.dense;
        AttnShape::dense(c.batch(), sq, skv, hq.max(1), hkv.max(1), d, c.causal)
    };
    // The kernel's scale, in f32.
    let scale = c.scale().unwrap_or(1.0 / (d.max(1) as f32).sqrt());
    shape.scale = Some(f64::from(scale));
    let (tq, tkv) = (lq.iter().sum::<usize>(), lk.iter().sum::<usize>());
    let (rq, rkv) = if c.entry.varlen() {
        (tq, tkv)
    } else {
        (shape.total_q(), shape.total_kv())
    };
    let qk_scale = match c.qk {
        QkDist::Normal { log2 } => 2f64.powi(log2.into()),
        _ => 2.0,
    };
    let mut gen = |rows: usize, heads: usize, key: bool| -> Vec<T> {
        let mut out = Vec::with_capacity(rows * heads * d);
        let spike = rng.next_u64() as usize % 64;
        for r in 0..rows {
            let f = match (c.qk, key) {
                (QkDist::Ramp, true) => (r % 64) as f64 / 16.0 - 1.0,
                (QkDist::Spike, true) if r % 64 == spike => 8.0,
                _ => 1.0,
            };
            for _ in 0..heads * d {
                out.push(T::from_f64(rng.normal() * qk_scale * f));
            }
        }
        out
    };
    let q = gen(rq, hq, false);
    let k = gen(rkv, hkv, true);
    let vs = 2f64.powi(c.v_log2.into());
    let v = (0..rkv * hkv * d)
        .map(|_| T::from_f64(rng.normal() * vs))
        .collect();
    Inputs { q, k, v, shape }
}

/// Where a case's mistake puts buffer `slot` and how long it makes it.
struct Place<'a> {
    mistake: Mistake,
    dev: &'a Device,
    other: &'a Device,
}

impl Place<'_> {
    fn len(&self, slot: u8, len: usize) -> usize {
        match self.mistake {
            Mistake::Len { slot: s, longer } if s == slot => {
                if longer || len == 0 {
                    len + 1
                } else {
                    len - 1
                }
            }
            _ => len,
        }
    }
    fn dev(&self, slot: u8) -> &Device {
        match self.mistake {
            Mistake::Device { slot: s } if s == slot => self.other,
            _ => self.dev,
        }
    }
    fn input<T: DeviceRepr + Copy + Default>(&self, slot: u8, v: &[T]) -> DeviceBuffer<T> {
        let mut v = v.to_vec();
        v.resize(self.len(slot, v.len()), T::default());
        up(self.dev(slot), &v)
    }
    fn output<T: DeviceRepr + Float>(&self, slot: u8, len: usize) -> Out<T> {
        Out::nan(self.dev(slot), self.len(slot, len), 0xA77 + u32::from(slot))
    }
}

// ---- comparison ---------------------------------------------------------------------------

/// Compare out (and the LSE) of a successful call with the reference: out after dividing out
/// v's scale, rows that see no key exactly zero.
fn compare<T: Elem>(
    c: &Case,
    inp: &Inputs<T>,
    out: &[T],
    lse: Option<&[f32]>,
) -> Result<(), String> {
    let qkv = [wide(&inp.q), wide(&inp.k), wide(&inp.v)];
    compare_with(c, &inp.shape, &qkv, &wide(out), lse, T::NAME, false)
}

/// [`compare`] on f64 q, k, v (what the kernel computes with: fp8 dequantized) and out of
/// dtype `name`; `fp8` takes the fp8 tolerances (`FP8_OUT_ATOL`, `FP8_MIN_COSINE`).
fn compare_with(
    c: &Case,
    s: &AttnShape,
    [q, k, v]: &[Vec<f64>; 3],
    out: &[f64],
    lse: Option<&[f32]>,
    name: &str,
    fp8: bool,
) -> Result<(), String> {
    let want = attn_ref(s, q, k, v);
    let vs = 2f64.powi(c.v_log2.into());
    let got: Vec<f64> = out.iter().map(|x| x / vs).collect();
    let want_out: Vec<f64> = want.out.iter().map(|x| x / vs).collect();
    if got.len() != want_out.len() {
        return Err(format!(
            "out: {} elements, want {}",
            got.len(),
            want_out.len()
        ));
    }
    let r = if fp8 {
        check_out(&got, &want_out, s.head_dim)
    } else {
        check_out_rounded(name, &got, &want_out, s.head_dim)
    };
    let pass = if fp8 {
        r.pass_with(FP8_OUT_ATOL, FP8_MIN_COSINE)
    } else {
        r.pass()
    };
    if !pass {
        return Err(format!(
            "out: max abs err {:.3e} beyond the output's rounding at {} (got {:e}, want {:e}), \
             min row cosine {:.5} at row {}, {} non-finite",
            r.max_abs,
            r.max_at,
            got.get(r.max_at).copied().unwrap_or(f64::NAN),
            want_out.get(r.max_at).copied().unwrap_or(f64::NAN),
            r.min_cos,
            r.min_row,
            r.non_finite
        ));
    }
    // Rows that see no key: exactly zero (the reference's LSE is -inf there).
    let d = s.head_dim;
    for b in 0..s.batch {
        let (q0, sq, _, skv) = s.seq(b);
        for h in 0..s.heads_q {
            for i in 0..sq {
                if (0..skv).any(|j| s.visible(i, j, sq, skv)) {
                    continue;
                }
                let row = &got[((q0 + i) * s.heads_q + h) * d..][..d];
                if row.iter().any(|&x| x != 0.0) {
                    return Err(format!(
                        "out: sequence {b} head {h} query {i} sees no key but is not zero"
                    ));
                }
            }
        }
    }
    if let Some(lse) = lse {
        let got: Vec<f64> = lse.iter().map(|&x| f64::from(x)).collect();
        if got.len() != want.lse.len() {
            return Err(format!(
                "lse: {} elements, want {}",
                got.len(),
                want.lse.len()
            ));
        }
        let (e, i) = lse_err(&got, &want.lse);
        if e > lse_atol(name) {
            return Err(format!(
                "lse: error {e:.3e} at {i} (got {:e}, want {:e}; atol {})",
                got[i],
                want.lse[i],
                lse_atol(name)
            ));
        }
    }
    Ok(())
}

/// The outcome of a call against its expected validity: `Ok(true)` to go on comparing.
fn outcome(
    r: flydsl_rt::Result<()>,
    op: &str,
    invalid: Option<String>,
    untouched: &[Result<(), String>],
) -> Result<bool, String> {
    match (r, invalid) {
        (Ok(()), None) => Ok(true),
        (Ok(()), Some(why)) => Err(format!("invalid arguments were accepted: {why}")),
        (Err(e), None) => Err(format!("valid arguments were rejected: {e}")),
        (Err(e), Some(_)) => {
            match &e {
                flydsl_rt::Error::InvalidArgument { op: o, .. } if o == op => {}
                _ => return Err(format!("the error does not name {op}: {e}")),
            }
            for u in untouched {
                u.clone()?;
            }
            Ok(false)
        }
    }
}

// ---- dense ------------------------------------------------------------------------------------

/// A call's result against its expected validity (see [`outcome`]): on success out and, when
/// the case passes one, the LSE, each checked to be fully written (an LSE not passed must
/// stay untouched); `None` when the call rightly failed.
#[allow(clippy::type_complexity)]
fn results<T: DeviceRepr + Float>(
    c: &Case,
    r: flydsl_rt::Result<()>,
    op: &str,
    invalid: Option<String>,
    out: &Out<T>,
    lse: &Out<f32>,
) -> Result<Option<(Vec<T>, Option<Vec<f32>>)>, String> {
    let untouched = [out.untouched("out"), lse.untouched("lse")];
    if !outcome(r, op, invalid, &untouched)? {
        return Ok(None);
    }
    let got = out.read();
    written("out", &got, &out.before)?;
    let lse_got = if c.lse {
        let l = lse.read();
        written("lse", &l, &lse.before)?;
        Some(l)
    } else {
        lse.untouched("lse (not passed)")?;
        None
    };
    Ok(Some((got, lse_got)))
}

/// Why a dense call of the case must fail (`None`: it must succeed).
fn dense_invalid(c: &Case, args: &AttnArgs) -> Option<String> {
    let (b, sq, skv) = (args.batch, args.seqlen_q, args.seqlen_kv);
    let used: &[u8] = if c.lse {
        &[Q, K, V, OUT, LSE]
    } else {
        &[Q, K, V, OUT]
    };
    if c.mistake == Mistake::F32 {
        Some("f32 data".into())
    } else if let Some(why) = options_invalid(c) {
        Some(why)
    } else if b > MAX_ROWS || sq > MAX_ROWS || skv > MAX_ROWS {
        Some("a shape past MAX_ROWS".into())
    } else if args.heads_q.saturating_mul(args.head_dim) > i32::MAX as usize / 64 {
        Some("heads_q * head_dim past the i32 tile bound".into())
    } else if skv == 0 && b > 0 && sq > 0 {
        Some("queries without keys".into())
    } else if matches!(c.mistake, Mistake::Huge { .. }) {
        Some(format!("{:?} (buffers of the real shape)", c.mistake))
    } else if used.iter().any(|&s| hits(c.mistake, s)) {
        Some(format!("{:?}", c.mistake))
    } else {
        None
    }
}

/// The dense call's arguments of a case (its `Huge` mistake applied).
fn dense_args(c: &Case) -> AttnArgs {
    let (hq, hkv) = c.heads();
    let (sq, skv) = c.dense;
    let mut args = AttnArgs {
        batch: c.batch(),
        seqlen_q: sq,
        seqlen_kv: skv,
        heads_q: hq,
        heads_kv: hkv,
        head_dim: c.head_dim(),
        causal: c.causal,
        softmax_scale: c.scale(),
        num_kv_splits: c.splits(),
    };
    if let Mistake::Huge { what, value } = c.mistake {
        match what {
            0 => args.batch = value,
            1 => args.seqlen_q = value,
            2 => args.seqlen_kv = value,
            _ => args.heads_q = value,
        }
    }
    args
}

fn dense_one<T: Elem + Float>(c: &Case, d: &Devs) -> Result<(), String> {
    let mut rng = Rng::new(c.seed);
    let inp = inputs::<T>(c, &mut rng);
    let args = dense_args(c);
    let invalid = dense_invalid(c, &args);
    if let Entry::Array { order } = c.entry {
        return array_one::<T>(c, d, &inp, &args, order, invalid);
    }
    if c.mistake == Mistake::F32 {
        return f32_one(c, d, &inp, &args);
    }
    let place = Place {
        mistake: c.mistake,
        dev: &d.dev,
        other: &d.other,
    };
    let (qd, kd, vd) = (
        place.input(Q, &inp.q),
        place.input(K, &inp.k),
        place.input(V, &inp.v),
    );
    let mut out = place.output::<T>(OUT, inp.q.len());
    let mut lse = place.output::<f32>(LSE, inp.shape.lse_len());
    let lse_arg = c.lse.then_some(&mut lse.buf);
    let s = &d.stream;
    let r = if c.entry == Entry::DenseUnchecked {
        // SAFETY: normalise() leaves the unchecked entry buffers of exactly the shape's
        // lengths on the stream's device.
        unsafe {
            fly_attn::flash_attn_fwd_unchecked(s, &qd, &kd, &vd, &mut out.buf, lse_arg, &args)
        }
    } else {
        fly_attn::flash_attn_fwd(s, &qd, &kd, &vd, &mut out.buf, lse_arg, &args)
    };
    let Some((got, lse_got)) = results(c, r, c.entry.op(), invalid, &out, &lse)? else {
        return Ok(());
    };
    compare(c, &inp, &got, lse_got.as_deref())
}

/// f32 data: the documented "bf16 and f16 only" error, nothing written.
fn f32_one<T: Elem>(c: &Case, d: &Devs, inp: &Inputs<T>, args: &AttnArgs) -> Result<(), String> {
    let f = |v: &[T]| v.iter().map(|x| x.f64() as f32).collect::<Vec<f32>>();
    let (q, k, v) = (
        up(&d.dev, &f(&inp.q)),
        up(&d.dev, &f(&inp.k)),
        up(&d.dev, &f(&inp.v)),
    );
    let mut out = Out::<f32>::nan(&d.dev, inp.q.len(), 1);
    let r = fly_attn::flash_attn_fwd(&d.stream, &q, &k, &v, &mut out.buf, None, args);
    outcome(r, c.entry.op(), Some("f32".into()), &[out.untouched("out")]).map(|_| ())
}

/// A `[b, s, h, d]` array of the packed `v` in memory order `order` (see [`Entry::Array`]).
fn array_of<T: Copy + Default>(
    v: &[T],
    dim: (usize, usize, usize, usize),
    order: u8,
) -> ndarray::Array4<T> {
    use ndarray::ShapeBuilder;
    let (b, s, h, d) = dim;
    let at = |bi: usize, si: usize, hi: usize, di: usize| v[((bi * s + si) * h + hi) * d + di];
    match order {
        0 => ndarray::Array4::from_shape_fn((b, s, h, d), |(bi, si, hi, di)| at(bi, si, hi, di)),
        1 => {
            ndarray::Array4::from_shape_fn((b, s, h, d).f(), |(bi, si, hi, di)| at(bi, si, hi, di))
        }
        _ => ndarray::Array4::from_shape_fn((b, h, s, d), |(bi, hi, si, di)| at(bi, si, hi, di))
            .permuted_axes([0, 2, 1, 3]),
    }
}

fn array_one<T: Elem>(
    c: &Case,
    d: &Devs,
    inp: &Inputs<T>,
    args: &AttnArgs,
    order: u8,
    invalid: Option<String>,
) -> Result<(), String> {
    let (b, sq, skv) = (args.batch, args.seqlen_q, args.seqlen_kv);
    let (hq, hkv, hd) = (args.heads_q, args.heads_kv, args.head_dim);
    let qa = array_of(&inp.q, (b, sq, hq, hd), order);
    let ka = array_of(&inp.k, (b, skv, hkv, hd), order);
    let va = array_of(&inp.v, (b, skv, hkv, hd), order);
    // Shape mistakes: v one key longer, k one sequence more, k 32 columns wider.
    let (bad, which) = match c.mistake {
        Mistake::ArrayShape(w) => {
            let (kb, ks, kd) = match w {
                0 => (b, skv + 1, hd),
                1 => (b + 1, skv, hd),
                _ => (b, skv, hd + 32),
            };
            (
                Some(ndarray::Array4::from_elem(
                    (kb, ks, hkv, kd),
                    T::from_f64(0.5),
                )),
                w,
            )
        }
        _ => (None, 0),
    };
    let (kv, vv) = match (&bad, which) {
        (Some(x), 0) => (ka.view(), x.view()),
        (Some(x), _) => (x.view(), x.view()),
        (None, _) => (ka.view(), va.view()),
    };
    // Order 3: every other element along the head dim of a wider array (strided views).
    let wide_q;
    let qv = if order == 3 {
        wide_q = ndarray::Array4::from_shape_fn((b, sq, hq, 2 * hd), |(bi, si, hi, di)| {
            if di % 2 == 0 {
                qa[[bi, si, hi, di / 2]]
            } else {
                T::from_f64(f64::NAN)
            }
        });
        wide_q.slice(ndarray::s![.., .., .., ..;2])
    } else {
        qa.view()
    };
    let invalid = match (invalid, c.mistake) {
        (Some(w), _) => Some(w),
        (None, Mistake::ArrayShape(w)) => Some(format!("array shapes ({w})")),
        (None, _) => None,
    };
    let opts = AttnOptions {
        causal: c.causal,
        softmax_scale: c.scale(),
        num_kv_splits: c.splits(),
    };
    let r = fly_attn::flash_attn_array(&d.stream, qv, kv, vv, opts);
    let (out, lse) = match r {
        Ok(x) => {
            outcome(Ok(()), c.entry.op(), invalid, &[])?;
            x
        }
        Err(e) => {
            outcome(Err(e), c.entry.op(), invalid, &[])?;
            return Ok(());
        }
    };
    if out.dim() != (b, sq, hq, hd) || lse.dim() != (b, hq, sq) {
        return Err(format!("shapes {:?} and {:?}", out.dim(), lse.dim()));
    }
    let out: Vec<T> = out.iter().copied().collect();
    let lse: Vec<f32> = lse.iter().copied().collect();
    compare(c, inp, &out, Some(&lse))
}

// ---- varlen ----------------------------------------------------------------------------------

/// The offsets of a case, with its offset mistake: (q, kv, max_seqlen_q, max_seqlen_kv).
fn offsets(c: &Case) -> (Vec<i32>, Vec<i32>, usize, usize) {
    let cu = |l: &mut dyn Iterator<Item = usize>| {
        let mut v = vec![0i32];
        for x in l {
            v.push(v[v.len() - 1] + x as i32);
        }
        v
    };
    let mut cq = cu(&mut c.lens.iter().map(|l| l.0));
    let mut ck = cu(&mut c.lens.iter().map(|l| l.1));
    let mut max_q = c.lens.iter().map(|l| l.0).max().unwrap_or(0) + c.slack.0;
    let mut max_kv = c.lens.iter().map(|l| l.1).max().unwrap_or(0) + c.slack.1;
    if let Mistake::Cu { kind, kv } = c.mistake {
        let (cu, max) = if kv {
            (&mut ck, &mut max_kv)
        } else {
            (&mut cq, &mut max_q)
        };
        let last = cu[cu.len() - 1];
        match kind {
            0 => cu[0] = 1,
            1 => cu[1] = last + 1,
            2 => *cu.last_mut().expect("offsets") += 1,
            3 => {
                let longest = cu
                    .windows(2)
                    .map(|w| (w[1] - w[0]) as usize)
                    .max()
                    .unwrap_or(0);
                *max = longest.saturating_sub(1);
            }
            4 => cu.push(last),
            5 => {
                cq = vec![0];
                ck = vec![0];
            }
            _ => cu[1] = -1,
        }
    }
    if let Mistake::Huge { what, value } = c.mistake {
        match what {
            0 | 1 => max_q = value,
            2 => max_kv = value,
            _ => {}
        }
    }
    (cq, ck, max_q, max_kv)
}

/// Why a varlen call of the case must fail (`None`: it must succeed), from the offsets, the
/// buffers' lengths and the arguments as passed.
fn varlen_invalid(
    c: &Case,
    a: &VarlenArgs,
    cq: &[i32],
    ck: &[i32],
    lens: [usize; 5],
) -> Option<String> {
    let [q_len, k_len, v_len, out_len, lse_len] = lens;
    let row_q = a.heads_q.saturating_mul(a.head_dim).max(1);
    let row_kv = a.heads_kv.saturating_mul(a.head_dim).max(1);
    let unchecked = c.entry.unchecked();
    let (q_dev, kv_dev) = match c.entry {
        Entry::Varlen { q_dev, kv_dev } | Entry::VarlenUnchecked { q_dev, kv_dev } => {
            (q_dev, kv_dev)
        }
        _ => (false, false),
    };
    let devices = [Q, K, V, OUT, LSE, CUQ, CUKV]
        .iter()
        .filter(|&&s| (s != LSE || c.lse) && (s != CUQ || q_dev) && (s != CUKV || kv_dev))
        .any(|&s| matches!(c.mistake, Mistake::Device { slot } if slot == s));
    // What the safe entry checks of the offsets (the unchecked one: host offsets without
    // their end).
    let rows_of = |len: usize, row: usize| len.is_multiple_of(row).then_some(len / row);
    let cu_q = if unchecked && q_dev {
        None
    } else {
        let rows = if unchecked { None } else { Some(q_len / row_q) };
        cu_invalid(cq, rows, a.max_seqlen_q)
    };
    let cu_kv = if unchecked && kv_dev {
        None
    } else {
        let rows = if unchecked {
            None
        } else {
            Some(k_len / row_kv)
        };
        cu_invalid(ck, rows, a.max_seqlen_kv)
    };
    let total_q = if unchecked && q_dev {
        rows_of(q_len, row_q).unwrap_or(usize::MAX)
    } else {
        cq.last().map_or(0, |&x| x.max(0) as usize)
    };
    let total_kv = ck.last().map_or(0, |&x| x.max(0) as usize);
    if devices {
        Some(format!("{:?}", c.mistake))
    } else if let Some(why) = cu_q.or(cu_kv) {
        Some(why)
    } else if cq.len() != ck.len() || cq.len() < 2 {
        Some("offset arrays of different lengths".into())
    } else if let Some(why) = options_invalid(c) {
        Some(why)
    } else if a.heads_q.saturating_mul(a.head_dim) > i32::MAX as usize / 64 {
        Some("heads_q * head_dim past the i32 tile bound".into())
    } else if cq.len() - 1 > MAX_ROWS || a.max_seqlen_q > MAX_ROWS || a.max_seqlen_kv > MAX_ROWS {
        Some("a shape past MAX_ROWS".into())
    } else if total_q.saturating_mul(a.heads_q) > i32::MAX as usize {
        Some("total_q * heads_q past i32".into())
    } else if !unchecked
        && (q_len != total_q.saturating_mul(row_q)
            || k_len != total_kv.saturating_mul(row_kv)
            || v_len != k_len
            || out_len != q_len
            || (c.lse && lse_len != total_q.saturating_mul(a.heads_q)))
    {
        Some("buffer lengths".into())
    } else {
        None
    }
}

fn varlen_one<T: Elem + Float>(c: &Case, d: &Devs) -> Result<(), String> {
    let mut rng = Rng::new(c.seed);
    let inp = inputs::<T>(c, &mut rng);
    let (hq, hkv) = c.heads();
    let (cq, ck, max_q, max_kv) = offsets(c);
    let mut args = VarlenArgs {
        max_seqlen_q: max_q,
        max_seqlen_kv: max_kv,
        heads_q: hq,
        heads_kv: hkv,
        head_dim: c.head_dim(),
        causal: c.causal,
        softmax_scale: c.scale(),
        num_kv_splits: c.splits(),
    };
    if let Mistake::Huge { what: 3, value } = c.mistake {
        args.heads_q = value;
    }
    let place = Place {
        mistake: c.mistake,
        dev: &d.dev,
        other: &d.other,
    };
    if c.mistake == Mistake::F32 {
        // f32 data through the varlen entry: an error, nothing written.
        let f = |v: &[T]| v.iter().map(|x| x.f64() as f32).collect::<Vec<f32>>();
        let (q, k, v) = (
            up(&d.dev, &f(&inp.q)),
            up(&d.dev, &f(&inp.k)),
            up(&d.dev, &f(&inp.v)),
        );
        let mut out = Out::<f32>::nan(&d.dev, inp.q.len(), 2);
        let r = fly_attn::flash_attn_varlen_fwd(
            &d.stream,
            &q,
            &k,
            &v,
            &mut out.buf,
            None,
            CuSeqlens::Host(&cq),
            CuSeqlens::Host(&ck),
            &args,
        );
        return outcome(r, c.entry.op(), Some("f32".into()), &[out.untouched("out")]).map(|_| ());
    }
    let (qd, kd, vd) = (
        place.input(Q, &inp.q),
        place.input(K, &inp.k),
        place.input(V, &inp.v),
    );
    let mut out = place.output::<T>(OUT, inp.q.len());
    let mut lse = place.output::<f32>(LSE, inp.shape.lse_len());
    let lens = [qd.len(), kd.len(), vd.len(), out.buf.len(), lse.buf.len()];
    let invalid = varlen_invalid(c, &args, &cq, &ck, lens);
    let (q_dev, kv_dev) = match c.entry {
        Entry::Varlen { q_dev, kv_dev } | Entry::VarlenUnchecked { q_dev, kv_dev } => {
            (q_dev, kv_dev)
        }
        _ => unreachable!("a varlen entry"),
    };
    let cqd = place.input(CUQ, &cq);
    let ckd = place.input(CUKV, &ck);
    let cu_q = if q_dev {
        CuSeqlens::Device(&cqd)
    } else {
        CuSeqlens::Host(&cq)
    };
    let cu_kv = if kv_dev {
        CuSeqlens::Device(&ckd)
    } else {
        CuSeqlens::Host(&ck)
    };
    let lse_arg = c.lse.then_some(&mut lse.buf);
    let s = &d.stream;
    let r = if c.entry.unchecked() {
        // SAFETY: normalise() leaves the unchecked entry buffers of exactly the shape's
        // lengths on the stream's device and valid device offsets.
        unsafe {
            fly_attn::flash_attn_varlen_fwd_unchecked(
                s,
                &qd,
                &kd,
                &vd,
                &mut out.buf,
                lse_arg,
                cu_q,
                cu_kv,
                &args,
            )
        }
    } else {
        fly_attn::flash_attn_varlen_fwd(s, &qd, &kd, &vd, &mut out.buf, lse_arg, cu_q, cu_kv, &args)
    };
    let Some((got, lse_got)) = results(c, r, c.entry.op(), invalid, &out, &lse)? else {
        return Ok(());
    };
    compare(c, &inp, &got, lse_got.as_deref())
}

// ---- fp8 ---------------------------------------------------------------------------------

/// `x` quantized per tensor to e4m3fn (`scale = amax / 448`, 1 for an all-zero tensor): the
/// codes, their f64 values (`code * scale`, what the kernel computes with) and the scale.
fn quantize_tensor(x: &[f64]) -> (Vec<F8E4M3FN>, Vec<f64>, f32) {
    let amax = x.iter().fold(0f64, |a, v| a.max(v.abs())) as f32;
    let scale = if amax == 0.0 {
        1.0
    } else {
        (amax / 448.0).max(f32::MIN_POSITIVE)
    };
    let q: Vec<F8E4M3FN> = x
        .iter()
        .map(|&v| F8E4M3FN::quantize(v as f32 / scale))
        .collect();
    let real = q
        .iter()
        .map(|c| f64::from(c.dequantize()) * f64::from(scale))
        .collect();
    (q, real, scale)
}

/// `flash_attn_fp8_fwd` (and `_with(Auto)`) on a dense case: q, k, v quantized per tensor
/// (the case's values), descales on the device; the case's mistakes, plus a descale of the
/// wrong length or on another device (from the seed's top bits).
fn fp8_one(c: &Case, d: &Devs) -> Result<(), String> {
    if c.mistake == Mistake::F32 || !matches!(c.entry, Entry::Dense) {
        return Ok(()); // the 16-bit suites own those entries
    }
    let mut rng = Rng::new(c.seed);
    let inp = inputs::<bf16>(c, &mut rng);
    let args = dense_args(c);
    let descale_mistake = (c.seed >> 61) as u8; // 0: a short q descale, 1: v's elsewhere
    let mut invalid = dense_invalid(c, &args);
    if invalid.is_none() && descale_mistake < 2 {
        invalid = Some(format!("descale mistake {descale_mistake}"));
    }
    let (q8, qr, sqd) = quantize_tensor(&wide(&inp.q));
    let (k8, kr, skd) = quantize_tensor(&wide(&inp.k));
    let (v8, vr, svd) = quantize_tensor(&wide(&inp.v));
    let place = Place {
        mistake: c.mistake,
        dev: &d.dev,
        other: &d.other,
    };
    let (qd, kd, vd) = (
        place.input(Q, &q8),
        place.input(K, &k8),
        place.input(V, &v8),
    );
    let dq = if descale_mistake == 0 {
        up(&d.dev, &[sqd, sqd])
    } else {
        up(&d.dev, &[sqd])
    };
    let dk = up(&d.dev, &[skd]);
    let dv = up(
        if descale_mistake == 1 {
            &d.other
        } else {
            &d.dev
        },
        &[svd],
    );
    let descales = fly_attn::Fp8Descales {
        q: &dq,
        k: &dk,
        v: &dv,
    };
    let mut out = place.output::<bf16>(OUT, inp.q.len());
    let mut lse = place.output::<f32>(LSE, inp.shape.lse_len());
    let lse_arg = c.lse.then_some(&mut lse.buf);
    let s = &d.stream;
    let (r, op) = if c.seed & 1 == 0 {
        let r =
            fly_attn::flash_attn_fp8_fwd(s, &qd, &kd, &vd, descales, &mut out.buf, lse_arg, &args);
        (r, "fly_attn::flash_attn_fp8_fwd")
    } else {
        let auto = fly_attn::AttnKernel::Auto;
        let r = fly_attn::flash_attn_fp8_fwd_with(
            s,
            &qd,
            &kd,
            &vd,
            descales,
            &mut out.buf,
            lse_arg,
            &args,
            auto,
        );
        (r, "fly_attn::flash_attn_fp8_fwd_with")
    };
    let Some((got, lse_got)) = results(c, r, op, invalid, &out, &lse)? else {
        return Ok(());
    };
    compare_with(
        c,
        &inp.shape,
        &[qr, kr, vr],
        &wide(&got),
        lse_got.as_deref(),
        "bf16",
        true,
    )
}

// ---- tests -----------------------------------------------------------------------------------

#[test]
fn fuzz_attn_fp8() {
    let devs = devices();
    run("fuzz_attn_fp8", 120, strategy(false), |c| {
        fp8_one(&c, &devs[c.target])
    });
}

#[test]
fn fuzz_attn_dense() {
    let devs = devices();
    run("fuzz_attn_dense", 150, strategy(false), |c| {
        let d = &devs[c.target];
        match c.dt {
            0 => dense_one::<bf16>(&c, d),
            _ => dense_one::<f16>(&c, d),
        }
    });
}

#[test]
fn fuzz_attn_varlen() {
    let devs = devices();
    run("fuzz_attn_varlen", 150, strategy(true), |c| {
        let d = &devs[c.target];
        match c.dt {
            0 => varlen_one::<bf16>(&c, d),
            _ => varlen_one::<f16>(&c, d),
        }
    });
}

/// The comparison is not vacuous: a correct result passes; one element off by 0.05, a row
/// that sees no key but is not exactly zero, or an LSE off by 0.01 fails.
#[test]
fn the_comparison_catches_wrong_outputs() {
    let devs = devices();
    let d = &devs[0];
    let c = Case {
        target: 0,
        dt: 0,
        entry: Entry::Dense,
        lse: true,
        causal: true,
        lens: vec![(33, 17)],
        dense: (33, 17),
        heads: (2, 1),
        head_dim: 64,
        scale: None,
        splits: Some(1),
        slack: (0, 0),
        qk: QkDist::Normal { log2: 0 },
        v_log2: 0,
        mistake: Mistake::None,
        seed: 7,
    };
    let inp = inputs::<bf16>(&c, &mut Rng::new(c.seed));
    let args = AttnArgs {
        seqlen_kv: 17,
        heads_kv: 1,
        causal: true,
        num_kv_splits: Some(1),
        ..AttnArgs::new(1, 33, 2, 64)
    };
    let (q, k, v) = (up(&d.dev, &inp.q), up(&d.dev, &inp.k), up(&d.dev, &inp.v));
    let mut out = DeviceBuffer::<bf16>::zeroed(&d.dev, inp.q.len()).unwrap();
    let mut lse = DeviceBuffer::<f32>::zeroed(&d.dev, inp.shape.lse_len()).unwrap();
    fly_attn::flash_attn_fwd(&d.stream, &q, &k, &v, &mut out, Some(&mut lse), &args).unwrap();
    let (out, lse) = (out.to_vec().unwrap(), lse.to_vec().unwrap());
    compare(&c, &inp, &out, Some(&lse)).unwrap();
    // Query 32 (the last) sees every key; query 0 none (33 queries on 17 keys, causal).
    let mut bad = out.clone();
    let i = (32 * 2) * 64 + 5;
    bad[i] = bf16::from_f64(bad[i].f64() + 0.05);
    assert!(compare(&c, &inp, &bad, Some(&lse)).is_err());
    let mut bad = out.clone();
    bad[3] = bf16::from_f64(1e-20);
    assert!(compare(&c, &inp, &bad, Some(&lse)).is_err());
    let mut bad_lse = lse.clone();
    let last = bad_lse.len() - 1;
    bad_lse[last] += 0.01;
    assert!(compare(&c, &inp, &out, Some(&bad_lse)).is_err());
}

/// `dispatch::auto_splits`, `dispatch::family` and `table::head_tile` against their docs: one
/// split when `batch * heads_q * q tiles` workgroups fill the device (two per compute unit),
/// else at most `MAX_SPLITS`, each split keeping two key tiles of 32, and enough of them to
/// fill the device unless a bound stops them; the smallest compiled head tile for every
/// multiple of 32 up to 256 and no family otherwise.
#[test]
fn fuzz_attn_dispatch() {
    use fly_attn::dispatch::{auto_splits, family, Family};
    use fly_attn::table::{head_tile, HEAD_TILES, MAX_SPLITS};
    let shape = (
        1u32..=400,
        0usize..=8,
        0usize..=64,
        prop_oneof![select(vec![0usize, 1, 63, 64, 65, 4096]), 0usize..=5000],
        prop_oneof![
            select(vec![0usize, 1, 63, 64, 127, 128, 4095, 1 << 20]),
            0usize..=70_000
        ],
        0usize..=300,
    );
    run(
        "fuzz_attn_dispatch",
        400,
        shape,
        |(cu, b, h, sq, skv, d)| {
            let n = auto_splits(cu, b, h, sq, skv);
            let blocks = b * h * sq.div_ceil(64);
            let want_fill = 2 * cu as usize;
            if !(1..=MAX_SPLITS).contains(&n) {
                return Err(format!("{n} splits"));
            }
            if (blocks == 0 || blocks >= want_fill) && n != 1 {
                return Err(format!("{n} splits for {blocks} workgroups on {cu} CUs"));
            }
            if n > 1 && skv / n < 64 {
                return Err(format!(
                    "{n} splits of {skv} keys: fewer than two tiles each"
                ));
            }
            let bounded = n == MAX_SPLITS || n == (skv / 64).max(1);
            if blocks > 0 && n * blocks < want_fill && !bounded {
                return Err(format!(
                    "{n} splits x {blocks} workgroups do not fill {cu} CUs"
                ));
            }
            let tile = head_tile(d);
            let want = (d > 0 && d % 32 == 0 && d <= 256)
                .then(|| HEAD_TILES.iter().copied().find(|&t| t >= d))
                .flatten();
            if tile != want {
                return Err(format!("head_tile({d}) = {tile:?}, want {want:?}"));
            }
            for t in TARGETS {
                for dt in [fly_attn::DType::BF16, fly_attn::DType::F16] {
                    let p = fly_attn::dispatch::Problem {
                        target: t,
                        dtype: dt,
                        fp8: false,
                        batch: b,
                        seqlen_q: sq,
                        seqlen_kv: skv,
                        heads_q: h,
                        heads_kv: h,
                        head_dim: d,
                        varlen: false,
                        splits: None,
                        auto_splits: n,
                        decode_splits: n,
                        tma_aligned: true,
                    };
                    // The portable kernel serves every legal head dim, with the automatic
                    // split count; Auto is it or (once enabled) the Hopper one.
                    let got = family(&p, fly_attn::AttnKernel::Portable).ok();
                    let want_p = want.map(|head_tile| (Family::Portable { head_tile }, n));
                    if got != want_p {
                        return Err(format!("family({t:?}, {dt:?}, {d}): {got:?}"));
                    }
                    let auto = family(&p, fly_attn::AttnKernel::Auto).ok();
                    let hopper = family(&p, fly_attn::AttnKernel::Hopper).ok();
                    // Decode shapes (few query rows per kv head): the decode kernel.
                    let decode = family(&p, fly_attn::AttnKernel::Decode).ok();
                    if fly_attn::dispatch::decode_applies(&p) && want.is_some() {
                        if auto != decode || decode.is_none() {
                            return Err(format!("Auto at a decode shape: {auto:?}"));
                        }
                    } else if auto != want_p && (auto.is_none() || auto != hopper) {
                        return Err(format!("Auto on {t:?}, {dt:?}, {d}: {auto:?}"));
                    }
                    let hopper_ok = t == flydsl_rt::Target::Sm90 && [64, 128, 256].contains(&d);
                    if hopper.is_some() != hopper_ok {
                        return Err(format!("Hopper on {t:?}, {dt:?}, {d}: {hopper:?}"));
                    }
                    // fp8 inputs: the portable kernel, whatever is asked; Hopper an error.
                    let f8 = fly_attn::dispatch::Problem { fp8: true, ..p };
                    let auto8 = family(&f8, fly_attn::AttnKernel::Auto).ok();
                    if auto8 != want_p || family(&f8, fly_attn::AttnKernel::Hopper).is_ok() {
                        return Err(format!("fp8 on {t:?}, {d}: Auto {auto8:?}"));
                    }
                }
            }
            Ok(())
        },
    );
}
