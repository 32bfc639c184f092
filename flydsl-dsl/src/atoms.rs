//! Matrix-atom fragment layouts: which (row, col) of A, B and C each lane's element holds.
//!
//! One description per atom serves every target (`TiledMma`-style): a kernel asks the
//! [`AtomLayout`] of its target's atom where fragment element `e` of lane `l` lives, and
//! loads / stores accordingly. The maps follow the vendor documentation
//! (`shared/facts/matrix-layouts.md`); the Sim implements the same maps independently.

use crate::val::Val;
use flydsl_ir::{MmaAtom, Target};

/// A coordinate whose parts are computed at run time from the lane id.
#[derive(Clone, Copy, Debug)]
pub struct Coord {
    /// Row (M index for A and C, K index for B).
    pub row: Val,
    /// Column (K index for A, N index for B and C).
    pub col: Val,
}

/// Lane layouts of one matrix atom on one target.
#[derive(Clone, Copy, Debug)]
pub struct AtomLayout {
    /// The atom.
    pub atom: MmaAtom,
    /// The target (wave size, fp8 flavour).
    pub target: Target,
}

/// Pure-integer forms of the maps (lane and element known), shared by the DSL (through
/// [`AtomLayout`]) and by host-side tests.
pub mod host {
    use flydsl_ir::MmaAtom::{self, *};

    /// (row i, col k) of A held by element `e` of lane `l`.
    pub fn a(atom: MmaAtom, l: u32, e: u32) -> (u32, u32) {
        match atom {
            Mfma16x16x16F16 | Mfma16x16x16Bf16 => (l % 16, 4 * (l / 16) + e),
            Mfma32x32x8F16 | Mfma32x32x8Bf16 => (l % 32, 4 * (l / 32) + e),
            Mfma16x16x32Fp8 | Mfma16x16x32I8 | Mfma16x16x32F16 | Mfma16x16x32Bf16 => {
                (l % 16, 8 * (l / 16) + e)
            }
            Wmma16x16x16F16 | Wmma16x16x16Bf16 => (l % 16, 8 * (e / 4) + 4 * (l / 16) + e % 4),
            Wmma16x16x32F16 | Wmma16x16x32Bf16 => (l % 16, 16 * (e / 8) + 8 * (l / 16) + e % 8),
            // matrix-layouts.md §4.2 [S/I]: 16-byte runs alternating between lane halves.
            // 16x16x128 fp8 extends the same runs to e = 0..63 (4 runs a lane).
            Wmma16x16x64Fp8 | Wmma16x16x128Fp8 => (l % 16, 32 * (e / 16) + 16 * (l / 16) + e % 16),
            // matrix-layouts.md §2.2 [I] (unverified on hardware): two 16-byte chunks 64 apart.
            MfmaScale16x16x128Fp8 => (l % 16, 64 * (e / 16) + 16 * (l / 16) + e % 16),
            MmaM16N8K16F16 | MmaM16N8K16Bf16 => {
                let (g, t) = (l / 4, l % 4);
                (g + 8 * ((e / 2) % 2), 2 * t + e % 2 + 8 * (e / 4))
            }
            // §2.2 [S] (f16/bf16) and §1.2 [X] (fp8): lanes 0-31 hold k 0..7, 32-63 k 8..15.
            Mfma32x32x16F16 | Mfma32x32x16Bf16 | Mfma32x32x16Fp8 => (l % 32, 8 * (l / 32) + e),
            // [I]: one 16-byte K run a lane, the 16x16x32 f16 pattern in bytes.
            Mfma16x16x64I8 => (l % 16, 16 * (l / 16) + e),
            // §3.2 [X] for fp8; iu8 [I] the same 8-byte runs.
            Wmma16x16x16Fp8 | Wmma16x16x16I8 => (l % 16, 8 * (l / 16) + e),
            // §4.2 [S/I] fp8 order, assumed for iu8.
            Wmma16x16x64I8 => (l % 16, 32 * (e / 16) + 16 * (l / 16) + e % 16),
            // §5: bytes 4r..4r+3 of register r; registers 0/1 rows g and g+8, 2/3 likewise
            // 16 K further on.
            MmaM16N8K32E4M3 | MmaM16N8K32E5M2 | MmaM16N8K32S8 => {
                let (g, t) = (l / 4, l % 4);
                (g + 8 * ((e / 4) % 2), 4 * t + e % 4 + 16 * (e / 8))
            }
        }
    }
    /// (row k, col j) of B held by element `e` of lane `l`.
    pub fn b(atom: MmaAtom, l: u32, e: u32) -> (u32, u32) {
        match atom {
            MmaM16N8K16F16 | MmaM16N8K16Bf16 => {
                let (g, t) = (l / 4, l % 4);
                (2 * t + e % 2 + 8 * (e / 2), g)
            }
            MmaM16N8K32E4M3 | MmaM16N8K32E5M2 | MmaM16N8K32S8 => {
                let (g, t) = (l / 4, l % 4);
                (4 * t + e % 4 + 16 * (e / 4), g)
            }
            // Every AMD atom: B is A's map with the row index read as the column.
            _ => {
                let (i, k) = a(atom, l, e);
                (k, i)
            }
        }
    }
    /// (row i, col j) of C/D held by element `v` of lane `l`.
    pub fn c(atom: MmaAtom, l: u32, v: u32) -> (u32, u32) {
        match atom {
            Mfma32x32x8F16 | Mfma32x32x8Bf16 | Mfma32x32x16F16 | Mfma32x32x16Bf16
            | Mfma32x32x16Fp8 => (8 * (v / 4) + 4 * (l / 32) + v % 4, l % 32),
            Wmma16x16x16F16 | Wmma16x16x16Bf16 | Wmma16x16x32F16 | Wmma16x16x32Bf16
            | Wmma16x16x64Fp8 | Wmma16x16x128Fp8 | Wmma16x16x16Fp8 | Wmma16x16x16I8
            | Wmma16x16x64I8 => (8 * (l / 16) + v, l % 16),
            MmaM16N8K16F16 | MmaM16N8K16Bf16 | MmaM16N8K32E4M3 | MmaM16N8K32E5M2
            | MmaM16N8K32S8 => {
                let (g, t) = (l / 4, l % 4);
                (g + 8 * (v / 2), 2 * t + v % 2)
            }
            _ => (4 * (l / 16) + v, l % 16),
        }
    }
}

impl AtomLayout {
    /// The layout of `atom` on `target`.
    pub fn new(atom: MmaAtom, target: Target) -> Self {
        AtomLayout { atom, target }
    }
    /// Fragment lengths (A, B, C) per lane.
    pub fn frag_lens(&self) -> (u32, u32, u32) {
        self.atom.frag_lanes(self.target.wave_size())
    }
    /// Where element `e` of lane `lane` sits, for a map `f` that is affine in the lane's
    /// quotient/remainder pieces: evaluated by splitting the lane into (hi, lo) parts.
    fn eval(&self, lane: Val, e: u32, f: fn(MmaAtom, u32, u32) -> (u32, u32)) -> Coord {
        // Every map above is of the form  row = r0(e) + ra * (l % m) + rb * (l / m), same for
        // col, for one modulus m per atom: recover the coefficients by probing.
        let m = self.lane_modulus();
        let base = f(self.atom, 0, e);
        let d_lo = f(self.atom, 1, e);
        let d_hi = f(self.atom, m, e);
        let coef = |b: u32, lo: u32, hi: u32| (lo as i64 - b as i64, hi as i64 - b as i64);
        let (ra, rb) = coef(base.0, d_lo.0, d_hi.0);
        let (ca, cb) = coef(base.1, d_lo.1, d_hi.1);
        let lo = lane % m;
        let hi = lane / m;
        let term = |v: Val, k: i64| match k {
            0 => None,
            1 => Some(v),
            _ => Some(v * k),
        };
        let part = |b: u32, a: i64, c: i64| {
            let acc = [term(lo, a), term(hi, c)]
                .into_iter()
                .flatten()
                .reduce(|x, y| x + y);
            match (acc, b) {
                (None, b) => crate::val::c_i32(b as i32),
                (Some(x), 0) => x,
                (Some(x), b) => x + b,
            }
        };
        Coord {
            row: part(base.0, ra, rb),
            col: part(base.1, ca, cb),
        }
    }
    fn lane_modulus(&self) -> u32 {
        use MmaAtom::*;
        match self.atom {
            Mfma32x32x8F16 | Mfma32x32x8Bf16 | Mfma32x32x16F16 | Mfma32x32x16Bf16
            | Mfma32x32x16Fp8 => 32,
            MmaM16N8K16F16 | MmaM16N8K16Bf16 | MmaM16N8K32E4M3 | MmaM16N8K32E5M2
            | MmaM16N8K32S8 => 4,
            _ => 16,
        }
    }
    /// A coordinate (row i, col k) of element `e` of `lane`.
    pub fn a(&self, lane: Val, e: u32) -> Coord {
        self.eval(lane, e, host::a)
    }
    /// B coordinate (row k, col j) of element `e` of `lane`.
    pub fn b(&self, lane: Val, e: u32) -> Coord {
        self.eval(lane, e, host::b)
    }
    /// C coordinate (row i, col j) of element `v` of `lane`.
    pub fn c(&self, lane: Val, v: u32) -> Coord {
        self.eval(lane, v, host::c)
    }
}

/// Check that [`AtomLayout`]'s affine decomposition reproduces the host maps for every lane
/// and element (run in tests; returns the first mismatch).
pub fn check_affine(atom: MmaAtom, target: Target) -> Result<(), String> {
    let l = AtomLayout::new(atom, target);
    let m = l.lane_modulus();
    let (na, nb, nc) = l.frag_lens();
    type Map = fn(MmaAtom, u32, u32) -> (u32, u32);
    let maps: [(&str, Map, u32); 3] = [("A", host::a, na), ("B", host::b, nb), ("C", host::c, nc)];
    for (name, f, n) in maps {
        for e in 0..n {
            let b = f(atom, 0, e);
            let lo = f(atom, 1, e);
            let hi = f(atom, m, e);
            for lane in 0..target.wave_size() {
                let (q, r) = ((lane / m) as i64, (lane % m) as i64);
                let pred = |b: u32, lo: u32, hi: u32| {
                    b as i64 + r * (lo as i64 - b as i64) + q * (hi as i64 - b as i64)
                };
                let want = f(atom, lane, e);
                let got = (pred(b.0, lo.0, hi.0), pred(b.1, lo.1, hi.1));
                if got != (want.0 as i64, want.1 as i64) {
                    return Err(format!(
                        "{atom:?} {name} lane {lane} elem {e}: affine {got:?} != {want:?}"
                    ));
                }
            }
        }
    }
    Ok(())
}
