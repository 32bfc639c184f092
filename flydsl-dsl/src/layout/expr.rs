//! Folding wrappers around [`IndexExpr`]: literals are computed here and trivial operations
//! are never emitted. All generic layout code goes through these.

use super::IndexExpr;

/// `a + b`, folding literals and skipping `+ 0`.
pub(crate) fn add<I: IndexExpr>(a: &I, b: &I) -> I {
    match (a.as_lit(), b.as_lit()) {
        (Some(x), Some(y)) => I::lit(x.wrapping_add(y)),
        (Some(0), _) => b.clone(),
        (_, Some(0)) => a.clone(),
        _ => a.add(b),
    }
}

/// `a * k`, skipping `* 1` and `* 0`.
pub(crate) fn mul<I: IndexExpr>(a: &I, k: i64) -> I {
    match (k, a.as_lit()) {
        (0, _) | (_, Some(0)) => I::lit(0),
        (1, _) => a.clone(),
        (_, Some(x)) => I::lit(x.wrapping_mul(k)),
        _ => a.mul_lit(k),
    }
}

/// `a / k` for `a >= 0`, `k > 0`; powers of two become shifts.
pub(crate) fn div<I: IndexExpr>(a: &I, k: i64) -> I {
    debug_assert!(k > 0);
    match (k, a.as_lit()) {
        (1, _) => a.clone(),
        (_, Some(x)) => I::lit(x.checked_div(k).unwrap_or(0)),
        _ if is_pow2(k) => a.shr_lit(k.trailing_zeros()),
        _ => a.div_lit(k),
    }
}

/// `a % k` for `a >= 0`, `k > 0`; powers of two become masks.
pub(crate) fn rem<I: IndexExpr>(a: &I, k: i64) -> I {
    debug_assert!(k > 0);
    match (k, a.as_lit()) {
        (1, _) => I::lit(0),
        (_, Some(x)) => I::lit(x.checked_rem(k).unwrap_or(0)),
        _ if is_pow2(k) => a.and_lit(k - 1),
        _ => a.rem_lit(k),
    }
}

/// `a ^ b`, folding literals and skipping `^ 0`.
pub(crate) fn xor<I: IndexExpr>(a: &I, b: &I) -> I {
    match (a.as_lit(), b.as_lit()) {
        (Some(x), Some(y)) => I::lit(x ^ y),
        (Some(0), _) => b.clone(),
        (_, Some(0)) => a.clone(),
        _ => a.xor(b),
    }
}

/// `a & m`, folding literals and skipping `& 0`.
pub(crate) fn and<I: IndexExpr>(a: &I, m: i64) -> I {
    match (m, a.as_lit()) {
        (0, _) => I::lit(0),
        (_, Some(x)) => I::lit(x & m),
        _ => a.and_lit(m),
    }
}

/// `a >> s`, skipping `>> 0`.
pub(crate) fn shr<I: IndexExpr>(a: &I, s: u32) -> I {
    match (s, a.as_lit()) {
        (0, _) => a.clone(),
        (_, Some(x)) => I::lit(x.checked_shr(s).unwrap_or(0)),
        _ => a.shr_lit(s),
    }
}

fn is_pow2(k: i64) -> bool {
    k > 0 && k & (k - 1) == 0
}
