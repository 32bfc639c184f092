//! Lane-to-element layouts of every matrix atom, as one table of affine-modular formulas.
//!
//! Each coordinate is a sum of terms `mul * ((x / div) % modulo)` where `x` is the lane id or
//! the element index within the lane's fragment (see `shared/facts/matrix-layouts.md`: §1.2
//! gfx942 MFMA, §2.2 gfx950 MFMA, §3.2 gfx1201 WMMA, §4.2 gfx1250 WMMA, §5 sm_90 mma.sync).
//! A is `M x K` (`A[i][k]`), B is `K x N` (`B[k][j]`), C/D are `M x N` (`[i][j]`).
//!
//! ```
//! use flydsl_ir::{MmaAtom, Target};
//! use flydsl_sim::mma_layout::{a_coord, c_coord};
//! // matrix-layouts.md §9.3: lane 17, element 2 of v_mfma_f32_16x16x16_f16 holds A[1][6].
//! assert_eq!(a_coord(MmaAtom::Mfma16x16x16F16, Target::Gfx942, 17, 2), (1, 6));
//! assert_eq!(c_coord(MmaAtom::Mfma16x16x16F16, Target::Gfx942, 17, 3), (7, 1));
//! ```

use flydsl_ir::{MmaAtom, Target};

#[derive(Clone, Copy, Debug)]
enum Src {
    Lane,
    Elem,
}

/// One term `mul * ((x / div) % modulo)`; `modulo == 0` means no modulo.
#[derive(Clone, Copy, Debug)]
struct Term {
    src: Src,
    div: u32,
    modulo: u32,
    mul: u32,
}

const fn l(div: u32, modulo: u32, mul: u32) -> Term {
    Term {
        src: Src::Lane,
        div,
        modulo,
        mul,
    }
}
const fn e(div: u32, modulo: u32, mul: u32) -> Term {
    Term {
        src: Src::Elem,
        div,
        modulo,
        mul,
    }
}

/// The layout of one atom: (row, col) formulas for A (i, k), B (k, j) and C/D (i, j).
struct AtomLayout {
    a: [&'static [Term]; 2],
    b: [&'static [Term]; 2],
    c: [&'static [Term]; 2],
}

// Shared pieces.
const L16: &[Term] = &[l(1, 16, 1)];
const L32: &[Term] = &[l(1, 32, 1)];
// MFMA 16x16 accumulator: D[4*(l/16) + v][l%16].
const MFMA16_C: [&[Term]; 2] = [&[l(16, 0, 4), e(1, 0, 1)], L16];
// MFMA 32x32 accumulator: D[8*(v/4) + 4*(l/32) + v%4][l%32].
const MFMA32_C: [&[Term]; 2] = [&[e(4, 0, 8), l(32, 0, 4), e(1, 4, 1)], L32];
// WMMA gfx12 accumulator: D[8*(l/16) + v][l%16].
const WMMA_C: [&[Term]; 2] = [&[l(16, 0, 8), e(1, 0, 1)], L16];

// k = 4*(l/16) + e  (MFMA 16x16x16)
const K_MFMA16X16X16: &[Term] = &[l(16, 0, 4), e(1, 0, 1)];
// k = 4*(l/32) + e  (MFMA 32x32x8)
const K_MFMA32X32X8: &[Term] = &[l(32, 0, 4), e(1, 0, 1)];
// k = 8*(l/16) + e  (MFMA 16x16x32: fp8, i8, gfx950 f16/bf16)
const K_MFMA16X16X32: &[Term] = &[l(16, 0, 8), e(1, 0, 1)];
// k = 8*(l/32) + e  (MFMA 32x32x16: gfx950 f16/bf16 §2.2 [S], fp8 §1.2 [X])
const K_MFMA32X32X16: &[Term] = &[l(32, 0, 8), e(1, 0, 1)];
// k = 16*(l/16) + e  (gfx950 MFMA 16x16x64 i8: 16 K-contiguous bytes a lane, [I] by analogy
// with the 16-byte runs of 16x16x32 f16; K-order is unobservable without scales, §0.1)
const K_MFMA16X16X64: &[Term] = &[l(16, 0, 16), e(1, 0, 1)];
// k = 8*(l/16) + e  (gfx1201 WMMA 16x16x16 fp8 §3.2 [X]; iu8 the same 8-byte runs [I])
const K_WMMA16_8BIT: &[Term] = &[l(16, 0, 8), e(1, 0, 1)];
// k = 8*(e/4) + 4*(l/16) + e%4  (gfx1201 WMMA 16x16x16)
const K_WMMA16: &[Term] = &[e(4, 0, 8), l(16, 0, 4), e(1, 4, 1)];
// k = 16*(e/8) + 8*(l/16) + e%8  (gfx1250 WMMA 16x16x32)
const K_WMMA32: &[Term] = &[e(8, 0, 16), l(16, 0, 8), e(1, 8, 1)];

// k = 32*(e/16) + 16*(l/16) + e%16  (gfx1250 WMMA 16x16x64 fp8 and iu8 with e < 32 and
// 16x16x128 fp8 with e < 64, §4.2 [S/I]; iu8 assumed to share the fp8 byte order [I])
const K_WMMA64: &[Term] = &[e(16, 0, 32), l(16, 0, 16), e(1, 16, 1)];
// k = 64*(e/16) + 16*(l/16) + e%16  (gfx950 scaled MFMA 16x16x128 fp8, §2.2 [I]: inferred
// from the 32x32x64 example, unverified on hardware; it matters once per-block scales differ)
const K_MFMA_SCALE128: &[Term] = &[e(16, 0, 64), l(16, 0, 16), e(1, 16, 1)];

const MFMA_16X16X16: AtomLayout = AtomLayout {
    a: [L16, K_MFMA16X16X16],
    b: [K_MFMA16X16X16, L16],
    c: MFMA16_C,
};
const MFMA_32X32X8: AtomLayout = AtomLayout {
    a: [L32, K_MFMA32X32X8],
    b: [K_MFMA32X32X8, L32],
    c: MFMA32_C,
};
const MFMA_16X16X32: AtomLayout = AtomLayout {
    a: [L16, K_MFMA16X16X32],
    b: [K_MFMA16X16X32, L16],
    c: MFMA16_C,
};
const WMMA_16X16X16: AtomLayout = AtomLayout {
    a: [L16, K_WMMA16],
    b: [K_WMMA16, L16],
    c: WMMA_C,
};
const WMMA_16X16X32: AtomLayout = AtomLayout {
    a: [L16, K_WMMA32],
    b: [K_WMMA32, L16],
    c: WMMA_C,
};
const WMMA_16X16X64: AtomLayout = AtomLayout {
    a: [L16, K_WMMA64],
    b: [K_WMMA64, L16],
    c: WMMA_C,
};
const MFMA_SCALE_16X16X128: AtomLayout = AtomLayout {
    a: [L16, K_MFMA_SCALE128],
    b: [K_MFMA_SCALE128, L16],
    c: MFMA16_C,
};
// sm_90 mma.sync m16n8k16 (g = l/4, t = l%4):
// A[g + 8*((e/2)%2)][2t + e%2 + 8*(e/4)], B[2t + e%2 + 8*(e/2)][g], C[g + 8*(v/2)][2t + v%2].
const MMA_M16N8K16: AtomLayout = AtomLayout {
    a: [
        &[l(4, 0, 1), e(2, 2, 8)],
        &[l(1, 4, 2), e(1, 2, 1), e(4, 0, 8)],
    ],
    b: [&[l(1, 4, 2), e(1, 2, 1), e(2, 0, 8)], &[l(4, 0, 1)]],
    c: [&[l(4, 0, 1), e(2, 0, 8)], &[l(1, 4, 2), e(1, 2, 1)]],
};

const MFMA_32X32X16: AtomLayout = AtomLayout {
    a: [L32, K_MFMA32X32X16],
    b: [K_MFMA32X32X16, L32],
    c: MFMA32_C,
};
const MFMA_16X16X64: AtomLayout = AtomLayout {
    a: [L16, K_MFMA16X16X64],
    b: [K_MFMA16X16X64, L16],
    c: MFMA16_C,
};
const WMMA_16X16X16_8BIT: AtomLayout = AtomLayout {
    a: [L16, K_WMMA16_8BIT],
    b: [K_WMMA16_8BIT, L16],
    c: WMMA_C,
};
// sm_90 mma.sync m16n8k32, 8-bit inputs (§5; e4m3 probed on the H200, e5m2/s8 [I]):
// A[g + 8*((e/4)%2)][4t + e%4 + 16*(e/8)], B[4t + e%4 + 16*(e/4)][g], C as m16n8k16.
const MMA_M16N8K32: AtomLayout = AtomLayout {
    a: [
        &[l(4, 0, 1), e(4, 2, 8)],
        &[l(1, 4, 4), e(1, 4, 1), e(8, 0, 16)],
    ],
    b: [&[l(1, 4, 4), e(1, 4, 1), e(4, 0, 16)], &[l(4, 0, 1)]],
    c: MMA_M16N8K16.c,
};

fn layout(atom: MmaAtom) -> &'static AtomLayout {
    use MmaAtom::*;
    match atom {
        Mfma16x16x16F16 | Mfma16x16x16Bf16 => &MFMA_16X16X16,
        Mfma32x32x8F16 | Mfma32x32x8Bf16 => &MFMA_32X32X8,
        Mfma16x16x32Fp8 | Mfma16x16x32I8 | Mfma16x16x32F16 | Mfma16x16x32Bf16 => &MFMA_16X16X32,
        Wmma16x16x16F16 | Wmma16x16x16Bf16 => &WMMA_16X16X16,
        Wmma16x16x32F16 | Wmma16x16x32Bf16 => &WMMA_16X16X32,
        Wmma16x16x64Fp8 | Wmma16x16x128Fp8 => &WMMA_16X16X64,
        MfmaScale16x16x128Fp8 => &MFMA_SCALE_16X16X128,
        MmaM16N8K16F16 | MmaM16N8K16Bf16 => &MMA_M16N8K16,
        Mfma32x32x16F16 | Mfma32x32x16Bf16 | Mfma32x32x16Fp8 => &MFMA_32X32X16,
        Mfma16x16x64I8 => &MFMA_16X16X64,
        Wmma16x16x16Fp8 | Wmma16x16x16I8 => &WMMA_16X16X16_8BIT,
        Wmma16x16x64I8 => &WMMA_16X16X64,
        MmaM16N8K32E4M3 | MmaM16N8K32E5M2 | MmaM16N8K32S8 => &MMA_M16N8K32,
    }
}

fn eval(terms: &[Term], lane: usize, elem: usize) -> usize {
    terms
        .iter()
        .map(|t| {
            let x = match t.src {
                Src::Lane => lane,
                Src::Elem => elem,
            } / t.div as usize;
            let x = if t.modulo == 0 {
                x
            } else {
                x % t.modulo as usize
            };
            x * t.mul as usize
        })
        .sum()
}

/// `(i, k)` of `A` held by element `elem` of lane `lane`.
///
/// The layouts do not depend on `target` (only the fp8 number format does); it is taken so the
/// call reads like the hardware instruction it describes.
pub fn a_coord(atom: MmaAtom, _target: Target, lane: usize, elem: usize) -> (usize, usize) {
    let t = layout(atom);
    (eval(t.a[0], lane, elem), eval(t.a[1], lane, elem))
}

/// `(k, j)` of `B` held by element `elem` of lane `lane`.
pub fn b_coord(atom: MmaAtom, _target: Target, lane: usize, elem: usize) -> (usize, usize) {
    let t = layout(atom);
    (eval(t.b[0], lane, elem), eval(t.b[1], lane, elem))
}

/// `(i, j)` of `C`/`D` held by element `elem` of lane `lane`.
pub fn c_coord(atom: MmaAtom, _target: Target, lane: usize, elem: usize) -> (usize, usize) {
    let t = layout(atom);
    (eval(t.c[0], lane, elem), eval(t.c[1], lane, elem))
}

/// `(row, K-block)` whose E8M0 scale lane `lane` supplies (in byte 0 of its scale word, opsel
/// 0) for a scaled atom: row `l % 16` of A (column `l % 16` of B), K-block `l / 16` of 32 K
/// (matrix-layouts.md §2.1). `None` for atoms without scales.
pub fn scale_coord(atom: MmaAtom, lane: usize) -> Option<(usize, usize)> {
    match atom {
        MmaAtom::MfmaScale16x16x128Fp8 => Some((lane % 16, lane / 16)),
        _ => None,
    }
}

/// K elements covered by one scale of a scaled atom.
pub const SCALE_BLOCK_K: usize = 32;

/// Value of an E8M0 scale byte: `2^(s - 127)`; `0xFF` is NaN.
pub fn e8m0_value(s: u8) -> f64 {
    if s == 0xFF {
        f64::NAN
    } else {
        2f64.powi(s as i32 - 127)
    }
}

/// Per-lane fragment lengths `(A, B, C)` of `atom` on `target`.
pub fn frag_lens(atom: MmaAtom, target: Target) -> (usize, usize, usize) {
    let (a, b, c) = atom.frag_lanes(target.wave_size());
    (a as usize, b as usize, c as usize)
}
