//! AMDGPU target hooks: function attributes and module flags, thread geometry, fast
//! transcendentals, barriers, cross-lane ops and buffer resources.

use super::func::{Func, TargetHooks};
use super::{ty, LowerError};
use flydsl_ir::{
    AddrSpace, Block, Dim, Kernel, MemFlags, OpKind, ScalarType, ShuffleMode, Special, Target,
    Type, UnOp, ValueId,
};

/// The AMDGPU [`TargetHooks`] (gfx942, gfx950, gfx1201, gfx1250).
pub(crate) struct Amdgpu;

impl TargetHooks for Amdgpu {
    fn module_header(&self) -> String {
        module_header()
    }
    fn define_kernel(&self) -> &'static str {
        "define amdgpu_kernel void"
    }
    fn fn_attributes(&self, k: &Kernel) -> String {
        fn_attributes(k)
    }
    fn module_metadata(&self, f: &mut Func, _sym: &str) -> String {
        module_metadata(f)
    }
    fn special(&self, f: &mut Func, s: Special) -> Result<String, LowerError> {
        special(f, s)
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
    /// The hint changes speed only; AMD lowers it as a plain load.
    fn load_keep_l2(&self, _: &mut Func, _: &str, _: &str, _: u32) -> Option<String> {
        None
    }
    fn atomic_scope(
        &self,
        f: &mut Func,
        a: AddrSpace,
    ) -> Result<(&'static str, String), LowerError> {
        match a {
            // Device buffers are coarse-grained allocations (hipMalloc), which lets LLVM use
            // the hardware float atomic instead of a compare-and-swap loop.
            AddrSpace::Global => {
                let m = f.metadata("!{}");
                Ok((
                    " syncscope(\"agent\")",
                    format!(", !amdgpu.no.fine.grained.memory {m}, !amdgpu.no.remote.memory {m}"),
                ))
            }
            AddrSpace::Shared => Ok((" syncscope(\"workgroup\")", String::new())),
            AddrSpace::Constant => Err(f.err("atomic on constant memory")),
        }
    }
    fn rsrc_type(&self) -> &'static str {
        "ptr addrspace(8)"
    }
    fn make_rsrc(
        &self,
        f: &mut Func,
        p: &str,
        n: &str,
        e: ScalarType,
        _rt: Type,
        uniform: bool,
    ) -> String {
        make_rsrc(f, p, n, e, uniform)
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

/// Module header.
pub(crate) fn module_header() -> String {
    "target triple = \"amdgcn-amd-amdhsa\"\n".to_string()
}

/// Which thread-geometry queries a kernel makes.
#[derive(Default)]
struct Uses {
    implicit_args: bool,
    tid: [bool; 3],
    wgid: [bool; 3],
}

fn dim_index(d: Dim) -> usize {
    match d {
        Dim::X => 0,
        Dim::Y => 1,
        Dim::Z => 2,
    }
}

fn scan(b: &Block, u: &mut Uses) {
    for op in &b.ops {
        match &op.kind {
            OpKind::Special(Special::BlockDim(_) | Special::GridDim(_)) => u.implicit_args = true,
            OpKind::Special(Special::ThreadId(d)) => u.tid[dim_index(*d)] = true,
            OpKind::Special(Special::BlockId(d)) => u.wgid[dim_index(*d)] = true,
            OpKind::If {
                then_block,
                else_block,
                ..
            } => {
                scan(then_block, u);
                scan(else_block, u);
            }
            OpKind::For { body, .. } => scan(body, u),
            _ => {}
        }
    }
}

/// The kernel's attribute group body.
///
/// The `amdgpu-no-*` attributes are justified because the lowered kernel makes no calls and
/// never uses the dispatch pointer, queue pointer, dispatch id, hostcall / heap / multigrid /
/// default-queue / completion-action implicit arguments or the LDS kernel id; the implicit
/// argument pointer only when it queries BlockDim/GridDim; the y/z work-item and work-group
/// ids only when it queries them. f32 denormals are flushed so `v_exp_f32`, `v_rcp_f32` etc.
/// are used bare.
pub(crate) fn fn_attributes(k: &Kernel) -> String {
    let mut u = Uses::default();
    scan(&k.body, &mut u);
    let mut a = vec![
        format!(
            "\"amdgpu-flat-work-group-size\"=\"1,{}\"",
            k.attrs.max_threads
        ),
        "\"denormal-fp-math-f32\"=\"preserve-sign,preserve-sign\"".to_string(),
    ];
    if let Some(w) = k.attrs.waves_per_eu {
        a.push(format!("\"amdgpu-waves-per-eu\"=\"{w}\""));
    }
    if let Some(r) = k.attrs.max_registers {
        a.extend(max_registers_attrs(k.target, r));
    }
    for n in [
        "dispatch-ptr",
        "queue-ptr",
        "dispatch-id",
        "hostcall-ptr",
        "heap-ptr",
        "multigrid-sync-arg",
        "default-queue",
        "completion-action",
        "lds-kernel-id",
    ] {
        a.push(format!("\"amdgpu-no-{n}\""));
    }
    if !u.implicit_args {
        a.push("\"amdgpu-no-implicitarg-ptr\"".into());
    }
    for (i, d) in ["y", "z"].iter().enumerate() {
        if !u.tid[i + 1] {
            a.push(format!("\"amdgpu-no-workitem-id-{d}\""));
        }
        if !u.wgid[i + 1] {
            a.push(format!("\"amdgpu-no-workgroup-id-{d}\""));
        }
    }
    if k.target.wave_size() == 32 {
        a.push("\"target-features\"=\"+wavefrontsize32\"".into());
    }
    a.join(" ")
}

/// The attributes that keep a kernel's VGPRs per lane (the code object's `.vgpr_count`)
/// within `max_registers`, as `maxnreg` bounds registers per thread on NVIDIA.
///
/// `amdgpu-num-vgpr` bounds the VGPRs. On gfx942 and gfx950 architectural and accumulation
/// VGPRs share one file, `.vgpr_count` is their sum, and LLVM reads the attribute as half the
/// budget of the two together (split evenly unless `amdgpu-agpr-alloc` reserves fewer
/// accumulation registers): these targets get half the cap (rounded down to the 4-register
/// granule) and, for caps up to the 256 architectural registers, no reserved accumulation
/// registers, so the whole budget can go to architectural ones (which the MFMA atoms also take
/// as accumulators there). Checked with llc-22. LLVM raises a value below the target's minimum
/// to it; the build's code-object check then reports the cap as not met.
fn max_registers_attrs(target: Target, max_registers: u32) -> Vec<String> {
    match target {
        Target::Gfx942 | Target::Gfx950 => {
            let mut a = vec![format!(
                "\"amdgpu-num-vgpr\"=\"{}\"",
                ((max_registers / 2) & !3).max(4)
            )];
            if max_registers <= 256 {
                a.push("\"amdgpu-agpr-alloc\"=\"0\"".into());
            }
            a
        }
        _ => vec![format!("\"amdgpu-num-vgpr\"=\"{}\"", max_registers.max(1))],
    }
}

/// Named module metadata: code object v5.
pub(crate) fn module_metadata(f: &mut Func) -> String {
    let m = f.metadata("!{i32 1, !\"amdhsa_code_object_version\", i32 500}");
    format!("!llvm.module.flags = !{{{m}}}\n")
}

/// The lane id within the wave (mbcnt over an all-ones mask).
fn lane_id(f: &mut Func) -> String {
    let lo = f.call(
        "i32",
        "llvm.amdgcn.mbcnt.lo",
        &[("i32", "-1"), ("i32", "0")],
    );
    if f.target.wave_size() == 64 {
        f.call(
            "i32",
            "llvm.amdgcn.mbcnt.hi",
            &[("i32", "-1"), ("i32", &lo)],
        )
    } else {
        lo
    }
}

/// Lower a thread-geometry query. BlockDim/GridDim read the code-object-v5 implicit
/// arguments: hidden_block_count_{x,y,z} (u32 at 0/4/8) and hidden_group_size_{x,y,z}
/// (u16 at 12/14/16).
pub(crate) fn special(f: &mut Func, s: Special) -> Result<String, LowerError> {
    let xyz = |d: Dim| ["x", "y", "z"][dim_index(d)];
    Ok(match s {
        Special::ThreadId(d) => f.call("i32", &format!("llvm.amdgcn.workitem.id.{}", xyz(d)), &[]),
        Special::BlockId(d) => f.call("i32", &format!("llvm.amdgcn.workgroup.id.{}", xyz(d)), &[]),
        Special::BlockDim(d) | Special::GridDim(d) => {
            let base = f.call("ptr addrspace(4)", "llvm.amdgcn.implicitarg.ptr", &[]);
            let i = dim_index(d);
            let (off, t, al) = if matches!(s, Special::GridDim(_)) {
                (4 * i, "i32", 4)
            } else {
                (12 + 2 * i, "i16", 2)
            };
            let p = f.inst(format!(
                "getelementptr i8, ptr addrspace(4) {base}, i64 {off}"
            ));
            let inv = f.metadata("!{}");
            let v = f.inst(format!(
                "load {t}, ptr addrspace(4) {p}, align {al}, !invariant.load {inv}"
            ));
            if t == "i16" {
                f.inst(format!("zext i16 {v} to i32"))
            } else {
                v
            }
        }
        Special::LaneId => lane_id(f),
    })
}

/// The hardware fast forms on f32: `v_exp_f32`, `v_log_f32`, `v_rsq_f32`, `v_rcp_f32`.
pub(crate) fn fast_f32(f: &mut Func, op: UnOp, x: &str) -> String {
    let name = match op {
        UnOp::Exp2 => "llvm.amdgcn.exp2.f32",
        UnOp::Log2 => "llvm.amdgcn.log.f32",
        UnOp::Rsqrt => "llvm.amdgcn.rsq.f32",
        _ => "llvm.amdgcn.rcp.f32",
    };
    f.call("float", name, &[("float", x)])
}

/// Workgroup barrier with the fences that make LDS and global writes visible to the group.
pub(crate) fn barrier(f: &mut Func) {
    f.emit("fence syncscope(\"workgroup\") release".into());
    f.call("void", "llvm.amdgcn.s.barrier", &[]);
    f.emit("fence syncscope(\"workgroup\") acquire".into());
}

/// Cross-lane shuffle through `ds_bpermute_b32` (byte address = source lane * 4).
pub(crate) fn shuffle(
    f: &mut Func,
    mode: ShuffleMode,
    v: ValueId,
    lane: ValueId,
) -> Result<String, LowerError> {
    let (x, t) = f.get_t(v)?;
    let o = f.get(lane)?;
    let xi = f.bitcast_to_i32(&x, t);
    let w = f.target.wave_size();
    let me = lane_id(f);
    let src = match mode {
        ShuffleMode::Idx => f.inst(format!("and i32 {o}, {}", w - 1)),
        ShuffleMode::Xor | ShuffleMode::Down => {
            let op = if mode == ShuffleMode::Xor {
                "xor"
            } else {
                "add"
            };
            let s = f.inst(format!("{op} i32 {me}, {o}"));
            let ok = f.inst(format!("icmp ult i32 {s}, {w}"));
            f.inst(format!("select i1 {ok}, i32 {s}, i32 {me}"))
        }
    };
    let addr = f.inst(format!("shl i32 {src}, 2"));
    let r = f.call(
        "i32",
        "llvm.amdgcn.ds.bpermute",
        &[("i32", &addr), ("i32", &xi)],
    );
    Ok(f.bitcast_from_i32(r, t))
}

/// `v_readfirstlane_b32` (two of them for 64-bit values); narrow values go through i32.
pub(crate) fn read_first_lane(f: &mut Func, v: ValueId) -> Result<String, LowerError> {
    let (x, t) = f.get_t(v)?;
    let Type::Scalar(s) = t else {
        return Err(f.err(format!("readfirstlane of {t}: scalars only")));
    };
    Ok(match s {
        ScalarType::I32 => f.call("i32", "llvm.amdgcn.readfirstlane.i32", &[("i32", &x)]),
        ScalarType::F32 => f.call("float", "llvm.amdgcn.readfirstlane.f32", &[("float", &x)]),
        ScalarType::I64 => f.call("i64", "llvm.amdgcn.readfirstlane.i64", &[("i64", &x)]),
        _ => {
            let (l, bits) = (ty::scalar(s), s.bits());
            let int = format!("i{bits}");
            let xi = if s.is_float() && bits == 16 {
                f.inst(format!("bitcast {l} {x} to {int}"))
            } else {
                x
            };
            let w = f.inst(format!("zext {int} {xi} to i32"));
            let r = f.call("i32", "llvm.amdgcn.readfirstlane.i32", &[("i32", &w)]);
            let n = f.inst(format!("trunc i32 {r} to {int}"));
            if s.is_float() && bits == 16 {
                f.inst(format!("bitcast {int} {n} to {l}"))
            } else {
                n
            }
        }
    })
}

/// Buffer descriptor dword3 for raw (stride 0), bounds-checked access.
///
/// gfx9 (gfx942/gfx950): DST_SEL_XYZW = 0 is fine for raw loads, NUM_FORMAT = 7 (bits 14:12)
/// and DATA_FORMAT = 4 (bits 18:15, must be non-zero) = 0x00027000 (what MLIR's AMDGPU
/// lowering uses). gfx12: bit 24 must be 1 and OOB_SELECT (bits 29:28) = 3 ("raw": an access
/// is out of range when its byte offset >= num_records), with FORMAT 32_32_32_32 = 0x31027000
/// (MLIR's bounds-checked value, tested there on gfx1201). On gfx1250 LLVM 22 places only
/// flags[3:0] in the descriptor's top nibble; the same constant keeps those bits 0.
fn rsrc_flags(t: Target) -> u32 {
    match t {
        Target::Gfx942 | Target::Gfx950 => 0x0002_7000,
        _ => 0x3102_7000,
    }
}

/// `llvm.amdgcn.make.buffer.rsrc` with num_records = elements * element size (bytes).
///
/// With `uniform` operands (proved by `flydsl_ir::uniform`) the pointer and the count go
/// through `readfirstlane` (exact for uniform values): a descriptor is an SGPR operand, and
/// when LLVM happens to compute a uniform address or count in VGPRs (64-bit arithmetic it
/// moved to the VALU) it would otherwise wrap every access through the descriptor in a
/// waterfall loop (`v_readfirstlane` + `s_cbranch_execnz` per access).
pub(crate) fn make_rsrc(f: &mut Func, p: &str, n: &str, e: ScalarType, uniform: bool) -> String {
    let mut bytes = f.inst(format!("mul i64 {n}, {}", e.size_bytes()));
    if f.target != Target::Gfx1250 {
        // The num_records field is 32 bits wide before gfx1250: clamp instead of wrapping.
        bytes = f.call(
            "i64",
            "llvm.umin.i64",
            &[("i64", &bytes), ("i64", "4294967295")],
        );
    }
    let mut p = p.to_string();
    if uniform {
        p = f.call(
            "ptr addrspace(1)",
            "llvm.amdgcn.readfirstlane.p1",
            &[("ptr addrspace(1)", &p)],
        );
        bytes = if f.target == Target::Gfx1250 {
            f.call("i64", "llvm.amdgcn.readfirstlane.i64", &[("i64", &bytes)])
        } else {
            let lo = f.inst(format!("trunc i64 {bytes} to i32"));
            let lo = f.call("i32", "llvm.amdgcn.readfirstlane.i32", &[("i32", &lo)]);
            f.inst(format!("zext i32 {lo} to i64"))
        };
    }
    let flags = rsrc_flags(f.target).to_string();
    f.call(
        "ptr addrspace(8)",
        "llvm.amdgcn.make.buffer.rsrc.p8.p1",
        &[
            ("ptr addrspace(1)", &p),
            ("i16", "0"),
            ("i64", &bytes),
            ("i32", &flags),
        ],
    )
}

/// The integer type a buffer access of `bytes` bytes is carried as (so 16-bit and 8-bit
/// vectors use plain dword loads and 128-bit accesses become `buffer_load_dwordx4`).
fn transfer_type(bytes: u32) -> Option<&'static str> {
    Some(match bytes {
        1 => "i8",
        2 => "i16",
        4 => "i32",
        8 => "<2 x i32>",
        16 => "<4 x i32>",
        _ => return None,
    })
}

/// The cache-policy `aux` operand for the non-temporal hint (gfx9: `nt` = bit 1; gfx12:
/// `th` = TH_NT = 1).
fn aux(f: &Func, flags: MemFlags) -> &'static str {
    match (flags.nontemporal, f.target) {
        (false, _) => "0",
        (true, Target::Gfx942 | Target::Gfx950) => "2",
        (true, _) => "1",
    }
}

fn byte_offset(f: &mut Func, idx: &str, e: ScalarType) -> String {
    f.inst(format!("mul i32 {idx}, {}", e.size_bytes()))
}

fn transfer_suffix(t: &str) -> String {
    match t {
        "<2 x i32>" => "v2i32".into(),
        "<4 x i32>" => "v4i32".into(),
        s => s.into(),
    }
}

/// `llvm.amdgcn.raw.ptr.buffer.load` of `rt` at element `idx`.
pub(crate) fn buffer_load(
    f: &mut Func,
    r: &str,
    idx: &str,
    e: ScalarType,
    flags: MemFlags,
    rt: Type,
) -> Result<String, LowerError> {
    let mt = ty::mem_type(rt);
    let xt = transfer_type(rt.size_bytes())
        .ok_or_else(|| f.err(format!("buffer access of {rt}: 1, 2, 4, 8 or 16 bytes")))?;
    let off = byte_offset(f, idx, e);
    let name = format!("llvm.amdgcn.raw.ptr.buffer.load.{}", transfer_suffix(xt));
    let a = aux(f, flags);
    let raw = f.call(
        xt,
        &name,
        &[
            ("ptr addrspace(8)", r),
            ("i32", &off),
            ("i32", "0"),
            ("i32", a),
        ],
    );
    let v = if xt != mt {
        f.inst(format!("bitcast {xt} {raw} to {mt}"))
    } else {
        raw
    };
    Ok(if rt.is_bool() {
        let tl = f.lty(rt);
        f.inst(format!("trunc {mt} {v} to {tl}"))
    } else {
        v
    })
}

/// `llvm.amdgcn.raw.ptr.buffer.store` of a value at element `idx`.
pub(crate) fn buffer_store(
    f: &mut Func,
    r: &str,
    idx: &str,
    e: ScalarType,
    flags: MemFlags,
    v: &str,
    vt: Type,
) -> Result<(), LowerError> {
    let mt = ty::mem_type(vt);
    let xt = transfer_type(vt.size_bytes())
        .ok_or_else(|| f.err(format!("buffer access of {vt}: 1, 2, 4, 8 or 16 bytes")))?;
    let mut x = v.to_string();
    if vt.is_bool() {
        let tl = f.lty(vt);
        x = f.inst(format!("zext {tl} {x} to {mt}"));
    }
    if xt != mt {
        x = f.inst(format!("bitcast {mt} {x} to {xt}"));
    }
    let off = byte_offset(f, idx, e);
    let name = format!("llvm.amdgcn.raw.ptr.buffer.store.{}", transfer_suffix(xt));
    let a = aux(f, flags);
    f.call(
        "void",
        &name,
        &[
            (xt, &x),
            ("ptr addrspace(8)", r),
            ("i32", &off),
            ("i32", "0"),
            ("i32", a),
        ],
    );
    Ok(())
}
