//! The accumulator-to-operand re-layout (FlashAttention's P): C of one MMA as A of the next.

use super::mma::AtomTv;
use super::TileError;
use crate::index::Idx;
use crate::layout::{composition, right_inverse, IndexExpr, Layout};
use crate::val::{select, vec_of, Val};
use flydsl_ir::{MmaAtom, Target};

/// Where an A operand element comes from: lane `lane`'s element `reg` of C fragment `atom`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// Source lane.
    pub lane: u32,
    /// Element of that lane's C fragment.
    pub reg: u32,
    /// Which C fragment (C atoms side by side along N).
    pub atom: u32,
}

/// The C-to-A map of one atom, derived with the layout algebra: over a strip of `M` rows and
/// `L = lcm(N, K)` columns, C is `L / N` atoms side by side and A is `L / K` atoms along K.
/// Both are layouts from their (lane, element, atom) slots to the strip's column-major index;
/// the map is `right_inverse(C) ∘ A`: A slot to the C slot holding the same element.
#[derive(Clone, Debug)]
pub struct ReLayout {
    map: Layout,
    wave: u32,
    na: u32,
    nc: u32,
    c_atoms: u32,
    a_atoms: u32,
}

/// Derive the C-to-A map of `atom` on `target`.
///
/// ```
/// use flydsl_dsl::tile::c_to_a_map;
/// use flydsl_dsl::ir::{MmaAtom, Target};
/// // mma.sync: two 16x8 C tiles make one 16x16 A tile, lane by lane (FlashAttention-2).
/// let r = c_to_a_map(MmaAtom::MmaM16N8K16Bf16, Target::Sm90)?;
/// assert_eq!((r.c_atoms(), r.a_atoms(), r.cross_lane()), (2, 1, false));
/// // MFMA: C holds columns per lane, A rows per lane: a cross-lane exchange.
/// assert!(c_to_a_map(MmaAtom::Mfma16x16x16Bf16, Target::Gfx942)?.cross_lane());
/// # Ok::<(), flydsl_dsl::tile::TileError>(())
/// ```
pub fn c_to_a_map(atom: MmaAtom, target: Target) -> Result<ReLayout, TileError> {
    let tv = AtomTv::new(atom, target)?;
    let (m, n, k) = atom.shape();
    let (m, n, k) = (m as i64, n as i64, k as i64);
    let l = lcm(n, k);
    let (c_atoms, a_atoms) = (l / n, l / k);
    let strip = |t: &super::Tv, atoms: i64, step: i64| -> Result<Layout, TileError> {
        let mut leaves = t.thr().flatten().modes();
        leaves.extend(t.val().flatten().modes());
        leaves.push(Layout::new(atoms, step)?);
        Ok(Layout::concat(&leaves)?)
    };
    let c = strip(tv.c(), c_atoms, m * n)?;
    let a = strip(tv.a(), a_atoms, m * k)?;
    let inv = right_inverse(&c)?;
    if inv.size() != m * l {
        return Err(super::invalid(
            "c_to_a_map",
            "atom",
            format!("{atom:?}"),
            format!("its C layout {c} is not a bijection onto the {m} x {l} strip"),
        ));
    }
    let map = match composition(&inv, &a) {
        Ok(map) => map,
        // Not expressible as one composition: fall back to fitting the pointwise map.
        Err(_) => Layout::fit(a.size(), |i| {
            inv.call(&a.call(&i).unwrap_or(0)).unwrap_or(0)
        })?,
    };
    let (na, _, nc) = atom.frag_lanes(target.wave_size());
    let r = ReLayout {
        map,
        wave: target.wave_size(),
        na,
        nc,
        c_atoms: c_atoms as u32,
        a_atoms: a_atoms as u32,
    };
    // The derivation must be exact: C(map(i)) == A(i) everywhere.
    for i in 0..a.size() {
        if c.call(&r.map.call(&i)?)? != a.call(&i)? {
            return Err(super::invalid(
                "c_to_a_map",
                "atom",
                format!("{atom:?}"),
                format!("derived map wrong at A slot {i}"),
            ));
        }
    }
    Ok(r)
}

fn lcm(a: i64, b: i64) -> i64 {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    a / gcd(a, b) * b
}

impl ReLayout {
    /// The map as a layout from the A slot `lane + wave * (e + na * atom)` to the C slot
    /// `lane + wave * (reg + nc * atom)`.
    pub fn layout(&self) -> &Layout {
        &self.map
    }
    /// C fragments consumed (side by side along N).
    pub fn c_atoms(&self) -> u32 {
        self.c_atoms
    }
    /// A fragments produced (along K).
    pub fn a_atoms(&self) -> u32 {
        self.a_atoms
    }
    /// The C slot feeding element `e` of lane `lane` of A fragment `atom`.
    pub fn src(&self, lane: u32, e: u32, atom: u32) -> Slot {
        let i = (lane + self.wave * (e + self.na * atom)) as i64;
        let f = self.map.call(&i).unwrap_or(0) as u32;
        let (lane, rest) = (f % self.wave, f / self.wave);
        Slot {
            lane,
            reg: rest % self.nc,
            atom: rest / self.nc,
        }
    }
    /// Whether any element moves between lanes (a shuffle), rather than only between the
    /// registers of one lane.
    pub fn cross_lane(&self) -> bool {
        self.slots().any(|(l, _, _, s)| s.lane != l)
    }
    fn slots(&self) -> impl Iterator<Item = (u32, u32, u32, Slot)> + '_ {
        (0..self.a_atoms).flat_map(move |b| {
            (0..self.na)
                .flat_map(move |e| (0..self.wave).map(move |l| (l, e, b, self.src(l, e, b))))
        })
    }
}

/// Turn `c` (the [`ReLayout::c_atoms`] C fragments of one M strip) into the A fragments
/// that hold the same elements, converted to the atom's input type (FlashAttention's
/// `P = softmax(S)` fed to `P * V`). Lane-preserving atoms cost only register moves; the
/// others read each element from its lane with [`shuffle_idx`](crate::shuffle_idx), one
/// shuffle per distinct source register, lane-dependent ones picked with selects.
pub fn c_to_a(r: &ReLayout, atom: MmaAtom, c: &[Val]) -> Vec<Val> {
    if c.len() != r.c_atoms as usize {
        super::fail(super::invalid(
            "c_to_a",
            "c.len()",
            c.len(),
            format!("{atom:?} needs {} C fragments", r.c_atoms),
        ));
        return vec![];
    }
    let in_ty = atom.in_type(crate::context::target());
    let lane = crate::val::lane_id();
    let cross = r.cross_lane();
    (0..r.a_atoms)
        .map(|b| {
            let elems: Vec<Val> = (0..r.na)
                .map(|e| {
                    let mut cands: Vec<(u32, u32)> = (0..r.wave)
                        .map(|l| {
                            let s = r.src(l, e, b);
                            (s.atom, s.reg)
                        })
                        .collect();
                    cands.sort_unstable();
                    cands.dedup();
                    let flat = Idx::Dyn(lane + (r.wave * (e + r.na * b)) as i32);
                    let f = r.map.call(&flat).unwrap_or(Idx::Lit(0));
                    let src_lane = f.rem_lit(r.wave as i64).val();
                    let slot = f.div_lit(r.wave as i64).val();
                    let pick = |(j, v): (u32, u32)| {
                        let x = c[j as usize].at(v);
                        if cross {
                            crate::wave::shuffle_idx(x, src_lane)
                        } else {
                            x
                        }
                    };
                    let mut out = pick(cands[0]);
                    for &(j, v) in &cands[1..] {
                        out = select(slot.eq((v + r.nc * j) as i32), pick((j, v)), out);
                    }
                    out.cast(in_ty)
                })
                .collect();
            vec_of(&elems)
        })
        .collect()
}
