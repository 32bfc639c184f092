//! Layouts recovered from integer functions, and the split of a layout into a 2-D tile's
//! row and column parts.

use super::base::Layout;
use super::error::LayoutError;

impl Layout {
    /// The layout with domain `[0, n)` that equals `f` there, if `f` is a layout function
    /// (a sum of `digit_i * stride_i` over a mixed-radix split of its argument). Modes are
    /// found greedily from `f(1), f(p), ...` and the result is checked at every point, so a
    /// function that is not a layout is refused, never approximated.
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// // mma.sync m16n8k16: lane l holds row l / 4 and column pair 2 * (l % 4).
    /// let l = Layout::fit(32, |l| l / 4 + 16 * 2 * (l % 4))?;
    /// assert_eq!(l.to_string(), "(4,8):(32,1)");
    /// assert!(Layout::fit(4, |i| i * i).is_err());
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn fit(n: i64, f: impl Fn(i64) -> i64) -> Result<Layout, LayoutError> {
        if n < 1 {
            return Err(LayoutError::BadArgument {
                what: "Layout::fit domain size n",
                value: n,
                fix: "the domain [0, n) must hold at least one point",
            });
        }
        let mut leaves: Vec<(i64, i64)> = Vec::new();
        let mut p = 1i64;
        while p < n {
            let rest = n / p;
            let d = f(p);
            let mut j = 2;
            while j < rest && f(j * p) == j * d {
                j += 1;
            }
            // The largest divisor of the remaining extent that the run covers.
            let s = (2..=j.min(rest))
                .rev()
                .find(|s| rest % s == 0)
                .unwrap_or(rest);
            leaves.push((s, d));
            p *= s;
        }
        let l = Layout::from_leaves(&leaves)?;
        for i in 0..n {
            if l.call(&i)? != f(i) - f(0) {
                return Err(LayoutError::BadArgument {
                    what: "Layout::fit: the function at this point differs from every layout",
                    value: i,
                    fix: "pass a function that is a sum of mixed-radix digits times strides \
                          with f(0) = 0",
                });
            }
        }
        if f(0) != 0 {
            return Err(LayoutError::BadArgument {
                what: "Layout::fit: f(0)",
                value: f(0),
                fix: "a layout maps 0 to 0; subtract the offset first",
            });
        }
        Ok(l)
    }

    /// Splits a layout into a column-major `rows`-row tile's index space (`row + rows *
    /// col`) into its row part and its column part: two layouts with this layout's domain
    /// with `self(i) == row(i) + rows * col(i)` and `row(i) < rows` for every `i`. A mode
    /// that crosses from rows into columns is split in two. Run-time coordinates then need
    /// no division by `rows`.
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// // 8 values, 2 rows of a 16-row tile then 4 columns: offsets 0,1,16,17,...
    /// let l = Layout::new((2, 4), (1, 16))?;
    /// let (r, c) = l.split_rows(16)?;
    /// assert_eq!((r.call(&5i64)?, c.call(&5i64)?), (1, 2));
    /// // One mode of 32 spanning two 16-row columns.
    /// let (r, c) = Layout::new(32, 1)?.split_rows(16)?;
    /// assert_eq!((r.call(&20i64)?, c.call(&20i64)?), (4, 1));
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn split_rows(&self, rows: i64) -> Result<(Layout, Layout), LayoutError> {
        let bad = |value: i64| LayoutError::BadArgument {
            what: "Layout::split_rows: a mode stride that neither stays in one column nor \
                   steps whole columns",
            value,
            fix: "use tile layouts whose modes step by divisors of the row count or by whole \
                  columns",
        };
        if rows < 1 {
            return Err(LayoutError::BadArgument {
                what: "Layout::split_rows rows",
                value: rows,
                fix: "the tile needs at least one row",
            });
        }
        let (mut r, mut c) = (Vec::new(), Vec::new());
        for (s, d) in self.leaves() {
            if d % rows == 0 {
                r.push((s, 0));
                c.push((s, d / rows));
            } else if (s - 1) * d < rows {
                r.push((s, d));
                c.push((s, 0));
            } else if d > 0 && rows % d == 0 && s % (rows / d) == 0 {
                let inner = rows / d;
                r.extend([(inner, d), (s / inner, 0)]);
                c.extend([(inner, 0), (s / inner, 1)]);
            } else {
                return Err(bad(d));
            }
        }
        let (r, c) = (Layout::from_leaves(&r)?, Layout::from_leaves(&c)?);
        for i in 0..self.size() {
            let (ri, ci) = (r.call(&i)?, c.call(&i)?);
            if ri >= rows || ri + rows * ci != self.call(&i)? {
                return Err(bad(i));
            }
        }
        Ok((r, c))
    }
}
