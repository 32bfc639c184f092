//! Coalesce: the simplest flat layout with the same 1-D function.

use super::base::Layout;

impl Layout {
    /// The same function on `[0, size)` with the fewest flat modes: size-1 modes are dropped
    /// and a mode whose stride is the previous mode's `shape * stride` is merged into it.
    /// The result has depth <= 1 (`1:0` if every mode has size 1).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// // CuTe docs ("Coalesce"): (2,(1,6)):(1,(6,2)) coalesces to 12:1.
    /// let l = Layout::new((2, (1, 6)), (1, (6, 2)))?;
    /// assert_eq!(l.coalesce().to_string(), "12:1");
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn coalesce(&self) -> Layout {
        let merged = coalesce_leaves(&self.leaves());
        // Merging keeps size and never increases the cosize, so this cannot fail.
        Layout::from_leaves(&merged).unwrap_or_else(|_| self.flatten())
    }

    /// Coalesces each top-level mode on its own, keeping the rank (CuTe's
    /// `coalesce(layout, Step<_1,_1,...>{})`).
    ///
    /// ```
    /// use flydsl_dsl::layout::Layout;
    /// // CuTe docs ("By-mode Coalesce"): (2,(1,6)):(1,(6,2)) becomes (2,6):(1,2).
    /// let l = Layout::new((2, (1, 6)), (1, (6, 2)))?;
    /// assert_eq!(l.coalesce_modes().to_string(), "(2,6):(1,2)");
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn coalesce_modes(&self) -> Layout {
        if self.shape().is_int() {
            return self.coalesce();
        }
        let modes: Vec<Layout> = self.modes().iter().map(Layout::coalesce).collect();
        Layout::concat(&modes).unwrap_or_else(|_| self.clone())
    }
}

/// Merges adjacent leaf modes `(s0,d0) ++ (s1,s0*d0)` and drops size-1 modes.
pub(crate) fn coalesce_leaves(leaves: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(leaves.len());
    for &(s, d) in leaves {
        if s == 1 {
            continue;
        }
        match out.last_mut() {
            Some((ps, pd)) if ps.checked_mul(*pd) == Some(d) => *ps *= s,
            _ => out.push((s, d)),
        }
    }
    out
}
