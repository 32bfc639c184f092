//! Elementwise arithmetic, compares, selects, constants and casts, for scalars and vectors.
//!
//! Choices (documented here because the IR leaves them open):
//! - shift amounts are masked to `bits - 1` (what AMD and NVIDIA shifters do), so a shift is
//!   never LLVM poison;
//! - float compares with the `U*` predicates use the ordered forms (floats are ordered
//!   except `Ne`);
//! - the fast `Exp2`/`Log2`/`Rsqrt`/`Rcp` work in f32: f16/bf16 operands are extended and the
//!   result rounded back (RNE).

use super::func::Func;
use super::ty::suffix;
use super::{fp8, ty, vector, LowerError};
use flydsl_ir::{BinOp, CastKind, CmpPred, Const, ScalarType, Type, UnOp, ValueId};

/// Literal of zero for an element spelling.
fn zero_of(elem: &str, lanes: u32) -> String {
    if lanes > 1 {
        return "zeroinitializer".into();
    }
    match elem {
        "i1" => "false".into(),
        "half" | "bfloat" | "float" => "0.0".into(),
        _ => "0".into(),
    }
}

/// Lower a constant.
pub(crate) fn constant(f: &mut Func, c: Const, rt: Type) -> Result<String, LowerError> {
    let (e, n) = f.shape(rt)?;
    if e.is_fp8() {
        let Const::Float(v) = c else {
            return Err(f.err(format!("integer constant for {e}")));
        };
        let lit = ty::float_lit(ScalarType::F32, v);
        let code = fp8::encode(f, &lit, e, 1)?;
        return Ok(if n == 1 {
            code
        } else {
            vector::splat_operand(f, &code, "i8", n)
        });
    }
    let lit = ty::const_lit(e, c).ok_or_else(|| f.err(format!("constant {c:?} for {e}")))?;
    Ok(ty::splat_lit(ty::scalar(e), &lit, n))
}

/// Call `llvm.<name>.<suffix>` on operands of one type.
fn intrinsic(f: &mut Func, name: &str, t: &str, elem: &str, n: u32, args: &[&str]) -> String {
    let full = format!("llvm.{name}.{}", suffix(elem, n));
    let a: Vec<(&str, &str)> = args.iter().map(|v| (t, *v)).collect();
    f.call(t, &full, &a)
}

/// Lower a binary op.
pub(crate) fn binary(
    f: &mut Func,
    op: BinOp,
    a: ValueId,
    b: ValueId,
    rt: Type,
) -> Result<String, LowerError> {
    let (e, n) = f.shape(rt)?;
    if e.is_fp8() {
        return Err(f.err("fp8 is a storage type: convert before arithmetic"));
    }
    let (x, y) = (f.get(a)?, f.get(b)?);
    let t = f.lty(rt);
    let el = ty::scalar(e);
    let fl = e.is_float();
    use BinOp::*;
    let simple = |i: &str, fop: &str| if fl { fop.to_string() } else { i.to_string() };
    let inst = match op {
        Add => simple("add", "fadd"),
        Sub => simple("sub", "fsub"),
        Mul => simple("mul", "fmul"),
        Div => simple("sdiv", "fdiv"),
        Rem if e == ScalarType::BF16 => {
            // No bf16 `frem` lowering on AMDGPU: the remainder is exact, so computing it in
            // f32 and rounding back gives the same value.
            let (xf, yf) = (to_f32(f, &x, e, n)?, to_f32(f, &y, e, n)?);
            let r = f.inst(format!("frem {} {xf}, {yf}", ty::shaped("float", n)));
            return from_f32(f, &r, e, n);
        }
        Rem => simple("srem", "frem"),
        UDiv | URem | And | Or | Xor | Shl | LShr | AShr | UMin | UMax if fl => {
            return Err(f.err(format!("{op:?} is not defined for {e}")))
        }
        MinNan | MaxNan if !fl => return Err(f.err(format!("{op:?} is not defined for {e}"))),
        UDiv => "udiv".into(),
        URem => "urem".into(),
        And => "and".into(),
        Or => "or".into(),
        Xor => "xor".into(),
        Shl | LShr | AShr => {
            let mask = ty::splat_lit(el, &ty::int_lit(e, e.bits() as i64 - 1), n);
            let amt = f.inst(format!("and {t} {y}, {mask}"));
            let i = match op {
                Shl => "shl",
                LShr => "lshr",
                _ => "ashr",
            };
            return Ok(f.inst(format!("{i} {t} {x}, {amt}")));
        }
        Min | Max | UMin | UMax | MinNan | MaxNan => {
            let name = match (op, fl) {
                (Min, true) => "minnum",
                (Max, true) => "maxnum",
                (Min, false) => "smin",
                (Max, false) => "smax",
                (UMin, _) => "umin",
                (UMax, _) => "umax",
                (MinNan, _) => "minimum",
                _ => "maximum",
            };
            return Ok(intrinsic(f, name, &t, el, n, &[&x, &y]));
        }
    };
    Ok(f.inst(format!("{inst} {t} {x}, {y}")))
}

/// Lower a unary op.
pub(crate) fn unary(f: &mut Func, op: UnOp, a: ValueId, rt: Type) -> Result<String, LowerError> {
    let (e, n) = f.shape(rt)?;
    if e.is_fp8() {
        return Err(f.err("fp8 is a storage type: convert before arithmetic"));
    }
    let x = f.get(a)?;
    let t = f.lty(rt);
    let el = ty::scalar(e);
    let fl = e.is_float();
    match op {
        UnOp::Neg if fl => Ok(f.inst(format!("fneg {t} {x}"))),
        UnOp::Neg => Ok(f.inst(format!("sub {t} {}, {x}", zero_of(el, n)))),
        UnOp::Not if !fl => {
            let ones = ty::splat_lit(el, &ty::int_lit(e, -1), n);
            Ok(f.inst(format!("xor {t} {x}, {ones}")))
        }
        UnOp::Abs if fl => Ok(intrinsic(f, "fabs", &t, el, n, &[&x])),
        UnOp::Abs => {
            let name = format!("llvm.abs.{}", suffix(el, n));
            Ok(f.call(&t, &name, &[(&t, &x), ("i1", "false")]))
        }
        _ if !fl => Err(f.err(format!("{op:?} is not defined for {e}"))),
        UnOp::Sqrt => Ok(intrinsic(f, "sqrt", &t, el, n, &[&x])),
        UnOp::Trunc => Ok(intrinsic(f, "trunc", &t, el, n, &[&x])),
        UnOp::Floor => Ok(intrinsic(f, "floor", &t, el, n, &[&x])),
        UnOp::Exp2 | UnOp::Log2 | UnOp::Rsqrt | UnOp::Rcp => fast(f, op, &x, e, n),
        UnOp::Not => Err(f.err(format!("Not is not defined for {e}"))),
    }
}

/// The hardware fast forms, lane by lane, in f32.
fn fast(f: &mut Func, op: UnOp, x: &str, e: ScalarType, n: u32) -> Result<String, LowerError> {
    let el = ty::scalar(e);
    vector::map_lanes(f, x, el, n, el, |f, s| {
        let s32 = to_f32(f, &s, e, 1)?;
        let r = f.hooks().fast_f32(f, op, &s32);
        from_f32(f, &r, e, 1)
    })
}

/// Lower a fused multiply-add.
pub(crate) fn fma(
    f: &mut Func,
    a: ValueId,
    b: ValueId,
    c: ValueId,
    rt: Type,
) -> Result<String, LowerError> {
    let (e, n) = f.shape(rt)?;
    if !e.is_float() || e.is_fp8() {
        return Err(f.err(format!("fma is not defined for {e}")));
    }
    let (x, y, z) = (f.get(a)?, f.get(b)?, f.get(c)?);
    let t = f.lty(rt);
    Ok(intrinsic(f, "fma", &t, ty::scalar(e), n, &[&x, &y, &z]))
}

/// Lower a compare.
pub(crate) fn cmp(f: &mut Func, p: CmpPred, a: ValueId, b: ValueId) -> Result<String, LowerError> {
    let (ta, x) = (f.ty(a)?, f.get(a)?);
    let y = f.get(b)?;
    let (e, n) = f.shape(ta)?;
    use CmpPred::*;
    if e.is_float() {
        let (x, y, t) = if e.is_fp8() {
            (
                to_f32(f, &x, e, n)?,
                to_f32(f, &y, e, n)?,
                ty::shaped("float", n),
            )
        } else {
            (x, y, f.lty(ta))
        };
        let pred = match p {
            Eq => "oeq",
            Ne => "une",
            Lt | ULt => "olt",
            Le | ULe => "ole",
            Gt | UGt => "ogt",
            Ge | UGe => "oge",
        };
        return Ok(f.inst(format!("fcmp {pred} {t} {x}, {y}")));
    }
    let pred = match p {
        Eq => "eq",
        Ne => "ne",
        Lt => "slt",
        Le => "sle",
        Gt => "sgt",
        Ge => "sge",
        ULt => "ult",
        ULe => "ule",
        UGt => "ugt",
        UGe => "uge",
    };
    let t = f.lty(ta);
    Ok(f.inst(format!("icmp {pred} {t} {x}, {y}")))
}

/// Lower a select.
pub(crate) fn select(
    f: &mut Func,
    c: ValueId,
    a: ValueId,
    b: ValueId,
    rt: Type,
) -> Result<String, LowerError> {
    let (cv, ct) = f.get_t(c)?;
    let (x, y) = (f.get(a)?, f.get(b)?);
    let t = f.lty(rt);
    let ctl = f.lty(ct);
    Ok(f.inst(format!("select {ctl} {cv}, {t} {x}, {t} {y}")))
}

/// Convert a float value of element `e` to f32 (exact).
pub(crate) fn to_f32(f: &mut Func, x: &str, e: ScalarType, n: u32) -> Result<String, LowerError> {
    match e {
        ScalarType::F32 => Ok(x.to_string()),
        ScalarType::F16 | ScalarType::BF16 => {
            let from = ty::shaped(ty::scalar(e), n);
            Ok(f.inst(format!("fpext {from} {x} to {}", ty::shaped("float", n))))
        }
        _ if e.is_fp8() => fp8::decode(f, x, e, n),
        _ => Err(f.err(format!("{e} is not a float type"))),
    }
}

/// Round an f32 value to float element `e` (RNE; fp8 saturates).
pub(crate) fn from_f32(f: &mut Func, x: &str, e: ScalarType, n: u32) -> Result<String, LowerError> {
    match e {
        ScalarType::F32 => Ok(x.to_string()),
        ScalarType::F16 | ScalarType::BF16 => {
            let to = ty::shaped(ty::scalar(e), n);
            Ok(f.inst(format!("fptrunc {} {x} to {to}", ty::shaped("float", n))))
        }
        _ if e.is_fp8() => fp8::encode(f, x, e, n),
        _ => Err(f.err(format!("{e} is not a float type"))),
    }
}

/// Lower a cast.
pub(crate) fn cast(f: &mut Func, k: CastKind, a: ValueId, rt: Type) -> Result<String, LowerError> {
    let (x, ft) = f.get_t(a)?;
    let (fe, n) = f.shape(ft)?;
    let (te, tn) = f.shape(rt)?;
    if k == CastKind::Bitcast {
        return bitcast(f, &x, ft, rt);
    }
    if n != tn {
        return Err(f.err(format!("convert {ft} -> {rt} changes the lane count")));
    }
    let unsigned = k == CastKind::ConvertUnsigned;
    let (fl, tl) = (f.lty(ft), f.lty(rt));
    let f32t = ty::shaped("float", n);
    match (fe.is_float(), te.is_float()) {
        (false, false) => {
            let (fb, tb) = (fe.bits(), te.bits());
            let op = if fb == tb {
                return Ok(x);
            } else if fb > tb {
                "trunc"
            } else if unsigned {
                "zext"
            } else {
                "sext"
            };
            Ok(f.inst(format!("{op} {fl} {x} to {tl}")))
        }
        (false, true) => {
            let op = if unsigned { "uitofp" } else { "sitofp" };
            if matches!(te, ScalarType::F32 | ScalarType::F16) {
                Ok(f.inst(format!("{op} {fl} {x} to {tl}")))
            } else {
                // bf16 / fp8 through f32: double rounding is innocuous (f32 has >= 2p+2 bits)
                // and integers beyond 2^24 saturate in fp8 anyway.
                let v = f.inst(format!("{op} {fl} {x} to {f32t}"));
                from_f32(f, &v, te, n)
            }
        }
        (true, false) => {
            let v = to_f32(f, &x, fe, n)?;
            let name = format!(
                "llvm.{}.sat.{}.{}",
                if unsigned { "fptoui" } else { "fptosi" },
                suffix(ty::scalar(te), n),
                suffix("float", n)
            );
            Ok(f.call(&tl, &name, &[(&f32t, &v)]))
        }
        (true, true) => {
            if fe == te {
                return Ok(x);
            }
            let direct = !fe.is_fp8()
                && !te.is_fp8()
                && !matches!(
                    (fe, te),
                    (ScalarType::F16, ScalarType::BF16) | (ScalarType::BF16, ScalarType::F16)
                );
            if direct {
                let op = if fe.bits() < te.bits() {
                    "fpext"
                } else {
                    "fptrunc"
                };
                return Ok(f.inst(format!("{op} {fl} {x} to {tl}")));
            }
            let v = to_f32(f, &x, fe, n)?;
            from_f32(f, &v, te, n)
        }
    }
}

/// Reinterpret bits; booleans are widened to / narrowed from their byte form.
fn bitcast(f: &mut Func, x: &str, ft: Type, rt: Type) -> Result<String, LowerError> {
    if ft.size_bytes() != rt.size_bytes() {
        return Err(f.err(format!("bitcast {ft} -> {rt} changes the size")));
    }
    let (fl, tl) = (f.lty(ft), f.lty(rt));
    if fl == tl {
        return Ok(x.to_string());
    }
    let (fm, tm) = (ty::mem_type(ft), ty::mem_type(rt));
    let mut v = x.to_string();
    if ft.is_bool() {
        v = f.inst(format!("zext {fl} {v} to {fm}"));
    }
    if fm != tm {
        v = f.inst(format!("bitcast {fm} {v} to {tm}"));
    }
    if rt.is_bool() {
        v = f.inst(format!("trunc {tm} {v} to {tl}"));
    }
    Ok(v)
}
