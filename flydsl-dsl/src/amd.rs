//! AMD-only pipeline primitives (`flydsl_ir::AmdOp`): the LDS-only barrier, explicit
//! vector-memory waits, scheduling controls, direct-to-LDS loads, hardware fp8 pack/unpack
//! and the permlane moves. Each exists on the AMD
//! targets its IR op lists (`AmdOp::targets`); building one for another target fails with a
//! verifier error naming the op and the target. The contracts are the IR ops' docs.

use crate::mem::{Lds, Rsrc};
use crate::val::{emit, emit0, Operand, Val};
use flydsl_ir::{AmdOp, DppCtrl, OpKind, ScalarType, Type};

/// LDS-only workgroup barrier ([`AmdOp::LdsBarrier`]): orders LDS accesses (and completed
/// direct-to-LDS loads) of the workgroup like [`barrier`](crate::barrier), but lets global and
/// buffer loads issued before it stay in flight. Call from uniform control flow.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::F32, Target};
/// let k = KernelBuilder::new("pingpong", Target::Gfx950, 256)
///     .build(|k| {
///         let x = k.tensor("x", F32);
///         let y = k.tensor_mut("y", F32);
///         let s = k.lds("s", F32, 256);
///         let t = thread_id_x();
///         let next = x.rsrc().load(t + 256); // a prefetch that may cross the barrier
///         s.store(t, x.rsrc().load(t));
///         lds_barrier();
///         y.store(t, s.load(t ^ 1) + next);
///     })
///     .unwrap();
/// assert!(format!("{:?}", k.body).contains("LdsBarrier"));
/// ```
pub fn lds_barrier() {
    emit0(OpKind::Amd(AmdOp::LdsBarrier))
}

/// Wait until at most `n` (`0..=63`) vector-memory loads of this wave are outstanding
/// ([`AmdOp::WaitVmcnt`]: `s_waitcnt vmcnt(n)` on gfx9, `s_wait_loadcnt n` on gfx12). Its use
/// is retiring direct-to-LDS loads while newer loads stay in flight.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::Target;
/// let k = KernelBuilder::new("w", Target::Gfx1201, 64).build(|_| wait_vmcnt(2)).unwrap();
/// assert!(format!("{:?}", k.body).contains("WaitVmcnt(2)"));
/// ```
pub fn wait_vmcnt(n: u32) {
    emit0(OpKind::Amd(AmdOp::WaitVmcnt(n)))
}

/// Scheduling fence ([`AmdOp::SchedBarrier`]): only the instruction classes in `mask`
/// ([`sched_mask`](flydsl_ir::sched_mask)) may be moved across it by the compiler.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{sched_mask, Target};
/// let k = KernelBuilder::new("sb", Target::Gfx942, 64)
///     .build(|_| sched_barrier(sched_mask::NONE))
///     .unwrap();
/// assert!(format!("{:?}", k.body).contains("SchedBarrier(0)"));
/// ```
pub fn sched_barrier(mask: u32) {
    emit0(OpKind::Amd(AmdOp::SchedBarrier(mask)))
}

/// Scheduling group ([`AmdOp::SchedGroupBarrier`]): `size` instructions of the classes in
/// `mask` here, ordered with the other groups of `sync_id`. The usual hot loop interleaves
/// one MFMA with one global read and one LDS read per group.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{sched_mask as m, Target};
/// let k = KernelBuilder::new("sgb", Target::Gfx950, 64)
///     .build(|_| {
///         for _ in 0..4 {
///             sched_group_barrier(m::MFMA, 1, 0);
///             sched_group_barrier(m::VMEM_READ, 1, 0);
///             sched_group_barrier(m::DS_READ, 1, 0);
///         }
///     })
///     .unwrap();
/// assert_eq!(k.body.ops.len(), 12);
/// ```
pub fn sched_group_barrier(mask: u32, size: u32, sync_id: u32) {
    emit0(OpKind::Amd(AmdOp::SchedGroupBarrier {
        mask,
        size,
        sync_id,
    }))
}

/// Set this wave's issue priority, `0..=3` ([`AmdOp::SetPrio`], `s_setprio`): raise it
/// around a matrix cluster, drop it back to 0 after.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::Target;
/// let k = KernelBuilder::new("prio", Target::Gfx942, 64)
///     .build(|_| { set_prio(1); set_prio(0); })
///     .unwrap();
/// assert!(format!("{:?}", k.body).contains("SetPrio(1)"));
/// assert!(KernelBuilder::new("bad", Target::Gfx942, 64).build(|_| set_prio(4)).is_err());
/// ```
pub fn set_prio(prio: u32) {
    emit0(OpKind::Amd(AmdOp::SetPrio(prio)))
}

/// Direct-to-LDS load ([`AmdOp::BufferLoadToLds`], gfx942: 4 bytes per lane, gfx950: 4 or
/// 16): each active lane `l` reads `bytes` bytes at element `index` of `src` (zeros out of
/// range) and the data lands in `dst` at element `dst_offset + l * bytes / size` (`dst_offset`
/// wave-uniform, i32). It lands asynchronously: read it after [`wait_vmcnt`] in the issuing
/// wave plus a barrier, or after the next [`lds_barrier`] / [`barrier`](crate::barrier).
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::BF16, Target};
/// let k = KernelBuilder::new("dma", Target::Gfx950, 64)
///     .build(|k| {
///         let x = k.tensor("x", BF16);
///         let y = k.tensor_mut("y", BF16);
///         let s = k.lds("s", BF16, 512);
///         let t = thread_id_x();
///         buffer_load_to_lds(&x.rsrc(), t * 8, &s, 0, 16); // 64 lanes x 16 B
///         lds_barrier();
///         y.store(t, s.load(t));
///     })
///     .unwrap();
/// assert!(format!("{:?}", k.body).contains("BufferLoadToLds"));
/// ```
pub fn buffer_load_to_lds(
    src: &Rsrc,
    index: impl Into<Operand>,
    dst: &Lds,
    dst_offset: impl Into<Operand>,
    bytes: u32,
) {
    let index = index.into().to_val(Type::s(ScalarType::I32));
    let off = dst_offset.into().to_val(Type::s(ScalarType::I32));
    let base = dst.base_ptr();
    let p = emit(OpKind::PtrAdd(base.id(), off.id()), base.ty());
    emit0(OpKind::Amd(AmdOp::BufferLoadToLds {
        rsrc: src.val().id(),
        index: index.id(),
        lds: p.id(),
        bytes,
    }))
}

/// gfx950 transposing LDS read ([`AmdOp::LdsReadTr16`], `ds_read_b64_tr_b16`): each lane
/// names 4 consecutive 16-bit elements at element `index` of `src` (8-byte aligned); in each
/// 16-lane group, lane `j` gets `[v(4i + j/4)[j % 4] for i in 0..4]` where `v(l)` is what lane
/// `l` named: the 4 x 16 tile whose rows lanes `4r..4r+4` read comes back one column per lane.
/// Returns `<4 x e>`. Every lane of a 16-lane group must be active.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::BF16, Target};
/// let k = KernelBuilder::new("tr", Target::Gfx950, 64)
///     .build(|k| {
///         let y = k.tensor_mut("y", BF16);
///         let s = k.lds("s", BF16, 256);
///         let t = thread_id_x();
///         s.store(t * 4, splat(t.cast(BF16), 4));
///         lds_barrier();
///         y.store(t * 4, lds_read_tr16(&s, t * 4));
///     })
///     .unwrap();
/// assert!(format!("{:?}", k.body).contains("LdsReadTr16"));
/// ```
pub fn lds_read_tr16(src: &Lds, index: impl Into<Operand>) -> Val {
    let index = match index.into() {
        Operand::V(v) => v,
        o => o.to_val(Type::s(ScalarType::I32)),
    };
    let p = src.base_ptr();
    emit(
        OpKind::Amd(AmdOp::LdsReadTr16 {
            ptr: p.id(),
            index: index.id(),
        }),
        Type::vec(p.elem(), 4),
    )
}

/// gfx1250 Tensor Data Mover load ([`AmdOp::TensorLoadToLds`], `tensor_load_to_lds`): copies
/// the tile the raw descriptor `groups` describe (2: `<4 x i32>`, `<8 x i32>`; or 4: plus two
/// `<4 x i32>`; wave-uniform; bit layout per AMD's gfx1250 ISA) into LDS, asynchronously:
/// the data lands at a [`wait_tensorcnt`] that retires it. The Sim does not run it.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::I32, Target};
/// let k = KernelBuilder::new("tdm", Target::Gfx1250, 32)
///     .build(|k| {
///         let w: Vec<Val> = (0..12).map(|i| k.scalar(&format!("d{i}"), I32)).collect();
///         tensor_load_to_lds(&[vec_of(&w[..4]), vec_of(&w[4..])]);
///         wait_tensorcnt(0);
///     })
///     .unwrap();
/// assert!(format!("{:?}", k.body).contains("TensorLoadToLds"));
/// ```
pub fn tensor_load_to_lds(groups: &[Val]) {
    emit0(OpKind::Amd(AmdOp::TensorLoadToLds {
        groups: groups.iter().map(|g| g.id()).collect(),
    }))
}

/// gfx1250 `s_wait_tensorcnt n` ([`AmdOp::WaitTensorcnt`]): wait until at most `n` tensor
/// loads of this wave are outstanding.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::Target;
/// assert!(KernelBuilder::new("w", Target::Gfx1250, 32).build(|_| wait_tensorcnt(1)).is_ok());
/// assert!(KernelBuilder::new("w", Target::Gfx950, 64).build(|_| wait_tensorcnt(1)).is_err());
/// ```
pub fn wait_tensorcnt(n: u32) {
    emit0(OpKind::Amd(AmdOp::WaitTensorcnt(n)))
}

/// DPP move within rows of 16 lanes ([`AmdOp::Dpp`], all AMD targets): lane `i` of each row
/// gets `v` (i32 or f32) of lane `ctrl.source(i)`, or keeps its own where that is outside
/// the row. A 16-lane sum without LDS:
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{DppCtrl::*, ScalarType::F32, Target};
/// let k = KernelBuilder::new("rowsum", Target::Gfx942, 64)
///     .build(|k| {
///         let y = k.tensor_mut("y", F32);
///         let t = thread_id_x();
///         let mut s = t.cast(F32);
///         for c in [QuadPerm([1, 0, 3, 2]), QuadPerm([2, 3, 0, 1]), RowHalfMirror, RowMirror] {
///             s = s + dpp(s, c);
///         }
///         y.store(t, s);
///     })
///     .unwrap();
/// assert_eq!(format!("{:?}", k.body).matches("Dpp").count(), 4);
/// ```
pub fn dpp(v: Val, ctrl: DppCtrl) -> Val {
    emit(
        OpKind::Amd(AmdOp::Dpp {
            value: v.id(),
            ctrl,
        }),
        v.ty(),
    )
}

/// Hardware fp8 pack ([`AmdOp::CvtPkFp8`], all AMD targets): `old` (i32) with its 16-bit
/// word `hi` replaced by the saturated fp8 codes of `a` (low byte) and `b` (f32). `to` must
/// be one of the target's [`AmdOp::fp8_types`] (FNUZ on gfx942, OCP elsewhere).
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{AmdOp, ScalarType::{F32, I32}, Target};
/// let t = Target::Gfx950;
/// let e4m3 = AmdOp::fp8_types(t)[0];
/// let k = KernelBuilder::new("pack", t, 64).build(|k| {
///     let x = k.tensor("x", F32);
///     let y = k.tensor_mut("y", I32);
///     let i = thread_id_x();
///     let v = x.load_vec(i * 4, 4, 16);
///     y.store(i, cvt_pk_fp8x4(v, e4m3));
/// }).unwrap();
/// assert_eq!(format!("{:?}", k.body).matches("CvtPkFp8").count(), 2);
/// ```
#[track_caller]
pub fn cvt_pk_fp8(a: Val, b: Val, old: Val, hi: bool, to: ScalarType) -> Val {
    emit(
        OpKind::Amd(AmdOp::CvtPkFp8 {
            a: a.id(),
            b: b.id(),
            old: old.id(),
            hi,
            to,
        }),
        Type::s(ScalarType::I32),
    )
}

/// Four f32 (`<4 x f32>`) packed into one i32 of fp8 codes, element `i` in byte `i`: two
/// [`cvt_pk_fp8`]s (`v_cvt_pk_fp8_f32` / `v_cvt_pk_bf8_f32`).
#[track_caller]
pub fn cvt_pk_fp8x4(v: Val, to: ScalarType) -> Val {
    let lo = cvt_pk_fp8(v.at(0), v.at(1), crate::c_i32(0), false, to);
    cvt_pk_fp8(v.at(2), v.at(3), lo, true, to)
}

/// Hardware fp8 unpack ([`AmdOp::CvtPkF32Fp8`], all AMD targets): the two fp8 codes `from`
/// in bytes `2 hi`, `2 hi + 1` of `src` (i32) as `<2 x f32>`, exactly.
#[track_caller]
pub fn cvt_pk_f32_fp8(src: Val, hi: bool, from: ScalarType) -> Val {
    emit(
        OpKind::Amd(AmdOp::CvtPkF32Fp8 {
            src: src.id(),
            hi,
            from,
        }),
        Type::vec(ScalarType::F32, 2),
    )
}

/// gfx950 `v_permlane16_swap_b32` (`rows = 16`) / `v_permlane32_swap_b32` (`rows = 32`)
/// ([`AmdOp::PermlaneSwap`]): returns the new `(a, b)` (i32 or f32, both the same type).
/// Called with `a == b`, lane `l` finds the value of lane `l ^ rows` in the first result
/// in its upper rows and in the second in its lower rows: a cross-row exchange for
/// reductions without `ds_bpermute`.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::F32, Target};
/// let k = KernelBuilder::new("xor32", Target::Gfx950, 64).build(|k| {
///     let y = k.tensor_mut("y", F32);
///     let t = thread_id_x();
///     let v = t.cast(F32);
///     let (a, b) = permlane_swap(v, v, 32);
///     y.store(t, v + select(t.lt(32), b, a)); // v + v of lane t ^ 32
/// }).unwrap();
/// assert!(format!("{:?}", k.body).contains("PermlaneSwap"));
/// ```
#[track_caller]
pub fn permlane_swap(a: Val, b: Val, rows: u32) -> (Val, Val) {
    let t = a.ty();
    let kind = OpKind::Amd(AmdOp::PermlaneSwap {
        a: a.id(),
        b: b.id(),
        rows,
    });
    let loc = flydsl_ir::SrcLoc::caller();
    let ids = crate::context::with(|s| s.push(kind, &[t, t], loc));
    (Val::from_id(ids[0], t), Val::from_id(ids[1], t))
}

/// gfx1201 / gfx1250 `v_permlanex16_b32` ([`AmdOp::PermlaneX16`]) with a constant select:
/// lane `16 r + i` of each 32-lane half gets `v` (i32 or f32) of lane `16 (1 - r) + sel_i`
/// (nibble `i` of `sel`). [`PERMLANEX16_SWAP_ROWS`] exchanges the two rows (lane `l` gets
/// lane `l ^ 16`).
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::F32, Target};
/// let k = KernelBuilder::new("xor16", Target::Gfx1201, 32).build(|k| {
///     let y = k.tensor_mut("y", F32);
///     let t = thread_id_x();
///     let v = t.cast(F32);
///     y.store(t, v + permlanex16(v, PERMLANEX16_SWAP_ROWS));
/// }).unwrap();
/// assert!(format!("{:?}", k.body).contains("PermlaneX16"));
/// ```
#[track_caller]
pub fn permlanex16(v: Val, sel: u64) -> Val {
    emit(
        OpKind::Amd(AmdOp::PermlaneX16 { value: v.id(), sel }),
        v.ty(),
    )
}

/// The [`permlanex16`] select that gives lane `i` of each row lane `i` of the other row.
pub const PERMLANEX16_SWAP_ROWS: u64 = 0xfedc_ba98_7654_3210;
