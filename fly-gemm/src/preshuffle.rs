//! The preshuffled B layout (byte-identical to the reference's, the layout other AMD
//! libraries consume) and its host-side shuffle and inverse.
//!
//! With `KPACK = 16 / size_of::<T>()` elements (16 bytes), for every group of 16 rows of
//! B (`[n, k]` row-major) and every 16-byte chunk `c` along K, the 16 rows x 16 bytes are
//! stored contiguously:
//! `shuffled[n0][c][nl][kp] = B[16 * n0 + nl][c * KPACK + kp]`.
//! It needs `n % 16 == 0` and `k * size_of::<T>() % 64 == 0`.

use flydsl_rt::validate::Call;
use flydsl_rt::Result;

/// Rows of B per preshuffle group.
pub const GROUP_ROWS: usize = 16;
/// Bytes of one preshuffled K chunk.
pub const CHUNK_BYTES: usize = 16;

/// The element index in the preshuffled buffer of `B[row][col]` (`k` columns, elements of
/// `elem_bytes` bytes; the layout rules are checked by `check`).
///
/// ```
/// // bf16: KPACK = 8. Row 17, column 9 of a K = 32 B: group 1, chunk 1, row 1, element 1.
/// assert_eq!(fly_gemm::preshuffle::index(17, 9, 32, 2), 16 * 32 + (1 * 16 + 1) * 8 + 1);
/// ```
pub fn index(row: usize, col: usize, k: usize, elem_bytes: usize) -> usize {
    let kpack = CHUNK_BYTES / elem_bytes;
    let (n0, nl) = (row / GROUP_ROWS, row % GROUP_ROWS);
    let (c, kp) = (col / kpack, col % kpack);
    n0 * GROUP_ROWS * k + (c * GROUP_ROWS + nl) * kpack + kp
}

/// The layout's rules for an `n x k` B of `elem_bytes` elements, as an error of `call`.
pub(crate) fn check(call: &Call<'_>, n: usize, k: usize, elem_bytes: usize) -> Result<()> {
    if !n.is_multiple_of(GROUP_ROWS) {
        return Err(call.error(
            "n",
            n,
            "the preshuffled B layout needs n % 16 == 0 (groups of 16 rows)",
            "pad B with zero rows to a multiple of 16, or pass B plain (BLayout::Plain)",
        ));
    }
    if !(k * elem_bytes).is_multiple_of(64) {
        return Err(call.error(
            "k",
            k,
            format_args!(
                "the preshuffled B layout needs k * {elem_bytes} bytes % 64 == 0 \
                 (k a multiple of {})",
                64 / elem_bytes
            ),
            "pad A and B with zero columns, or pass B plain (BLayout::Plain)",
        ));
    }
    Ok(())
}

fn shuffle<T: Copy>(op: &str, b: &[T], n: usize, k: usize, forward: bool) -> Result<Vec<T>> {
    let call = Call::new(op);
    let eb = std::mem::size_of::<T>();
    if eb == 0 || !CHUNK_BYTES.is_multiple_of(eb) {
        return Err(call.error(
            "T",
            std::any::type_name::<T>(),
            format_args!("elements of {eb} bytes do not pack into 16-byte chunks"),
            "use a 1-, 2-, 4-, 8- or 16-byte element type",
        ));
    }
    check(&call, n, k, eb)?;
    let nk = call.product(n, k)?;
    if b.len() != nk {
        return Err(call.error(
            "b",
            format_args!("a slice of {} elements", b.len()),
            format_args!("B must hold n * k = {n} * {k} = {nk} elements"),
            "pass the whole B",
        ));
    }
    let kpack = CHUNK_BYTES / eb;
    let mut out = b.to_vec();
    // `at` walks the preshuffled order, `src` is the row-major index of the same run.
    let mut at = 0;
    for n0 in 0..n / GROUP_ROWS {
        for c in 0..k / kpack {
            for nl in 0..GROUP_ROWS {
                let src = (n0 * GROUP_ROWS + nl) * k + c * kpack;
                let (from, to) = if forward { (src, at) } else { (at, src) };
                out[to..to + kpack].copy_from_slice(&b[from..from + kpack]);
                at += kpack;
            }
        }
    }
    Ok(out)
}

/// B (`[n, k]` row-major) in the preshuffled layout (see the module docs), for
/// [`BLayout::Preshuffled`](crate::BLayout::Preshuffled).
///
/// Errors: `n % 16 != 0`, `k * size_of::<T>() % 64 != 0`, `b.len() != n * k`.
///
/// ```
/// use fly_gemm::preshuffle::{preshuffle_b, unpreshuffle_b};
/// let (n, k) = (16, 32);
/// let b: Vec<u16> = (0..(n * k) as u16).collect();
/// let s = preshuffle_b(&b, n, k)?;
/// // Chunk 0 of rows 0 and 1, then ...
/// assert_eq!(&s[..10], &[0, 1, 2, 3, 4, 5, 6, 7, 32, 33]);
/// assert_eq!(unpreshuffle_b(&s, n, k)?, b);
/// assert!(preshuffle_b(&b[..8 * 32], 8, 32).is_err()); // n % 16 != 0
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn preshuffle_b<T: Copy>(b: &[T], n: usize, k: usize) -> Result<Vec<T>> {
    shuffle("fly_gemm::preshuffle_b", b, n, k, true)
}

/// The inverse of [`preshuffle_b`]: the row-major `[n, k]` B of a preshuffled buffer.
/// Same errors.
///
/// ```
/// use fly_gemm::preshuffle::{preshuffle_b, unpreshuffle_b};
/// let b: Vec<u8> = (0..=255u8).cycle().take(32 * 64).collect();
/// assert_eq!(unpreshuffle_b(&preshuffle_b(&b, 32, 64)?, 32, 64)?, b);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn unpreshuffle_b<T: Copy>(shuffled: &[T], n: usize, k: usize) -> Result<Vec<T>> {
    shuffle("fly_gemm::unpreshuffle_b", shuffled, n, k, false)
}

/// [`preshuffle_b`] on an ndarray `[n, k]` B (any memory order: read in logical row-major
/// order). The result has shape `[n, k]` in standard (row-major) memory order, and its
/// memory holds the preshuffled layout: hand it to `DeviceBuffer::from_array` as is.
///
/// ```
/// use fly_gemm::preshuffle::{preshuffle_b, preshuffle_b_array, unpreshuffle_b_array};
/// let b = ndarray::Array2::from_shape_fn((16, 32), |(r, c)| (r * 32 + c) as u16);
/// let s = preshuffle_b_array(b.view())?;
/// assert_eq!(s.as_slice().unwrap(), &preshuffle_b(b.as_slice().unwrap(), 16, 32)?[..]);
/// assert_eq!(unpreshuffle_b_array(s.view())?, b);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn preshuffle_b_array<T: Copy>(b: ndarray::ArrayView2<'_, T>) -> Result<ndarray::Array2<T>> {
    array(b, true)
}

/// [`unpreshuffle_b`] on an ndarray `[n, k]` whose row-major order holds a preshuffled B.
pub fn unpreshuffle_b_array<T: Copy>(
    shuffled: ndarray::ArrayView2<'_, T>,
) -> Result<ndarray::Array2<T>> {
    array(shuffled, false)
}

fn array<T: Copy>(b: ndarray::ArrayView2<'_, T>, forward: bool) -> Result<ndarray::Array2<T>> {
    let (n, k) = b.dim();
    let flat: Vec<T> = b.iter().copied().collect();
    let op = if forward {
        "fly_gemm::preshuffle_b_array"
    } else {
        "fly_gemm::unpreshuffle_b_array"
    };
    let out = shuffle(op, &flat, n, k, forward)?;
    ndarray::Array2::from_shape_vec((n, k), out)
        .map_err(|e| Call::new(op).error("b", format_args!("[{n}, {k}]"), e, "pass a 2-D [n, k] B"))
}
