//! Rows in global memory: buffer resources over a row, 128-bit loads and stores (with the
//! keep-in-L2 hint switched by a run-time flag), and the element helpers around them.

use crate::mem::{keep_l2_if, Rsrc, Tensor};
use crate::val::{select, splat, vec_of, Val};
use flydsl_ir::{ScalarType, Type};

/// Elements of `elem` per 128-bit access.
fn per16(elem: ScalarType) -> u32 {
    16 / elem.size_bytes()
}

/// A buffer resource over row `row` (i32) of a row-major `[m, n]` tensor: the row offset in
/// i64, `n` valid elements, or none when `valid` is false (every access is dropped or reads
/// zero). Indices into it are i32 elements; on AMD `index * element size` is the i32 byte
/// offset, so the caller keeps `n * element size` below 2^31.
#[track_caller]
pub fn row_rsrc(t: &Tensor, row: Val, n: Val, valid: Option<Val>) -> Rsrc {
    let base = row.cast(ScalarType::I64) * n.cast(ScalarType::I64);
    let len = match valid {
        Some(v) => select(v, n, 0),
        None => n,
    };
    t.offset(base).rsrc_n(len.cast(ScalarType::I64))
}

/// Load `lanes` consecutive elements at element `i` of `r` in 128-bit pieces (8 f32 are two
/// loads), each aligned to its size; a vector of at most 128 bits is one load.
#[track_caller]
pub fn load_vec(r: Rsrc, i: Val, lanes: u32) -> Val {
    let piece = per16(r.elem()).min(lanes);
    if piece == lanes {
        return r.load_vec(i, lanes, lanes * r.elem().size_bytes());
    }
    let mut elems = Vec::new();
    for p in 0..lanes / piece {
        let v = r.load_vec(i + (p * piece) as i32, piece, 16);
        elems.extend(v.elems());
    }
    vec_of(&elems)
}

/// Store vector `v` at element `i` of `r` in 128-bit pieces, each aligned to its size.
#[track_caller]
pub fn store_vec(r: Rsrc, i: Val, v: Val) {
    let lanes = v.lanes();
    let piece = per16(r.elem()).min(lanes);
    let align = piece * r.elem().size_bytes();
    for p in 0..lanes / piece {
        r.store_aligned(
            i + (p * piece) as i32,
            v.slice(p * piece, piece),
            align,
            false,
        );
    }
}

/// Load `lanes` elements (one access: at most 128 bits) at each of the indices `idx` of `r`
/// (byte alignment `align`, 0 for the element's), with the keep-in-L2 hint when the run-time flag `keep_l2` (i1) is set:
/// on NVIDIA one uniform branch around all the loads ([`keep_l2_if`]), on AMD plain loads.
#[track_caller]
pub fn load_row(r: Rsrc, idx: &[Val], lanes: u32, align: u32, keep_l2: Val) -> Vec<Val> {
    keep_l2_if(keep_l2, |hint| {
        idx.iter()
            .map(|&i| {
                if hint {
                    r.load_vec_keep_l2(i, lanes, align)
                } else {
                    r.load_vec(i, lanes, align)
                }
            })
            .collect()
    })
}

/// `v` itself, in a form the compilers cannot prove equal to `v`: its 32-bit words xor'ed with
/// `zero`, an i32 that is 0 at run time but not provably so (for example `n >> 31` of a
/// length `n >= 0`). Widening a packed 16-bit vector for a reduction and again from this copy
/// after it keeps only the packed value live across the reduction's barrier: without it the
/// compilers reuse the first widening and hold the f32 copy, twice the registers (counts in
/// `bench/fly-norm-registers.md`). `zero` may also be and'ed with a reduction's result, which
/// keeps the copy after that reduction. `v` must be a whole number of 32-bit words.
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::blocks::opaque; use flydsl_dsl::ir::{ScalarType::*, Target, Type};
/// KernelBuilder::new("k", Target::Gfx942, 64).build(|k| {
///     let n = k.scalar("n", I32);
///     let v = cnst(Type::vec(BF16, 8), flydsl_dsl::ir::Const::Float(1.0));
///     assert_eq!(opaque(v, n >> 31).ty(), v.ty());
/// }).unwrap();
/// ```
#[track_caller]
pub fn opaque(v: Val, zero: Val) -> Val {
    let words = v.lanes() * v.elem().size_bytes() / 4;
    let ty = v.ty();
    let w = v.bitcast(Type::vec(ScalarType::I32, words));
    (w ^ splat(zero, words)).bitcast(ty)
}

/// The f32 lanes of `v`. A bf16 widens exactly by moving its bits to the top half of an f32,
/// so a packed bf16 vector is widened with integer ops on its 32-bit words: `w << 16` gives
/// the even (low-half) element and `w & 0xffff0000` the odd one, two instructions a pair where
/// sm_90's generic conversion takes three (a shift for the low half, a byte permute and a
/// shift for the high one). Other dtypes, and bf16 vectors of odd length, use `cast`.
#[track_caller]
pub fn widen(v: Val) -> Val {
    if v.elem() != ScalarType::BF16 || v.lanes() & 1 != 0 {
        return v.cast(ScalarType::F32);
    }
    let words = v.lanes() / 2;
    let w = v.bitcast(Type::vec(ScalarType::I32, words));
    let f = Type::vec(ScalarType::F32, words);
    let lo = (w << 16i32).bitcast(f).elems();
    let hi = (w & (0xffff_0000u32 as i32)).bitcast(f).elems();
    let e: Vec<Val> = lo.into_iter().zip(hi).flat_map(|(a, b)| [a, b]).collect();
    vec_of(&e)
}
