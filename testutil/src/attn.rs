//! FlashAttention forward: the f64 CPU reference (dense BSHD and packed varlen, MHA / GQA /
//! MQA, bottom-right causal mask, softmax scale, LSE) and the comparisons with the
//! tolerances of `shared/facts/kernels.md` (max abs error < 1e-2 and every row's cosine
//! similarity > 0.99 for bf16/f16; LSE atol bf16 8e-3, f16 4e-3; fp8 e4m3fn inputs with
//! bf16 output, against the reference on the dequantized inputs: max abs error < 5e-2 and
//! every row's cosine > 0.98, LSE as bf16).
//!
//! Semantics: for query `i` of a sequence with `sq` queries and `skv` keys, key `j` is
//! visible iff `j < skv` and, when causal, `j <= i + skv - sq` (bottom-right aligned).
//! `out[i] = sum_j softmax_j(scale * q_i . k_j) v_j`; a row with no visible key is all
//! zeros and its LSE is `-inf`. LSE is the natural log of `sum_j exp(scale * q_i . k_j)`.

/// The shape of one attention problem. Dense: q `[batch, seqlen_q, heads_q, head_dim]`, k
/// and v `[batch, seqlen_kv, heads_kv, head_dim]`, out like q, LSE `[batch, heads_q,
/// seqlen_q]`. Varlen (`cu_seqlens_*` set): q `[total_q, heads_q, head_dim]`, k and v
/// `[total_kv, heads_kv, head_dim]`, LSE `[heads_q, total_q]`.
#[derive(Clone, Debug, PartialEq)]
pub struct AttnShape {
    /// Sequences.
    pub batch: usize,
    /// Queries per sequence (dense).
    pub seqlen_q: usize,
    /// Keys per sequence (dense).
    pub seqlen_kv: usize,
    /// Query heads.
    pub heads_q: usize,
    /// Key/value heads (divides `heads_q`).
    pub heads_kv: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Bottom-right aligned causal mask.
    pub causal: bool,
    /// Softmax scale (`1 / sqrt(head_dim)` when `None`).
    pub scale: Option<f64>,
    /// Packed varlen: `(cu_seqlens_q, cu_seqlens_kv)`, each `batch + 1` offsets.
    pub cu_seqlens: Option<(Vec<i32>, Vec<i32>)>,
}

impl AttnShape {
    /// A dense shape.
    pub fn dense(
        batch: usize,
        seqlen_q: usize,
        seqlen_kv: usize,
        heads_q: usize,
        heads_kv: usize,
        head_dim: usize,
        causal: bool,
    ) -> AttnShape {
        AttnShape {
            batch,
            seqlen_q,
            seqlen_kv,
            heads_q,
            heads_kv,
            head_dim,
            causal,
            scale: None,
            cu_seqlens: None,
        }
    }
    /// A varlen shape from per-sequence lengths (q and kv lengths separately).
    pub fn varlen(
        lens_q: &[usize],
        lens_kv: &[usize],
        heads_q: usize,
        heads_kv: usize,
        head_dim: usize,
        causal: bool,
    ) -> AttnShape {
        assert_eq!(lens_q.len(), lens_kv.len());
        let cu = |l: &[usize]| {
            let mut v = vec![0i32];
            for &x in l {
                v.push(v[v.len() - 1] + x as i32);
            }
            v
        };
        AttnShape {
            batch: lens_q.len(),
            seqlen_q: lens_q.iter().copied().max().unwrap_or(0),
            seqlen_kv: lens_kv.iter().copied().max().unwrap_or(0),
            heads_q,
            heads_kv,
            head_dim,
            causal,
            scale: None,
            cu_seqlens: Some((cu(lens_q), cu(lens_kv))),
        }
    }
    /// The softmax scale in use.
    pub fn softmax_scale(&self) -> f64 {
        self.scale
            .unwrap_or_else(|| 1.0 / (self.head_dim as f64).sqrt())
    }
    /// Total query rows (`batch * seqlen_q` dense, `cu_q[batch]` varlen).
    pub fn total_q(&self) -> usize {
        match &self.cu_seqlens {
            Some((q, _)) => q[self.batch] as usize,
            None => self.batch * self.seqlen_q,
        }
    }
    /// Total key rows.
    pub fn total_kv(&self) -> usize {
        match &self.cu_seqlens {
            Some((_, k)) => k[self.batch] as usize,
            None => self.batch * self.seqlen_kv,
        }
    }
    /// Elements of q and out.
    pub fn q_len(&self) -> usize {
        self.total_q() * self.heads_q * self.head_dim
    }
    /// Elements of k (and of v).
    pub fn kv_len(&self) -> usize {
        self.total_kv() * self.heads_kv * self.head_dim
    }
    /// Elements of the LSE.
    pub fn lse_len(&self) -> usize {
        self.total_q() * self.heads_q
    }
    /// Sequence `b`: (first q row, q rows, first kv row, kv rows) in the packed row space.
    pub fn seq(&self, b: usize) -> (usize, usize, usize, usize) {
        match &self.cu_seqlens {
            Some((q, k)) => (
                q[b] as usize,
                (q[b + 1] - q[b]) as usize,
                k[b] as usize,
                (k[b + 1] - k[b]) as usize,
            ),
            None => (
                b * self.seqlen_q,
                self.seqlen_q,
                b * self.seqlen_kv,
                self.seqlen_kv,
            ),
        }
    }
    /// Index of the LSE of (sequence `b`, head `h`, query `i` of the sequence).
    pub fn lse_index(&self, b: usize, h: usize, i: usize) -> usize {
        match &self.cu_seqlens {
            Some((q, _)) => h * self.total_q() + q[b] as usize + i,
            None => (b * self.heads_q + h) * self.seqlen_q + i,
        }
    }
    /// Whether key `j` is visible to query `i` in a sequence of `sq` queries, `skv` keys.
    pub fn visible(&self, i: usize, j: usize, sq: usize, skv: usize) -> bool {
        j < skv && (!self.causal || j as i64 <= i as i64 + skv as i64 - sq as i64)
    }
}

/// The reference's output: `out` (layout of q) and `lse` (see [`AttnShape`]).
#[derive(Clone, Debug)]
pub struct AttnRef {
    /// Attention output, f64.
    pub out: Vec<f64>,
    /// Log-sum-exp per (head, query), natural log, scale folded in; `-inf` for fully
    /// masked rows.
    pub lse: Vec<f64>,
}

/// The f64 reference with an explicit mask (every (query, key) pair tested with
/// [`AttnShape::visible`]). Inputs are the already-rounded values, widened.
///
/// ```
/// use flydsl_testutil::attn::{attn_ref, AttnShape};
/// // One query, two keys, D = 1: softmax of [0, 0] averages the values.
/// let s = AttnShape::dense(1, 1, 2, 1, 1, 1, false);
/// let r = attn_ref(&s, &[1.0], &[0.0, 0.0], &[2.0, 4.0]);
/// assert_eq!(r.out, vec![3.0]);
/// assert!((r.lse[0] - 2f64.ln()).abs() < 1e-12);
/// ```
pub fn attn_ref(s: &AttnShape, q: &[f64], k: &[f64], v: &[f64]) -> AttnRef {
    assert_eq!(q.len(), s.q_len(), "q length");
    assert_eq!(k.len(), s.kv_len(), "k length");
    assert_eq!(v.len(), s.kv_len(), "v length");
    let (hq, hkv, d) = (s.heads_q, s.heads_kv, s.head_dim);
    let group = hq / hkv;
    let scale = s.softmax_scale();
    let mut out = vec![0.0; s.q_len()];
    let mut lse = vec![f64::NEG_INFINITY; s.lse_len()];
    let mut logits = Vec::new();
    for b in 0..s.batch {
        let (q0, sq, k0, skv) = s.seq(b);
        for h in 0..hq {
            let hk = h / group;
            for i in 0..sq {
                let qrow = &q[((q0 + i) * hq + h) * d..][..d];
                logits.clear();
                for j in 0..skv {
                    if s.visible(i, j, sq, skv) {
                        let krow = &k[((k0 + j) * hkv + hk) * d..][..d];
                        let dot: f64 = qrow.iter().zip(krow).map(|(a, b)| a * b).sum();
                        logits.push((j, dot * scale));
                    }
                }
                if logits.is_empty() {
                    continue; // zeros, LSE -inf
                }
                let m = logits.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = logits.iter().map(|x| (x.1 - m).exp()).sum();
                let o = &mut out[((q0 + i) * hq + h) * d..][..d];
                for &(j, l) in &logits {
                    let p = (l - m).exp() / sum;
                    let vrow = &v[((k0 + j) * hkv + hk) * d..][..d];
                    for (x, y) in o.iter_mut().zip(vrow) {
                        *x += p * y;
                    }
                }
                lse[s.lse_index(b, h, i)] = m + sum.ln();
            }
        }
    }
    AttnRef { out, lse }
}

/// Output tolerances (max abs error, minimum per-row cosine similarity) of a 16-bit dtype
/// (`bf16` / `f16`; kernels.md).
pub const OUT_ATOL: f64 = 1e-2;
/// Minimum cosine similarity of every output row.
pub const MIN_COSINE: f64 = 0.99;

/// Max abs output error of fp8 e4m3fn inputs (bf16 output), against the reference on the
/// dequantized inputs.
pub const FP8_OUT_ATOL: f64 = 5e-2;
/// Minimum cosine similarity of every output row with fp8 e4m3fn inputs.
pub const FP8_MIN_COSINE: f64 = 0.98;

/// The output tolerances `(max abs error, minimum row cosine)` of a dtype name: `"fp8"`
/// ([`FP8_OUT_ATOL`], [`FP8_MIN_COSINE`]), else the 16-bit ones ([`OUT_ATOL`],
/// [`MIN_COSINE`]).
///
/// ```
/// use flydsl_testutil::attn::out_tolerance;
/// assert_eq!(out_tolerance("fp8"), (5e-2, 0.98));
/// assert_eq!(out_tolerance("bf16"), (1e-2, 0.99));
/// ```
pub fn out_tolerance(dtype: &str) -> (f64, f64) {
    if dtype == "fp8" {
        (FP8_OUT_ATOL, FP8_MIN_COSINE)
    } else {
        (OUT_ATOL, MIN_COSINE)
    }
}

/// LSE absolute tolerance of a dtype name (`"bf16"` 8e-3, `"f16"` 4e-3; `"fp8"` as bf16:
/// its inputs are exact in bf16 and its output is bf16).
pub fn lse_atol(dtype: &str) -> f64 {
    if dtype == "f16" {
        4e-3
    } else {
        8e-3
    }
}

/// The result of [`check_out`]: the worst element and the worst row.
#[derive(Clone, Debug, PartialEq)]
pub struct OutReport {
    /// Largest `|got - want|`.
    pub max_abs: f64,
    /// Where it is.
    pub max_at: usize,
    /// Smallest per-row cosine similarity (rows whose reference and result are both zero
    /// count as 1; a zero reference row with a non-zero result counts as 0).
    pub min_cos: f64,
    /// Which row (index into the `[rows, head_dim]` view).
    pub min_row: usize,
    /// Number of non-finite results.
    pub non_finite: usize,
}

impl OutReport {
    /// Whether the result meets [`OUT_ATOL`] and [`MIN_COSINE`] with no NaN / Inf.
    pub fn pass(&self) -> bool {
        self.pass_with(OUT_ATOL, MIN_COSINE)
    }

    /// Whether the result meets `atol` and `min_cos` ([`out_tolerance`]) with no NaN / Inf.
    ///
    /// ```
    /// use flydsl_testutil::attn::{check_out, out_tolerance};
    /// let r = check_out(&[1.03, 0.0], &[1.0, 0.0], 2);
    /// let (a, c) = out_tolerance("fp8");
    /// assert!(!r.pass() && r.pass_with(a, c));
    /// ```
    pub fn pass_with(&self, atol: f64, min_cos: f64) -> bool {
        self.non_finite == 0 && self.max_abs < atol && self.min_cos > min_cos
    }
}

/// Compare an output with the reference, rows of `head_dim` (every (query, head) row).
///
/// ```
/// use flydsl_testutil::attn::check_out;
/// let r = check_out(&[1.0, 0.0, 0.0, 0.0], &[1.0, 0.0, 0.0, 0.0], 2);
/// assert!(r.pass());
/// assert!(!check_out(&[0.0, 1.0], &[1.0, 0.0], 2).pass());
/// ```
pub fn check_out(got: &[f64], want: &[f64], head_dim: usize) -> OutReport {
    assert_eq!(got.len(), want.len(), "output lengths");
    let mut r = OutReport {
        max_abs: 0.0,
        max_at: 0,
        min_cos: 1.0,
        min_row: 0,
        non_finite: 0,
    };
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if !g.is_finite() {
            r.non_finite += 1;
            r.max_abs = f64::INFINITY;
            r.max_at = i;
            continue;
        }
        let e = (g - w).abs();
        if e > r.max_abs {
            r.max_abs = e;
            r.max_at = i;
        }
    }
    for (row, (g, w)) in got
        .chunks(head_dim.max(1))
        .zip(want.chunks(head_dim.max(1)))
        .enumerate()
    {
        let dot: f64 = g.iter().zip(w).map(|(a, b)| a * b).sum();
        let ng: f64 = g.iter().map(|a| a * a).sum::<f64>().sqrt();
        let nw: f64 = w.iter().map(|a| a * a).sum::<f64>().sqrt();
        let cos = match (ng == 0.0, nw == 0.0) {
            (true, true) => 1.0,
            (false, false) => dot / (ng * nw),
            _ => 0.0,
        };
        let cos = if cos.is_nan() { 0.0 } else { cos };
        if cos < r.min_cos {
            r.min_cos = cos;
            r.min_row = row;
        }
    }
    r
}

/// [`check_out`] for outputs stored in `dtype` (`"bf16"`, `"f16"`) of any magnitude: each
/// element's error is counted beyond the rounding of its reference to `dtype` (its unit
/// roundoff, 2^-8 or 2^-11, times `|want|`), so that [`OUT_ATOL`] bounds the kernel's own
/// error. (Rounding alone reaches 1.6e-2 at `|out| >= 4` in bf16: a value of v's normal tail
/// under a one-hot softmax.) The cosines are [`check_out`]'s.
///
/// ```
/// use flydsl_testutil::attn::{check_out, check_out_rounded};
/// // 4.1875 is the bf16 nearest to 4.174: 1.35e-2 off, all of it rounding.
/// assert!(!check_out(&[4.1875, 1.0], &[4.174, 1.0], 2).pass());
/// assert!(check_out_rounded("bf16", &[4.1875, 1.0], &[4.174, 1.0], 2).pass());
/// assert!(!check_out_rounded("bf16", &[4.22, 1.0], &[4.174, 1.0], 2).pass());
/// ```
pub fn check_out_rounded(dtype: &str, got: &[f64], want: &[f64], head_dim: usize) -> OutReport {
    let u = if dtype == "f16" {
        2f64.powi(-11)
    } else {
        2f64.powi(-8)
    };
    let mut r = check_out(got, want, head_dim);
    r.max_abs = 0.0;
    r.max_at = 0;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let e = if g.is_finite() {
            ((g - w).abs() - u * w.abs()).max(0.0)
        } else {
            f64::INFINITY
        };
        if e > r.max_abs || (e.is_infinite() && !r.max_abs.is_infinite()) {
            r.max_abs = e;
            r.max_at = i;
        }
    }
    r
}

/// Panic with the worst element and row unless `got` passes [`check_out`].
pub fn assert_out(what: &str, got: &[f64], want: &[f64], head_dim: usize) {
    assert_out_dtype(what, "bf16", got, want, head_dim);
}

/// [`assert_out`] with the tolerances of the dtype name `dtype` ([`out_tolerance`]).
pub fn assert_out_dtype(what: &str, dtype: &str, got: &[f64], want: &[f64], head_dim: usize) {
    let r = check_out(got, want, head_dim);
    let (atol, min_cos) = out_tolerance(dtype);
    assert!(
        r.pass_with(atol, min_cos),
        "{what}: max abs err {:.3e} at {} (got {}, want {}; atol {atol}), min row cosine \
         {:.5} at row {} (min {min_cos}), {} non-finite",
        r.max_abs,
        r.max_at,
        got.get(r.max_at).copied().unwrap_or(f64::NAN),
        want.get(r.max_at).copied().unwrap_or(f64::NAN),
        r.min_cos,
        r.min_row,
        r.non_finite
    );
}

/// Largest LSE error: `-inf` must match `-inf` exactly (else the error is infinite), finite
/// values by absolute difference. Returns (error, index).
///
/// ```
/// use flydsl_testutil::attn::lse_err;
/// let ninf = f64::NEG_INFINITY;
/// assert!((lse_err(&[ninf, 1.0], &[ninf, 1.001]).0 - 1e-3).abs() < 1e-12);
/// assert!(lse_err(&[0.0], &[ninf]).0.is_infinite());
/// ```
pub fn lse_err(got: &[f64], want: &[f64]) -> (f64, usize) {
    assert_eq!(got.len(), want.len(), "LSE lengths");
    let mut worst = (0.0, 0);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let e = if *w == f64::NEG_INFINITY || *g == f64::NEG_INFINITY {
            if g == w {
                0.0
            } else {
                f64::INFINITY
            }
        } else if g.is_finite() {
            (g - w).abs()
        } else {
            f64::INFINITY
        };
        if e > worst.0 || (e.is_infinite() && !worst.0.is_infinite()) {
            worst = (e, i);
        }
    }
    worst
}

/// Panic unless every LSE is within [`lse_atol`] of the reference (with `-inf` exact).
pub fn assert_lse(what: &str, dtype: &str, got: &[f64], want: &[f64]) {
    let (e, i) = lse_err(got, want);
    assert!(
        e <= lse_atol(dtype),
        "{what}: LSE error {e:.3e} at {i} (got {}, want {}; atol {})",
        got[i],
        want[i],
        lse_atol(dtype)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_bottom_right_and_fully_masked_rows() {
        // Sq = 3 > Skv = 1: bottom-right alignment shows key 0 only to the last query.
        let s = AttnShape::dense(1, 3, 1, 1, 1, 2, true);
        assert!(!s.visible(0, 0, 3, 1) && !s.visible(1, 0, 3, 1) && s.visible(2, 0, 3, 1));
        let r = attn_ref(&s, &[1.0; 6], &[1.0, 2.0], &[5.0, 7.0]);
        assert_eq!(&r.out[..4], &[0.0; 4]);
        assert_eq!(&r.out[4..], &[5.0, 7.0]);
        assert_eq!(r.lse[0], f64::NEG_INFINITY);
        assert!(r.lse[2].is_finite());
    }

    #[test]
    fn gqa_maps_query_heads_to_their_group() {
        // heads 4 on 2 kv heads: q heads 0,1 read kv head 0; 2,3 read kv head 1.
        let s = AttnShape::dense(1, 1, 1, 4, 2, 1, false);
        let r = attn_ref(&s, &[1.0; 4], &[0.0, 0.0], &[10.0, 20.0]);
        assert_eq!(r.out, vec![10.0, 10.0, 20.0, 20.0]);
    }

    #[test]
    fn varlen_zero_length_sequence() {
        let s = AttnShape::varlen(&[2, 0, 1], &[1, 3, 0], 1, 1, 1, false);
        assert_eq!((s.total_q(), s.total_kv()), (3, 4));
        let r = attn_ref(&s, &[1.0, 1.0, 1.0], &[0.0; 4], &[3.0, 9.0, 9.0, 9.0]);
        assert_eq!(r.out, vec![3.0, 3.0, 0.0]);
        assert_eq!(r.lse[2], f64::NEG_INFINITY);
    }
}
