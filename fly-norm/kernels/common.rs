//! Building blocks shared by the norm kernels: dtype mapping, wide vector loads/stores,
//! horizontal and cross-lane reductions, and the per-row statistics of both norms.

use crate::config::{DType, Norm, MAX_WAVES};
use flydsl_dsl::ir::{ScalarType, Type};
use flydsl_dsl::*;

/// The IR scalar type of a dtype.
pub fn st(d: DType) -> ScalarType {
    match d {
        DType::F32 => ScalarType::F32,
        DType::F16 => ScalarType::F16,
        DType::BF16 => ScalarType::BF16,
    }
}

/// Elements of `elem` per 128-bit access.
fn per16(elem: ScalarType) -> u32 {
    16 / elem.size_bytes()
}

/// Load `lanes` consecutive elements at element `i` through a buffer resource, in 128-bit
/// pieces (an 8 x f32 vector is two loads).
pub fn rsrc_load(r: Rsrc, i: Val, lanes: u32) -> Val {
    let piece = per16(r.elem()).min(lanes);
    if piece == lanes {
        return r.load_vec(i, lanes, lanes * r.elem().size_bytes());
    }
    let mut elems = Vec::new();
    for p in 0..lanes / piece {
        let v = r.load_vec(i + (p * piece) as i32, piece, 16);
        elems.extend(v.elems());
    }
    vec_of(&elems)
}

/// Store vector `v` at element `i` through a buffer resource, in 128-bit pieces.
pub fn rsrc_store(r: Rsrc, i: Val, v: Val) {
    let lanes = v.lanes();
    let piece = per16(r.elem()).min(lanes);
    let align = piece * r.elem().size_bytes();
    for p in 0..lanes / piece {
        r.store_aligned(
            i + (p * piece) as i32,
            v.slice(p * piece, piece),
            align,
            false,
        );
    }
}

/// `v` itself, in a form the compilers cannot prove equal to `v`: its bits xor'ed with
/// `n >> 31` (0 for the row length `n >= 0` every launched kernel has; with `n < 0` no
/// element is in range, so nothing that depends on it is stored).
///
/// Widening a packed 2-byte vector to f32 once for the row sums and again from this copy
/// after the block reduction keeps only the packed value live across the reduction's
/// barrier: without it the compilers reuse the first widening and hold the f32 copy, twice
/// the registers (bf16 LayerNorm forward with 4 tiles on sm_90: 92 registers, 2 blocks of
/// 256 threads per SM, against 80 with it).
pub fn opaque(v: Val, n: Val) -> Val {
    let words = v.lanes() * v.elem().size_bytes() / 4;
    let ty = v.ty();
    let w = v.bitcast(Type::vec(ScalarType::I32, words));
    (w ^ splat(n >> 31, words)).bitcast(ty)
}

/// The f32 lanes of `v`. A bf16 widens exactly by moving its bits to the top half of an f32,
/// so a packed bf16 vector is widened with integer ops on its 32-bit words: `w << 16` gives
/// the even (low-half) element and `w & 0xffff0000` the odd one, two instructions a pair where
/// sm_90's generic conversion takes three (a shift for the low half, a byte permute and a
/// shift for the high one). The forward widens every x, gamma and beta element once or twice,
/// so this is a tenth of the bf16 LayerNorm forward's instructions. Other dtypes, and bf16
/// vectors of odd length, use `cast`.
pub fn widen(v: Val) -> Val {
    if v.elem() != ScalarType::BF16 || v.lanes() & 1 != 0 {
        return v.cast(ScalarType::F32);
    }
    let words = v.lanes() / 2;
    let w = v.bitcast(Type::vec(ScalarType::I32, words));
    let f = Type::vec(ScalarType::F32, words);
    let lo = (w << 16i32).bitcast(f).elems();
    let hi = (w & (0xffff_0000u32 as i32)).bitcast(f).elems();
    let e: Vec<Val> = lo.into_iter().zip(hi).flat_map(|(a, b)| [a, b]).collect();
    vec_of(&e)
}

/// Sum of a vector's lanes (a balanced tree).
pub fn hsum(v: Val) -> Val {
    tree(v.elems(), |a, b| a + b)
}

/// Max (maxNum) of a vector's lanes.
pub fn hmax(v: Val) -> Val {
    tree(v.elems(), |a, b| a.max(b))
}

fn tree(mut xs: Vec<Val>, f: impl Fn(Val, Val) -> Val) -> Val {
    while xs.len() > 1 {
        xs = xs
            .chunks(2)
            .map(|c| if c.len() == 2 { f(c[0], c[1]) } else { c[0] })
            .collect();
    }
    xs[0]
}

/// A reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Red {
    /// Sum.
    Sum,
    /// Max (maxNum: NaN operands are ignored; used on |y| >= 0).
    Max,
}

fn combine(r: Red, a: Val, b: Val) -> Val {
    match r {
        Red::Sum => a + b,
        Red::Max => a.max(b),
    }
}

/// Butterfly reduction of an f32 over the wave, or over aligned groups of `lanes` lanes when
/// given (a run-time power of two up to the wave size; steps wider than the group are
/// skipped with a select, so every lane executes the same shuffles).
pub fn group_reduce(v: Val, r: Red, lanes: Option<Val>) -> Val {
    let mut acc = v;
    let mut m = wave_size() / 2;
    while m >= 1 {
        let o = shuffle_xor(acc, m as i32);
        let c = combine(r, acc, o);
        acc = match lanes {
            None => c,
            Some(l) => select(c_i32(m as i32).lt(l), c, acc),
        };
        m /= 2;
    }
    acc
}

/// LDS slots the block reduction needs: `regions` regions of up to two values per wave.
pub fn scratch_len(regions: u32) -> u32 {
    regions * 2 * MAX_WAVES
}

/// Reduce up to two f32 values over a block of `nwaves` (run-time) waves: wave butterflies,
/// one LDS slot per wave and value in region `region` (uniform i32), one barrier, then a
/// butterfly over the per-wave partials. Every thread gets the results.
///
/// There is no trailing barrier: a caller that reduces again must use another region before
/// every wave is known to have read this one (rows alternate between regions by parity).
pub fn block_reduce2(vals: &[(Val, Red)], scratch: Lds, region: Val, nwaves: Val) -> Vec<Val> {
    let ws = wave_size() as i32;
    let w: Vec<Val> = vals
        .iter()
        .map(|&(v, r)| group_reduce(v, r, None))
        .collect();
    let wave = thread_id_x() / ws;
    let lane = lane_id();
    let base = region * (2 * MAX_WAVES) as i32;
    if_(lane.eq(0), || {
        for (j, &wj) in w.iter().enumerate() {
            scratch.store(base + wave + (j as u32 * MAX_WAVES) as i32, wj);
        }
    });
    barrier();
    let slot = lane.min(nwaves - 1);
    vals.iter()
        .enumerate()
        .map(|(j, &(_, r))| {
            let part = scratch.load(base + slot + (j as u32 * MAX_WAVES) as i32);
            let part = select(lane.lt(nwaves), part, c_f32(0.0));
            group_reduce(part, r, None)
        })
        .collect()
}

/// Per-row statistics of a norm: from partial sums to (mean, rstd).
#[derive(Clone, Copy, Debug)]
pub struct RowMath {
    /// Which norm.
    pub norm: Norm,
    /// 1 / n (f32).
    pub inv_n: Val,
    /// eps (f32).
    pub eps: Val,
}

impl RowMath {
    /// `inv_n` from the i32 row length.
    pub fn new(norm: Norm, n: Val, eps: Val) -> RowMath {
        RowMath {
            norm,
            inv_n: c_f32(1.0) / n.cast(ScalarType::F32),
            eps,
        }
    }
    /// The per-thread partial sums of an f32 vector: (sum, sum of squares) for LayerNorm,
    /// (sum of squares) for RMSNorm.
    pub fn partials(&self, xf: Val) -> Vec<Val> {
        let sq = hsum(xf * xf);
        match self.norm {
            Norm::Layer => vec![hsum(xf), sq],
            Norm::Rms => vec![sq],
        }
    }
    /// The per-thread partial sums of several f32 vectors of one length (as
    /// [`RowMath::partials`] summed over them): lane-wise accumulation over the vectors, the
    /// squares by fused multiply-adds, then one tree per sum (`8 * tiles + 7` instructions a
    /// sum of 8-lane vectors; the squares take `15 * tiles + tiles - 1` by `partials`).
    pub fn partials_of(&self, xs: &[Val]) -> Vec<Val> {
        let (x0, rest) = xs.split_first().expect("at least one vector");
        let sq = hsum(rest.iter().fold(*x0 * *x0, |acc, &x| x.fma(x, acc)));
        match self.norm {
            Norm::Layer => {
                let s = hsum(rest.iter().fold(*x0, |acc, &x| acc + x));
                vec![s, sq]
            }
            Norm::Rms => vec![sq],
        }
    }
    /// Zero partial sums.
    pub fn zeros(&self) -> Vec<Val> {
        match self.norm {
            Norm::Layer => vec![c_f32(0.0), c_f32(0.0)],
            Norm::Rms => vec![c_f32(0.0)],
        }
    }
    /// Add two lists of partial sums.
    pub fn add(&self, a: &[Val], b: &[Val]) -> Vec<Val> {
        a.iter().zip(b).map(|(&x, &y)| x + y).collect()
    }
    /// (mean, rstd) from row totals. LayerNorm: var = E[x^2] - mean^2 clamped at 0 (a NaN
    /// stays NaN); RMSNorm: mean is 0.
    pub fn stats(&self, sums: &[Val]) -> (Val, Val) {
        match self.norm {
            Norm::Layer => {
                let mean = sums[0] * self.inv_n;
                let var = sums[1] * self.inv_n - mean * mean;
                let var = select(var.lt(0.0f32), c_f32(0.0), var);
                (mean, (var + self.eps).rsqrt())
            }
            Norm::Rms => (c_f32(0.0), (sums[0] * self.inv_n + self.eps).rsqrt()),
        }
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

/// Dynamic int8 quantisation of one value or vector `ys` (f32) given the row's `inv_scale`
/// (= 1 / yscale): `trunc(ys * inv_scale)` saturated to i32 (NaN -> 0), clamped to
/// [-127, 127], as i8.
pub fn quantize(ys: Val, inv_scale: Val) -> Val {
    let l = ys.lanes();
    let q = (ys * splat(inv_scale, l)).cast(ScalarType::I32);
    q.max(-127i32).min(127i32).cast(ScalarType::I8)
}

/// The row's yscale (`amax / 127`, or 1 when amax is 0) and its reciprocal.
pub fn quant_scale(amax: Val) -> (Val, Val) {
    let s = amax / 127.0f32;
    let s = select(amax.eq(0.0f32), c_f32(1.0), s);
    (s, c_f32(1.0) / s)
}
