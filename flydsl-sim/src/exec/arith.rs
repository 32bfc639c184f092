//! Elementwise ops over whole thread vectors: constants, arithmetic, compares, casts, vector
//! shuffling and pointer arithmetic.

use super::Wg;
use crate::fpmode::ftz;
use crate::memory::{join, split, LDS_HANDLE_BASE};
use crate::numeric::*;
use crate::SimError;
use flydsl_ir::{BinOp, CastKind, CmpPred, Const, ScalarType, UnOp, ValueId};

/// Call `f(i)` for every word index `i` of the active threads (`w` words per thread).
#[inline]
pub(super) fn each(act: &[u32], w: usize, mut f: impl FnMut(usize)) {
    for &t in act {
        let b = t as usize * w;
        for i in b..b + w {
            f(i);
        }
    }
}

/// IEEE `minimum` (NaN-propagating, -0 < +0).
fn minimum(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else if x == y {
        if x.is_sign_negative() {
            x
        } else {
            y
        }
    } else if x < y {
        x
    } else {
        y
    }
}

/// IEEE `maximum` (NaN-propagating, +0 > -0).
fn maximum(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else if x == y {
        if x.is_sign_negative() {
            y
        } else {
            x
        }
    } else if x > y {
        x
    } else {
        y
    }
}

#[inline]
fn fbin(op: BinOp, x: f32, y: f32) -> f32 {
    match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => x / y,
        BinOp::Rem => x % y,
        BinOp::Min => x.min(y),
        BinOp::Max => x.max(y),
        BinOp::MinNan => minimum(x, y),
        BinOp::MaxNan => maximum(x, y),
        _ => f32::NAN,
    }
}

/// `r[k] = f(va[k], vb[k])` over the active words (one loop per op, no match inside).
#[inline(always)]
fn map2(
    act: &[u32],
    w: usize,
    r: &mut [u64],
    va: &[u64],
    vb: &[u64],
    mut f: impl FnMut(u64, u64) -> u64,
) {
    each(act, w, |k| r[k] = f(va[k], vb[k]));
}

/// An f32 binary op, flushing denormal inputs and results when `FLUSH`.
#[inline(always)]
fn f32_map<const FLUSH: bool>(
    act: &[u32],
    w: usize,
    r: &mut [u64],
    va: &[u64],
    vb: &[u64],
    f: impl Fn(f32, f32) -> f32,
) {
    let g = |v: u64| {
        let x = f32::from_bits(v as u32);
        if FLUSH {
            ftz(x)
        } else {
            x
        }
    };
    map2(act, w, r, va, vb, |a, b| {
        let z = f(g(a), g(b));
        (if FLUSH { ftz(z) } else { z }).to_bits() as u64
    });
}

/// f32 binary ops, the common ones with their own loop.
fn f32_binary<const FLUSH: bool>(
    op: BinOp,
    act: &[u32],
    w: usize,
    r: &mut [u64],
    va: &[u64],
    vb: &[u64],
) {
    match op {
        BinOp::Add => f32_map::<FLUSH>(act, w, r, va, vb, |x, y| x + y),
        BinOp::Sub => f32_map::<FLUSH>(act, w, r, va, vb, |x, y| x - y),
        BinOp::Mul => f32_map::<FLUSH>(act, w, r, va, vb, |x, y| x * y),
        BinOp::Div => f32_map::<FLUSH>(act, w, r, va, vb, |x, y| x / y),
        BinOp::Max => f32_map::<FLUSH>(act, w, r, va, vb, f32::max),
        BinOp::Min => f32_map::<FLUSH>(act, w, r, va, vb, f32::min),
        _ => f32_map::<FLUSH>(act, w, r, va, vb, |x, y| fbin(op, x, y)),
    }
}

/// Integer ops that cannot fault, one loop per op; false when `op` needs [`ibin`].
fn int_fast(
    op: BinOp,
    bits: u32,
    act: &[u32],
    w: usize,
    r: &mut [u64],
    va: &[u64],
    vb: &[u64],
) -> bool {
    let m = mask(bits);
    // Widths are powers of two: `& (bits - 1)` is the shift amount modulo the width.
    let sh = bits as u64 - 1;
    match op {
        BinOp::Add => map2(act, w, r, va, vb, |a, b| a.wrapping_add(b) & m),
        BinOp::Sub => map2(act, w, r, va, vb, |a, b| a.wrapping_sub(b) & m),
        BinOp::Mul => map2(act, w, r, va, vb, |a, b| a.wrapping_mul(b) & m),
        BinOp::And => map2(act, w, r, va, vb, |a, b| a & b & m),
        BinOp::Or => map2(act, w, r, va, vb, |a, b| (a | b) & m),
        BinOp::Xor => map2(act, w, r, va, vb, |a, b| (a ^ b) & m),
        BinOp::Shl => map2(act, w, r, va, vb, |a, b| (a << (b & sh)) & m),
        BinOp::LShr => map2(act, w, r, va, vb, |a, b| (a & m) >> (b & sh)),
        _ => return false,
    }
    true
}

/// [`int_fast`] for the checked index ops (`Add`, `Sub`, `Mul`, `Shl`): the same results, and
/// whether any lane overflowed its signed range. `None` for other ops.
fn int_checked(
    op: BinOp,
    bits: u32,
    act: &[u32],
    w: usize,
    r: &mut [u64],
    va: &[u64],
    vb: &[u64],
) -> Option<bool> {
    if !matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Shl) {
        return None;
    }
    let sh = bits as u64 - 1;
    let mut ovf = false;
    if bits <= 32 {
        match op {
            BinOp::Add => checked_map(bits, act, w, r, va, vb, &mut ovf, |x, y, _| x + y),
            BinOp::Sub => checked_map(bits, act, w, r, va, vb, &mut ovf, |x, y, _| x - y),
            BinOp::Mul => checked_map(bits, act, w, r, va, vb, &mut ovf, |x, y, _| x * y),
            _ => checked_map(bits, act, w, r, va, vb, &mut ovf, |x, _, s| x << s),
        }
    } else {
        map2(act, w, r, va, vb, |a, b| {
            let (x, y, s) = (a as i64, b as i64, (b & sh) as u32);
            let (z, o) = match op {
                BinOp::Add => x.overflowing_add(y),
                BinOp::Sub => x.overflowing_sub(y),
                BinOp::Mul => x.overflowing_mul(y),
                _ => {
                    let z = x.wrapping_shl(s);
                    (z, z.wrapping_shr(s) != x)
                }
            };
            ovf |= o;
            z as u64
        });
    }
    Some(ovf)
}

/// One checked op at `bits <= 32`: exact in i64; a lane overflowed when its result does not
/// survive the round trip through `bits`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn checked_map(
    bits: u32,
    act: &[u32],
    w: usize,
    r: &mut [u64],
    va: &[u64],
    vb: &[u64],
    ovf: &mut bool,
    f: impl Fn(i64, i64, u64) -> i64,
) {
    let m = mask(bits);
    let sh = bits as u64 - 1;
    let mut o = false;
    map2(act, w, r, va, vb, |a, b| {
        let e = f(sext(a, bits), sext(b, bits), b & sh);
        o |= sext(e as u64, bits) != e;
        e as u64 & m
    });
    *ovf |= o;
}

/// Integer binary op on canonical bits of width `bits`.
#[inline]
fn ibin(op: BinOp, a: u64, b: u64, bits: u32) -> Result<u64, &'static str> {
    let m = mask(bits);
    let (sa, sb) = (sext(a, bits), sext(b, bits));
    let smin = sext(1u64 << (bits - 1), bits);
    let sdiv_check = || {
        if sb == 0 {
            Err("signed division by zero")
        } else if sa == smin && sb == -1 {
            Err("signed division overflow (MIN / -1)")
        } else {
            Ok(())
        }
    };
    let amt = (b & m) % bits as u64;
    Ok(match op {
        BinOp::Add => a.wrapping_add(b) & m,
        BinOp::Sub => a.wrapping_sub(b) & m,
        BinOp::Mul => a.wrapping_mul(b) & m,
        BinOp::Div => {
            sdiv_check()?;
            (sa.wrapping_div(sb) as u64) & m
        }
        BinOp::Rem => {
            sdiv_check()?;
            (sa.wrapping_rem(sb) as u64) & m
        }
        BinOp::UDiv => {
            if b & m == 0 {
                return Err("unsigned division by zero");
            }
            (a & m) / (b & m)
        }
        BinOp::URem => {
            if b & m == 0 {
                return Err("unsigned remainder by zero");
            }
            (a & m) % (b & m)
        }
        BinOp::And => a & b & m,
        BinOp::Or => (a | b) & m,
        BinOp::Xor => (a ^ b) & m,
        BinOp::Shl => (a << amt) & m,
        BinOp::LShr => (a & m) >> amt,
        BinOp::AShr => ((sa >> amt) as u64) & m,
        BinOp::Min => (sa.min(sb) as u64) & m,
        BinOp::Max => (sa.max(sb) as u64) & m,
        BinOp::UMin => (a & m).min(b & m),
        BinOp::UMax => (a & m).max(b & m),
        BinOp::MinNan | BinOp::MaxNan => return Err("NaN-propagating min/max on integers"),
    })
}

/// Unary float op on the bits of type `t`.
fn fun(op: UnOp, t: ScalarType, b: u64) -> u64 {
    let sign = 1u64 << (t.bits() - 1);
    match op {
        UnOp::Neg => return b ^ sign,
        UnOp::Abs => return b & !sign,
        _ => {}
    }
    let x = float_val(t, b);
    if t == ScalarType::F32 {
        let hw = |x: f64, f: fn(f64) -> f64| {
            // Hardware transcendental: denormal inputs and outputs flush to zero.
            let r = f(flush_denorm(x)) as f32;
            let r = if r.is_subnormal() {
                0.0f32.copysign(r)
            } else {
                r
            };
            r.to_bits() as u64
        };
        return match op {
            UnOp::Exp2 => hw(x, f64::exp2),
            UnOp::Log2 => hw(x, f64::log2),
            UnOp::Rsqrt => hw(x, |x| 1.0 / x.sqrt()),
            UnOp::Rcp => hw(x, |x| 1.0 / x),
            UnOp::Sqrt => (x as f32).sqrt().to_bits() as u64,
            UnOp::Trunc => (x as f32).trunc().to_bits() as u64,
            UnOp::Floor => (x as f32).floor().to_bits() as u64,
            _ => b,
        };
    }
    let r = match op {
        UnOp::Exp2 => x.exp2(),
        UnOp::Log2 => x.log2(),
        UnOp::Rsqrt => 1.0 / x.sqrt(),
        UnOp::Rcp => 1.0 / x,
        UnOp::Sqrt => x.sqrt(),
        UnOp::Trunc => x.trunc(),
        UnOp::Floor => x.floor(),
        _ => x,
    };
    float_bits(t, r)
}

fn iun(op: UnOp, b: u64, bits: u32) -> u64 {
    let m = mask(bits);
    match op {
        UnOp::Neg => 0u64.wrapping_sub(b) & m,
        UnOp::Not => !b & m,
        UnOp::Abs => (sext(b, bits).wrapping_abs() as u64) & m,
        _ => b,
    }
}

fn icmp(p: CmpPred, a: u64, b: u64, bits: u32) -> bool {
    let (sa, sb) = (sext(a, bits), sext(b, bits));
    let (ua, ub) = (a & mask(bits), b & mask(bits));
    match p {
        CmpPred::Eq => ua == ub,
        CmpPred::Ne => ua != ub,
        CmpPred::Lt => sa < sb,
        CmpPred::Le => sa <= sb,
        CmpPred::Gt => sa > sb,
        CmpPred::Ge => sa >= sb,
        CmpPred::ULt => ua < ub,
        CmpPred::ULe => ua <= ub,
        CmpPred::UGt => ua > ub,
        CmpPred::UGe => ua >= ub,
    }
}

fn fcmp(p: CmpPred, x: f64, y: f64) -> bool {
    match p {
        CmpPred::Eq => x == y,
        CmpPred::Ne => x != y,
        CmpPred::Lt => x < y,
        CmpPred::Le => x <= y,
        CmpPred::Gt => x > y,
        CmpPred::Ge => x >= y,
        _ => false,
    }
}

/// Numeric conversion of one element.
pub(crate) fn convert(b: u64, from: ScalarType, to: ScalarType, unsigned: bool) -> u64 {
    match (from.is_float(), to.is_float()) {
        (false, false) => {
            if unsigned {
                b & mask(from.bits()) & mask(to.bits())
            } else {
                int_bits(to, sext(b, from.bits()))
            }
        }
        (false, true) => int_to_float(b, from, unsigned, to),
        (true, false) => float_to_int(float_val(from, b), to, unsigned),
        (true, true) => {
            if from == ScalarType::F32 {
                f32_to(to, f32::from_bits(b as u32))
            } else {
                float_bits(to, float_val(from, b))
            }
        }
    }
}

/// The low `bits` bits of an exact result.
fn int_bits_w(x: i128, bits: u32) -> u64 {
    (x as u64) & mask(bits)
}

/// The exact (unwrapped) result of a checked index op, when it differs from the wrapped one
/// read back at `bits` (signed).
#[inline]
fn index_overflow(op: BinOp, a: u64, b: u64, bits: u32) -> Option<(i128, char)> {
    if bits <= 32 {
        // Fast path: exact in i64, no overflow in the common case.
        let (sa, sb) = (sext(a, bits), sext(b, bits));
        let exact = match op {
            BinOp::Add => sa + sb,
            BinOp::Sub => sa - sb,
            BinOp::Mul => sa * sb,
            BinOp::Shl => sa << ((b & mask(bits)) % bits as u64),
            _ => return None,
        };
        if sext(exact as u64, bits) == exact {
            return None;
        }
    }
    let (sa, sb) = (sext(a, bits) as i128, sext(b, bits) as i128);
    let (exact, sym) = match op {
        BinOp::Add => (sa + sb, '+'),
        BinOp::Sub => (sa - sb, '-'),
        BinOp::Mul => (sa * sb, '*'),
        BinOp::Shl => (sa << ((b & mask(bits)) % bits as u64), '<'),
        _ => return None,
    };
    let (lo, hi) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    (exact < lo || exact > hi).then_some((exact, sym))
}

/// The bits of type `t` with an f32-denormal value replaced by a zero of the same sign.
fn daz_bits(t: ScalarType, b: u64) -> u64 {
    if t == ScalarType::F32 {
        ftz(f32::from_bits(b as u32)).to_bits() as u64
    } else {
        f32_to(t, ftz(f32_of(t, b)))
    }
}

impl Wg<'_, '_> {
    /// Whether arithmetic on `t` flushes f32 denormals on this target (see [`crate::fpmode`]).
    #[inline]
    fn flushes(&self, t: ScalarType) -> bool {
        match t {
            ScalarType::F32 => self.cx.fp.ftz_f32,
            ScalarType::BF16 => self.cx.fp.ftz_bf16,
            _ => false,
        }
    }

    /// The index-check site of `res`, when it is checked arithmetic feeding an address.
    #[inline]
    fn index_site(&self, res: ValueId) -> Option<u32> {
        self.cx.index_checked.get(res.0 as usize).copied().flatten()
    }

    /// Report the first active lane whose checked op overflowed.
    #[allow(clippy::too_many_arguments)]
    fn check_index_arith(
        &self,
        site: u32,
        op: BinOp,
        bits: u32,
        va: &[u64],
        vb: &[u64],
        act: &[u32],
        w: usize,
    ) -> Result<(), SimError> {
        for &th in act {
            let base = th as usize * w;
            for k in base..base + w {
                let Some((exact, sym)) = index_overflow(op, va[k], vb[k], bits) else {
                    continue;
                };
                let x = sext(va[k], bits);
                let (op_str, y) = if sym == '<' {
                    (
                        "<<".to_string(),
                        ((vb[k] & mask(bits)) % bits as u64) as i64,
                    )
                } else {
                    (sym.to_string(), sext(vb[k], bits))
                };
                let wrapped = sext(int_bits_w(exact, bits), bits);
                let s = &self.cx.index_sites[site as usize];
                return Err(SimError::IndexOverflow {
                    kernel: self.kname(),
                    op: s.op.clone(),
                    expr: format!(
                        "{x} {op_str} {y} = {exact}, which wraps to {wrapped} in i{bits}"
                    ),
                    sink: s.sink.clone(),
                    at: self.thread_ref(th),
                });
            }
        }
        Ok(())
    }

    pub(super) fn constant(&mut self, res: ValueId, c: Const, act: &[u32]) {
        let i = self.info(res);
        let bits = match c {
            Const::Int(v) => int_bits(i.elem, v),
            Const::Float(x) => float_bits(i.elem, x),
        };
        let mut r = self.take(res);
        each(act, i.words, |k| r[k] = bits);
        self.put(res, r);
    }

    pub(super) fn binary(
        &mut self,
        res: ValueId,
        op: BinOp,
        a: ValueId,
        b: ValueId,
        act: &[u32],
    ) -> Result<(), SimError> {
        let i = self.info(res);
        let (t, w) = (i.elem, i.words);
        let mut r = self.take(res);
        let (va, vb) = (self.val(a), self.val(b));
        let mut out = Ok(());
        let fp = self.cx.fp;
        match t {
            ScalarType::F32 if fp.ftz_f32 => f32_binary::<true>(op, act, w, &mut r, va, vb),
            ScalarType::F32 => f32_binary::<false>(op, act, w, &mut r, va, vb),
            ScalarType::BF16 if fp.ftz_bf16 => each(act, w, |k| {
                let f = |v: u64| ftz(f32_of(t, v));
                r[k] = f32_to(t, ftz(fbin(op, f(va[k]), f(vb[k]))));
            }),
            _ if t.is_float() => each(act, w, |k| {
                r[k] = f32_to(t, fbin(op, f32_of(t, va[k]), f32_of(t, vb[k])));
            }),
            _ => {
                let bits = t.bits();
                let handled = match self.index_site(res) {
                    Some(site) => match int_checked(op, bits, act, w, &mut r, va, vb) {
                        Some(true) => {
                            out = self.check_index_arith(site, op, bits, va, vb, act, w);
                            true
                        }
                        Some(false) => true,
                        None => false,
                    },
                    None => int_fast(op, bits, act, w, &mut r, va, vb),
                };
                if !handled {
                    'outer: for &th in act {
                        let base = th as usize * w;
                        for k in base..base + w {
                            match ibin(op, va[k], vb[k], bits) {
                                Ok(z) => r[k] = z,
                                Err(e) => {
                                    out = Err(self.fault(&format!("{op:?}"), th, e));
                                    break 'outer;
                                }
                            }
                        }
                    }
                }
            }
        }
        self.put(res, r);
        out
    }

    pub(super) fn unary(&mut self, res: ValueId, op: UnOp, a: ValueId, act: &[u32]) {
        let i = self.info(res);
        let (t, w) = (i.elem, i.words);
        let mut r = self.take(res);
        let va = self.val(a);
        if t.is_float() {
            let daz = self.flushes(t) && matches!(op, UnOp::Sqrt | UnOp::Trunc | UnOp::Floor);
            if daz {
                each(act, w, |k| r[k] = fun(op, t, daz_bits(t, va[k])));
            } else {
                each(act, w, |k| r[k] = fun(op, t, va[k]));
            }
        } else {
            let bits = t.bits();
            each(act, w, |k| r[k] = iun(op, va[k], bits));
        }
        self.put(res, r);
    }

    pub(super) fn fma(&mut self, res: ValueId, a: ValueId, b: ValueId, c: ValueId, act: &[u32]) {
        let i = self.info(res);
        let (t, w) = (i.elem, i.words);
        let mut r = self.take(res);
        let (va, vb, vc) = (self.val(a), self.val(b), self.val(c));
        let flush = self.flushes(t);
        if t == ScalarType::F32 && flush {
            each(act, w, |k| {
                let f = |v: u64| ftz(f32::from_bits(v as u32));
                r[k] = ftz(f(va[k]).mul_add(f(vb[k]), f(vc[k]))).to_bits() as u64;
            });
        } else if t == ScalarType::F32 {
            each(act, w, |k| {
                let f = |v: u64| f32::from_bits(v as u32);
                r[k] = f(va[k]).mul_add(f(vb[k]), f(vc[k])).to_bits() as u64;
            });
        } else if flush {
            // bf16 promoted to an f32 fma: flush the (exactly widened) inputs and a result
            // below the f32 normal range.
            each(act, w, |k| {
                let f = |v: u64| flush_denorm(float_val(t, v));
                r[k] = float_bits(t, flush_denorm(f(va[k]).mul_add(f(vb[k]), f(vc[k]))));
            });
        } else {
            each(act, w, |k| {
                let f = |v: u64| float_val(t, v);
                r[k] = float_bits(t, f(va[k]).mul_add(f(vb[k]), f(vc[k])));
            });
        }
        self.put(res, r);
    }

    pub(super) fn cmp(
        &mut self,
        res: ValueId,
        p: CmpPred,
        a: ValueId,
        b: ValueId,
        act: &[u32],
    ) -> Result<(), SimError> {
        let ia = self.info(a);
        let (t, w) = (ia.elem, ia.words);
        let unsigned_pred = matches!(p, CmpPred::ULt | CmpPred::ULe | CmpPred::UGt | CmpPred::UGe);
        if t.is_float() && unsigned_pred {
            return Err(self.unsupported(format!("unsigned compare {p:?} on {t}")));
        }
        let mut r = self.take(res);
        let (va, vb) = (self.val(a), self.val(b));
        if t == ScalarType::F32 {
            each(act, w, |k| {
                let f = |v: u64| f32::from_bits(v as u32) as f64;
                r[k] = fcmp(p, f(va[k]), f(vb[k])) as u64;
            });
        } else if t.is_float() {
            each(act, w, |k| {
                r[k] = fcmp(p, float_val(t, va[k]), float_val(t, vb[k])) as u64
            });
        } else {
            let bits = t.bits();
            each(act, w, |k| r[k] = icmp(p, va[k], vb[k], bits) as u64);
        }
        self.put(res, r);
        Ok(())
    }

    pub(super) fn select(&mut self, res: ValueId, c: ValueId, a: ValueId, b: ValueId, act: &[u32]) {
        let w = self.info(res).words;
        let cw = self.info(c).words;
        let mut r = self.take(res);
        let (vc, va, vb) = (self.val(c), self.val(a), self.val(b));
        for &t in act {
            let base = t as usize * w;
            for e in 0..w {
                let ci = if cw == 1 { t as usize } else { base + e };
                r[base + e] = if vc[ci] & 1 == 1 {
                    va[base + e]
                } else {
                    vb[base + e]
                };
            }
        }
        self.put(res, r);
    }

    pub(super) fn cast(
        &mut self,
        res: ValueId,
        kind: CastKind,
        a: ValueId,
        act: &[u32],
    ) -> Result<(), SimError> {
        let (ir, ia) = (self.info(res), self.info(a));
        let mut r = self.take(res);
        let va = self.val(a);
        match kind {
            CastKind::Bitcast => {
                let (fs, ts) = (ia.elem.size_bytes() as usize, ir.elem.size_bytes() as usize);
                let total = fs * ia.words;
                if total != ts * ir.words || total > 128 {
                    self.put(res, r);
                    return Err(self.unsupported(format!(
                        "bitcast of {} x {} to {} x {}",
                        ia.words, ia.elem, ir.words, ir.elem
                    )));
                }
                let mut buf = [0u8; 128];
                for &t in act {
                    let (sb, db) = (t as usize * ia.words, t as usize * ir.words);
                    for e in 0..ia.words {
                        buf[e * fs..(e + 1) * fs].copy_from_slice(&va[sb + e].to_le_bytes()[..fs]);
                    }
                    for e in 0..ir.words {
                        let mut w = [0u8; 8];
                        w[..ts].copy_from_slice(&buf[e * ts..(e + 1) * ts]);
                        r[db + e] = u64::from_le_bytes(w) & mask(ir.elem.bits());
                    }
                }
            }
            CastKind::Convert | CastKind::ConvertUnsigned => {
                let unsigned = kind == CastKind::ConvertUnsigned;
                let (from, to) = (ia.elem, ir.elem);
                each(act, ir.words, |k| r[k] = convert(va[k], from, to, unsigned));
            }
        }
        self.put(res, r);
        Ok(())
    }

    pub(super) fn splat(&mut self, res: ValueId, a: ValueId, act: &[u32]) {
        let w = self.info(res).words;
        let mut r = self.take(res);
        let va = self.val(a);
        for &t in act {
            let b = t as usize * w;
            r[b..b + w].fill(va[t as usize]);
        }
        self.put(res, r);
    }

    pub(super) fn extract(&mut self, res: ValueId, v: ValueId, i: usize, act: &[u32]) {
        let vw = self.info(v).words;
        let mut r = self.take(res);
        let vv = self.val(v);
        for &t in act {
            r[t as usize] = vv[t as usize * vw + i];
        }
        self.put(res, r);
    }

    pub(super) fn insert(&mut self, res: ValueId, v: ValueId, s: ValueId, i: usize, act: &[u32]) {
        let w = self.info(res).words;
        let mut r = self.take(res);
        let (vv, vs) = (self.val(v), self.val(s));
        for &t in act {
            let b = t as usize * w;
            r[b..b + w].copy_from_slice(&vv[b..b + w]);
            r[b + i] = vs[t as usize];
        }
        self.put(res, r);
    }

    pub(super) fn build(&mut self, res: ValueId, vs: &[ValueId], act: &[u32]) {
        let w = self.info(res).words;
        let mut r = self.take(res);
        for (e, &v) in vs.iter().enumerate() {
            let vv = self.val(v);
            for &t in act {
                r[t as usize * w + e] = vv[t as usize];
            }
        }
        self.put(res, r);
    }

    pub(super) fn slice(&mut self, res: ValueId, v: ValueId, start: usize, act: &[u32]) {
        let w = self.info(res).words;
        let vw = self.info(v).words;
        let mut r = self.take(res);
        let vv = self.val(v);
        for &t in act {
            let (d, s) = (t as usize * w, t as usize * vw + start);
            r[d..d + w].copy_from_slice(&vv[s..s + w]);
        }
        self.put(res, r);
    }

    pub(super) fn lds_base(&mut self, res: ValueId, id: u32, act: &[u32]) {
        let addr = join(LDS_HANDLE_BASE + id as u64, 0);
        let mut r = self.take(res);
        for &t in act {
            r[t as usize] = addr;
        }
        self.put(res, r);
    }

    /// A pointer into the dynamic region (handle = the region after the static arrays) at a
    /// per-thread byte offset.
    pub(super) fn dyn_lds_base(&mut self, res: ValueId, off: ValueId, act: &[u32]) {
        let handle = LDS_HANDLE_BASE + self.cx.k.lds.len() as u64;
        let mut r = self.take(res);
        let vo = self.val(off);
        for &t in act {
            r[t as usize] = join(handle, sext(vo[t as usize], 32));
        }
        self.put(res, r);
    }

    pub(super) fn ptr_add(&mut self, res: ValueId, p: ValueId, i: ValueId, act: &[u32]) {
        let es = self.info(p).elem.size_bytes() as i64;
        let ibits = self.info(i).elem.bits();
        let mut r = self.take(res);
        let (vp, vi) = (self.val(p), self.val(i));
        for &t in act {
            let t = t as usize;
            let (h, off) = split(vp[t]);
            r[t] = join(h, off.wrapping_add(sext(vi[t], ibits).wrapping_mul(es)));
        }
        self.put(res, r);
    }
}
