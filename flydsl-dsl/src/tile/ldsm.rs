//! `ldmatrix` for matrix-atom operands, derived from the atom's thread-value layout: an
//! operand fragment of `2 * count` 16-bit values per lane is one `ldmatrix.x{count}` exactly
//! when its values come in pairs that form the `ldmatrix` fragment of `count` 8 x 8 matrices
//! (see `NvOp::LdMatrix`): value `2 i + h` of lane `l` is element `(l / 4, 2 (l % 4) + h)`
//! of matrix `i`, whose rows are 8 consecutive, 8-aligned columns of the tile.

use super::tv::Tv;
use flydsl_ir::{NvOp, Target, Type};

/// The `ldmatrix` plan of an operand: its matrix count and each matrix's top-left tile
/// coordinate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LdsmPlan {
    /// Matrices (1, 2 or 4).
    pub count: u32,
    /// (row, col) of each matrix's element (0, 0).
    pub bases: Vec<(i64, i64)>,
}

/// The plan for operand layout `tv` of type `ty` on `target`, if `ldmatrix` loads it.
pub(crate) fn plan(tv: &Tv, ty: Type, target: Target) -> Option<LdsmPlan> {
    if target != Target::Sm90 || ty.elem()?.size_bytes() != 2 {
        return None;
    }
    let nv = tv.vals();
    let count = nv / 2;
    if nv % 2 != 0 || ![1, 2, 4].contains(&count) || tv.thr().size() != 32 {
        return None;
    }
    let at = |l: i64, v: i64| {
        let (r0, c0) = tv.thr_coord_lit(l);
        let (r, c) = tv.val_coord(v);
        (r0 + r, c0 + c)
    };
    let bases: Vec<(i64, i64)> = (0..count).map(|i| at(0, 2 * i)).collect();
    let fits = bases.iter().all(|&(_, c)| c % 8 == 0)
        && (0..32).all(|l| {
            (0..nv).all(|v| {
                let (br, bc) = bases[(v / 2) as usize];
                at(l, v) == (br + l / 4, bc + 2 * (l % 4) + v % 2)
            })
        });
    fits.then_some(LdsmPlan {
        count: count as u32,
        bases,
    })
}

impl LdsmPlan {
    /// The fragment type `ldmatrix` gives.
    pub fn frag_type(&self) -> Type {
        NvOp::matrix_frag_type(self.count)
    }
}
