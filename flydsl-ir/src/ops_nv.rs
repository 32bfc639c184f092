//! NVIDIA Hopper (sm_90a) ops: mbarriers, TMA tile loads, wgmma, register reallocation,
//! proxy fences, `cp.async` with its commit groups, and `ldmatrix` / `stmatrix`. They exist on [`Target::Sm90`] only; the verifier rejects them elsewhere.
//!
//! Shared-memory layout contract shared by [`NvOp::TmaLoad`] and [`NvOp::Wgmma`]: the
//! *128-byte swizzle*. A tile stored "SW128" is a sequence of 128-byte rows; the byte at the
//! linear LDS address `a` (the address [`crate::OpKind::LdsAddr`] gives) is stored at
//! [`swizzle128`]`(a)`, which XORs address bits 4..7 (the 16-byte chunk within the row) with
//! bits 7..10 (the row within its 8-row, 1024-byte group). A TMA load with a 128-byte swizzle
//! writes its box that way and wgmma reads its operands that way, so both agree whatever the
//! tile's start, as long as tiles start on a 1024-byte boundary.

use crate::{AddrSpace, ScalarType, Target, Type, ValueId};
use serde::{Deserialize, Serialize};

/// Where the 128-byte swizzle puts the byte of linear LDS address `a`.
///
/// ```
/// use flydsl_ir::swizzle128;
/// assert_eq!(swizzle128(0), 0);
/// assert_eq!(swizzle128(128), 128 + 16); // row 1: chunk 0 goes to chunk 1
/// assert_eq!(swizzle128(7 * 128 + 7 * 16 + 3), 7 * 128 + 3); // row 7, chunk 7 -> chunk 0
/// assert_eq!(swizzle128(1024), 1024); // the pattern repeats every 1024 bytes
/// ```
pub fn swizzle128(a: u64) -> u64 {
    a ^ (((a >> 7) & 7) << 4)
}

/// Rows of one [`NvOp::Wgmma`] A operand (the instruction's M).
pub const WGMMA_M: u32 = 64;
/// K of one [`NvOp::Wgmma`] for 16-bit inputs (8-bit inputs: [`wgmma_k`]).
pub const WGMMA_K: u32 = 16;

/// K of one [`NvOp::Wgmma`] on operands of `elem`: 16 for bf16 / f16, 32 for the 8-bit
/// types (fp8 e4m3fn / e5m2, s8): one K-slice is always 32 bytes of each operand row.
///
/// ```
/// use flydsl_ir::{wgmma_k, ScalarType};
/// assert_eq!(wgmma_k(ScalarType::BF16), 16);
/// assert_eq!(wgmma_k(ScalarType::F8E4M3FN), 32);
/// assert_eq!(wgmma_k(ScalarType::I8), 32);
/// ```
pub fn wgmma_k(elem: ScalarType) -> u32 {
    32 / elem.size_bytes()
}

/// The accumulator element of an [`NvOp::Wgmma`] on operands of `elem`: `i32` (s32) for
/// `i8` (s8), `f32` otherwise.
///
/// ```
/// use flydsl_ir::{wgmma_acc_elem, ScalarType};
/// assert_eq!(wgmma_acc_elem(ScalarType::I8), ScalarType::I32);
/// assert_eq!(wgmma_acc_elem(ScalarType::F8E4M3FN), ScalarType::F32);
/// ```
pub fn wgmma_acc_elem(elem: ScalarType) -> ScalarType {
    if elem == ScalarType::I8 {
        ScalarType::I32
    } else {
        ScalarType::F32
    }
}

/// True for the operand element types [`NvOp::Wgmma`] takes: bf16, f16, fp8 e4m3fn and
/// e5m2 (OCP), i8 (signed).
pub fn wgmma_operand_ok(elem: ScalarType) -> bool {
    matches!(
        elem,
        ScalarType::BF16
            | ScalarType::F16
            | ScalarType::F8E4M3FN
            | ScalarType::F8E5M2
            | ScalarType::I8
    )
}
/// Threads that issue one wgmma together (a warpgroup: four warps).
pub const WARPGROUP: u32 = 128;

/// The LDS layout of a wgmma B operand (16 x N, element `B[k][n]`), both 128-byte swizzled
/// (addresses are linear LDS addresses before [`swizzle128`]; `size` is the element size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WgmmaB {
    /// K-major, as [`NvOp::Wgmma`]'s B: `B[k][n]` at `p + 128 n + size k`; `p % 1024 < 128`,
    /// 16-byte aligned (a K-slice of a 64-element-wide tile, like `B = K^T` of a row-major K).
    KMajor,
    /// MN-major ("transposed", `tnspB = 1`): N is contiguous in 64-element (128-byte) rows,
    /// one row per k: `B[k][n]` at `p + 128 k + size (n % 64) + block_bytes (n / 64)`; `p`
    /// 1024-byte aligned. This is a row-major `[k, n]` tile loaded by TMA with the 128-byte
    /// swizzle as `N / 64` column blocks of 64 elements, `block_bytes` apart (for attention's
    /// `O += P V` with V `[kv, D]`: the k16 step `kk` starts `2048 kk` bytes in).
    ///
    /// The descriptor's canonical form (PTX ISA "Matrix Descriptor", MN-major SW128:
    /// `((8 x 16B, m), (8, k)) : ((16B, LBO), (128B, SBO))`): the leading byte offset is
    /// `block_bytes` (between 64-wide N blocks) and the stride byte offset 1024 (between
    /// groups of 8 k rows).
    MnMajor {
        /// Bytes between consecutive 64-element N blocks: a multiple of 1024 below 2^18.
        block_bytes: u32,
    },
}

impl WgmmaB {
    /// The linear (pre-swizzle) byte offset of `B[k][n]` from the tile pointer.
    ///
    /// ```
    /// use flydsl_ir::WgmmaB;
    /// assert_eq!(WgmmaB::KMajor.offset(3, 2, 2), 128 * 2 + 6);
    /// let mn = WgmmaB::MnMajor { block_bytes: 8192 };
    /// assert_eq!(mn.offset(3, 70, 2), 128 * 3 + 2 * 6 + 8192);
    /// ```
    pub fn offset(self, k: u64, n: u64, size: u64) -> u64 {
        match self {
            WgmmaB::KMajor => 128 * n + size * k,
            WgmmaB::MnMajor { block_bytes } => {
                128 * k + size * (n % 64) + block_bytes as u64 * (n / 64)
            }
        }
    }
}

/// An NVIDIA Hopper op. Every op that names an mbarrier takes a pointer to a shared `i64`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum NvOp {
    /// `mbarrier.init`: the barrier expects `count` arrivals per phase, its transaction count
    /// is 0 and its current phase is 0. Run it from one thread, then make it visible with
    /// [`NvOp::FenceProxyAsync`] and a workgroup barrier before any other thread or TMA uses
    /// the barrier.
    MbarInit {
        /// The barrier (`ptr<shared, i64>`).
        bar: ValueId,
        /// Arrivals per phase (1..=2^20 - 1).
        count: u32,
    },
    /// `mbarrier.arrive.expect_tx`: each executing thread raises the barrier's pending
    /// transaction count by `bytes` (i32) and then arrives. The phase completes when all its
    /// arrivals have happened and the transaction count is back to 0 (async copies that
    /// signal this barrier lower it as their bytes land).
    MbarArriveExpectTx {
        /// The barrier.
        bar: ValueId,
        /// Bytes the phase waits for (i32, >= 0).
        bytes: ValueId,
    },
    /// `mbarrier.arrive`: each executing thread arrives once.
    MbarArrive {
        /// The barrier.
        bar: ValueId,
    },
    /// Wait until the barrier's phase of parity `parity` (i32, 0 or 1) has completed
    /// (`mbarrier.try_wait.parity` in a loop). Phases alternate parity starting at 0, so the
    /// `n`-th use of a barrier (from 0) waits with parity `n % 2`. After the wait, the
    /// data the phase's async copies wrote is visible to the waiting threads.
    ///
    /// The Sim runs a workgroup's threads in lockstep: a wait whose phase has not completed
    /// when every thread reaches it can never complete there (it would need another wave to
    /// run ahead), so the Sim reports it as a deadlock. Warp-specialized kernels, whose
    /// producer and consumer waves wait on each other inside divergent branches, therefore
    /// do not run on the Sim.
    MbarWait {
        /// The barrier.
        bar: ValueId,
        /// Parity of the phase to wait for (i32).
        parity: ValueId,
    },
    /// `fence.proxy.async.shared::cta`: orders this thread's earlier generic-proxy shared
    /// memory accesses (stores, mbarrier init) before later async-proxy accesses (TMA, wgmma
    /// operand reads). The Sim has a single proxy: a no-op there.
    FenceProxyAsync,
    /// `elect.sync`: i1, true in exactly one active lane of each warp (the lowest active lane
    /// on the Sim; hardware picks one lane, so do not rely on which).
    ElectOne,
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 regs`: the warpgroup's per-thread register
    /// budget becomes `regs` (24..=256, a multiple of 8). Needs a kernel with no external
    /// calls and a known entry register count (set [`crate::KernelAttrs::max_registers`]).
    /// A no-op on the Sim.
    SetMaxNReg {
        /// True to raise (`inc`), false to lower (`dec`).
        inc: bool,
        /// The new per-thread register count.
        regs: u32,
    },
    /// A 2-D TMA tile load (`cp.async.bulk.tensor.2d...mbarrier::complete_tx::bytes`): each
    /// executing thread (normally one) copies the box of the tensor map at `tmap` whose
    /// first element has coordinates `coords` (i32: innermost first; may be negative or past
    /// the end: elements outside the tensor are written as zeros) into LDS at `dst`, laid out
    /// row-major (innermost dimension contiguous) and swizzled as the map says; when the
    /// bytes land, the barrier's transaction count drops by the box's byte size (always the
    /// full box). Until a [`NvOp::MbarWait`] on `bar` returns, the LDS destination must not
    /// be read (the Sim reports such a read).
    ///
    /// `tmap` points to a 128-byte tensor map in global memory made by the runtime
    /// (`flydsl_rt::TensorMap`), 64-byte aligned. `dst` must be 128-byte aligned, and
    /// 1024-byte aligned with a 128-byte swizzle.
    TmaLoad {
        /// The tensor map (a global pointer).
        tmap: ValueId,
        /// LDS destination.
        dst: ValueId,
        /// The mbarrier that counts the bytes.
        bar: ValueId,
        /// Box start coordinates, innermost first (i32; 1 to 5 of them).
        coords: Vec<ValueId>,
    },
    /// `wgmma.fence.sync.aligned`: orders register accesses to wgmma accumulators before the
    /// next [`NvOp::Wgmma`]. Issue it once before the first wgmma of a batch and whenever the
    /// accumulators were written by other code. A no-op on the Sim.
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`: closes the batch of wgmmas issued since the last
    /// commit. A no-op on the Sim.
    WgmmaCommit,
    /// `wgmma.mma_async` m64nNkK, both operands in LDS:
    /// `D[m][n] = C[m][n] + sum_k A[m][k] * B[n][k]` for one warpgroup (128 threads, all
    /// active). The operand element type (A's and B's, the same) picks the form: bf16 / f16
    /// (K = 16, f32 accumulate), OCP fp8 e4m3fn / e5m2 (K = 32, f32 accumulate: `.e4m3` /
    /// `.e5m2`) or signed i8 (K = 32, s32 accumulate: `.s32.s8.s8`, wrapping); see
    /// [`wgmma_k`] and [`wgmma_acc_elem`]. A (64 x K) and B (N x K) are K-major
    /// 128-byte-swizzled tiles: row `r`, element `k` of the operand at pointer `p` is at
    /// linear LDS address `p + 128 * r + size * k`, stored per [`swizzle128`] (one K-slice
    /// is 32 bytes of each row, so the slice `k0` of a 128-byte-wide SW128 tile starts
    /// `32 * (k0 / K)` bytes into its row). `p` must satisfy `p % 1024 < 128`, 16-byte
    /// aligned.
    ///
    /// `acc` is `<N/2 x f32>` (`<N/2 x i32>` for i8) per thread in the warpgroup's
    /// accumulator layout: warp `w` (within the warpgroup), lane `l`, register `4j + i` holds
    /// `D[16w + l/4 + 8*(i/2)][8j + 2*(l%4) + i%2]`.
    ///
    /// The result must not be read (other than as another wgmma's `acc`) before a
    /// [`NvOp::WgmmaWait`] that covers it. The Sim computes it at once: float forms as
    /// `C + sum` with the products decoded exactly, rounded once to f32 (hardware may differ
    /// in the last bits); i8 exactly, wrapping to 32 bits.
    Wgmma {
        /// N: a multiple of 8 in 8..=256.
        n: u32,
        /// A tile pointer (`ptr<shared, bf16|f16|e4m3fn|e5m2|i8>`).
        a: ValueId,
        /// B tile pointer (same element type as A).
        b: ValueId,
        /// Accumulator in.
        acc: ValueId,
    },
    /// `wgmma.mma_async` m64nNk16 with A from registers (the *RS* form), B in LDS, f32
    /// accumulate: `D[m][n] = C[m][n] + sum_k A[m][k] * B[k][n]` for one warpgroup (128
    /// threads, all active). The element type (bf16 or f16) is B's.
    ///
    /// `a` is `<4 x i32>` per thread: the *A fragment*, four registers of two 16-bit
    /// elements each (the first in the low half). Warp `w` of the warpgroup holds rows
    /// `16w..16w+16` in the per-warp layout of `mma.sync` m16n8k16's A: lane `l`, register
    /// `r`, half `h` holds `A[16w + l/4 + 8*(r%2)][2*(l%4) + 8*(r/2) + h]`. This is exactly
    /// the accumulator layout of [`NvOp::Wgmma`] restricted to columns `16kk..16kk+16`:
    /// accumulator registers `8kk..8kk+8`, packed pairwise, are the A fragment of the k16
    /// step `kk` (how attention feeds P = softmax(S) back without an LDS round trip).
    ///
    /// B (16 x N) is a 128-byte-swizzled LDS tile at `b` laid out as `b_layout` says. The
    /// result must not be read before a [`NvOp::WgmmaWait`] that covers it; `a` must be an
    /// ordinary (not in-flight) value. The Sim computes each element as `C + sum` rounded once
    /// to f32.
    WgmmaRs {
        /// N: a multiple of 8 in 8..=256 (of 64 with [`WgmmaB::MnMajor`]).
        n: u32,
        /// The A fragment (`<4 x i32>`).
        a: ValueId,
        /// B tile pointer (`ptr<shared, bf16|f16>`).
        b: ValueId,
        /// How B is laid out in LDS.
        b_layout: WgmmaB,
        /// Accumulator in (`<N/2 x f32>`).
        acc: ValueId,
    },
    /// `wgmma.wait_group.sync.aligned pending`: waits until at most `pending` committed
    /// wgmma batches are still running, and returns `values` (accumulators) as their
    /// results: tied through the wait, so no read of them moves above it.
    WgmmaWait {
        /// Batches allowed to stay in flight.
        pending: u32,
        /// Accumulators to pass through (results have the same types).
        values: Vec<ValueId>,
    },
    /// `cp.async` (`.cg` for 16 bytes, else `.ca`) with zero-fill: each executing thread
    /// starts an asynchronous copy of `bytes` bytes from global memory at `&src[index]`
    /// (`src` plus `index` elements of its element type; no index means 0) to LDS at `dst`,
    /// of which only the first `src_bytes` (i32, run time, `0..=bytes`) are read and the
    /// rest are written as zeros: `src_bytes = 0` reads nothing, so a predicated-off copy
    /// may point anywhere (the zero-fill idiom for ragged tile edges). Source and
    /// destination are `bytes`-aligned.
    ///
    /// The copy joins the executing thread's open *commit group* (closed by
    /// [`NvOp::CpAsyncCommit`]). Its bytes must not be read by any thread until the issuing
    /// thread has run a [`NvOp::CpAsyncWait`] that covers its group; other threads also need a
    /// workgroup barrier after that wait. The Sim writes the bytes at issue but reports such
    /// an early read (an ordinary load, `LdMatrix` or a wgmma operand read).
    CpAsync {
        /// LDS destination (`ptr<shared, _>`).
        dst: ValueId,
        /// Global source (`ptr<global, _>`).
        src: ValueId,
        /// Element index into `src` (i32 or i64).
        index: Option<ValueId>,
        /// Bytes copied: 4, 8 or 16.
        bytes: u32,
        /// Bytes read from `src` (i32, `0..=bytes`); the rest are zero-filled.
        src_bytes: ValueId,
    },
    /// `cp.async.commit_group`: closes the executing thread's open commit group (possibly
    /// empty). Groups are numbered per thread in commit order.
    CpAsyncCommit,
    /// `cp.async.wait_group pending`: waits until at most the `pending` most recent committed
    /// groups of the executing thread are still in flight; the copies of all older groups
    /// have landed and are visible to this thread (to others after a workgroup barrier).
    /// Copies not yet committed are not waited for.
    CpAsyncWait {
        /// Most recent committed groups allowed to stay in flight (0..=7).
        pending: u32,
    },
    /// `ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16`: a warp loads `count` 8 x 8
    /// matrices of 16-bit elements from LDS. All 32 lanes of the warp execute it. Lane
    /// `8 i + r` (for `i < count`) supplies in `ptr` the address of row `r` of matrix `i`:
    /// 8 consecutive 16-bit elements `M_i[r][0..8]`, 16-byte aligned (the addresses of lanes
    /// `8 * count ..` are ignored).
    ///
    /// The result is `<count x i32>` (`i32` for `count = 1`); register `i` of lane `l` packs
    /// two elements of `M_i`, the first in the low 16 bits: without `trans`,
    /// `M_i[l / 4][2 (l % 4)]` and `M_i[l / 4][2 (l % 4) + 1]`; with `trans`,
    /// `M_i[2 (l % 4)][l / 4]` and `M_i[2 (l % 4) + 1][l / 4]` (the fragment of the
    /// transposed matrix). This is the A/B fragment layout of `mma.sync` m16n8k16.
    LdMatrix {
        /// Row address per lane (`ptr<shared, _>`).
        ptr: ValueId,
        /// Matrices: 1, 2 or 4.
        count: u32,
        /// Transpose each matrix.
        trans: bool,
    },
    /// `stmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16`: the inverse of
    /// [`NvOp::LdMatrix`]: lane `8 i + r` supplies the address of row `r` of matrix `i`, and
    /// `value` (`<count x i32>`, `i32` for `count = 1`) holds each lane's elements in the
    /// [`NvOp::LdMatrix`] layout; the warp writes the `count` matrices to LDS.
    StMatrix {
        /// Row address per lane (`ptr<shared, _>`).
        ptr: ValueId,
        /// The fragments.
        value: ValueId,
        /// Matrices: 1, 2 or 4.
        count: u32,
        /// Transpose each matrix.
        trans: bool,
    },
}

impl NvOp {
    /// The SSA operands the op reads.
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            NvOp::MbarInit { bar, .. } | NvOp::MbarArrive { bar } => vec![*bar],
            NvOp::MbarArriveExpectTx { bar, bytes } => vec![*bar, *bytes],
            NvOp::MbarWait { bar, parity } => vec![*bar, *parity],
            NvOp::FenceProxyAsync
            | NvOp::ElectOne
            | NvOp::SetMaxNReg { .. }
            | NvOp::WgmmaFence
            | NvOp::WgmmaCommit => vec![],
            NvOp::TmaLoad {
                tmap,
                dst,
                bar,
                coords,
            } => {
                let mut v = vec![*tmap, *dst, *bar];
                v.extend(coords);
                v
            }
            NvOp::Wgmma { a, b, acc, .. } | NvOp::WgmmaRs { a, b, acc, .. } => {
                vec![*a, *b, *acc]
            }
            NvOp::WgmmaWait { values, .. } => values.clone(),
            NvOp::CpAsync {
                dst,
                src,
                index,
                src_bytes,
                ..
            } => {
                let mut v = vec![*dst, *src];
                v.extend(index);
                v.push(*src_bytes);
                v
            }
            NvOp::CpAsyncCommit | NvOp::CpAsyncWait { .. } => vec![],
            NvOp::LdMatrix { ptr, .. } => vec![*ptr],
            NvOp::StMatrix { ptr, value, .. } => vec![*ptr, *value],
        }
    }

    /// The per-lane fragment type of an [`NvOp::LdMatrix`] / [`NvOp::StMatrix`] of `count`
    /// matrices: `i32` for one, `<count x i32>` otherwise.
    ///
    /// ```
    /// use flydsl_ir::{NvOp, ScalarType, Type};
    /// assert_eq!(NvOp::matrix_frag_type(1), Type::Scalar(ScalarType::I32));
    /// assert_eq!(NvOp::matrix_frag_type(4), Type::Vector(ScalarType::I32, 4));
    /// ```
    pub fn matrix_frag_type(count: u32) -> Type {
        if count == 1 {
            Type::Scalar(ScalarType::I32)
        } else {
            Type::Vector(ScalarType::I32, count as u8)
        }
    }

    /// The register A fragment of an [`NvOp::WgmmaRs`]: `<4 x i32>`.
    ///
    /// ```
    /// use flydsl_ir::{NvOp, ScalarType, Type};
    /// assert_eq!(NvOp::wgmma_a_frag_type(), Type::Vector(ScalarType::I32, 4));
    /// ```
    pub fn wgmma_a_frag_type() -> Type {
        Type::Vector(ScalarType::I32, 4)
    }

    /// The accumulator type of an m64nNk16 wgmma on 16-bit or fp8 inputs: `<N/2 x f32>`.
    pub fn wgmma_acc_type(n: u32) -> Type {
        Type::Vector(ScalarType::F32, (n / 2) as u8)
    }

    /// The accumulator type of a wgmma of N `n` on operands of `elem`: `<N/2 x f32>`, or
    /// `<N/2 x i32>` for i8.
    ///
    /// ```
    /// use flydsl_ir::{NvOp, ScalarType, Type};
    /// assert_eq!(NvOp::wgmma_acc_type_of(16, ScalarType::I8), Type::Vector(ScalarType::I32, 8));
    /// ```
    pub fn wgmma_acc_type_of(n: u32, elem: ScalarType) -> Type {
        Type::Vector(wgmma_acc_elem(elem), (n / 2) as u8)
    }

    /// Check the op's operand and result types on `target`; the error says what is wrong.
    pub fn check(
        &self,
        target: Target,
        t: &dyn Fn(ValueId) -> Type,
        results: &[Type],
    ) -> Result<(), String> {
        if target != Target::Sm90 {
            return Err(format!(
                "{self:?} is an NVIDIA Hopper op; {target} has no such op"
            ));
        }
        let bar_ty = Type::Ptr(AddrSpace::Shared, ScalarType::I64);
        let i32_ty = Type::Scalar(ScalarType::I32);
        let want_results = |n: usize| {
            if results.len() == n {
                Ok(())
            } else {
                Err(format!("takes {n} results, has {}", results.len()))
            }
        };
        let want_bar = |b: ValueId| {
            if t(b) == bar_ty {
                Ok(())
            } else {
                Err(format!("the mbarrier must be {bar_ty}, not {}", t(b)))
            }
        };
        match self {
            NvOp::MbarInit { bar, count } => {
                want_results(0)?;
                want_bar(*bar)?;
                if !(1..1 << 20).contains(count) {
                    return Err(format!("mbarrier count {count} is outside 1..2^20"));
                }
            }
            NvOp::MbarArriveExpectTx { bar, bytes } => {
                want_results(0)?;
                want_bar(*bar)?;
                if t(*bytes) != i32_ty {
                    return Err(format!("expect-tx bytes must be i32, not {}", t(*bytes)));
                }
            }
            NvOp::MbarArrive { bar } => {
                want_results(0)?;
                want_bar(*bar)?;
            }
            NvOp::MbarWait { bar, parity } => {
                want_results(0)?;
                want_bar(*bar)?;
                if t(*parity) != i32_ty {
                    return Err(format!("wait parity must be i32, not {}", t(*parity)));
                }
            }
            NvOp::FenceProxyAsync | NvOp::WgmmaFence | NvOp::WgmmaCommit => want_results(0)?,
            NvOp::ElectOne => {
                if results != [Type::Scalar(ScalarType::I1)] {
                    return Err("elect gives one i1".into());
                }
            }
            NvOp::SetMaxNReg { regs, .. } => {
                want_results(0)?;
                if !(24..=256).contains(regs) || regs % 8 != 0 {
                    return Err(format!(
                        "setmaxnreg {regs}: use a multiple of 8 in 24..=256"
                    ));
                }
            }
            NvOp::TmaLoad {
                tmap,
                dst,
                bar,
                coords,
            } => {
                want_results(0)?;
                want_bar(*bar)?;
                if !matches!(t(*tmap), Type::Ptr(AddrSpace::Global, _)) {
                    return Err(format!(
                        "the tensor map must be a global pointer, not {}",
                        t(*tmap)
                    ));
                }
                if !matches!(t(*dst), Type::Ptr(AddrSpace::Shared, _)) {
                    return Err(format!(
                        "the TMA destination must be an LDS pointer, not {}",
                        t(*dst)
                    ));
                }
                if !(1..=5).contains(&coords.len()) || coords.iter().any(|&c| t(c) != i32_ty) {
                    return Err(format!(
                        "a TMA load takes 1 to 5 i32 coordinates, got {}",
                        coords.len()
                    ));
                }
            }
            NvOp::Wgmma { n, a, b, acc } => {
                if *n % 8 != 0 || !(8..=256).contains(n) {
                    return Err(format!("wgmma N = {n}: use a multiple of 8 in 8..=256"));
                }
                let ta = t(*a);
                let elem = match ta {
                    Type::Ptr(AddrSpace::Shared, e) if wgmma_operand_ok(e) => Some(e),
                    _ => None,
                };
                let Some(elem) = elem.filter(|_| t(*b) == ta) else {
                    return Err(format!(
                        "wgmma operands must be LDS pointers to bf16, f16, e4m3fn, e5m2 or i8, \
                         both the same; got {ta} and {}",
                        t(*b)
                    ));
                };
                let acc_ty = NvOp::wgmma_acc_type_of(*n, elem);
                if t(*acc) != acc_ty || results != [acc_ty] {
                    return Err(format!(
                        "wgmma m64n{n}k{} on {elem} takes and gives a {acc_ty} accumulator; got {}",
                        wgmma_k(elem),
                        t(*acc)
                    ));
                }
            }
            NvOp::WgmmaRs {
                n,
                a,
                b,
                b_layout,
                acc,
            } => {
                if *n % 8 != 0 || !(8..=256).contains(n) {
                    return Err(format!("wgmma N = {n}: use a multiple of 8 in 8..=256"));
                }
                if let WgmmaB::MnMajor { block_bytes } = b_layout {
                    if *n % 64 != 0 {
                        return Err(format!(
                            "wgmma with an MN-major B: N = {n} must be a multiple of 64"
                        ));
                    }
                    if block_bytes % 1024 != 0 || *block_bytes >= 1 << 18 {
                        return Err(format!(
                            "MN-major B block stride {block_bytes}: use a multiple of 1024 \
                             below 2^18"
                        ));
                    }
                }
                if !matches!(
                    t(*b),
                    Type::Ptr(AddrSpace::Shared, ScalarType::BF16 | ScalarType::F16)
                ) {
                    return Err(format!(
                        "wgmma B must be an LDS pointer to bf16 or f16, not {}",
                        t(*b)
                    ));
                }
                let frag = NvOp::wgmma_a_frag_type();
                if t(*a) != frag {
                    return Err(format!(
                        "a register A fragment is {frag} (8 packed 16-bit elements), not {}",
                        t(*a)
                    ));
                }
                let acc_ty = NvOp::wgmma_acc_type(*n);
                if t(*acc) != acc_ty || results != [acc_ty] {
                    return Err(format!(
                        "wgmma m64n{n}k16 takes and gives a {acc_ty} accumulator; got {}",
                        t(*acc)
                    ));
                }
            }
            NvOp::WgmmaWait { pending, values } => {
                if *pending > 7 {
                    return Err(format!("wgmma wait_group {pending}: use 0..=7"));
                }
                let tys: Vec<Type> = values.iter().map(|&v| t(v)).collect();
                if tys != results {
                    return Err("wgmma wait results must match its values' types".into());
                }
                if tys
                    .iter()
                    .any(|ty| !matches!(ty.value_elem(), Some(ScalarType::F32 | ScalarType::I32)))
                {
                    return Err("wgmma wait passes f32 or i32 accumulators only".into());
                }
            }
            NvOp::CpAsync {
                dst,
                src,
                index,
                bytes,
                src_bytes,
            } => {
                want_results(0)?;
                if !matches!(t(*dst), Type::Ptr(AddrSpace::Shared, _)) {
                    return Err(format!(
                        "the cp.async destination must be an LDS pointer, not {}",
                        t(*dst)
                    ));
                }
                if !matches!(t(*src), Type::Ptr(AddrSpace::Global, _)) {
                    return Err(format!(
                        "the cp.async source must be a global pointer, not {}",
                        t(*src)
                    ));
                }
                if let Some(i) = index {
                    let ti = t(*i);
                    if ti != i32_ty && ti != Type::Scalar(ScalarType::I64) {
                        return Err(format!("the cp.async index must be i32 or i64, not {ti}"));
                    }
                }
                if ![4, 8, 16].contains(bytes) {
                    return Err(format!("cp.async of {bytes} bytes: use 4, 8 or 16"));
                }
                if t(*src_bytes) != i32_ty {
                    return Err(format!(
                        "cp.async src_bytes must be i32, not {}",
                        t(*src_bytes)
                    ));
                }
            }
            NvOp::CpAsyncCommit => want_results(0)?,
            NvOp::CpAsyncWait { pending } => {
                want_results(0)?;
                if *pending > 7 {
                    return Err(format!("cp.async wait_group {pending}: use 0..=7"));
                }
            }
            NvOp::LdMatrix { ptr, count, .. } | NvOp::StMatrix { ptr, count, .. } => {
                if ![1, 2, 4].contains(count) {
                    return Err(format!("{count} matrices: use 1, 2 or 4"));
                }
                if !matches!(t(*ptr), Type::Ptr(AddrSpace::Shared, _)) {
                    return Err(format!(
                        "the row address must be an LDS pointer, not {}",
                        t(*ptr)
                    ));
                }
                let ft = NvOp::matrix_frag_type(*count);
                if let NvOp::StMatrix { value, .. } = self {
                    want_results(0)?;
                    if t(*value) != ft {
                        return Err(format!(
                            "stmatrix of {count} matrices stores a {ft}, not {}",
                            t(*value)
                        ));
                    }
                } else if results != [ft] {
                    return Err(format!("ldmatrix of {count} matrices gives one {ft}"));
                }
            }
        }
        Ok(())
    }
}
