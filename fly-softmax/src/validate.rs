//! Argument checks of the safe entry points. Every error names the bad value and the fix.

use crate::element::Element;
use flydsl_rt::{DeviceBuffer, Error, Result};

/// Largest `m` accepted (row indices are 32-bit in the kernels).
///
/// ```
/// assert!(fly_softmax::validate::MAX_M > 1 << 30);
/// ```
pub const MAX_M: usize = i32::MAX as usize - 1024;
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

/// An argument error of operation `op`.
pub(crate) fn bad(op: &str, reason: String) -> Error {
    Error::InvalidArgument {
        op: op.to_string(),
        reason,
    }
}

/// Check `m`, `n` for elements of `T` and return `m * n`.
pub(crate) fn shape<T: Element>(op: &str, m: usize, n: usize) -> Result<usize> {
    let max_n = max_n(T::DTYPE.size() as usize);
    if n == 0 {
        return Err(bad(
            op,
            "n = 0: a softmax row needs at least one element; pass n >= 1 (an empty batch is \
             m = 0)"
                .into(),
        ));
    }
    if n > max_n {
        return Err(bad(
            op,
            format!(
                "n = {n} exceeds the supported maximum {max_n} for {}; split the rows",
                T::DTYPE.name()
            ),
        ));
    }
    if m > MAX_M {
        return Err(bad(
            op,
            format!("m = {m} exceeds the supported maximum {MAX_M}; launch the rows in chunks"),
        ));
    }
    m.checked_mul(n).ok_or_else(|| {
        bad(
            op,
            format!("m * n = {m} * {n} overflows usize; use a smaller shape"),
        )
    })
}

/// Check that buffer `name` holds exactly `len` elements.
pub(crate) fn len<T: Element>(
    op: &str,
    name: &str,
    b: &DeviceBuffer<T>,
    len: usize,
    m: usize,
    n: usize,
) -> Result<()> {
    if b.len() != len {
        return Err(bad(
            op,
            format!(
                "buffer `{name}` has {} elements but m * n = {m} * {n} = {len}; pass a buffer of \
                 exactly m * n elements (row-major [m, n])",
                b.len()
            ),
        ));
    }
    Ok(())
}
