//! Wave-level operations: barriers, shuffles, matrix atoms, reductions.

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

/// Sum (f32 or i32) over the whole wave with a butterfly of `shuffle_xor`; every lane gets
/// the result.
#[track_caller]
pub fn wave_reduce_sum(v: Val) -> Val {
    let mut acc = v;
    let mut m = wave_size() / 2;
    while m >= 1 {
        // No closure: the ops keep the caller's source location.
        acc = acc + shuffle_xor(acc, m as i32);
        m /= 2;
    }
    acc
}

/// Max over the whole wave (floats: maxNum); every lane gets the result.
#[track_caller]
pub fn wave_reduce_max(v: Val) -> Val {
    let mut acc = v;
    let mut m = wave_size() / 2;
    while m >= 1 {
        acc = acc.max(shuffle_xor(acc, m as i32));
        m /= 2;
    }
    acc
}

/// Reduce over the wave with `f` (associative, commutative); every lane gets the result.
#[track_caller]
pub fn wave_reduce(v: Val, f: impl Fn(Val, Val) -> Val) -> Val {
    let mut acc = v;
    let mut m = wave_size() / 2;
    while m >= 1 {
        acc = f(acc, shuffle_xor(acc, m as i32));
        m /= 2;
    }
    acc
}

/// Reduce over the whole workgroup of `threads` threads (a multiple of the wave size): wave
/// butterflies, one LDS slot per wave, a barrier, then a final wave reduction. `scratch`
/// must hold at least `threads / wave_size()` elements of `v`'s type. Every thread gets the
/// result. Contains two barriers: call from uniform control flow.
#[track_caller]
pub fn block_reduce(
    v: Val,
    threads: u32,
    scratch: crate::mem::Lds,
    identity: impl Into<Operand>,
    f: impl Fn(Val, Val) -> Val,
) -> Val {
    let ws = wave_size();
    let waves = threads.div_ceil(ws);
    let w = wave_reduce(v, &f);
    if waves == 1 {
        return w;
    }
    let tid = crate::val::thread_id_x();
    let wave = tid / ws as i32;
    let lane = crate::val::lane_id();
    crate::control::if_(lane.eq(0), || scratch.store(wave, w));
    barrier();
    let idx = lane.min(waves as i32 - 1);
    let part = scratch.load(idx);
    let part = crate::val::select(lane.lt(waves as i32), part, identity);
    let r = wave_reduce(part, &f);
    // Keep the slots stable until every wave has read them (the caller may reuse `scratch`).
    barrier();
    r
}
