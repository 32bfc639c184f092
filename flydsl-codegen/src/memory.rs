//! Memory ops: pointer arithmetic, loads and stores, the LDS block, atomics and buffer
//! resources (native on AMD, emulated with an exact bounds check on NVPTX).

use super::func::Func;
use super::{amdgpu, arith::shape, ty, LowerError};
use flydsl_ir::{AddrSpace, MemFlags, ScalarType, Type, ValueId};

/// The `!nontemporal` suffix when the hint is set.
fn nt_suffix(f: &mut Func, flags: MemFlags) -> String {
    if flags.nontemporal {
        let md = f.metadata("!{i32 1}");
        format!(", !nontemporal {md}")
    } else {
        String::new()
    }
}

/// The alignment of an access: the hint, else the element's natural alignment.
fn align_of(flags: MemFlags, elem: ScalarType) -> u32 {
    if flags.align != 0 {
        flags.align
    } else {
        elem.size_bytes()
    }
}

/// Address space and element type of a pointer value.
fn ptr_parts(f: &Func, t: Type) -> Result<(AddrSpace, ScalarType), LowerError> {
    match t {
        Type::Ptr(a, e) => Ok((a, e)),
        _ => Err(f.err(format!("expected a pointer, got {t}"))),
    }
}

/// `getelementptr` of `index` elements from `ptr`; returns (address, address space, elem).
fn element_addr(
    f: &mut Func,
    ptr: ValueId,
    index: ValueId,
) -> Result<(String, AddrSpace, ScalarType), LowerError> {
    let (p, pt) = f.get_t(ptr)?;
    let (a, e) = ptr_parts(f, pt)?;
    let (i, it) = f.get_t(index)?;
    let il = f.lty(it);
    let pl = f.lty(pt);
    let addr = f.inst(format!(
        "getelementptr {}, {pl} {p}, {il} {i}",
        ty::mem_scalar(e)
    ));
    Ok((addr, a, e))
}

/// Lower `LdsBase`: the array's byte offset inside the kernel's one LDS block.
pub(crate) fn lds_base(f: &mut Func, id: u32) -> Result<String, LowerError> {
    let arr =
        f.k.lds
            .get(id as usize)
            .ok_or_else(|| f.err(format!("no LDS array {id}")))?;
    let off = arr.offset;
    Ok(f.inst(format!(
        "getelementptr i8, ptr addrspace(3) @{}, i32 {off}",
        ty::LDS_SYMBOL
    )))
}

/// Lower `DynLdsBase`: a byte offset into the dynamic LDS region.
pub(crate) fn dyn_lds_base(f: &mut Func, off: ValueId) -> Result<String, LowerError> {
    let o = f.get(off)?;
    Ok(f.inst(format!(
        "getelementptr i8, ptr addrspace(3) @{}, i32 {o}",
        ty::DYN_LDS_SYMBOL
    )))
}

/// Lower `PtrAdd`.
pub(crate) fn ptr_add(f: &mut Func, ptr: ValueId, index: ValueId) -> Result<String, LowerError> {
    Ok(element_addr(f, ptr, index)?.0)
}

/// Lower `Load`.
pub(crate) fn load(
    f: &mut Func,
    ptr: ValueId,
    index: ValueId,
    flags: MemFlags,
    rt: Type,
) -> Result<String, LowerError> {
    let (addr, a, e) = element_addr(f, ptr, index)?;
    Ok(load_at(f, &addr, a, e, flags, rt))
}

/// Load a value of type `rt` from an address.
fn load_at(
    f: &mut Func,
    addr: &str,
    a: AddrSpace,
    e: ScalarType,
    flags: MemFlags,
    rt: Type,
) -> String {
    let mt = ty::mem_type(rt);
    if flags.keep_l2 && a == AddrSpace::Global && !f.amd() && !rt.is_bool() {
        if let Some(v) = nvptx_load_keep_l2(f, addr, &mt, rt.size_bytes()) {
            return v;
        }
    }
    let nt = nt_suffix(f, flags);
    let al = align_of(flags, e);
    let v = f.inst(format!(
        "load {mt}, ptr addrspace({}) {addr}, align {al}{nt}",
        ty::addrspace(a)
    ));
    if rt.is_bool() {
        let tl = f.lty(rt);
        f.inst(format!("trunc {mt} {v} to {tl}"))
    } else {
        v
    }
}

/// NVPTX load of `bytes` (4, 8 or 16; else `None`, a plain load) from a global address with
/// an `L2::evict_last` cache policy ([`MemFlags::keep_l2`]), as `mt`. LLVM has no intrinsic
/// for cache-hinted loads, so it is inline PTX: `createpolicy` (pure, so LLVM may share one
/// between loads) and `ld.global.L2::cache_hint`, which LLVM treats as an opaque memory read
/// that stays where it is placed (inside the bounds guard of an emulated buffer load).
fn nvptx_load_keep_l2(f: &mut Func, addr: &str, mt: &str, bytes: u32) -> Option<String> {
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

/// Store an operand of type `vt` at an address.
fn store_at(
    f: &mut Func,
    addr: &str,
    a: AddrSpace,
    e: ScalarType,
    flags: MemFlags,
    v: &str,
    vt: Type,
) {
    let mt = ty::mem_type(vt);
    let mut v = v.to_string();
    if vt.is_bool() {
        let tl = f.lty(vt);
        v = f.inst(format!("zext {tl} {v} to {mt}"));
    }
    let nt = nt_suffix(f, flags);
    let al = align_of(flags, e);
    f.emit(format!(
        "store {mt} {v}, ptr addrspace({}) {addr}, align {al}{nt}",
        ty::addrspace(a)
    ));
}

/// Lower `Store`.
pub(crate) fn store(
    f: &mut Func,
    ptr: ValueId,
    index: ValueId,
    value: ValueId,
    flags: MemFlags,
) -> Result<(), LowerError> {
    let (v, vt) = f.get_t(value)?;
    let (addr, a, e) = element_addr(f, ptr, index)?;
    if a == AddrSpace::Constant {
        return Err(f.err("store to constant memory"));
    }
    store_at(f, &addr, a, e, flags, &v, vt);
    Ok(())
}

/// Lower `AtomicAdd` (relaxed; device scope for global memory, workgroup scope for LDS).
pub(crate) fn atomic_add(
    f: &mut Func,
    ptr: ValueId,
    index: ValueId,
    value: ValueId,
) -> Result<String, LowerError> {
    let (v, vt) = f.get_t(value)?;
    let (addr, a, e) = element_addr(f, ptr, index)?;
    let (op, t) = match e {
        ScalarType::F32 => ("fadd", "float"),
        ScalarType::I32 => ("add", "i32"),
        _ => return Err(f.err(format!("atomic add of {vt}: f32 or i32 only"))),
    };
    let scope = match (a, f.amd()) {
        (AddrSpace::Global, true) => " syncscope(\"agent\")",
        (AddrSpace::Shared, true) => " syncscope(\"workgroup\")",
        (AddrSpace::Global, false) => "",
        (AddrSpace::Shared, false) => " syncscope(\"block\")",
        (AddrSpace::Constant, _) => return Err(f.err("atomic on constant memory")),
    };
    // AMD: device buffers are coarse-grained allocations (hipMalloc), which lets LLVM use
    // the hardware float atomic instead of a compare-and-swap loop.
    let md = if f.amd() && a == AddrSpace::Global {
        let m = f.metadata("!{}");
        format!(", !amdgpu.no.fine.grained.memory {m}, !amdgpu.no.remote.memory {m}")
    } else {
        String::new()
    };
    let sp = ty::addrspace(a);
    Ok(f.inst(format!(
        "atomicrmw {op} ptr addrspace({sp}) {addr}, {t} {v}{scope} monotonic, align 4{md}"
    )))
}

/// Lower `MakeRsrc`.
pub(crate) fn make_rsrc(
    f: &mut Func,
    ptr: ValueId,
    num_elems: ValueId,
    rt: Type,
) -> Result<String, LowerError> {
    let (p, n) = (f.get(ptr)?, f.get(num_elems)?);
    let Type::BufferRsrc(e) = rt else {
        return Err(f.err(format!("make_rsrc gives {rt}, not a resource")));
    };
    if f.amd() {
        return Ok(amdgpu::make_rsrc(f, &p, &n, e));
    }
    let t = f.lty(rt);
    let r0 = f.inst(format!("insertvalue {t} poison, ptr addrspace(1) {p}, 0"));
    Ok(f.inst(format!("insertvalue {t} {r0}, i64 {n}, 1")))
}

/// The resource's element type and operand.
fn rsrc_parts(f: &Func, rsrc: ValueId) -> Result<(String, ScalarType), LowerError> {
    let (r, t) = f.get_t(rsrc)?;
    match t {
        Type::BufferRsrc(e) => Ok((r, e)),
        _ => Err(f.err(format!("expected a buffer resource, got {t}"))),
    }
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

/// Lower `BufferLoad`: out-of-range accesses read zero.
pub(crate) fn buffer_load(
    f: &mut Func,
    rsrc: ValueId,
    index: ValueId,
    flags: MemFlags,
    rt: Type,
) -> Result<String, LowerError> {
    let (r, e) = rsrc_parts(f, rsrc)?;
    let idx = f.get(index)?;
    let (_, lanes) = shape(f, rt)?;
    if f.amd() {
        return amdgpu::buffer_load(f, &r, &idx, e, flags, rt);
    }
    let (ok, base, i) = emulated_guard(f, &r, &idx, lanes);
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

/// Lower `BufferStore`: out-of-range stores are dropped.
pub(crate) fn buffer_store(
    f: &mut Func,
    rsrc: ValueId,
    index: ValueId,
    value: ValueId,
    flags: MemFlags,
) -> Result<(), LowerError> {
    let (r, e) = rsrc_parts(f, rsrc)?;
    let idx = f.get(index)?;
    let (v, vt) = f.get_t(value)?;
    let (_, lanes) = shape(f, vt)?;
    if f.amd() {
        return amdgpu::buffer_store(f, &r, &idx, e, flags, &v, vt);
    }
    let (ok, base, i) = emulated_guard(f, &r, &idx, lanes);
    let (lin, ljoin) = (f.new_label("bufst"), f.new_label("bufstend"));
    f.cond_br(&ok, &lin, &ljoin);
    f.start_block(&lin);
    let addr = f.inst(format!(
        "getelementptr {}, ptr addrspace(1) {base}, i64 {i}",
        ty::mem_scalar(e)
    ));
    store_at(f, &addr, AddrSpace::Global, e, flags, &v, vt);
    f.br(&ljoin);
    f.start_block(&ljoin);
    Ok(())
}
