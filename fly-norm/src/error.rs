//! Argument validation shared by the safe entry points. Errors are
//! [`flydsl_rt::Error::InvalidArgument`] whose message names the operation, the bad value and
//! the fix.

use flydsl_rt::{DeviceBuffer, DeviceRepr, Error, Result};

/// An invalid-argument error of operation `op`.
pub(crate) fn invalid(op: &str, reason: String) -> Error {
    Error::InvalidArgument {
        op: format!("fly_norm::{op}"),
        reason,
    }
}

/// `m * n` as an element count, with m and n within the kernels' i32 scalars.
pub(crate) fn shape(op: &str, m: usize, n: usize) -> Result<usize> {
    if n == 0 {
        return Err(invalid(
            op,
            "n = 0: rows must have at least one element (n >= 1)".into(),
        ));
    }
    let (ml, nl) = (crate::config::MAX_ROWS, crate::config::MAX_COLS);
    if m > ml || n > nl {
        return Err(invalid(
            op,
            format!("shape ({m}, {n}) exceeds the kernels' limit of {ml} rows and {nl} columns; split the call"),
        ));
    }
    m.checked_mul(n)
        .ok_or_else(|| invalid(op, format!("m * n = {m} * {n} overflows usize")))
}

/// `eps` must be finite and > 0.
pub(crate) fn eps(op: &str, eps: f32) -> Result<()> {
    if eps.is_finite() && eps > 0.0 {
        Ok(())
    } else {
        Err(invalid(
            op,
            format!("eps = {eps} must be finite and > 0 (e.g. 1e-5 or 1e-6)"),
        ))
    }
}

/// `buf` must hold exactly `want` elements.
pub(crate) fn len<T: DeviceRepr>(
    op: &str,
    name: &str,
    buf: &DeviceBuffer<T>,
    want: usize,
    what: &str,
) -> Result<()> {
    if buf.len() == want {
        Ok(())
    } else {
        Err(invalid(
            op,
            format!("`{name}` has {} elements but must have {what} = {want}; pass a buffer of {want} elements", buf.len()),
        ))
    }
}
