//! NVPTX (sm_90) target hooks: module boilerplate, special registers, approximate
//! transcendentals, barriers and warp shuffles.

use super::func::Func;
use super::{ty, LowerError};
use flydsl_ir::{Dim, ScalarType, ShuffleMode, Special, Type, UnOp, ValueId};

/// Module header: triple and the NVPTX 64-bit datalayout.
pub(crate) fn module_header() -> String {
    "target triple = \"nvptx64-nvidia-cuda\"\n\
     target datalayout = \"e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64\"\n"
        .to_string()
}

/// `nvvm.annotations`: the kernel marker, `maxntidx` and, when set, `maxnreg`.
pub(crate) fn module_metadata(f: &mut Func, sym: &str) -> String {
    let mut nodes = vec![
        f.metadata(&format!("!{{ptr {sym}, !\"kernel\", i32 1}}")),
        f.metadata(&format!(
            "!{{ptr {sym}, !\"maxntidx\", i32 {}}}",
            f.k.attrs.max_threads
        )),
    ];
    if let Some(r) = f.k.attrs.max_registers {
        nodes.push(f.metadata(&format!("!{{ptr {sym}, !\"maxnreg\", i32 {r}}}")));
    }
    format!("!nvvm.annotations = !{{{}}}\n", nodes.join(", "))
}

/// Lower a thread-geometry query through the PTX special registers.
pub(crate) fn special(f: &mut Func, s: Special) -> String {
    let xyz = |d: Dim| match d {
        Dim::X => "x",
        Dim::Y => "y",
        Dim::Z => "z",
    };
    let reg = match s {
        Special::ThreadId(d) => format!("tid.{}", xyz(d)),
        Special::BlockId(d) => format!("ctaid.{}", xyz(d)),
        Special::BlockDim(d) => format!("ntid.{}", xyz(d)),
        Special::GridDim(d) => format!("nctaid.{}", xyz(d)),
        Special::LaneId => "laneid".to_string(),
    };
    f.call("i32", &format!("llvm.nvvm.read.ptx.sreg.{reg}"), &[])
}

/// The approximate forms: `ex2.approx.ftz.f32`, `lg2.approx.ftz.f32`,
/// `rsqrt.approx.ftz.f32`, `rcp.approx.ftz.f32`.
pub(crate) fn fast_f32(f: &mut Func, op: UnOp, x: &str) -> String {
    let name = match op {
        UnOp::Exp2 => "llvm.nvvm.ex2.approx.ftz.f",
        UnOp::Log2 => "llvm.nvvm.lg2.approx.ftz.f",
        UnOp::Rsqrt => "llvm.nvvm.rsqrt.approx.ftz.f",
        _ => "llvm.nvvm.rcp.approx.ftz.f",
    };
    f.call("float", name, &[("float", x)])
}

/// `bar.sync 0` (orders shared and global memory among the CTA's threads).
pub(crate) fn barrier(f: &mut Func) {
    f.call("void", "llvm.nvvm.barrier0", &[]);
}

/// Bring a 32-bit value to i32 (`bitcast` for f32).
/// `shfl.sync.{bfly,idx,down}.b32` over the full warp, clamp 31: an out-of-warp source
/// lane (xor / down) keeps the lane's own value; idx uses the low 5 bits.
pub(crate) fn shuffle(
    f: &mut Func,
    mode: ShuffleMode,
    v: ValueId,
    lane: ValueId,
) -> Result<String, LowerError> {
    let (x, t) = f.get_t(v)?;
    let o = f.get(lane)?;
    let xi = f.bitcast_to_i32(&x, t);
    let m = match mode {
        ShuffleMode::Xor => "bfly",
        ShuffleMode::Idx => "idx",
        ShuffleMode::Down => "down",
    };
    let r = f.call(
        "i32",
        &format!("llvm.nvvm.shfl.sync.{m}.i32"),
        &[("i32", "-1"), ("i32", &xi), ("i32", &o), ("i32", "31")],
    );
    Ok(f.bitcast_from_i32(r, t))
}

/// Broadcast an i32 from the lowest active lane.
fn first_lane_i32(f: &mut Func, x: &str, mask: &str, first: &str) -> String {
    f.call(
        "i32",
        "llvm.nvvm.shfl.sync.idx.i32",
        &[("i32", mask), ("i32", x), ("i32", first), ("i32", "31")],
    )
}

/// The value of the lowest active lane (`activemask` + `cttz` + `shfl.sync.idx`).
pub(crate) fn read_first_lane(f: &mut Func, v: ValueId) -> Result<String, LowerError> {
    let (x, t) = f.get_t(v)?;
    let Type::Scalar(s) = t else {
        return Err(f.err(format!("readfirstlane of {t}: scalars only")));
    };
    let mask = f.call("i32", "llvm.nvvm.activemask", &[]);
    let first = f.call("i32", "llvm.cttz.i32", &[("i32", &mask), ("i1", "true")]);
    Ok(match s {
        ScalarType::I32 | ScalarType::F32 => {
            let xi = f.bitcast_to_i32(&x, t);
            let r = first_lane_i32(f, &xi, &mask, &first);
            f.bitcast_from_i32(r, t)
        }
        ScalarType::I64 => {
            let lo = f.inst(format!("trunc i64 {x} to i32"));
            let h = f.inst(format!("lshr i64 {x}, 32"));
            let hi = f.inst(format!("trunc i64 {h} to i32"));
            let rl = first_lane_i32(f, &lo, &mask, &first);
            let rh = first_lane_i32(f, &hi, &mask, &first);
            let zl = f.inst(format!("zext i32 {rl} to i64"));
            let zh = f.inst(format!("zext i32 {rh} to i64"));
            let sh = f.inst(format!("shl i64 {zh}, 32"));
            f.inst(format!("or i64 {sh}, {zl}"))
        }
        _ => {
            let (l, bits) = (ty::scalar(s), s.bits());
            let int = format!("i{bits}");
            let float16 = s.is_float() && bits == 16;
            let xi = if float16 {
                f.inst(format!("bitcast {l} {x} to {int}"))
            } else {
                x
            };
            let w = f.inst(format!("zext {int} {xi} to i32"));
            let r = first_lane_i32(f, &w, &mask, &first);
            let n = f.inst(format!("trunc i32 {r} to {int}"));
            if float16 {
                f.inst(format!("bitcast {int} {n} to {l}"))
            } else {
                n
            }
        }
    })
}
