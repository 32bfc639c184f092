//! AMD-only operations ([`OpKind::Amd`](crate::OpKind::Amd)): the pipeline primitives of the
//! AMDGPU targets. Each variant's doc comment is its contract; the Sim
//! (`flydsl-sim`, `exec/amd_ops.rs`) and the lowering (`flydsl-codegen`, `amd_pipe.rs`)
//! implement exactly that. [`AmdOp::targets`] lists where each exists; the verifier rejects
//! an op on any other target.

use crate::{ScalarType, Target, ValueId};
use serde::{Deserialize, Serialize};

mod tdm;
pub use tdm::TdmDesc;

/// The instruction classes of [`AmdOp::SchedBarrier`] and [`AmdOp::SchedGroupBarrier`]
/// masks (LLVM's `llvm.amdgcn.sched_barrier` / `sched_group_barrier` mask bits). Combine
/// with `|`.
pub mod sched_mask {
    /// No instruction may be scheduled across (a hard scheduling fence).
    pub const NONE: u32 = 0x0;
    /// Non-memory, side-effect-free instructions.
    pub const ALU: u32 = 0x1;
    /// Vector ALU instructions.
    pub const VALU: u32 = 0x2;
    /// Scalar ALU instructions.
    pub const SALU: u32 = 0x4;
    /// Matrix instructions (MFMA / WMMA).
    pub const MFMA: u32 = 0x8;
    /// All vector-memory instructions.
    pub const VMEM: u32 = 0x10;
    /// Vector-memory reads.
    pub const VMEM_READ: u32 = 0x20;
    /// Vector-memory writes.
    pub const VMEM_WRITE: u32 = 0x40;
    /// All LDS instructions.
    pub const DS: u32 = 0x80;
    /// LDS reads.
    pub const DS_READ: u32 = 0x100;
    /// LDS writes.
    pub const DS_WRITE: u32 = 0x200;
    /// Transcendental instructions.
    pub const TRANS: u32 = 0x400;
    /// Every class LLVM defines (a mask with other bits set is rejected).
    pub const ALL: u32 = 0x7ff;
}

/// The largest count [`AmdOp::WaitVmcnt`] accepts (the 6-bit `vmcnt` / `loadcnt` field).
pub const MAX_VMCNT: u32 = 63;

/// An AMD-only operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AmdOp {
    /// LDS-only workgroup barrier (no results). Every thread of the workgroup must reach it
    /// (from uniform control flow, like [`OpKind::Barrier`](crate::OpKind::Barrier)). Every
    /// LDS access of the workgroup before it, plain or by a direct-to-LDS load
    /// ([`AmdOp::BufferLoadToLds`]), happens before every LDS access after it. Global and
    /// buffer memory are *not* ordered: loads into registers issued before it may still be in
    /// flight after it (that is its point: a prefetch crosses an LDS ping-pong barrier), and
    /// global writes before it need not be visible to other threads after it (use
    /// [`OpKind::Barrier`](crate::OpKind::Barrier) for that).
    ///
    /// Lowering: a workgroup-scope release fence, `s_barrier`, an acquire fence, both fences
    /// restricted to LDS by `!mmra !{!"amdgpu-synchronize-as", !"local"}`: llc emits
    /// `s_waitcnt lgkmcnt(0)` (gfx9) / `s_wait_dscnt 0` (gfx12) and the barrier, and waits on
    /// `vmcnt` / `loadcnt` only as far as the wave's own pending direct-to-LDS loads need.
    /// Sim: the same as `Barrier` (a racecheck epoch), and it completes every pending
    /// direct-to-LDS load of the workgroup first. The Sim's global memory is always
    /// coherent, so it cannot report a kernel that relies on this barrier for global data.
    LdsBarrier,
    /// Wait until at most `n` (`0..=`[`MAX_VMCNT`]) vector-memory loads issued by this wave
    /// are outstanding (gfx9 `s_waitcnt vmcnt(n)`, gfx12 `s_wait_loadcnt n`). No results.
    /// Loads complete in issue order, so every direct-to-LDS load of the wave older than its
    /// `n` newest ones has landed in LDS afterwards, readable by the issuing thread; other
    /// threads read it after a following barrier. The compiler may wait more than asked
    /// (never less) and keeps waiting for loads into registers where their values are used.
    ///
    /// Sim: direct-to-LDS loads are the only asynchronous loads it models; this retires all
    /// but the `n` newest pending ones of each wave that has an active thread.
    WaitVmcnt(u32),
    /// Scheduling fence for the compiler's instruction scheduler
    /// (`llvm.amdgcn.sched.barrier(mask)`): only the instruction classes in `mask`
    /// ([`sched_mask`]) may be scheduled across it; `sched_mask::NONE` lets nothing cross.
    /// No results. No effect on results: the Sim ignores it.
    SchedBarrier(u32),
    /// Scheduling group (`llvm.amdgcn.sched.group.barrier(mask, size, sync_id)`): asks the
    /// scheduler to place `size` instructions of the classes in `mask` ([`sched_mask`]) here,
    /// in order with the other groups of the same `sync_id`. No results. No effect on
    /// results: the Sim ignores it.
    SchedGroupBarrier {
        /// Instruction classes ([`sched_mask`]).
        mask: u32,
        /// How many instructions the group holds.
        size: u32,
        /// Groups with the same id are ordered among themselves.
        sync_id: u32,
    },
    /// Set this wave's issue priority (`s_setprio prio`, `prio` in `0..=3`; 0 is the
    /// default, higher wins arbitration on the SIMD). No results. No effect on results: the
    /// Sim ignores it.
    SetPrio(u32),
    /// Direct-to-LDS buffer load (`buffer_load_dword ... lds` on gfx942 and gfx950,
    /// `buffer_load_dwordx4 ... lds` on gfx950; `llvm.amdgcn.raw.ptr.buffer.load.lds`). No
    /// results. Each active lane `l` (its lane index in the wave, `0..wave`, whether or not
    /// lower lanes are active) reads `bytes` bytes at element `index` (i32, per lane) of the
    /// buffer resource `rsrc`, with `BufferLoad`'s range rule (wholly out of range reads
    /// zeros; a partly out-of-range access is unspecified, the Sim reports it under
    /// memcheck), and writes them to LDS at byte `l * bytes` from the LDS pointer `lds`
    /// (the hardware's `M0` base + lane * size). `lds` must be the same for every active
    /// lane of a wave (it goes to the scalar `M0`); the Sim reports a divergent one. The
    /// pointer's element type is the resource's; `bytes` is a multiple of the element size.
    ///
    /// `bytes`: 4 on gfx942, 4 or 16 on gfx950 (the only targets with the instruction).
    ///
    /// The write is asynchronous: it lands when a [`AmdOp::WaitVmcnt`] of the issuing wave
    /// retires it or at the next `Barrier` / `LdsBarrier` (whose fence waits for the wave's
    /// own pending direct-to-LDS loads). Before that, any access to those LDS bytes is a
    /// race, which the Sim reports (racecheck); after a `WaitVmcnt` the data is the issuing
    /// thread's write in the current barrier epoch, so other threads read it after a barrier.
    BufferLoadToLds {
        /// Buffer resource.
        rsrc: ValueId,
        /// Element index (i32, per lane).
        index: ValueId,
        /// Wave-uniform LDS pointer: lane `l` writes at byte `l * bytes` from it.
        lds: ValueId,
        /// Bytes per lane.
        bytes: u32,
    },
    /// gfx950 transposing LDS read `ds_read_b64_tr_b16` (`llvm.amdgcn.ds.read.tr16.b64`).
    /// One result, `<4 x e>` for the LDS pointer's 16-bit element type `e` (f16, bf16 or i16).
    /// Each lane reads the 4 elements (8 bytes, 8-byte aligned) at element `index` (i32 or
    /// i64) of `ptr`, as a `Load` of `<4 x e>` would, and the 16-lane groups of the wave
    /// then exchange them: in each group of lanes `16g .. 16g + 16`, lane `16g + j` gets
    /// element `i` (for `i` in `0..4`) of what lane `16g + 4i + j / 4` read, element `j % 4`.
    /// Seen as a 4 x 16 tile whose row `r` is read by lanes `4r .. 4r + 4` of the group (4
    /// consecutive elements each), lane `j` gets column `j`: the MFMA operand layout that
    /// needs the tile's other dimension contiguous (AMD CDNA4 ISA, "MFMA transpose load from
    /// LDS"). Every lane of a group with an active lane must be active (the Sim reports a
    /// partly active group: the hardware exchange reads the inactive lanes' data).
    LdsReadTr16 {
        /// LDS pointer to 16-bit elements.
        ptr: ValueId,
        /// Element index (i32 or i64) of this lane's 4 elements.
        index: ValueId,
    },
    /// gfx1250 Tensor Data Mover load (`tensor_load_to_lds`,
    /// `llvm.amdgcn.tensor.load.to.lds` / `.d2`): copies a tile of a global tensor into LDS
    /// as the raw descriptor groups say. No results. `groups` are 2 (`<4 x i32>`,
    /// `<8 x i32>`: tensors of up to 2 dimensions) or 4 (`<4 x i32>`, `<8 x i32>`,
    /// `<4 x i32>`, `<4 x i32>`) wave-uniform values, passed to the instruction verbatim
    /// (scalar registers); their bit layout (LDS address, global address, dimensions, tile
    /// sizes, strides, padding) is the hardware's, documented in AMD's gfx1250 ISA ("Tensor
    /// Data Mover"), and nothing here checks it. The copy is asynchronous: its LDS writes
    /// land when a [`AmdOp::WaitTensorcnt`] retires it; other threads read them after a
    /// following barrier.
    ///
    /// Sim: the 2-group (2-D) form runs as [`TdmDesc`] documents (fields, bit positions and
    /// semantics), once per wave with an active lane; the groups must be the same in every
    /// active lane of the wave (the Sim reports lanes that differ), and descriptor features
    /// it does not model (gather, multicast, atomic barrier, iterate, 3-D and up, the
    /// 4-group form) are an `Unsupported` error naming the field. The LDS writes stay
    /// pending (racecheck reports any access to them) until a [`AmdOp::WaitTensorcnt`] of
    /// the issuing wave retires the load: barriers do not.
    TensorLoadToLds {
        /// The descriptor groups (2 or 4).
        groups: Vec<ValueId>,
    },
    /// Data-parallel primitive move within rows of 16 lanes (`v_mov_b32_dpp`,
    /// `llvm.amdgcn.update.dpp` with row and bank masks 0xf): one result of the type of
    /// `value` (i32 or f32 scalar). Lane `16r + i` gets the value of lane `16r + src(i)` of its
    /// row, with `src` given by `ctrl` ([`DppCtrl`]); where `src(i)` falls outside the row
    /// (`RowShl`, `RowShr`) the lane keeps its own value. It replaces `ds_bpermute` shuffles
    /// in row reductions (quad_perm for xor 1 and 2, half-mirror and mirror to combine
    /// quads and half-rows). Every lane of a row with an active lane must be active (the Sim
    /// reports a partly active row: the hardware reads the inactive lanes' registers).
    Dpp {
        /// The i32 or f32 value moved.
        value: ValueId,
        /// Which lane of the row each lane reads.
        ctrl: DppCtrl,
    },
    /// gfx1250 `s_wait_tensorcnt n` (`llvm.amdgcn.s.wait.tensorcnt`, `n` in
    /// `0..=`[`MAX_VMCNT`]): wait until at most `n` Tensor Data Mover operations of this wave
    /// are outstanding. No results. Sim: retires all but the `n` newest
    /// [`AmdOp::TensorLoadToLds`] of each wave with an active thread (their LDS writes land).
    WaitTensorcnt(u32),
    /// Hardware fp8 pack (`v_cvt_pk_fp8_f32` for E4M3 types, `v_cvt_pk_bf8_f32` for E5M2;
    /// `llvm.amdgcn.cvt.pk.{fp8,bf8}.f32`): one `i32` result, `old` (i32) with its 16-bit
    /// word `hi` (false: bits 0..16, true: bits 16..32) replaced by the fp8 codes of `a`
    /// (low byte) and `b` (high byte), f32 scalars. The conversion saturates: `a` and `b` are
    /// first clamped to `±max` of `to` (infinities included), then rounded to nearest even;
    /// a NaN gives `to`'s NaN. `to` is the target's fp8 pair: `F8E4M3FNUZ` / `F8E5M2FNUZ`
    /// on gfx942, `F8E4M3FN` / `F8E5M2` (OCP) on gfx950, gfx1201 and gfx1250
    /// ([`AmdOp::fp8_types`]).
    ///
    /// Lowering: a NaN-propagating clamp (`llvm.minimum` / `llvm.maximum`, which the
    /// hardware conversion alone does not do) and the intrinsic with `word_sel = hi`.
    /// Sim: the same clamp and the exact round-to-nearest-even encoding (`flydsl_sim::fp8`).
    CvtPkFp8 {
        /// Low byte's f32.
        a: ValueId,
        /// High byte's f32.
        b: ValueId,
        /// The i32 whose other word is kept.
        old: ValueId,
        /// Write bits 16..32 (else 0..16).
        hi: bool,
        /// The fp8 type.
        to: ScalarType,
    },
    /// Hardware fp8 unpack (`v_cvt_pk_f32_fp8` / `v_cvt_pk_f32_bf8`;
    /// `llvm.amdgcn.cvt.pk.f32.{fp8,bf8}`): one `<2 x f32>` result, the exact values of the
    /// two fp8 codes `from` in bytes `2 hi` and `2 hi + 1` of `src` (i32). NaN codes give a
    /// NaN. `from` as for [`AmdOp::CvtPkFp8`].
    CvtPkF32Fp8 {
        /// The packed codes.
        src: ValueId,
        /// Read bytes 2 and 3 (else 0 and 1).
        hi: bool,
        /// The fp8 type.
        from: ScalarType,
    },
    /// gfx950 `v_permlane16_swap_b32` (`rows = 16`) or `v_permlane32_swap_b32` (`rows = 32`)
    /// (`llvm.amdgcn.permlane{16,32}.swap`, `fi` and `bound_ctrl` off): two results of the
    /// type of `a` and `b` (both i32 or both f32), the new `a` and the new `b`. With rows of
    /// 16 lanes: `permlane16` swaps the odd rows of `a` with the even rows of `b` (lane
    /// `16 (2p + 1) + i` of `a` with lane `16 (2p) + i` of `b`); `permlane32` swaps rows 2
    /// and 3 of `a` with rows 0 and 1 of `b` (lane `32 + i` of `a` with lane `i` of `b`).
    /// Every lane of the wave must be active (the Sim reports a partly active wave: the
    /// hardware reads the inactive lanes' registers).
    PermlaneSwap {
        /// First operand (`vdst_old`).
        a: ValueId,
        /// Second operand (`src0`).
        b: ValueId,
        /// 16 or 32.
        rows: u32,
    },
    /// gfx12 `v_permlanex16_b32` (`llvm.amdgcn.permlanex16`, `fi` and `bound_ctrl` off)
    /// with a constant lane select: one result of `value`'s type (i32 or f32). In each
    /// 32-lane half, lane `16 r + i` gets `value` of lane `16 (1 - r) + sel_i` (the other
    /// row), `sel_i` being bits `4 i .. 4 i + 4` of `sel`. `sel = 0xfedc_ba98_7654_3210`
    /// swaps the rows (a butterfly across 16 lanes, the last step of a wave32 reduction
    /// without LDS). Every lane of a 32-lane half with an active lane must be active (the Sim
    /// reports a partly active one).
    PermlaneX16 {
        /// The i32 or f32 value moved.
        value: ValueId,
        /// 16 nibbles: the source lane within the other row.
        sel: u64,
    },
}

impl AmdOp {
    /// The op's name in errors (`LdsBarrier`, `BufferLoadToLds`, ...).
    ///
    /// ```
    /// use flydsl_ir::AmdOp;
    /// assert_eq!(AmdOp::SetPrio(1).name(), "SetPrio");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            AmdOp::LdsBarrier => "LdsBarrier",
            AmdOp::WaitVmcnt(_) => "WaitVmcnt",
            AmdOp::SchedBarrier(_) => "SchedBarrier",
            AmdOp::SchedGroupBarrier { .. } => "SchedGroupBarrier",
            AmdOp::SetPrio(_) => "SetPrio",
            AmdOp::BufferLoadToLds { .. } => "BufferLoadToLds",
            AmdOp::LdsReadTr16 { .. } => "LdsReadTr16",
            AmdOp::TensorLoadToLds { .. } => "TensorLoadToLds",
            AmdOp::WaitTensorcnt(_) => "WaitTensorcnt",
            AmdOp::Dpp { .. } => "Dpp",
            AmdOp::CvtPkFp8 { .. } => "CvtPkFp8",
            AmdOp::CvtPkF32Fp8 { .. } => "CvtPkF32Fp8",
            AmdOp::PermlaneSwap { .. } => "PermlaneSwap",
            AmdOp::PermlaneX16 { .. } => "PermlaneX16",
        }
    }

    /// The targets that have this op.
    ///
    /// ```
    /// use flydsl_ir::{AmdOp, Target};
    /// assert!(AmdOp::LdsBarrier.targets().contains(&Target::Gfx1250));
    /// assert!(!AmdOp::LdsBarrier.targets().contains(&Target::Sm90));
    /// ```
    pub fn targets(&self) -> &'static [Target] {
        const ALL_AMD: &[Target] = &[
            Target::Gfx942,
            Target::Gfx950,
            Target::Gfx1201,
            Target::Gfx1250,
        ];
        match self {
            AmdOp::BufferLoadToLds { .. } => &[Target::Gfx942, Target::Gfx950],
            AmdOp::LdsReadTr16 { .. } => &[Target::Gfx950],
            AmdOp::TensorLoadToLds { .. } | AmdOp::WaitTensorcnt(_) => &[Target::Gfx1250],
            AmdOp::PermlaneSwap { .. } => &[Target::Gfx950],
            AmdOp::PermlaneX16 { .. } => &[Target::Gfx1201, Target::Gfx1250],
            _ => ALL_AMD,
        }
    }

    /// The SSA operands it reads.
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            AmdOp::BufferLoadToLds {
                rsrc, index, lds, ..
            } => vec![*rsrc, *index, *lds],
            AmdOp::LdsReadTr16 { ptr, index } => vec![*ptr, *index],
            AmdOp::TensorLoadToLds { groups } => groups.clone(),
            AmdOp::Dpp { value, .. } | AmdOp::PermlaneX16 { value, .. } => vec![*value],
            AmdOp::CvtPkFp8 { a, b, old, .. } => vec![*a, *b, *old],
            AmdOp::CvtPkF32Fp8 { src, .. } => vec![*src],
            AmdOp::PermlaneSwap { a, b, .. } => vec![*a, *b],
            _ => vec![],
        }
    }

    /// The bytes per lane [`AmdOp::BufferLoadToLds`] supports on `target` (empty where it
    /// does not exist).
    ///
    /// ```
    /// use flydsl_ir::{AmdOp, Target};
    /// assert_eq!(AmdOp::lds_load_sizes(Target::Gfx950), &[4, 16]);
    /// assert!(AmdOp::lds_load_sizes(Target::Gfx1201).is_empty());
    /// ```
    pub fn lds_load_sizes(target: Target) -> &'static [u32] {
        match target {
            Target::Gfx942 => &[4],
            Target::Gfx950 => &[4, 16],
            _ => &[],
        }
    }

    /// The fp8 types [`AmdOp::CvtPkFp8`] and [`AmdOp::CvtPkF32Fp8`] convert on `target`
    /// (E4M3, E5M2; empty off AMD): the FNUZ pair on gfx942, the OCP pair elsewhere.
    ///
    /// ```
    /// use flydsl_ir::{AmdOp, ScalarType, Target};
    /// assert_eq!(AmdOp::fp8_types(Target::Gfx942), &[ScalarType::F8E4M3FNUZ, ScalarType::F8E5M2FNUZ]);
    /// assert_eq!(AmdOp::fp8_types(Target::Gfx1201), &[ScalarType::F8E4M3FN, ScalarType::F8E5M2]);
    /// assert!(AmdOp::fp8_types(Target::Sm90).is_empty());
    /// ```
    pub fn fp8_types(target: Target) -> &'static [ScalarType] {
        match target {
            Target::Gfx942 => &[ScalarType::F8E4M3FNUZ, ScalarType::F8E5M2FNUZ],
            Target::Gfx950 | Target::Gfx1201 | Target::Gfx1250 => {
                &[ScalarType::F8E4M3FN, ScalarType::F8E5M2]
            }
            Target::Sm90 => &[],
        }
    }

    /// The number of results the op has.
    pub fn result_count(&self) -> usize {
        match self {
            AmdOp::LdsReadTr16 { .. }
            | AmdOp::Dpp { .. }
            | AmdOp::CvtPkFp8 { .. }
            | AmdOp::CvtPkF32Fp8 { .. }
            | AmdOp::PermlaneX16 { .. } => 1,
            AmdOp::PermlaneSwap { .. } => 2,
            _ => 0,
        }
    }
}

impl AmdOp {
    /// The verifier's rules for this op on `target` with results `results`, `ty` giving each
    /// value's type: the reason it is invalid, if it is.
    pub(crate) fn check(
        &self,
        target: Target,
        ty: &dyn Fn(ValueId) -> crate::Type,
        results: &[ValueId],
    ) -> Result<(), String> {
        use crate::{AddrSpace, Type};
        let name = self.name();
        if !self.targets().contains(&target) {
            let list: Vec<&str> = self.targets().iter().map(|t| t.name()).collect();
            return Err(format!(
                "{name} does not exist on {}: it exists on {} only; build this code for \
                 those targets or use a generic op (Barrier, Load/Store) here",
                target,
                list.join(", ")
            ));
        }
        let want = self.result_count();
        if results.len() != want {
            return Err(format!(
                "{name} has {want} result(s), this op has {}",
                results.len()
            ));
        }
        let fp8_ok = |t: ScalarType| -> Result<(), String> {
            let ok = Self::fp8_types(target);
            if ok.contains(&t) {
                Ok(())
            } else {
                Err(format!(
                    "{name} to/from {t}: {target} converts {ok:?} in hardware; use one of \
                     those (or the generic Cast, which converts any fp8 type in software)"
                ))
            }
        };
        let f32_ty = Type::Scalar(ScalarType::F32);
        let i32_ty = Type::Scalar(ScalarType::I32);
        match *self {
            AmdOp::LdsBarrier => {}
            AmdOp::CvtPkFp8 { a, b, old, to, .. } => {
                fp8_ok(to)?;
                if ty(a) != f32_ty || ty(b) != f32_ty {
                    return Err(format!("a and b must be f32, not {} and {}", ty(a), ty(b)));
                }
                if ty(old) != i32_ty || ty(results[0]) != i32_ty {
                    return Err(format!(
                        "old and the result must be i32, not {} and {}",
                        ty(old),
                        ty(results[0])
                    ));
                }
            }
            AmdOp::CvtPkF32Fp8 { src, from, .. } => {
                fp8_ok(from)?;
                if ty(src) != i32_ty {
                    return Err(format!("src must be i32, not {}", ty(src)));
                }
                if ty(results[0]) != Type::vec(ScalarType::F32, 2) {
                    return Err(format!(
                        "the result is {}, it must be <2 x f32>",
                        ty(results[0])
                    ));
                }
            }
            AmdOp::PermlaneSwap { a, b, rows } => {
                if rows != 16 && rows != 32 {
                    return Err(format!("PermlaneSwap rows = {rows}: use 16 or 32"));
                }
                let t = ty(a);
                if !matches!(t, Type::Scalar(ScalarType::I32 | ScalarType::F32)) || ty(b) != t {
                    return Err(format!(
                        "PermlaneSwap swaps two i32 or two f32 scalars, not {t} and {}",
                        ty(b)
                    ));
                }
                if results.iter().any(|&r| ty(r) != t) {
                    return Err(format!("both results must be {t}"));
                }
            }
            AmdOp::PermlaneX16 { value, .. } => {
                let t = ty(value);
                if !matches!(t, Type::Scalar(ScalarType::I32 | ScalarType::F32)) {
                    return Err(format!("PermlaneX16 moves an i32 or f32 scalar, not {t}"));
                }
                if ty(results[0]) != t {
                    return Err(format!("the result is {}, it must be {t}", ty(results[0])));
                }
            }
            AmdOp::WaitVmcnt(n) | AmdOp::WaitTensorcnt(n) => {
                if n > MAX_VMCNT {
                    return Err(format!(
                        "{name}({n}): the count is 0..={MAX_VMCNT} (the hardware field)"
                    ));
                }
            }
            AmdOp::Dpp { value, ctrl } => {
                if !matches!(ty(value), Type::Scalar(ScalarType::I32 | ScalarType::F32)) {
                    return Err(format!("Dpp moves an i32 or f32 scalar, not {}", ty(value)));
                }
                if ty(results[0]) != ty(value) {
                    return Err(format!(
                        "the result is {}, it must be the value's type {}",
                        ty(results[0]),
                        ty(value)
                    ));
                }
                ctrl.encode()?;
            }
            AmdOp::TensorLoadToLds { ref groups } => {
                let v4 = Type::vec(ScalarType::I32, 4);
                let v8 = Type::vec(ScalarType::I32, 8);
                let want: &[Type] = match groups.len() {
                    2 => &[v4, v8],
                    4 => &[v4, v8, v4, v4],
                    n => {
                        return Err(format!(
                            "{n} descriptor groups: give 2 (<4 x i32>, <8 x i32>) or 4 \
                             (<4 x i32>, <8 x i32>, <4 x i32>, <4 x i32>)"
                        ))
                    }
                };
                let got: Vec<Type> = groups.iter().map(|&g| ty(g)).collect();
                if got != want {
                    return Err(format!(
                        "descriptor groups have types {got:?}, expected {want:?}"
                    ));
                }
            }
            AmdOp::SchedBarrier(m) | AmdOp::SchedGroupBarrier { mask: m, .. } => {
                if m & !sched_mask::ALL != 0 {
                    return Err(format!(
                        "{name} mask {m:#x} has bits outside sched_mask::ALL ({:#x})",
                        sched_mask::ALL
                    ));
                }
            }
            AmdOp::SetPrio(p) => {
                if p > 3 {
                    return Err(format!("SetPrio({p}): the priority is 0..=3"));
                }
            }
            AmdOp::BufferLoadToLds {
                rsrc,
                index,
                lds,
                bytes,
            } => {
                let t = ty;
                let Type::BufferRsrc(e) = t(rsrc) else {
                    return Err(format!("rsrc is {}, not a buffer resource", t(rsrc)));
                };
                if t(index) != Type::Scalar(ScalarType::I32) {
                    return Err(format!("index is {}, not i32", t(index)));
                }
                if t(lds) != Type::Ptr(AddrSpace::Shared, e) {
                    return Err(format!(
                        "lds is {}; it must be an LDS pointer to the resource's element type \
                         ({})",
                        t(lds),
                        Type::Ptr(AddrSpace::Shared, e)
                    ));
                }
                let sizes = Self::lds_load_sizes(target);
                if !sizes.contains(&bytes) {
                    return Err(format!(
                        "{bytes} bytes per lane: {} supports {sizes:?}",
                        target
                    ));
                }
                if !bytes.is_multiple_of(e.size_bytes()) || e == ScalarType::I1 {
                    return Err(format!(
                        "{bytes} bytes per lane is not a whole number of {e} elements"
                    ));
                }
            }
            AmdOp::LdsReadTr16 { ptr, index } => {
                let t = ty;
                let Type::Ptr(AddrSpace::Shared, e) = t(ptr) else {
                    return Err(format!("ptr is {}, not an LDS pointer", t(ptr)));
                };
                if !matches!(e, ScalarType::F16 | ScalarType::BF16 | ScalarType::I16) {
                    return Err(format!(
                        "LDS pointer to {e}: the transposing read takes f16, bf16 or i16"
                    ));
                }
                if !matches!(t(index), Type::Scalar(ScalarType::I32 | ScalarType::I64)) {
                    return Err(format!("index is {}, not i32 or i64", t(index)));
                }
                if t(results[0]) != Type::vec(e, 4) {
                    return Err(format!(
                        "the result is {}, it must be {}",
                        t(results[0]),
                        Type::vec(e, 4)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The lane pattern of [`AmdOp::Dpp`] within a row of 16 lanes: lane `i` of the row reads
/// lane [`DppCtrl::source`]`(i)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DppCtrl {
    /// Within each quad of 4 lanes, lane `q` reads lane `sel[q]` (each `0..4`).
    QuadPerm([u8; 4]),
    /// Lane `i` reads lane `i + n` (`n` in `1..=15`; none past the row's end).
    RowShl(u8),
    /// Lane `i` reads lane `i - n` (`n` in `1..=15`; none before the row's start).
    RowShr(u8),
    /// Lane `i` reads lane `(i - n) mod 16` (`n` in `1..=15`).
    RowRor(u8),
    /// Lane `i` reads lane `15 - i`.
    RowMirror,
    /// Lane `i` reads lane `7 - i` within each half-row of 8.
    RowHalfMirror,
}

impl DppCtrl {
    /// The lane of the row that lane `i` (`0..16`) reads, or `None` where it keeps its own
    /// value (outside the row).
    ///
    /// ```
    /// use flydsl_ir::DppCtrl;
    /// assert_eq!(DppCtrl::QuadPerm([1, 0, 3, 2]).source(6), Some(7));
    /// assert_eq!(DppCtrl::RowShr(2).source(1), None);
    /// assert_eq!(DppCtrl::RowHalfMirror.source(9), Some(14));
    /// ```
    pub fn source(self, i: u32) -> Option<u32> {
        let i = i % 16;
        match self {
            DppCtrl::QuadPerm(sel) => Some(i / 4 * 4 + u32::from(sel[(i % 4) as usize] & 3)),
            DppCtrl::RowShl(n) => (i + u32::from(n) < 16).then(|| i + u32::from(n)),
            DppCtrl::RowShr(n) => i.checked_sub(u32::from(n)),
            DppCtrl::RowRor(n) => Some((i + 16 - u32::from(n) % 16) % 16),
            DppCtrl::RowMirror => Some(15 - i),
            DppCtrl::RowHalfMirror => Some((i & 8) | (7 - (i & 7))),
        }
    }

    /// The hardware's `dpp_ctrl` field, or why the pattern is invalid.
    ///
    /// ```
    /// use flydsl_ir::DppCtrl;
    /// assert_eq!(DppCtrl::QuadPerm([1, 0, 3, 2]).encode(), Ok(0xb1));
    /// assert_eq!(DppCtrl::RowShr(1).encode(), Ok(0x111));
    /// assert!(DppCtrl::RowShl(0).encode().is_err());
    /// ```
    pub fn encode(self) -> Result<u32, String> {
        let shift = |base: u32, n: u8, what: &str| {
            if (1..=15).contains(&n) {
                Ok(base + u32::from(n))
            } else {
                Err(format!("Dpp {what}({n}): the shift is 1..=15"))
            }
        };
        match self {
            DppCtrl::QuadPerm(sel) => {
                if sel.iter().any(|&x| x > 3) {
                    return Err(format!("Dpp QuadPerm({sel:?}): each selector is 0..=3"));
                }
                Ok(sel
                    .iter()
                    .enumerate()
                    .map(|(q, &x)| u32::from(x) << (2 * q))
                    .sum())
            }
            DppCtrl::RowShl(n) => shift(0x100, n, "RowShl"),
            DppCtrl::RowShr(n) => shift(0x110, n, "RowShr"),
            DppCtrl::RowRor(n) => shift(0x120, n, "RowRor"),
            DppCtrl::RowMirror => Ok(0x140),
            DppCtrl::RowHalfMirror => Ok(0x141),
        }
    }
}
