//! The lane-to-element tables of the matrix atoms a kernel uses, built once per workgroup.

use crate::mma_layout::{a_coord, b_coord, c_coord, frag_lens};
use flydsl_ir::{MmaAtom, Target};

/// Coordinates of every (lane, element) slot of one atom's A, B and C fragments.
pub(crate) struct MmaTables {
    pub atom: MmaAtom,
    pub a: Vec<(usize, usize)>,
    pub b: Vec<(usize, usize)>,
    pub c: Vec<(usize, usize)>,
}

impl MmaTables {
    pub fn new(atom: MmaAtom, target: Target) -> MmaTables {
        let ws = target.wave_size() as usize;
        let (la, lb, lc) = frag_lens(atom, target);
        let tab = |len: usize, f: fn(MmaAtom, Target, usize, usize) -> (usize, usize)| {
            (0..ws * len)
                .map(|x| f(atom, target, x / len, x % len))
                .collect()
        };
        MmaTables {
            atom,
            a: tab(la, a_coord),
            b: tab(lb, b_coord),
            c: tab(lc, c_coord),
        }
    }
}
