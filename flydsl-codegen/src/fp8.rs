//! fp8 <-> f32 conversions, emitted inline as branch-free integer code.
//!
//! fp8 values travel as `i8`. The code works unchanged on scalars and on `<n x i8>` /
//! `<n x float>` vectors (every step is elementwise), and it is emitted into the kernel
//! body rather than into helper functions because `llc` does not inline calls on NVPTX.
//!
//! Semantics (the same as the Sim's): f32 -> fp8 rounds to nearest even and saturates every
//! finite value to the largest finite code; infinity becomes infinity in E5M2 and the
//! largest finite value elsewhere; NaN becomes the format's NaN (`S.1111.111` in E4M3FN,
//! `S.11111.10` in E5M2, `0x80` in the FNUZ formats); the FNUZ formats have no negative zero.
//! fp8 -> f32 is exact (subnormals included); NaN codes give a quiet NaN.

use super::func::Func;
use super::{ty, LowerError};
use flydsl_ir::ScalarType;

/// Parameters of one fp8 format.
struct Fmt {
    /// Mantissa bits.
    m: u32,
    /// Exponent bias.
    bias: i32,
    /// Largest finite code without sign.
    max_code: u32,
    /// Largest finite value.
    max: f32,
    /// Code of +infinity (E5M2 only).
    inf: Option<u32>,
    /// NaN code without sign.
    nan: u32,
    /// True for the FNUZ formats (0x80 is NaN, no negative zero, NaN is unsigned).
    fnuz: bool,
}

fn fmt_of(s: ScalarType) -> Option<Fmt> {
    Some(match s {
        ScalarType::F8E4M3FN => Fmt {
            m: 3,
            bias: 7,
            max_code: 0x7E,
            max: 448.0,
            inf: None,
            nan: 0x7F,
            fnuz: false,
        },
        ScalarType::F8E4M3FNUZ => Fmt {
            m: 3,
            bias: 8,
            max_code: 0x7F,
            max: 240.0,
            inf: None,
            nan: 0x80,
            fnuz: true,
        },
        ScalarType::F8E5M2 => Fmt {
            m: 2,
            bias: 15,
            max_code: 0x7B,
            max: 57344.0,
            inf: Some(0x7C),
            nan: 0x7E,
            fnuz: false,
        },
        ScalarType::F8E5M2FNUZ => Fmt {
            m: 2,
            bias: 16,
            max_code: 0x7F,
            max: 57344.0,
            inf: None,
            nan: 0x80,
            fnuz: true,
        },
        _ => return None,
    })
}

/// Small emitter for elementwise i32 / float code of one lane count.
struct Ew<'a, 'k> {
    f: &'a mut Func<'k>,
    n: u32,
    i: String,
    fl: String,
}

impl Ew<'_, '_> {
    /// An i32 constant of the right shape.
    fn c(&self, v: i64) -> String {
        ty::splat_lit("i32", &v.to_string(), self.n)
    }
    /// An f32 constant of the right shape.
    fn cf(&self, v: f32) -> String {
        ty::splat_lit("float", &ty::float_lit(ScalarType::F32, v as f64), self.n)
    }
    /// `op i32 a, b`.
    fn op(&mut self, op: &str, a: &str, b: &str) -> String {
        let t = self.i.clone();
        self.f.inst(format!("{op} {t} {a}, {b}"))
    }
    /// `icmp pred i32 a, b`.
    fn icmp(&mut self, pred: &str, a: &str, b: &str) -> String {
        let t = self.i.clone();
        self.f.inst(format!("icmp {pred} {t} {a}, {b}"))
    }
    /// `select cond, a, b` on i32.
    fn sel(&mut self, c: &str, a: &str, b: &str) -> String {
        let ct = ty::shaped("i1", self.n);
        let t = self.i.clone();
        self.f.inst(format!("select {ct} {c}, {t} {a}, {t} {b}"))
    }
}

fn two_pow(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// Encode an f32 operand (`float` or `<n x float>`) into fp8 format `e` (`i8` / `<n x i8>`).
pub(crate) fn encode(f: &mut Func, x: &str, e: ScalarType, n: u32) -> Result<String, LowerError> {
    let fm = fmt_of(e).ok_or_else(|| f.err(format!("{e} is not an fp8 type")))?;
    let mut w = Ew {
        f,
        n,
        i: ty::shaped("i32", n),
        fl: ty::shaped("float", n),
    };
    let (it, ft) = (w.i.clone(), w.fl.clone());
    let b = w.f.inst(format!("bitcast {ft} {x} to {it}"));
    let abs = w.op("and", &b, &w.c(0x7FFF_FFFF));
    let sign = w.op("lshr", &b, &w.c(31));
    let sign7 = w.op("shl", &sign, &w.c(7));
    // Normal range: round the 23-bit mantissa to m bits (RNE), carry into the exponent.
    let shift = 23 - fm.m as i64;
    let lsb0 = w.op("lshr", &abs, &w.c(shift));
    let lsb = w.op("and", &lsb0, &w.c(1));
    let r0 = w.op("add", &abs, &w.c((1 << (shift - 1)) - 1));
    let r1 = w.op("add", &r0, &lsb);
    let t = w.op("lshr", &r1, &w.c(shift));
    let norm = w.op("sub", &t, &w.c(((127 - fm.bias) as i64) << fm.m));
    // Subnormal range: scale so one fp8 quantum is 1.0 and round to an integer (exact).
    let af = w.f.inst(format!("bitcast {it} {abs} to {ft}"));
    let q = w.f.inst(format!(
        "fmul {ft} {af}, {}",
        w.cf(two_pow(fm.m as i32 + fm.bias - 1))
    ));
    let rname = format!("llvm.roundeven.{}", ty::suffix("float", n));
    let r = w.f.call(&ft, &rname, &[(&ft, &q)]);
    let sub = w.f.inst(format!("fptoui {ft} {r} to {it}"));
    let min_normal = ((127 + 1 - fm.bias) as i64) << 23;
    let is_sub = w.icmp("ult", &abs, &w.c(min_normal));
    let mag0 = w.sel(&is_sub, &sub, &norm);
    let uname = format!("llvm.umin.{}", ty::suffix("i32", n));
    let maxc = w.c(fm.max_code as i64);
    let mag1 = w.f.call(&it, &uname, &[(&it, &mag0), (&it, &maxc)]);
    // Saturate everything at or above the largest finite value (infinities included).
    let big = w.icmp("uge", &abs, &w.c(fm.max.to_bits() as i64));
    let mut mag = w.sel(&big, &maxc, &mag1);
    if let Some(inf) = fm.inf {
        let is_inf = w.icmp("eq", &abs, &w.c(0x7F80_0000));
        mag = w.sel(&is_inf, &w.c(inf as i64), &mag);
    }
    let mut code = w.op("or", &mag, &sign7);
    let nan = if fm.fnuz {
        let zero = w.icmp("eq", &mag, &w.c(0));
        code = w.sel(&zero, &w.c(0), &code);
        w.c(fm.nan as i64)
    } else {
        w.op("or", &sign7, &w.c(fm.nan as i64))
    };
    let is_nan = w.icmp("ugt", &abs, &w.c(0x7F80_0000));
    let code = w.sel(&is_nan, &nan, &code);
    let i8t = ty::shaped("i8", n);
    Ok(w.f.inst(format!("trunc {it} {code} to {i8t}")))
}

/// Decode fp8 codes (`i8` / `<n x i8>`) of format `e` into f32 (exact).
pub(crate) fn decode(f: &mut Func, x: &str, e: ScalarType, n: u32) -> Result<String, LowerError> {
    let fm = fmt_of(e).ok_or_else(|| f.err(format!("{e} is not an fp8 type")))?;
    let mut w = Ew {
        f,
        n,
        i: ty::shaped("i32", n),
        fl: ty::shaped("float", n),
    };
    let (it, ft) = (w.i.clone(), w.fl.clone());
    let i8t = ty::shaped("i8", n);
    let c = w.f.inst(format!("zext {i8t} {x} to {it}"));
    let sign = w.op("and", &c, &w.c(0x80));
    let sign31 = w.op("shl", &sign, &w.c(24));
    let mag = w.op("and", &c, &w.c(0x7F));
    // Normal: move exponent and mantissa into place and re-bias.
    let sh = w.op("shl", &mag, &w.c(23 - fm.m as i64));
    let norm = w.op("add", &sh, &w.c(((127 - fm.bias) as i64) << 23));
    // Subnormal: mantissa times the quantum (an exact normal f32).
    let mm = w.op("and", &mag, &w.c((1 << fm.m) - 1));
    let mf = w.f.inst(format!("uitofp {it} {mm} to {ft}"));
    let sf = w.f.inst(format!(
        "fmul {ft} {mf}, {}",
        w.cf(two_pow(1 - fm.bias - fm.m as i32))
    ));
    let sb = w.f.inst(format!("bitcast {ft} {sf} to {it}"));
    let is_sub = w.icmp("ult", &mag, &w.c(1 << fm.m));
    let bits0 = w.sel(&is_sub, &sb, &norm);
    let mut bits = w.op("or", &bits0, &sign31);
    if let Some(inf) = fm.inf {
        let is_inf = w.icmp("eq", &mag, &w.c(inf as i64));
        let infb = w.op("or", &sign31, &w.c(0x7F80_0000));
        bits = w.sel(&is_inf, &infb, &bits);
    }
    let (is_nan, nanb) = if fm.fnuz {
        (w.icmp("eq", &c, &w.c(0x80)), w.c(0x7FC0_0000))
    } else {
        let is_nan = match fm.inf {
            Some(inf) => w.icmp("ugt", &mag, &w.c(inf as i64)),
            None => w.icmp("eq", &mag, &w.c(fm.nan as i64)),
        };
        (is_nan, w.op("or", &sign31, &w.c(0x7FC0_0000)))
    };
    let bits = w.sel(&is_nan, &nanb, &bits);
    Ok(w.f.inst(format!("bitcast {it} {bits} to {ft}")))
}
