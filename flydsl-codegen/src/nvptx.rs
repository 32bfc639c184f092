//! NVPTX (sm_90) target hooks: module boilerplate, special registers, approximate
//! transcendentals, barriers and warp shuffles.

use super::func::{Func, TargetHooks};
use super::memory::{load_at, store_at};
use super::{ty, LowerError};
use flydsl_ir::{
    AddrSpace, Dim, Kernel, MemFlags, ScalarType, ShuffleMode, Special, Type, UnOp, ValueId,
};

/// The NVPTX [`TargetHooks`] (sm_90). Buffer resources are emulated: a resource is the base
/// pointer and the valid element count, and every access is guarded by a bounds check.
pub(crate) struct Nvptx;

impl TargetHooks for Nvptx {
    fn module_header(&self) -> String {
        module_header()
    }
    fn define_kernel(&self) -> &'static str {
        "define void"
    }
    fn fn_attributes(&self, _k: &Kernel) -> String {
        String::new()
    }
    fn module_metadata(&self, f: &mut Func, sym: &str) -> String {
        module_metadata(f, sym)
    }
    fn special(&self, f: &mut Func, s: Special) -> Result<String, LowerError> {
        Ok(special(f, s))
    }
    fn fast_f32(&self, f: &mut Func, op: UnOp, x: &str) -> String {
        fast_f32(f, op, x)
    }
    fn barrier(&self, f: &mut Func) {
        barrier(f)
    }
    fn shuffle(
        &self,
        f: &mut Func,
        mode: ShuffleMode,
        v: ValueId,
        lane: ValueId,
    ) -> Result<String, LowerError> {
        shuffle(f, mode, v, lane)
    }
    fn read_first_lane(&self, f: &mut Func, v: ValueId) -> Result<String, LowerError> {
        read_first_lane(f, v)
    }
    fn load_keep_l2(&self, f: &mut Func, addr: &str, mt: &str, bytes: u32) -> Option<String> {
        load_keep_l2(f, addr, mt, bytes)
    }
    fn atomic_scope(
        &self,
        f: &mut Func,
        a: AddrSpace,
    ) -> Result<(&'static str, String), LowerError> {
        match a {
            AddrSpace::Global => Ok(("", String::new())),
            AddrSpace::Shared => Ok((" syncscope(\"block\")", String::new())),
            AddrSpace::Constant => Err(f.err("atomic on constant memory")),
        }
    }
    /// The emulated resource: base pointer and valid element count.
    fn rsrc_type(&self) -> &'static str {
        "{ ptr addrspace(1), i64 }"
    }
    fn make_rsrc(
        &self,
        f: &mut Func,
        p: &str,
        n: &str,
        _e: ScalarType,
        rt: Type,
        _uniform: bool,
    ) -> String {
        let t = f.lty(rt);
        let r0 = f.inst(format!("insertvalue {t} poison, ptr addrspace(1) {p}, 0"));
        f.inst(format!("insertvalue {t} {r0}, i64 {n}, 1"))
    }
    fn buffer_load(
        &self,
        f: &mut Func,
        r: &str,
        idx: &str,
        e: ScalarType,
        flags: MemFlags,
        rt: Type,
    ) -> Result<String, LowerError> {
        buffer_load(f, r, idx, e, flags, rt)
    }
    fn buffer_store(
        &self,
        f: &mut Func,
        r: &str,
        idx: &str,
        e: ScalarType,
        flags: MemFlags,
        v: &str,
        vt: Type,
    ) -> Result<(), LowerError> {
        buffer_store(f, r, idx, e, flags, v, vt)
    }
}

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

/// NVPTX load of `bytes` (4, 8 or 16; else `None`, a plain load) from a global address with
/// an `L2::evict_last` cache policy ([`MemFlags::keep_l2`]), as `mt`. LLVM has no intrinsic
/// for cache-hinted loads, so it is inline PTX: `createpolicy` (pure, so LLVM may share one
/// between loads) and `ld.global.L2::cache_hint`, which LLVM treats as an opaque memory read
/// that stays where it is placed (inside the bounds guard of an emulated buffer load).
fn load_keep_l2(f: &mut Func, addr: &str, mt: &str, bytes: u32) -> Option<String> {
    let n = match bytes {
        4 => 1,
        8 => 2,
        16 => 4,
        _ => return None,
    };
    let pol = f.inst(
        "call i64 asm \"createpolicy.fractional.L2::evict_last.b64 $0, 1.0;\", \"=l\"() \
         nounwind memory(none)",
    );
    let outs: Vec<String> = (0..n).map(|i| format!("${i}")).collect();
    let (vec, dst, rty) = match n {
        1 => ("", outs[0].clone(), "i32".to_string()),
        _ => (
            if n == 2 { ".v2" } else { ".v4" },
            format!("{{{}}}", outs.join(", ")),
            format!("{{ {} }}", vec!["i32"; n].join(", ")),
        ),
    };
    let cons = format!("{}l,l", "=r,".repeat(n));
    let r = f.inst(format!(
        "call {rty} asm \"ld.global.L2::cache_hint{vec}.b32 {dst}, [${n}], ${};\", \"{cons}\"\
         (ptr addrspace(1) {addr}, i64 {pol}) nounwind memory(read)",
        n + 1
    ));
    let words = if n == 1 {
        r
    } else {
        let mut v = "poison".to_string();
        for i in 0..n {
            let w = f.inst(format!("extractvalue {rty} {r}, {i}"));
            v = f.inst(format!("insertelement <{n} x i32> {v}, i32 {w}, i32 {i}"));
        }
        v
    };
    let wt = if n == 1 {
        "i32".to_string()
    } else {
        format!("<{n} x i32>")
    };
    Some(f.inst(format!("bitcast {wt} {words} to {mt}")))
}

/// NVPTX emulation: "the whole access lies in [0, num_elems)". Returns the in-range
/// condition, the base pointer and the i64 index; the address is formed only in the guarded
/// block, so no out-of-range address is ever dereferenced.
fn emulated_guard(f: &mut Func, r: &str, idx: &str, lanes: u32) -> (String, String, String) {
    let t = "{ ptr addrspace(1), i64 }";
    let base = f.inst(format!("extractvalue {t} {r}, 0"));
    let n = f.inst(format!("extractvalue {t} {r}, 1"));
    let i = f.inst(format!("sext i32 {idx} to i64"));
    let end = f.inst(format!("add i64 {i}, {lanes}"));
    let lo = f.inst(format!("icmp sge i64 {i}, 0"));
    let hi = f.inst(format!("icmp sle i64 {end}, {n}"));
    let ok = f.inst(format!("and i1 {lo}, {hi}"));
    (ok, base, i)
}

/// Emulated `BufferLoad`: out-of-range accesses read zero.
fn buffer_load(
    f: &mut Func,
    r: &str,
    idx: &str,
    e: ScalarType,
    flags: MemFlags,
    rt: Type,
) -> Result<String, LowerError> {
    let (_, lanes) = f.shape(rt)?;
    let (ok, base, i) = emulated_guard(f, r, idx, lanes);
    let pre = f.cur_block.clone();
    let (lin, ljoin) = (f.new_label("bufld"), f.new_label("bufldend"));
    f.cond_br(&ok, &lin, &ljoin);
    f.start_block(&lin);
    let addr = f.inst(format!(
        "getelementptr {}, ptr addrspace(1) {base}, i64 {i}",
        ty::mem_scalar(e)
    ));
    let v = load_at(f, &addr, AddrSpace::Global, e, flags, rt);
    let end = f.cur_block.clone();
    f.br(&ljoin);
    f.start_block(&ljoin);
    let tl = f.lty(rt);
    Ok(f.inst(format!(
        "phi {tl} [ {v}, %{end} ], [ zeroinitializer, %{pre} ]"
    )))
}

/// Emulated `BufferStore`: out-of-range stores are dropped.
fn buffer_store(
    f: &mut Func,
    r: &str,
    idx: &str,
    e: ScalarType,
    flags: MemFlags,
    v: &str,
    vt: Type,
) -> Result<(), LowerError> {
    let (_, lanes) = f.shape(vt)?;
    let (ok, base, i) = emulated_guard(f, r, idx, lanes);
    let (lin, ljoin) = (f.new_label("bufst"), f.new_label("bufstend"));
    f.cond_br(&ok, &lin, &ljoin);
    f.start_block(&lin);
    let addr = f.inst(format!(
        "getelementptr {}, ptr addrspace(1) {base}, i64 {i}",
        ty::mem_scalar(e)
    ));
    store_at(f, &addr, AddrSpace::Global, e, flags, v, vt);
    f.br(&ljoin);
    f.start_block(&ljoin);
    Ok(())
}
