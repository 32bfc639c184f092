//! Shape limits of the safe entry points. The checks use the workspace's argument checks
//! ([`flydsl_rt::validate::Call`]), whose errors name the public function, the argument, its
//! value, the rule and the fix.

use flydsl_rt::validate::Call;
use flydsl_rt::{Element, Result};

/// Largest `m` accepted. The kernels count rows in i32, a block stepping by the grid
/// (at most [`crate::plan::MAX_GRID`] blocks), so `m + MAX_GRID` must stay within i32.
///
/// ```
/// use fly_softmax::{plan::MAX_GRID, validate::MAX_M};
/// assert!(MAX_M > 1 << 30);
/// assert!(MAX_M as i64 + MAX_GRID as i64 <= i32::MAX as i64);
/// ```
pub const MAX_M: usize = i32::MAX as usize - crate::plan::MAX_GRID as usize;
/// Largest `n` accepted for any dtype (column indices are 32-bit within a row; rows are offset
/// in 64 bits). A row must also stay below 2 GiB: see [`max_n`].
///
/// ```
/// assert!(fly_softmax::validate::max_n(2) <= fly_softmax::validate::MAX_N);
/// ```
pub const MAX_N: usize = i32::MAX as usize - 65536;

/// Largest `n` for elements of `elem_bytes` bytes: a row's byte offsets must fit the 32-bit
/// offsets of AMD buffer instructions (`n * elem_bytes <= i32::MAX`), and [`MAX_N`].
///
/// ```
/// assert_eq!(fly_softmax::validate::max_n(4), (i32::MAX / 4) as usize);
/// ```
pub const fn max_n(elem_bytes: usize) -> usize {
    let by_bytes = i32::MAX as usize / elem_bytes;
    if by_bytes < MAX_N {
        by_bytes
    } else {
        MAX_N
    }
}

/// Check `m`, `n` for elements of `T` and return `m * n`.
pub(crate) fn shape<T: Element>(call: Call<'_>, m: usize, n: usize) -> Result<usize> {
    let max_n = max_n(T::DTYPE.bytes() as usize);
    if n == 0 {
        return Err(call.error(
            "n",
            0,
            "a softmax row needs at least one element",
            "pass n >= 1 (an empty batch is m = 0)",
        ));
    }
    call.at_most(
        "n",
        n,
        max_n,
        format_args!(
            "rows of {} are limited to that length; split the rows",
            T::DTYPE
        ),
    )?;
    call.at_most("m", m, MAX_M, "launch the rows in chunks")?;
    call.product(m, n)
}
