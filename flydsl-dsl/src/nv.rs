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
use flydsl_ir::{NvOp, OpKind, ScalarType, Type, WgmmaB};

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

/// One m64n`n`kK wgmma on K-major SW128 LDS tiles `a` and `b`, accumulating into `acc`:
/// bf16 / f16 tiles (K = 16) and fp8 e4m3fn / e5m2 tiles (K = 32) into `<n/2 x f32>`, i8
/// tiles (K = 32) into `<n/2 x i32>` (see `flydsl_ir::NvOp::Wgmma`). Read the result only
/// through [`wgmma_wait`].
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

/// One m64n`n`k16 wgmma with A from registers: `frag` is the `<4 x i32>` A fragment (see
/// [`wgmma_a_frag`]), `b` the LDS B tile laid out as `b_layout` says (for `O += P V` with a
/// row-major V tile: [`WgmmaB::MnMajor`]). Accumulates into `acc` (`<n/2 x f32>`); read the
/// result only through [`wgmma_wait`].
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::*, Target, WgmmaB};
/// let k = KernelBuilder::new("pv", Target::Sm90, 128).build(|k| {
///     let out = k.tensor_mut("out", F32);
///     let v = k.lds_aligned("v", BF16, 16 * 64, 1024);
///     let p = splat(c_f32(0.5), 8); // this thread's 8 elements of P (16 columns)
///     let frag = nv::wgmma_a_frag(p, 0, BF16);
///     nv::wgmma_fence();
///     let o = nv::wgmma_rs(64, frag, v.ptr(), WgmmaB::MnMajor { block_bytes: 1024 }, splat(c_f32(0.0), 32));
///     nv::wgmma_commit();
///     let o = nv::wgmma_wait(0, &[o])[0];
///     out.store(thread_id_x(), o.at(0));
/// }).unwrap();
/// assert!(flydsl_dsl::ir::verify(&k).is_ok());
/// ```
#[track_caller]
pub fn wgmma_rs(n: u32, frag: Val, b: Val, b_layout: WgmmaB, acc: Val) -> Val {
    emit(
        OpKind::Nv(NvOp::WgmmaRs {
            n,
            a: frag.id(),
            b: b.id(),
            b_layout,
            acc: acc.id(),
        }),
        acc.ty(),
    )
}

/// The register A fragment (`<4 x i32>`) of k16 step `kk` from an f32 accumulator `acc` in
/// the wgmma accumulator layout (`<N/2 x f32>` with `N >= 16 (kk + 1)`, or just the 8
/// values of that step when `acc` has 8 lanes and `kk == 0`): registers `8kk..8kk+8`
/// rounded to `elem` (bf16 or f16) and packed in pairs, the first in the low half. Those
/// are columns `16kk..16kk+16` of the accumulator's matrix in the A-fragment layout of
/// `NvOp::WgmmaRs`, so `S = Q K^T` computed by [`wgmma`] feeds `P V` directly.
#[track_caller]
pub fn wgmma_a_frag(acc: Val, kk: u32, elem: ScalarType) -> Val {
    let part = acc.slice(8 * kk, 8);
    part.cast(elem).bitcast(NvOp::wgmma_a_frag_type())
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

/// Start a `cp.async` of `bytes` (4, 8 or 16) bytes from global `src[index]` (`index` in
/// elements of `src`'s type; `None` for 0) to LDS `dst`, reading only the first `src_bytes`
/// (i32, `0..=bytes`) and zero-filling the rest: pass 0 to predicate a copy off (it then
/// reads nothing). The copy joins this thread's open commit group; read its bytes only
/// after [`cp_async_wait`] (and a barrier, for other threads).
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::*, Target};
/// let k = KernelBuilder::new("stage", Target::Sm90, 32).build(|k| {
///     let x = k.tensor("x", F32);
///     let n = k.scalar("n", I32);
///     let out = k.tensor_mut("out", F32);
///     let s = k.lds_aligned("s", F32, 32 * 4, 16);
///     let t = thread_id_x();
///     let i = t * 4; // four f32 per thread; past n: zeros
///     let ok = (i + 4).le(n);
///     let sb = select(ok, c_i32(16), c_i32(0));
///     nv::cp_async(s.ptr_at(i), x.ptr(), Some(select(ok, i, c_i32(0))), 16, sb);
///     nv::cp_async_commit();
///     nv::cp_async_wait(0);
///     out.store(t, s.load(i)); // this thread's own copy: no barrier needed
/// }).unwrap();
/// assert!(flydsl_dsl::ir::verify(&k).is_ok());
/// ```
#[track_caller]
pub fn cp_async(dst: Val, src: Val, index: Option<Val>, bytes: u32, src_bytes: Val) {
    emit0(OpKind::Nv(NvOp::CpAsync {
        dst: dst.id(),
        src: src.id(),
        index: index.map(|i| i.id()),
        bytes,
        src_bytes: src_bytes.id(),
    }))
}

/// `cp.async.commit_group`: close this thread's open group of [`cp_async`] copies.
#[track_caller]
pub fn cp_async_commit() {
    emit0(OpKind::Nv(NvOp::CpAsyncCommit))
}

/// `cp.async.wait_group pending`: wait until at most the `pending` most recent committed
/// groups of this thread are in flight.
#[track_caller]
pub fn cp_async_wait(pending: u32) {
    emit0(OpKind::Nv(NvOp::CpAsyncWait { pending }))
}

/// `ldmatrix` of `count` (1, 2, 4) 8 x 8 16-bit matrices; this lane's row address is `ptr`
/// (lane `8 i + r`: row `r` of matrix `i`). Gives `i32` (one matrix) or `<count x i32>`
/// in the `mma.sync` fragment layout (see `NvOp::LdMatrix`).
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType::*, Target};
/// let k = KernelBuilder::new("ldm", Target::Sm90, 32).build(|k| {
///     let out = k.tensor_mut("out", I32);
///     let s = k.lds_aligned("s", BF16, 4 * 64, 16);
///     let l = thread_id_x();
///     let frag = nv::ldmatrix(s.ptr_at(l * 8), 4, false);
///     nv::stmatrix(s.ptr_at(l * 8), frag, 4, true);
///     out.store(l, frag.at(0));
/// }).unwrap();
/// assert!(flydsl_dsl::ir::verify(&k).is_ok());
/// ```
#[track_caller]
pub fn ldmatrix(ptr: Val, count: u32, trans: bool) -> Val {
    emit(
        OpKind::Nv(NvOp::LdMatrix {
            ptr: ptr.id(),
            count,
            trans,
        }),
        NvOp::matrix_frag_type(count),
    )
}

/// `stmatrix` of `count` (1, 2, 4) 8 x 8 16-bit matrices from `value` (as [`ldmatrix`]
/// gives it) to the rows this warp's lanes address.
#[track_caller]
pub fn stmatrix(ptr: Val, value: Val, count: u32, trans: bool) {
    emit0(OpKind::Nv(NvOp::StMatrix {
        ptr: ptr.id(),
        value: value.id(),
        count,
        trans,
    }))
}
