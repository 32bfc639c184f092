//! What the norm kernels share beyond [`flydsl_dsl::blocks`] (reductions, row loads, dtype
//! helpers): the LDS regions of their block reductions and the per-row statistics of both
//! norms.

pub use flydsl_dsl::blocks::{
    block_reduce_n, group_reduce, hmax, hsum, load_vec, opaque, store_vec, team_reduce, widen,
    Group, Op, Scratch,
};

use crate::config::{Norm, MAX_WAVES};
use flydsl_dsl::ir::{ScalarType, Type};
use flydsl_dsl::*;

/// LDS slots the block reductions need: `regions` regions of up to two values per wave.
pub fn scratch_len(regions: u32) -> u32 {
    Scratch::len(regions, 2, MAX_WAVES)
}

/// Region `region` (uniform i32) of the block reductions' LDS `scratch` ([`scratch_len`]):
/// up to two values of up to [`MAX_WAVES`] waves. Consecutive reductions alternate between
/// regions (see [`block_reduce_n`]: no trailing barrier).
pub fn red_region(scratch: Lds, region: Val) -> Scratch {
    Scratch::new(scratch, MAX_WAVES).region(region, 2 * MAX_WAVES)
}

/// A lane-wise reduction of a wave, or of aligned groups of `lanes` lanes when given (a
/// run-time power of two up to the wave size).
pub fn lanes_reduce(v: Val, op: Op, lanes: Option<Val>) -> Val {
    let g = lanes.map_or(Group::Wave, Group::Dyn);
    group_reduce(v, g, |a, b| op.apply(a, b))
}

/// `+inf` as an f32 constant.
pub fn inf() -> Val {
    c_f32(f32::INFINITY)
}

/// The step of a [`Share`]'s fold: `acc = step(acc, x, keep)`.
pub type Step<'a> = &'a dyn Fn(&[Val], Val, Val) -> Vec<Val>;

/// One lane's share of a row, for the overflow fallback ([`RowMath::rescaled`]).
pub struct Share<'a> {
    /// `fold(init, f)`: runs `acc = f(acc, x, keep)` over this lane's f32 vectors `x` of the
    /// row and returns the final `acc`; `keep` is an f32 1.0, or 0.0 for padding vectors past
    /// the row's end (which read as zeros).
    pub fold: &'a dyn Fn(&[Val], Step) -> Vec<Val>,
    /// Combines the lanes' values over the lanes that share the row (the identity when one
    /// lane holds the whole row). Called from the branch on [`RowMath::overflowed`], so only
    /// a block-uniform branch may reduce across lanes.
    #[allow(clippy::type_complexity)]
    pub reduce: &'a dyn Fn(&[(Val, Op)]) -> Vec<Val>,
}

/// Per-row statistics of a norm: from partial sums to (mean, rstd).
///
/// Accuracy and range (the contract the tests in `tests/numerics_sim.rs` check):
///
/// - LayerNorm's variance is never `E[x^2] - mean^2`. The register-resident paths sum the
///   deviations `d = x - x0` from the row's first element (after the fused add) in one
///   pass over the registers and one reduction, and take `c = sum(d) / n`,
///   `var = sum(d^2) / n - c^2`, `mean = x0 + c` ([`RowMath::shifted_stats`]: exact for
///   constant rows, and accurate whatever `|mean| / std`). The looped path takes one pass:
///   each thread sums its elements shifted by its first one and the threads' (count, mean
///   relative to the row's first element, M2) are merged by Chan's formulas
///   ([`chan_block_reduce`]): one pass over memory, as before.
/// - Sums of squares cannot overflow for finite inputs: when a row's sums come out
///   infinite (squares past f32's range: |x| above about `1.8e19 / sqrt(n)`), the row's
///   statistics are recomputed from the row scaled by a power of two that brings its
///   largest |x| into [2, 4) ([`RowMath::rescaled`]). The test costs the common case one
///   compare and a uniform branch per row. The recomputation takes two passes, each with
///   one reduction: on the fast path over the registers the row already lives in (its
///   branch is uniform over the block, so it reduces across the block); on the multi-row
///   path each lane reads the whole row itself from memory, so that the branch needs no
///   cross-lane operation and may diverge between the rows of a wave, and then its own
///   vectors again, so that no register holds them across the branch; on the generic path
///   over the thread's elements in memory. A row with a NaN skips it on the vectorised
///   paths and RMSNorm's generic path (its outputs are NaN either way); LayerNorm's generic
///   path cannot tell NaN from overflow after the merge, so such rows pay the fallback's
///   first pass. A row with an infinity keeps its non-finite statistics.
/// - What remains: `x - mean` in f32 overflows when |x - mean| passes f32's maximum (as in
///   any f32 implementation), and `eps` below the smallest normal f32 is flushed to 0.
#[derive(Clone, Copy, Debug)]
pub struct RowMath {
    /// Which norm.
    pub norm: Norm,
    /// n (f32).
    pub nf: Val,
    /// 1 / n (f32).
    pub inv_n: Val,
    /// eps (f32).
    pub eps: Val,
}

/// Sum of the lanes of several f32 vectors of one length: lane-wise first, then one tree
/// (`lean`), or a tree per vector.
fn sum_of(xs: &[Val], lean: bool) -> Val {
    if lean {
        let (x0, rest) = xs.split_first().expect("at least one vector");
        hsum(rest.iter().fold(*x0, |acc, &x| acc + x))
    } else {
        xs.iter().fold(c_f32(0.0), |acc, &x| acc + hsum(x))
    }
}

/// Sum of the squared lanes of several f32 vectors: lane-wise fused multiply-adds and one
/// tree (`lean`: `8 * tiles + 7` instructions for 8-lane vectors), or a tree per vector.
fn sum_sq_of(xs: &[Val], lean: bool) -> Val {
    if lean {
        let (x0, rest) = xs.split_first().expect("at least one vector");
        hsum(rest.iter().fold(*x0 * *x0, |acc, &x| x.fma(x, acc)))
    } else {
        xs.iter().fold(c_f32(0.0), |acc, &x| acc + hsum(x * x))
    }
}

impl RowMath {
    /// `inv_n` from the i32 row length.
    pub fn new(norm: Norm, n: Val, eps: Val) -> RowMath {
        let nf = n.cast(ScalarType::F32);
        RowMath {
            norm,
            nf,
            inv_n: c_f32(1.0) / nf,
            eps,
        }
    }
    /// The first pass's per-lane partial of the register-resident f32 vectors `xs` (padding
    /// vectors read as zeros): `sum(x)` (LayerNorm) or `sum(x^2)` (RMSNorm).
    pub fn first_partial(&self, xs: &[Val], lean: bool) -> Val {
        match self.norm {
            Norm::Layer => sum_of(xs, lean),
            Norm::Rms => sum_sq_of(xs, lean),
        }
    }
    /// LayerNorm's per-lane shifted partials `(sum(d), sum(d^2))` of `d = x - shift` over
    /// the register-resident f32 vectors `xs` (`shift`: the row's first element). Vectors past
    /// the row's end (`ok[t]` false) read as zeros and subtract 0 instead of `shift` (a scalar
    /// select a vector), so their `d` is 0. Summed as [`RowMath::first_partial`] sums: one
    /// subtraction an element more than `sum(x)` and `sum(x^2)` (`lean`: lane-wise adds and
    /// fused multiply-adds across the vectors, then one tree a sum).
    pub fn dev_partials(&self, xs: &[Val], ok: &[Val], shift: Val, lean: bool) -> (Val, Val) {
        let ds: Vec<Val> = xs
            .iter()
            .zip(ok)
            .map(|(&x, &k)| x - splat(select(k, shift, 0.0f32), x.lanes()))
            .collect();
        (sum_of(&ds, lean), sum_sq_of(&ds, lean))
    }
    /// LayerNorm: (mean, rstd) from the row totals `(sum(d), sum(d^2))` of the deviations
    /// from `shift`, an element of the row: `c = sum(d) / n`, `var = sum(d^2) / n - c^2`
    /// (clamped at 0; a NaN stays NaN), `mean = shift + c`. The cancellation in `var` is that
    /// of `(shift - mean)^2 / var`, at most `n` whatever `|mean| / std`; a constant row has
    /// `d = 0`, so var 0 and the mean `shift` exactly (multiplying by `1 / n` keeps that).
    pub fn shifted_stats(&self, shift: Val, sd: Val, sq: Val) -> (Val, Val) {
        let c = sd * self.inv_n;
        let var = sq * self.inv_n - c * c;
        let var = select(var.lt(0.0f32), c_f32(0.0), var);
        (shift + c, (var + self.eps).rsqrt())
    }
    /// LayerNorm's `xhat = x * r + nb`, one fused multiply-add an element, for inputs of a
    /// dtype of `sig` significant bits (bf16 8, f16 11) from a row holding `shift`: `r` is
    /// `rstd` truncated to `24 - sig` significant bits (relative error below `2^(sig - 24)`),
    /// so that `shift * r` is exact and `nb = (shift - mean) * r - shift * r` is `-mean * r`
    /// rounded once. `xhat` errs by half an ulp of `mean * r` (within the 2^-24 roundings of
    /// the f32 mean any implementation makes), and a constant row (`mean = shift`) gives
    /// `xhat = 0` exactly. `nb` can only overflow for a constant row (a row of distinct
    /// values of the dtype has `|shift| * rstd` below about `2^9 * sqrt(2n)`): then `(0, 0)`,
    /// which keeps its `xhat` 0. A NaN `rstd` stays NaN (the mask keeps the quiet bit).
    pub fn xhat_fma(&self, shift: Val, mean: Val, rstd: Val, sig: u32) -> (Val, Val) {
        use ScalarType::{F32, I32};
        let mask = !((1i32 << sig) - 1);
        let r = (rstd.bitcast(Type::s(I32)) & mask).bitcast(Type::s(F32));
        let sr = shift * r;
        let nb = (shift - mean).fma(r, -sr);
        let big = nb.abs().eq(f32::INFINITY);
        (select(big, c_f32(0.0), r), select(big, c_f32(0.0), nb))
    }
    /// RMSNorm: rstd from the row's sum of squares.
    pub fn rms_rstd(&self, ss: Val) -> Val {
        (ss * self.inv_n + self.eps).rsqrt()
    }
    /// The corrected two-pass (mean, var): `c = sum(d) / n`, `var = sum(d^2) / n - c^2`
    /// (clamped at 0; a NaN stays NaN), `mean + c`. Divided, not multiplied by `1 / n`: a
    /// constant row's deviations are all one `d`, its sums `n * d` and `n * d^2` are exact,
    /// and so `c = d` and `var = 0` exactly, as the f64 reference and torch give.
    fn corrected(&self, mean: Val, sd: Val, sq: Val) -> (Val, Val) {
        let c = sd / self.nf;
        let var = sq / self.nf - c * c;
        let var = select(var.lt(0.0f32), c_f32(0.0), var);
        (mean + c, var)
    }
    /// Whether a row needs [`RowMath::rescaled`]: its totals overflowed (`mean` infinite, or
    /// the sum of squares `sq` +inf; a NaN does not count). For RMSNorm pass `mean` = 0.
    pub fn overflowed(&self, mean: Val, sq: Val) -> Val {
        mean.abs().max(sq).eq(f32::INFINITY)
    }
    /// The row's `(mean, rstd)` from the row scaled by `sc = 2^(128 - E)`, `E` the biased
    /// exponent of its largest |x| (clamped to 1..=254): the scaled values are at most 4, so
    /// no sum can overflow. LayerNorm sums the scaled deviations `d = x * sc - shift * sc`
    /// from `shift` (an element of the row, as [`RowMath::shifted_stats`]: `x * sc` and
    /// `shift * sc` are exact, so `d` is `(x - shift) * sc` rounded once), and takes
    /// `mean = shift + c / sc` with `c = sum(d) / n`, `var' = sum(d^2) / n - c^2`; RMSNorm
    /// sums the scaled squares. Then `rstd = sc / sqrt(var' + eps * sc^2)` (capped at
    /// `1 / sqrt(eps)`, which it cannot exceed, for when `eps * sc^2` underflows and `var'` is
    /// 0). A row with a NaN or an infinity keeps `orig` after the first pass. Two passes over
    /// `share`, each with one reduction (so that the block reductions' regions keep
    /// alternating: see `fwd.rs`).
    pub fn rescaled(&self, share: &Share, shift: Val, orig: (Val, Val)) -> (Val, Val) {
        use ScalarType::{F32, I32};
        let fold = share.fold;
        let reduce = share.reduce;
        let zero = c_f32(0.0);
        let first = fold(&[zero, zero], &|a, x, _| {
            vec![a[0].max(hmax(x.abs())), a[1] + hsum(x * 0.0f32)]
        });
        let r = reduce(&[(first[0], Op::Max), (first[1], Op::Sum)]);
        let amax = r[0];
        // A NaN or an infinity in the row (sum of x * 0 not 0): keep `orig`.
        let bad = r[1].ne(0.0f32);
        let e = (amax.bitcast(Type::s(I32)) >> 23).max(1i32).min(254i32);
        let sc = ((c_i32(255) - e) << 23).bitcast(Type::s(F32));
        let unsc = (e << 23).bitcast(Type::s(F32)); // 2 / sc
        let rstd_of = |var: Val| (sc * (var + self.eps * sc * sc).rsqrt()).min(self.eps.rsqrt());
        let scaled = || match self.norm {
            Norm::Rms => {
                let ss = fold(&[zero], &|a, x, _| {
                    let xs = x * splat(sc, x.lanes());
                    vec![a[0] + hsum(xs * xs)]
                })[0];
                let ss = reduce(&[(ss, Op::Sum)])[0];
                vec![zero, rstd_of(ss * self.inv_n)]
            }
            Norm::Layer => {
                let ss = shift * sc;
                let part = fold(&[zero, zero], &|a, x, k| {
                    let l = x.lanes();
                    let d = x.fma(splat(sc, l), splat(-(ss * k), l));
                    vec![a[0] + hsum(d), a[1] + hsum(d * d)]
                });
                let tot = reduce(&[(part[0], Op::Sum), (part[1], Op::Sum)]);
                let (c, var) = self.corrected(zero, tot[0], tot[1]);
                vec![shift + (c * 0.5f32) * unsc, rstd_of(var)]
            }
        };
        let r = if_else(bad, || vec![orig.0, orig.1], scaled);
        (r[0], r[1])
    }
    /// `xhat = (x - mean) * rstd` (LayerNorm) or `x * rstd` (RMSNorm) of an f32 vector or scalar.
    pub fn xhat(&self, xf: Val, mean: Val, rstd: Val) -> Val {
        let l = xf.lanes();
        match self.norm {
            Norm::Layer => (xf - splat(mean, l)) * splat(rstd, l),
            Norm::Rms => xf * splat(rstd, l),
        }
    }
    /// `y = xhat * gamma (+ beta)` in f32.
    pub fn y(&self, xhat: Val, g: Val, b: Val) -> Val {
        match self.norm {
            Norm::Layer => xhat.fma(g, b),
            Norm::Rms => xhat * g,
        }
    }
}

/// Merge two partial moments `(count, mean, M2)` (Chan et al.): `count = ca + cb`,
/// `mean = ma + (mb - ma) * cb / count`, `M2 = Ma + Mb + (mb - ma)^2 * ca * cb / count`.
/// An empty side (count 0, mean 0, M2 0) leaves the other unchanged.
pub fn chan_merge(a: [Val; 3], b: [Val; 3]) -> [Val; 3] {
    let c = a[0] + b[0];
    let wb = b[0] / c.max(1.0f32);
    let d = b[1] - a[1];
    [c, d.fma(wb, a[1]), a[2] + b[2] + d * d * (a[0] * wb)]
}

/// Merge the per-thread moments `(count, mean, M2)` of a block of `threads` (build-time)
/// threads: [`chan_merge`] as the tuple merge of a [`team_reduce`] over the block, its three
/// values in region `region` and the next one ([`red_region`]: 4 slots per wave), so all threads
/// get the same bits. No trailing barrier.
pub fn chan_block_reduce(m: [Val; 3], scratch: Lds, region: Val, threads: u32) -> [Val; 3] {
    let r = team_reduce(&m, threads, Some(red_region(scratch, region)), |a, b| {
        chan_merge([a[0], a[1], a[2]], [b[0], b[1], b[2]]).to_vec()
    });
    [r[0], r[1], r[2]]
}

/// Dynamic int8 quantisation of one value or vector `ys` (f32) given the row's `inv_scale`
/// (= 1 / yscale): `trunc(ys * inv_scale)` saturated to i32 (NaN -> 0), clamped to
/// [-127, 127], as i8.
pub fn quantize(ys: Val, inv_scale: Val) -> Val {
    let l = ys.lanes();
    let q = (ys * splat(inv_scale, l)).cast(ScalarType::I32);
    q.max(-127i32).min(127i32).cast(ScalarType::I8)
}

/// Fold the elements of `ys` (f32 vectors or scalars) into the f32 `acc` (start at 0):
/// `acc + y * 0`, one fused multiply-add an element in one scalar chain. The sum stays 0
/// while every `y` is finite and becomes NaN at the first NaN or infinity: the quant paths'
/// detector of non-finite outputs, which the maxNum of `amax` would skip.
pub fn nonfinite_acc(acc: Val, ys: &[Val]) -> Val {
    ys.iter()
        .flat_map(|y| y.elems())
        .fold(acc, |a, e| e.fma(0.0f32, a))
}

/// A lane's amax for the row's yscale: `amax`, or +inf when its non-finite detector `nf`
/// (from [`nonfinite_acc`]) is not 0, so that the maxNum reductions across lanes keep it.
pub fn amax_or_inf(amax: Val, nf: Val) -> Val {
    select(nf.eq(0.0f32), amax, inf())
}

/// The row's yscale (`amax / 127`, or 1 when amax is 0) and its reciprocal. A row with a
/// NaN or infinite output has `amax` = +inf ([`amax_or_inf`]): yscale +inf, and every `q`
/// of the row 0 (`y * 0` is 0 or NaN, and NaN converts to 0), so dequantised values are NaN.
pub fn quant_scale(amax: Val) -> (Val, Val) {
    let s = amax / 127.0f32;
    let s = select(amax.eq(0.0f32), c_f32(1.0), s);
    (s, c_f32(1.0) / s)
}
