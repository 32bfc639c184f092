//! NVIDIA Hopper (sm_90a) building blocks: mbarriers, TMA tile loads, wgmma and register
//! reallocation. Each function emits one [`flydsl_ir::NvOp`]; its doc comment in flydsl-ir
//! is the contract. Building a kernel that uses them for an AMD target fails verification.
//!
//! A pipelined stage, as the GEMM proof uses it:
//!
//! ```
//! use flydsl_dsl::*;
//! use flydsl_dsl::ir::{ScalarType::*, Target};
//! let k = KernelBuilder::new("stage", Target::Sm90, 128).build(|k| {
//!     let map = k.tensor("a_map", I8); // a TensorMap made by flydsl-rt
//!     let out = k.tensor_mut("out", F32);
//!     let bar = k.lds("bar", I64, 1);
//!     let tile = k.lds_aligned("tile", BF16, 64 * 64, 1024);
//!     if_(thread_id_x().eq(0), || {
//!         nv::mbar_init(bar.ptr(), 1);
//!         nv::fence_proxy_async();
//!     });
//!     barrier();
//!     if_(thread_id_x().eq(0), || {
//!         nv::mbar_arrive_expect_tx(bar.ptr(), c_i32(64 * 64 * 2));
//!         nv::tma_load(map.ptr(), tile.ptr(), bar.ptr(), &[c_i32(0), c_i32(0)]);
//!     });
//!     nv::mbar_wait(bar.ptr(), c_i32(0));
//!     nv::wgmma_fence();
//!     let acc = nv::wgmma(64, tile.ptr(), tile.ptr(), splat(c_f32(0.0), 32));
//!     nv::wgmma_commit();
//!     let acc = nv::wgmma_wait(0, &[acc])[0];
//!     out.store_aligned(thread_id_x() * 32, acc.slice(0, 4), 16, false);
//! }).unwrap();
//! assert!(flydsl_dsl::ir::verify(&k).is_ok());
//! ```

use crate::context::with;
use crate::val::{emit, emit0, Val};
use flydsl_ir::{NvOp, OpKind, ScalarType, Type};

/// `mbarrier.init` with `count` arrivals per phase (run from one thread).
#[track_caller]
pub fn mbar_init(bar: Val, count: u32) {
    emit0(OpKind::Nv(NvOp::MbarInit {
        bar: bar.id(),
        count,
    }))
}

/// Arrive on `bar` expecting `bytes` (i32) more bytes of async copies in this phase.
#[track_caller]
pub fn mbar_arrive_expect_tx(bar: Val, bytes: Val) {
    emit0(OpKind::Nv(NvOp::MbarArriveExpectTx {
        bar: bar.id(),
        bytes: bytes.id(),
    }))
}

/// Arrive on `bar`.
#[track_caller]
pub fn mbar_arrive(bar: Val) {
    emit0(OpKind::Nv(NvOp::MbarArrive { bar: bar.id() }))
}

/// Wait until the phase of `bar` with parity `parity` (i32) has completed.
#[track_caller]
pub fn mbar_wait(bar: Val, parity: Val) {
    emit0(OpKind::Nv(NvOp::MbarWait {
        bar: bar.id(),
        parity: parity.id(),
    }))
}

/// `fence.proxy.async.shared::cta`.
#[track_caller]
pub fn fence_proxy_async() {
    emit0(OpKind::Nv(NvOp::FenceProxyAsync))
}

/// True in one lane of each warp (`elect.sync`).
#[track_caller]
pub fn elect_one() -> Val {
    emit(OpKind::Nv(NvOp::ElectOne), Type::s(ScalarType::I1))
}

/// `setmaxnreg.inc` (`inc`) or `.dec` to `regs` registers per thread.
#[track_caller]
pub fn setmaxnreg(inc: bool, regs: u32) {
    emit0(OpKind::Nv(NvOp::SetMaxNReg { inc, regs }))
}

/// A TMA tile load of the box at `coords` (i32, innermost first) of the tensor map at `tmap`
/// into LDS at `dst`, signalling `bar` with its bytes.
#[track_caller]
pub fn tma_load(tmap: Val, dst: Val, bar: Val, coords: &[Val]) {
    emit0(OpKind::Nv(NvOp::TmaLoad {
        tmap: tmap.id(),
        dst: dst.id(),
        bar: bar.id(),
        coords: coords.iter().map(|c| c.id()).collect(),
    }))
}

/// `wgmma.fence`.
#[track_caller]
pub fn wgmma_fence() {
    emit0(OpKind::Nv(NvOp::WgmmaFence))
}

/// `wgmma.commit_group`.
#[track_caller]
pub fn wgmma_commit() {
    emit0(OpKind::Nv(NvOp::WgmmaCommit))
}

/// One m64n`n`k16 wgmma on K-major SW128 LDS tiles `a` and `b`, accumulating into `acc`
/// (`<n/2 x f32>`). Read the result only through [`wgmma_wait`].
#[track_caller]
pub fn wgmma(n: u32, a: Val, b: Val, acc: Val) -> Val {
    emit(
        OpKind::Nv(NvOp::Wgmma {
            n,
            a: a.id(),
            b: b.id(),
            acc: acc.id(),
        }),
        acc.ty(),
    )
}

/// Wait until at most `pending` wgmma batches are in flight; returns `accs`, now readable.
#[track_caller]
pub fn wgmma_wait(pending: u32, accs: &[Val]) -> Vec<Val> {
    let tys: Vec<Type> = accs.iter().map(|v| v.ty()).collect();
    let kind = OpKind::Nv(NvOp::WgmmaWait {
        pending,
        values: accs.iter().map(|v| v.id()).collect(),
    });
    let loc = flydsl_ir::SrcLoc::caller();
    with(|s| {
        s.push(kind, &tys, loc)
            .into_iter()
            .zip(tys)
            .map(|(id, t)| Val::from_id(id, t))
            .collect()
    })
}

/// The i32 LDS address of an LDS pointer (for swizzles, alignment and descriptors).
#[track_caller]
pub fn lds_addr(p: Val) -> Val {
    emit(OpKind::LdsAddr(p.id()), Type::s(ScalarType::I32))
}
