//! The host preshuffle: byte-exact against the kernels.md formula written out independently
//! (nested 4-D indexing of `shuffled[n0][c][nl][kp]`), round trips, and its errors.

use fly_gemm::preshuffle::{index, preshuffle_b, unpreshuffle_b};
use flydsl_rt::half::bf16;

/// `shuffled[n0][c][nl][kp] = B[16 n0 + nl][c KPACK + kp]`, as a 4-D array of dims
/// `[n / 16][k / KPACK][16][KPACK]` flattened row-major.
fn by_formula<T: Copy + Default>(b: &[T], n: usize, k: usize) -> Vec<T> {
    let kpack = 16 / std::mem::size_of::<T>();
    let dims = [n / 16, k / kpack, 16, kpack];
    let mut out = vec![T::default(); n * k];
    for n0 in 0..dims[0] {
        for c in 0..dims[1] {
            for nl in 0..dims[2] {
                for kp in 0..dims[3] {
                    let flat = ((n0 * dims[1] + c) * dims[2] + nl) * dims[3] + kp;
                    out[flat] = b[(16 * n0 + nl) * k + c * kpack + kp];
                }
            }
        }
    }
    out
}

fn bytes<T>(v: &[T]) -> &[u8] {
    // SAFETY: plain-old-data element types (u8, bf16, u32) with no padding; the slice is
    // borrowed for the returned lifetime.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

#[test]
fn byte_exact_against_the_formula_for_1_2_and_4_byte_elements() {
    for (n, k) in [(16, 64), (48, 128), (32, 192)] {
        let b8: Vec<u8> = (0..n * k).map(|i| (i * 7 + i / 251) as u8).collect();
        assert_eq!(preshuffle_b(&b8, n, k).unwrap(), by_formula(&b8, n, k));
        let b16: Vec<bf16> = (0..n * k).map(|i| bf16::from_bits(i as u16)).collect();
        let s16 = preshuffle_b(&b16, n, k).unwrap();
        assert_eq!(bytes(&s16), bytes(&by_formula(&b16, n, k)));
        let b32: Vec<u32> = (0..(n * k) as u32).collect();
        assert_eq!(preshuffle_b(&b32, n, k).unwrap(), by_formula(&b32, n, k));
        // The public index agrees with the formula.
        for (r, c) in [(0, 0), (n - 1, k - 1), (17 % n, 9)] {
            assert_eq!(s16[index(r, c, k, 2)], b16[r * k + c], "({r}, {c})");
        }
    }
}

#[test]
fn round_trips() {
    for (n, k) in [(16, 32), (64, 96), (160, 64)] {
        let b: Vec<u16> = (0..(n * k) as u32)
            .map(|i| i.wrapping_mul(2654435761) as u16)
            .collect();
        let s = preshuffle_b(&b, n, k).unwrap();
        assert_ne!(s, b, "{n}x{k}: the shuffle moved nothing");
        assert_eq!(unpreshuffle_b(&s, n, k).unwrap(), b);
    }
    let b: Vec<u8> = (0..32 * 64).map(|i| i as u8).collect();
    assert_eq!(
        unpreshuffle_b(&preshuffle_b(&b, 32, 64).unwrap(), 32, 64).unwrap(),
        b
    );
}

#[test]
fn bad_shapes_are_errors_naming_the_rule() {
    let b = vec![0u16; 24 * 32];
    let e = preshuffle_b(&b, 24, 32).unwrap_err().to_string();
    assert!(
        e.starts_with("fly_gemm::preshuffle_b: `n` = 24") && e.contains("16"),
        "{e}"
    );
    let b = vec![0u16; 16 * 24];
    let e = unpreshuffle_b(&b, 16, 24).unwrap_err().to_string();
    assert!(
        e.starts_with("fly_gemm::unpreshuffle_b: `k` = 24") && e.contains("64"),
        "{e}"
    );
    let e = preshuffle_b(&vec![0u8; 16 * 64 - 1], 16, 64)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`b`"), "{e}");
    // 1-byte elements need k % 64 == 0.
    assert!(preshuffle_b(&vec![0u8; 16 * 32], 16, 32).is_err());
}

#[test]
fn ndarray_forms_match_the_slice_forms_for_any_memory_order() {
    use fly_gemm::preshuffle::{preshuffle_b_array, unpreshuffle_b_array};
    let (n, k) = (32, 64);
    let b = ndarray::Array2::from_shape_fn((n, k), |(r, c)| (r * 1000 + c) as u32);
    let want = preshuffle_b(b.as_slice().unwrap(), n, k).unwrap();
    let s = preshuffle_b_array(b.view()).unwrap();
    assert_eq!(s.as_slice().unwrap(), &want[..]);
    // A column-major copy of the same logical B shuffles the same.
    let bt = b.t().as_standard_layout().into_owned(); // [k, n] row-major
    let col_major = bt.t(); // [n, k], column-major strides
    assert!(!col_major.is_standard_layout());
    assert_eq!(col_major, b.view());
    assert_eq!(preshuffle_b_array(col_major).unwrap(), s);
    assert_eq!(unpreshuffle_b_array(s.view()).unwrap(), b);
    assert!(preshuffle_b_array(b.slice(ndarray::s![..8, ..]))
        .unwrap_err()
        .to_string()
        .starts_with("fly_gemm::preshuffle_b_array: `n` = 8"));
}
