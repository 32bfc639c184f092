//! Wave-level operations: barriers, shuffles, matrix atoms. The reductions built on the
//! shuffles are in [`crate::blocks`].

use crate::context::target;
use crate::val::{emit, emit0, Operand, Val};
use flydsl_ir::{MmaAtom, OpKind, ScalarType, ShuffleMode, Type};

/// Threads per wave of the kernel's target (a compile-time constant).
pub fn wave_size() -> u32 {
    target().wave_size()
}

/// Workgroup barrier.
#[track_caller]
pub fn barrier() {
    emit0(OpKind::Barrier)
}

/// System-scope release fence of this thread ([`OpKind::FenceRelease`]): before a
/// [`barrier`] and one lane's [`Tensor::flag_store`](crate::Tensor::flag_store), it makes the
/// whole workgroup's writes visible to the agent that sees the flag on AMD targets.
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::ir::Target;
/// let k = KernelBuilder::new("k", Target::Gfx942, 64).build(|_| fence_release()).unwrap();
/// assert_eq!(k.body.ops.len(), 1);
/// ```
#[track_caller]
pub fn fence_release() {
    emit0(OpKind::FenceRelease)
}

#[track_caller]
fn shuffle(mode: ShuffleMode, v: Val, o: impl Into<Operand>) -> Val {
    let o = o.into().to_val(Type::s(ScalarType::I32));
    emit(OpKind::Shuffle(mode, v.id(), o.id()), v.ty())
}

/// Value of lane `lane ^ mask` (i32 or f32).
#[track_caller]
pub fn shuffle_xor(v: Val, mask: impl Into<Operand>) -> Val {
    shuffle(ShuffleMode::Xor, v, mask)
}
/// Value of lane `src` (i32 or f32).
#[track_caller]
pub fn shuffle_idx(v: Val, src: impl Into<Operand>) -> Val {
    shuffle(ShuffleMode::Idx, v, src)
}
/// Value of lane `lane + delta` (own value past the end of the wave).
#[track_caller]
pub fn shuffle_down(v: Val, delta: impl Into<Operand>) -> Val {
    shuffle(ShuffleMode::Down, v, delta)
}
/// Value of the first active lane.
#[track_caller]
pub fn read_first_lane(v: Val) -> Val {
    emit(OpKind::ReadFirstLane(v.id()), v.ty())
}
/// Matrix-core atom `D = A * B + C` (per-lane fragments, see `MmaAtom`).
#[track_caller]
pub fn mma(atom: MmaAtom, a: Val, b: Val, c: Val) -> Val {
    emit(OpKind::Mma(atom, a.id(), b.id(), c.id()), c.ty())
}
/// Block-scaled matrix-core atom (gfx950 `MfmaScale16x16x128Fp8`): `D = C + sum over K-blocks
/// of 32 of scaleA * scaleB * (A_blk * B_blk)`. `scale_a` / `scale_b` are i32 per lane holding
/// four E8M0 bytes; opsel is fixed to 0, so byte 0 of each lane's word is used: lane `l`
/// supplies the scale of A row `l % 16` (B column `l % 16`) for K-block `l / 16`.
#[track_caller]
pub fn mma_scaled(atom: MmaAtom, a: Val, b: Val, c: Val, scale_a: Val, scale_b: Val) -> Val {
    emit(
        OpKind::MmaScaled(atom, a.id(), b.id(), c.id(), scale_a.id(), scale_b.id()),
        c.ty(),
    )
}
