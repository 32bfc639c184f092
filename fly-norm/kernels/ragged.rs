//! The row layout of the ragged vectorised forward paths ([`Path::FastRagged`],
//! [`Path::RowsRagged`]): rows whose length `n` is not a multiple of the vector width `vec`.
//!
//! Row `r` starts at element `r * n`, `p = (r * n) % vec` elements past a 128-bit boundary
//! (the tensors are 16-byte aligned). So a ragged row's vectors are aligned to memory, not
//! to the row: slot `s` covers the row's elements `s * vec - p ..= s * vec - p + vec - 1`,
//! and a lane owns the same slots as on the aligned paths (`idx = (stride * t + j) * vec`,
//! now an index from the aligned start `r * n - p`). Slots wholly inside the row take 128-bit
//! accesses; the at most two partial ones (the row's head and tail) take element accesses,
//! each masked to the row (so nothing outside a row is read or written), the loads reading
//! zeros outside. The weights are column-aligned: a slot's `vec` weights are elements
//! `wq .. wq + vec` (`wq = (vec - p) % vec`) of two consecutive aligned weight vectors,
//! shifted into place in registers ([`realign`]), or, for the slots whose second weight
//! vector would pass the end of the weights, element by element.
//!
//! [`Path::FastRagged`]: crate::config::Path::FastRagged
//! [`Path::RowsRagged`]: crate::config::Path::RowsRagged

use flydsl_dsl::ir::{ScalarType, Type};
use flydsl_dsl::*;

use ScalarType::{I32, I64};

/// One ragged row's slots (see the module docs), for the tiles of one lane.
pub struct Ragged {
    /// The aligned start `base - p` (i64): the slots' view.
    pub abase: Val,
    /// `p` (i32): how far the row starts past a vector boundary.
    pub p: Val,
    /// `(vec - p) % vec` (i32): where a slot's first weight lies in its aligned weight vector.
    pub wq: Val,
    /// Per tile: the row index of the slot's first element (i32, `idx - p`, may be negative).
    pub lo: Vec<Val>,
    /// Per tile: the slot lies wholly in the row.
    pub full: Vec<Val>,
    /// Per tile: `full`, and both aligned weight vectors of the slot lie in `[0, n)`.
    pub wfast: Vec<Val>,
    /// Elements a vector.
    vec: u32,
    /// The row length (i32).
    n: Val,
    /// The row's valid length (i32): `n`, or 0 for the multi-row path's rows past `m`.
    nrow: Val,
}

impl Ragged {
    /// The slots of the row starting at element `base` (i64) for tiles at aligned indices
    /// `idx`, `vec` elements a vector, `n` (i32) elements a row of which `nrow` (i32) are
    /// valid (`n` or 0).
    pub fn new(base: Val, idx: &[Val], vec: u32, n: Val, nrow: Val) -> Ragged {
        let v = vec as i32;
        let p = (base & c_i64(i64::from(v - 1))).cast(I32);
        let abase = base - p.cast(I64);
        let wq = (c_i32(v) - p) & (v - 1);
        let lo: Vec<Val> = idx.iter().map(|&i| i - p).collect();
        let full: Vec<Val> = lo.iter().map(|&l| l.ge(0) & (l + v).le(nrow)).collect();
        // The second weight vector starts at `lo - wq + vec` and is only read when `wq > 0`.
        let wfast = lo
            .iter()
            .zip(&full)
            .map(|(&l, &f)| f & (wq.eq(0) | (l - wq + 2 * v).le(n)))
            .collect();
        Ragged {
            abase,
            p,
            wq,
            lo,
            full,
            wfast,
            vec,
            n,
            nrow,
        }
    }
    /// Whether element `l` of tile `t`'s slot lies in `[0, limit)` of the row.
    fn valid(&self, t: usize, l: u32, limit: Val) -> Val {
        let c = self.lo[t] + l as i32;
        c.ge(0) & c.lt(limit)
    }
    /// Tile `t`'s slot of the row view `row` (at the row's first element) element by element:
    /// the elements in `[0, limit)` of the row, zeros elsewhere; the loads stay within the
    /// row's `n` elements.
    pub fn gather(&self, row: Tensor, t: usize, limit: Val) -> Val {
        let hi = self.n - 1;
        let es: Vec<Val> = (0..self.vec)
            .map(|l| {
                let c = (self.lo[t] + l as i32).max(0i32).min(hi);
                select(self.valid(t, l, limit), row.load(c), 0.0f32)
            })
            .collect();
        vec_of(&es)
    }
    /// [`Ragged::gather`] of the activations (the row's `nrow` valid elements).
    pub fn gather_row(&self, row: Tensor, t: usize) -> Val {
        self.gather(row, t, self.nrow)
    }
    /// Tile `t`'s weights from the weight access `load(index, lanes)` (column indices): two
    /// aligned vectors shifted into place ([`realign`]) where `wfast`, else element by
    /// element (zeros past the row), as the pair `(a, b)` and shift `q` for `realign`.
    /// The loads of every tile issue before any shift: call [`Ragged::weights`].
    fn weight_pair(&self, t: usize, load: &dyn Fn(Val, u32) -> Val) -> Vec<Val> {
        let v = self.vec as i32;
        if_else(
            self.wfast[t],
            || {
                let a0 = self.lo[t] - self.wq;
                let a1 = select(self.wq.eq(0), a0, a0 + v);
                vec![load(a0, self.vec), load(a1, self.vec)]
            },
            || {
                let hi = self.n - 1;
                let es: Vec<Val> = (0..self.vec)
                    .map(|l| {
                        let c = (self.lo[t] + l as i32).max(0i32).min(hi);
                        select(self.valid(t, l, self.n), load(c, 1), 0.0f32)
                    })
                    .collect();
                let e = vec_of(&es);
                vec![e, e]
            },
        )
    }
    /// The weights of tiles `ts` from each access of `loads` (`load(index, lanes)` at
    /// column indices, each index plus `off` when given): `out[k][i]` is access `k`'s
    /// vector for tile `ts[i]`, elements outside the row 0.
    pub fn weights(
        &self,
        ts: &[usize],
        loads: &[&dyn Fn(Val, u32) -> Val],
        off: Option<Val>,
    ) -> Vec<Vec<Val>> {
        let pairs: Vec<Vec<Vec<Val>>> = loads
            .iter()
            .map(|&f| {
                let g = move |i: Val, l: u32| f(off.map_or(i, |o| i + o), l);
                ts.iter().map(|&t| self.weight_pair(t, &g)).collect()
            })
            .collect();
        pairs
            .into_iter()
            .map(|per| {
                per.into_iter()
                    .zip(ts)
                    .map(|(ab, &t)| realign(ab[0], ab[1], select(self.wfast[t], self.wq, 0i32)))
                    .collect()
            })
            .collect()
    }
    /// Store tile `t`'s vector `v` of the activations' dtype: one aligned store at the
    /// slot's index `idx` of the aligned view `aligned` (`align` bytes) when the slot is
    /// full, else the elements in the row one by one into the row view `row`.
    pub fn store(&self, aligned: &dyn Fn(Val), row: Tensor, t: usize, v: Val) {
        if_else(
            self.full[t],
            || {
                aligned(v);
                vec![]
            },
            || {
                for l in 0..self.vec {
                    let c = self.lo[t] + l as i32;
                    if_(self.valid(t, l, self.nrow), || row.store(c, v.at(l)));
                }
                vec![]
            },
        );
    }
    /// Tile `t`'s slot of the row with its elements outside the row replaced by `fill`
    /// (an f32 scalar, cast to the vector's dtype): LayerNorm fills with its shift, so those
    /// elements' deviations are 0.
    pub fn fill(&self, t: usize, v: Val, fill: Val) -> Val {
        let r = if_else(
            self.full[t],
            || vec![v],
            || {
                let f = fill.cast(v.elem());
                let es: Vec<Val> = (0..self.vec)
                    .map(|l| select(self.valid(t, l, self.nrow), v.at(l), f))
                    .collect();
                vec![vec_of(&es)]
            },
        );
        r[0]
    }
}

/// Elements `q .. q + lanes` of the concatenation of the vectors `a` and `b` (`lanes`
/// elements each, 2 or 4 bytes an element, a multiple of 4 bytes in all), `q` a run-time
/// i32 in `0..lanes`: a barrel shift of the 32-bit words (one select a word and stage, one
/// stage a bit of the word shift), then, for 2-byte elements, a half-word funnel shift.
pub fn realign(a: Val, b: Val, q: Val) -> Val {
    let (et, lanes) = (a.elem(), a.lanes());
    let esz = et.size_bytes();
    let nw = lanes * esz / 4;
    let words = |v: Val| v.bitcast(Type::vec(I32, nw)).elems();
    let mut cur: Vec<Val> = [words(a), words(b)].concat();
    let bytes = q * esz as i32;
    let ws = bytes >> 2;
    let half = esz == 2;
    // The words the last stage needs: `nw`, plus one for the funnel shift.
    let need = nw as usize + usize::from(half);
    let mut sh = nw / 2;
    while sh >= 1 {
        let take = (ws & sh as i32).ne(0);
        // This stage's output: what the later (smaller) stages still shift over.
        let len = need + (sh as usize - 1);
        cur = (0..len)
            .map(|k| select(take, cur[k + sh as usize], cur[k]))
            .collect();
        sh /= 2;
    }
    let out: Vec<Val> = (0..nw as usize)
        .map(|i| {
            if half {
                let odd = (bytes & 2).ne(0);
                select(odd, cur[i].lshr(16) | (cur[i + 1] << 16), cur[i])
            } else {
                cur[i]
            }
        })
        .collect();
    vec_of(&out).bitcast(Type::vec(et, lanes))
}
