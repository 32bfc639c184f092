//! Vector construction and access: splat, extract, insert, build, slice, and a lane-by-lane
//! helper for operations that only exist on scalars.

use super::func::Func;
use super::{ty, LowerError};
use flydsl_ir::{Type, ValueId};

/// Broadcast a scalar operand of LLVM element type `elem` into `<n x elem>`.
pub(crate) fn splat_operand(f: &mut Func, s: &str, elem: &str, n: u32) -> String {
    let vt = ty::shaped(elem, n);
    let one = f.inst(format!("insertelement {vt} poison, {elem} {s}, i64 0"));
    f.inst(format!(
        "shufflevector {vt} {one}, {vt} poison, <{n} x i32> zeroinitializer"
    ))
}

/// Lower `Splat`.
pub(crate) fn splat_value(f: &mut Func, a: ValueId, rt: Type) -> Result<String, LowerError> {
    let (e, n) = f.shape(rt)?;
    let s = f.get(a)?;
    if n == 1 {
        return Ok(s);
    }
    Ok(splat_operand(f, &s, ty::scalar(e), n))
}

/// Lower `Extract`.
pub(crate) fn extract(f: &mut Func, v: ValueId, i: u32) -> Result<String, LowerError> {
    let (x, t) = f.get_t(v)?;
    let (_, n) = f.shape(t)?;
    if i >= n || n == 1 {
        return Err(f.err(format!("extract {i} of {t}")));
    }
    let tl = f.lty(t);
    Ok(f.inst(format!("extractelement {tl} {x}, i64 {i}")))
}

/// Lower `Insert`.
pub(crate) fn insert(f: &mut Func, v: ValueId, s: ValueId, i: u32) -> Result<String, LowerError> {
    let (x, t) = f.get_t(v)?;
    let (e, n) = f.shape(t)?;
    if i >= n || n == 1 {
        return Err(f.err(format!("insert at {i} into {t}")));
    }
    let sv = f.get(s)?;
    let tl = f.lty(t);
    Ok(f.inst(format!(
        "insertelement {tl} {x}, {} {sv}, i64 {i}",
        ty::scalar(e)
    )))
}

/// Lower `Build`.
pub(crate) fn build(f: &mut Func, vals: &[ValueId], rt: Type) -> Result<String, LowerError> {
    let (e, n) = f.shape(rt)?;
    if vals.len() as u32 != n || n < 2 {
        return Err(f.err(format!("build of {} scalars into {rt}", vals.len())));
    }
    let ops: Vec<String> = vals.iter().map(|&v| f.get(v)).collect::<Result<_, _>>()?;
    Ok(build_operands(f, &ops, ty::scalar(e)))
}

/// Build `<n x elem>` from scalar operands.
pub(crate) fn build_operands(f: &mut Func, ops: &[String], elem: &str) -> String {
    let vt = ty::shaped(elem, ops.len() as u32);
    let mut acc = "poison".to_string();
    for (i, o) in ops.iter().enumerate() {
        acc = f.inst(format!("insertelement {vt} {acc}, {elem} {o}, i64 {i}"));
    }
    acc
}

/// Lower `Slice`.
pub(crate) fn slice(f: &mut Func, v: ValueId, start: u32, rt: Type) -> Result<String, LowerError> {
    let (x, t) = f.get_t(v)?;
    let (_, n) = f.shape(t)?;
    let (_, m) = f.shape(rt)?;
    if start + m > n || n == 1 {
        return Err(f.err(format!("slice {start}..+{m} of {t}")));
    }
    let tl = f.lty(t);
    Ok(slice_operand(f, &x, &tl, start, m))
}

/// Lanes `[start, start + m)` of a vector operand of LLVM type `vt`.
pub(crate) fn slice_operand(f: &mut Func, x: &str, vt: &str, start: u32, m: u32) -> String {
    if m == 1 {
        return f.inst(format!("extractelement {vt} {x}, i64 {start}"));
    }
    let mask: Vec<String> = (start..start + m).map(|i| format!("i32 {i}")).collect();
    f.inst(format!(
        "shufflevector {vt} {x}, {vt} poison, <{m} x i32> <{}>",
        mask.join(", ")
    ))
}

/// Apply a scalar operation to every lane of `x` (`<n x in_elem>`), giving `<n x out_elem>`
/// (or the scalar result when `n == 1`).
pub(crate) fn map_lanes(
    f: &mut Func,
    x: &str,
    in_elem: &str,
    n: u32,
    out_elem: &str,
    mut op: impl FnMut(&mut Func, String) -> Result<String, LowerError>,
) -> Result<String, LowerError> {
    if n == 1 {
        return op(f, x.to_string());
    }
    let vt = ty::shaped(in_elem, n);
    let mut outs = Vec::with_capacity(n as usize);
    for i in 0..n {
        let s = f.inst(format!("extractelement {vt} {x}, i64 {i}"));
        outs.push(op(f, s)?);
    }
    Ok(build_operands(f, &outs, out_elem))
}
