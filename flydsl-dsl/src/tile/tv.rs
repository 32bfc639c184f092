//! Thread-value layouts: which element of a tile each (thread, value) pair holds.

use super::TileError;
use crate::index::Idx;
use crate::layout::{IndexExpr, Layout};
use crate::val::Val;

/// A thread-value layout over a `rows x cols` tile: `thr` maps a thread id and `val` a value
/// id to the tile's column-major index (`row + rows * col`); thread `t`'s value `v` is the
/// element at `thr(t) + val(v)`. Both are split once into row and column parts
/// ([`Layout::split_rows`]), so a run-time thread id costs only the divisions of its own
/// modes.
///
/// ```
/// use flydsl_dsl::layout::Layout;
/// use flydsl_dsl::tile::Tv;
/// // 4 threads, each holding 2 consecutive columns of one row of a 4 x 2 tile.
/// let tv = Tv::new(Layout::new(4, 1)?, Layout::new(2, 4)?, (4, 2))?;
/// assert_eq!(tv.val_coord(1), (0, 1));
/// assert_eq!(tv.thr_coord_lit(3), (3, 0));
/// # Ok::<(), flydsl_dsl::tile::TileError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tv {
    thr: Layout,
    val: Layout,
    rows: i64,
    cols: i64,
    thr_rc: (Layout, Layout),
    val_rc: (Layout, Layout),
}

impl Tv {
    /// A thread-value layout; `thr(t) + val(v)` must stay inside the `(rows, cols)` tile.
    pub fn new(thr: Layout, val: Layout, (rows, cols): (i64, i64)) -> Result<Tv, TileError> {
        let size = rows.checked_mul(cols).filter(|&s| s > 0).ok_or_else(|| {
            super::invalid(
                "Tv::new",
                "(rows, cols)",
                format!("({rows}, {cols})"),
                "the tile needs at least one row and one column",
            )
        })?;
        let top = thr.cosize() - 1 + val.cosize() - 1;
        if top >= size {
            return Err(super::invalid(
                "Tv::new",
                "thr + val",
                format!("{thr} + {val}"),
                format!("reaches index {top}, outside the {rows} x {cols} tile"),
            ));
        }
        let (thr_rc, val_rc) = (thr.split_rows(rows)?, val.split_rows(rows)?);
        Ok(Tv {
            thr,
            val,
            rows,
            cols,
            thr_rc,
            val_rc,
        })
    }
    /// The thread layout.
    pub fn thr(&self) -> &Layout {
        &self.thr
    }
    /// The value layout.
    pub fn val(&self) -> &Layout {
        &self.val
    }
    /// `(rows, cols)` of the tile.
    pub fn tile(&self) -> (i64, i64) {
        (self.rows, self.cols)
    }
    /// Values per thread.
    pub fn vals(&self) -> i64 {
        self.val.size()
    }
    /// (row, col) offset of value `v` (static).
    pub fn val_coord(&self, v: i64) -> (i64, i64) {
        let r = self.val_rc.0.call(&v).unwrap_or(0);
        let c = self.val_rc.1.call(&v).unwrap_or(0);
        (r, c)
    }
    /// (row, col) of thread `t`'s value 0 for a known `t`.
    pub fn thr_coord_lit(&self, t: i64) -> (i64, i64) {
        let r = self.thr_rc.0.call(&t).unwrap_or(0);
        let c = self.thr_rc.1.call(&t).unwrap_or(0);
        (r, c)
    }
    /// (row, col) of thread `t`'s value 0 (`t` < the thread layout's size).
    pub fn thr_coord(&self, t: Val) -> (Idx, Idx) {
        let t = Idx::Dyn(t);
        let r = self.thr_rc.0.call(&t).unwrap_or(Idx::Lit(0));
        let c = self.thr_rc.1.call(&t).unwrap_or(Idx::Lit(0));
        (r, c)
    }
    /// The largest run `n` (1, 2, 4, 8 or 16, at most `max`) such that values come in groups
    /// of `n` consecutive columns of one row starting at a multiple of `n`, for every thread:
    /// the vector width a copy of this layout can use.
    pub fn col_run(&self, max: i64) -> i64 {
        let nv = self.vals();
        let mut n = 16.min(max);
        while n > 1 {
            let ok = nv % n == 0
                && (0..nv).all(|v| {
                    let (r0, c0) = self.val_coord(v - v % n);
                    let (r, c) = self.val_coord(v);
                    r == r0 && c == c0 + v % n && c0 % n == 0
                })
                && (0..self.thr.size()).all(|t| self.thr_coord_lit(t).1 % n == 0);
            if ok {
                return n;
            }
            n /= 2;
        }
        1
    }
}

/// `a + b` for a run-time and a static index part.
pub(crate) fn add(a: Idx, b: i64) -> Idx {
    a.add(&Idx::Lit(b))
}
