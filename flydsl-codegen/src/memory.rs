//! Memory ops: pointer arithmetic, loads and stores, the LDS block, atomics and buffer
//! resources (native on AMD, emulated with an exact bounds check on NVPTX).

use super::func::Func;
use super::{ty, LowerError};
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
pub(crate) fn load_at(
    f: &mut Func,
    addr: &str,
    a: AddrSpace,
    e: ScalarType,
    flags: MemFlags,
    rt: Type,
) -> String {
    let mt = ty::mem_type(rt);
    if flags.keep_l2 && a == AddrSpace::Global && !rt.is_bool() {
        if let Some(v) = f.hooks().load_keep_l2(f, addr, &mt, rt.size_bytes()) {
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

/// Store an operand of type `vt` at an address.
pub(crate) fn store_at(
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
    let (scope, md) = f.hooks().atomic_scope(f, a)?;
    let sp = ty::addrspace(a);
    Ok(f.inst(format!(
        "atomicrmw {op} ptr addrspace({sp}) {addr}, {t} {v}{scope} monotonic, align 4{md}"
    )))
}

/// Lower `FlagStore`: a release store at system scope (no `syncscope`: LLVM's default scope
/// is the system), `st.release.sys` on NVPTX and `buffer_wbl2 sc0 sc1` + a `sc0 sc1` store
/// on gfx942/gfx950 (the AMDGPU memory model's system-scope release).
pub(crate) fn flag_store(
    f: &mut Func,
    ptr: ValueId,
    index: ValueId,
    value: ValueId,
) -> Result<(), LowerError> {
    let v = f.get(value)?;
    let (addr, a, _) = element_addr(f, ptr, index)?;
    let sp = ty::addrspace(a);
    f.emit(format!(
        "store atomic i32 {v}, ptr addrspace({sp}) {addr} release, align 4"
    ));
    Ok(())
}

/// Lower `FlagWait`: a loop of system-scope acquire loads (`ld.acquire.sys` on NVPTX; on
/// gfx942/gfx950 a `sc0 sc1` load followed by `buffer_inv sc0 sc1`) that ends when the flag
/// equals `expect` (result true) or when `llvm.readsteadycounter` has advanced by more than
/// `timeout` ticks since the first poll (result false).
pub(crate) fn flag_wait(
    f: &mut Func,
    [ptr, index, expect, timeout]: [ValueId; 4],
) -> Result<String, LowerError> {
    let want = f.get(expect)?;
    let limit = f.get(timeout)?;
    let (addr, a, _) = element_addr(f, ptr, index)?;
    let sp = ty::addrspace(a);
    let t0 = f.call("i64", "llvm.readsteadycounter", &[]);
    let (lpoll, lcheck, ldone) = (
        f.new_label("flag_poll"),
        f.new_label("flag_check"),
        f.new_label("flag_done"),
    );
    f.br(&lpoll);
    f.start_block(&lpoll);
    let cur = f.inst(format!(
        "load atomic i32, ptr addrspace({sp}) {addr} acquire, align 4"
    ));
    let seen = f.inst(format!("icmp eq i32 {cur}, {want}"));
    f.cond_br(&seen, &ldone, &lcheck);
    f.start_block(&lcheck);
    let now = f.call("i64", "llvm.readsteadycounter", &[]);
    let spent = f.inst(format!("sub i64 {now}, {t0}"));
    let expired = f.inst(format!("icmp sgt i64 {spent}, {limit}"));
    f.cond_br(&expired, &ldone, &lpoll);
    f.start_block(&ldone);
    Ok(f.inst(format!("phi i1 [ true, %{lpoll} ], [ false, %{lcheck} ]")))
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
    let uniform = f.is_uniform(ptr) && f.is_uniform(num_elems);
    Ok(f.hooks().make_rsrc(f, &p, &n, e, rt, uniform))
}

/// The resource's element type and operand.
fn rsrc_parts(f: &Func, rsrc: ValueId) -> Result<(String, ScalarType), LowerError> {
    let (r, t) = f.get_t(rsrc)?;
    match t {
        Type::BufferRsrc(e) => Ok((r, e)),
        _ => Err(f.err(format!("expected a buffer resource, got {t}"))),
    }
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
    // Checked here so that both targets report a non-value type the same way.
    f.shape(rt)?;
    f.hooks().buffer_load(f, &r, &idx, e, flags, rt)
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
    f.shape(vt)?;
    f.hooks().buffer_store(f, &r, &idx, e, flags, &v, vt)
}
