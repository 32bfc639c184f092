//! The 8-bit input types of [`crate::gemm_scaled`] and the host-side per-row quantization
//! that produces them: `scale[r] = amax(x[r, :]) / Q::MAX` (an all-zero row gets 1; the
//! scale is at least the smallest normal f32, so a row of tiny values never gets a scale of
//! 0 or a subnormal one), and `q[r, c] = Q::quantize(x[r, c] / scale[r])`, so
//! `x[r, c] ~ q[r, c] * scale[r]`.
//!
//! Quantize the activations A per row (per token: `scale_a`) and the weight B per row of
//! `[n, k]` (per output channel: `scale_b`); [`crate::gemm_scaled`] then computes
//! `(A_q * B_q^T) * scale_a[m] * scale_b[n]`, which approximates `A * B^T`.
//!
//! ```
//! use fly_gemm::{dequantize_rows, quantize_rows};
//! use flydsl_rt::F8E4M3FN;
//! let x = [7.0f32, -3.5, 1.75, 0.0, 0.0, 0.0];
//! let (q, scales) = quantize_rows::<F8E4M3FN>(&x, 2, 3)?;
//! assert_eq!(scales, [7.0 / 448.0, 1.0]); // row 1 is all zero: scale 1
//! assert_eq!(q[0].to_bits(), 0x7E); // 448, the largest e4m3fn value
//! assert_eq!(dequantize_rows(&q, &scales, 2, 3)?, x); // exact for these values
//! let (qi, si) = quantize_rows::<i8>(&[254.0, -127.0, 2.0], 1, 3)?;
//! assert_eq!((qi, si), (vec![127, -64, 1], vec![2.0]));
//! # Ok::<(), flydsl_rt::Error>(())
//! ```

use crate::table::Quant;
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceRepr, Result, F8E4M3FN, F8E4M3FNUZ};

mod sealed {
    use crate::kernels::{generated, Portable8Launchers};
    use flydsl_rt::PerElement;

    /// Seals [`super::QuantElement`] and gives each input type its portable-kernel table.
    pub trait Sealed: flydsl_rt::DeviceRepr + 'static {
        /// The 8-bit portable kernels reading this type (per output dtype).
        fn portable8() -> &'static PerElement<Portable8Launchers<Self>>;
    }
    impl Sealed for flydsl_rt::F8E4M3FN {
        fn portable8() -> &'static PerElement<Portable8Launchers<Self>> {
            &generated::PORTABLE8_E4M3FN
        }
    }
    impl Sealed for flydsl_rt::F8E4M3FNUZ {
        fn portable8() -> &'static PerElement<Portable8Launchers<Self>> {
            &generated::PORTABLE8_E4M3FNUZ
        }
    }
    impl Sealed for i8 {
        fn portable8() -> &'static PerElement<Portable8Launchers<Self>> {
            &generated::PORTABLE8_I8
        }
    }
}

/// An 8-bit input element of [`crate::gemm_scaled`]: `flydsl_rt::F8E4M3FN` (OCP fp8, f32
/// accumulation; gfx950, gfx1201, gfx1250, sm90), `flydsl_rt::F8E4M3FNUZ` (AMD fp8 FNUZ,
/// f32 accumulation; gfx942, whose matrix instructions read this format) or `i8` (exact
/// s32 accumulation; every target). Sealed.
///
/// ```
/// use fly_gemm::QuantElement;
/// use flydsl_rt::{F8E4M3FN, F8E4M3FNUZ};
/// assert_eq!(F8E4M3FN::quantize(1.0).to_bits(), 0x38);
/// assert_eq!(F8E4M3FN::quantize(1e9).dequantize(), 448.0); // saturates
/// assert_eq!(F8E4M3FNUZ::quantize(1.0).0, 0x40); // bias 8
/// assert_eq!(F8E4M3FNUZ::quantize(-1e9).dequantize(), -240.0);
/// assert_eq!(i8::quantize(-300.0), -127);
/// assert_eq!(i8::quantize(2.5), 2); // ties to even
/// ```
pub trait QuantElement: DeviceRepr + sealed::Sealed {
    /// Which kernel family reads it.
    const QUANT: Quant;
    /// The largest magnitude [`QuantElement::quantize`] produces (448 for e4m3fn, 240 for
    /// e4m3fnuz, 127 for int8: the symmetric range, -128 is never produced).
    const MAX: f32;
    /// The nearest value to `x`: round to nearest even, saturating at `±MAX`; NaN gives
    /// fp8 NaN and int8 0.
    fn quantize(x: f32) -> Self;
    /// The exact value.
    fn dequantize(self) -> f32;
}

impl QuantElement for F8E4M3FN {
    const QUANT: Quant = Quant::Fp8;
    const MAX: f32 = 448.0;
    fn quantize(x: f32) -> Self {
        F8E4M3FN(flydsl_rt::sim::fp8::f32_to_e4m3fn(x))
    }
    fn dequantize(self) -> f32 {
        flydsl_rt::sim::fp8::e4m3fn_to_f32(self.0)
    }
}

impl QuantElement for F8E4M3FNUZ {
    const QUANT: Quant = Quant::Fp8Fnuz;
    const MAX: f32 = 240.0;
    fn quantize(x: f32) -> Self {
        F8E4M3FNUZ(flydsl_rt::sim::fp8::f32_to_e4m3fnuz(x))
    }
    fn dequantize(self) -> f32 {
        flydsl_rt::sim::fp8::e4m3fnuz_to_f32(self.0)
    }
}

impl QuantElement for i8 {
    const QUANT: Quant = Quant::Int8;
    const MAX: f32 = 127.0;
    fn quantize(x: f32) -> Self {
        if x.is_nan() {
            0
        } else {
            x.round_ties_even().clamp(-127.0, 127.0) as i8
        }
    }
    fn dequantize(self) -> f32 {
        self as f32
    }
}

fn check_shape(call: &Call, what: &str, len: usize, rows: usize, cols: usize) -> Result<()> {
    let want = call.product(rows, cols)?;
    if len != want {
        return Err(call.error(
            what,
            format_args!("{len} elements"),
            format_args!("rows * cols = {rows} * {cols} = {want} elements expected"),
            "pass a row-major [rows, cols] slice",
        ));
    }
    Ok(())
}

/// Quantize the row-major `[rows, cols]` matrix `x` per row into `q` (same shape) and
/// `scales` (`rows`): `scale = amax / Q::MAX` (0 -> 1), `q = Q::quantize(x / scale)`.
///
/// Errors (nothing written): lengths other than `rows * cols` (`x`, `q`) or `rows`
/// (`scales`), a NaN or infinite value in `x` (its scale would be meaningless).
pub fn quantize_rows_into<Q: QuantElement>(
    x: &[f32],
    rows: usize,
    cols: usize,
    q: &mut [Q],
    scales: &mut [f32],
) -> Result<()> {
    let call = Call::new("fly_gemm::quantize_rows_into");
    check_shape(&call, "x", x.len(), rows, cols)?;
    check_shape(&call, "q", q.len(), rows, cols)?;
    check_shape(&call, "scales", scales.len(), rows, 1)?;
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(call.error(
            "x",
            format_args!("x[{}][{}] = {}", i / cols.max(1), i % cols.max(1), x[i]),
            "every value must be finite",
            "replace NaN / infinite values before quantizing",
        ));
    }
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let amax = row.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        // amax / MAX underflows (to 0 or a subnormal) for rows below MAX * 2^-126: clamp
        // to the smallest normal, where x / scale still stays within +-MAX.
        let scale = if amax == 0.0 {
            1.0
        } else {
            (amax / Q::MAX).max(f32::MIN_POSITIVE)
        };
        scales[r] = scale;
        for (d, &v) in q[r * cols..(r + 1) * cols].iter_mut().zip(row) {
            *d = Q::quantize(v / scale);
        }
    }
    Ok(())
}

/// [`quantize_rows_into`] returning new `(q, scales)` vectors.
///
/// ```
/// let (q, s) = fly_gemm::quantize_rows::<i8>(&[0.0, 0.0], 1, 2)?;
/// assert_eq!((q, s), (vec![0, 0], vec![1.0]));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn quantize_rows<Q: QuantElement + Default + Clone>(
    x: &[f32],
    rows: usize,
    cols: usize,
) -> Result<(Vec<Q>, Vec<f32>)> {
    let call = Call::new("fly_gemm::quantize_rows");
    check_shape(&call, "x", x.len(), rows, cols)?;
    let mut q = vec![Q::default(); x.len()];
    // `rows` scales are allocated even for `cols = 0` (then `x` is empty): fail cleanly.
    let mut s = Vec::new();
    s.try_reserve_exact(rows).map_err(|_| {
        call.error(
            "rows",
            rows,
            "one f32 scale per row must fit in memory",
            "quantize fewer rows per call",
        )
    })?;
    s.resize(rows, 0.0);
    quantize_rows_into(x, rows, cols, &mut q, &mut s)?;
    Ok((q, s))
}

/// The inverse of [`quantize_rows`]: `x[r][c] = q[r][c] * scales[r]` for the row-major
/// `[rows, cols]` matrix `q`.
///
/// Errors: lengths other than `rows * cols` (`q`) or `rows` (`scales`).
pub fn dequantize_rows<Q: QuantElement>(
    q: &[Q],
    scales: &[f32],
    rows: usize,
    cols: usize,
) -> Result<Vec<f32>> {
    let call = Call::new("fly_gemm::dequantize_rows");
    check_shape(&call, "q", q.len(), rows, cols)?;
    check_shape(&call, "scales", scales.len(), rows, 1)?;
    Ok(q.iter()
        .enumerate()
        .map(|(i, v)| v.dequantize() * scales[i / cols.max(1)])
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_e4m3fn_code_round_trips_and_int8_is_symmetric() {
        for b in 0..=255u8 {
            let v = F8E4M3FN(b).dequantize();
            if v.is_nan() {
                assert!(F8E4M3FN::quantize(v).dequantize().is_nan());
            } else if v != 0.0 {
                assert_eq!(F8E4M3FN::quantize(v).to_bits(), b, "code {b:#x}");
            }
        }
        for i in -127..=127i8 {
            assert_eq!(i8::quantize(i as f32), i);
        }
        assert_eq!(i8::quantize(-128.0), -127);
        assert_eq!(i8::quantize(f32::NAN), 0);
    }

    #[test]
    fn rows_reach_the_max_and_round_trip_within_half_a_step() {
        let (rows, cols) = (5, 37);
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * (1 + i / cols) as f32 * 1e-3)
            .collect();
        let (q, s) = quantize_rows::<i8>(&x, rows, cols).unwrap();
        let back = dequantize_rows(&q, &s, rows, cols).unwrap();
        for r in 0..rows {
            let row = &q[r * cols..(r + 1) * cols];
            assert_eq!(row.iter().map(|v| v.unsigned_abs()).max(), Some(127));
            for c in 0..cols {
                let i = r * cols + c;
                assert!((back[i] - x[i]).abs() <= 0.5 * s[r] * 1.0001, "x[{r}][{c}]");
            }
        }
        let (q8, s8) = quantize_rows::<F8E4M3FN>(&x, rows, cols).unwrap();
        let back8 = dequantize_rows(&q8, &s8, rows, cols).unwrap();
        for i in 0..x.len() {
            // e4m3 has 3 mantissa bits: relative error <= 2^-4 (normals), or half the
            // smallest subnormal step 2^-9 of the scaled value.
            let tol = (x[i].abs() / 16.0).max(s8[i / cols] * 2f32.powi(-10)) * 1.0001;
            assert!(
                (back8[i] - x[i]).abs() <= tol,
                "x[{i}] = {} -> {}",
                x[i],
                back8[i]
            );
        }
    }

    #[test]
    fn tiny_rows_get_a_normal_scale_and_finite_codes() {
        for x in [1e-45f32, 1e-40, 3e-39] {
            let (q, s) = quantize_rows::<F8E4M3FN>(&[x, 0.0], 1, 2).unwrap();
            assert!(s[0] >= f32::MIN_POSITIVE, "{x}: scale {}", s[0]);
            assert!(q.iter().all(|v| v.dequantize().is_finite()), "{x}: {q:?}");
            let (qi, si) = quantize_rows::<i8>(&[-x, x], 1, 2).unwrap();
            assert!(
                si[0] >= f32::MIN_POSITIVE && qi[0] == -qi[1],
                "{x}: {qi:?} {si:?}"
            );
        }
        // Huge row counts of empty rows: an error, not an allocation panic.
        let e = quantize_rows::<i8>(&[], usize::MAX / 2 + 1, 0).unwrap_err();
        assert!(e.to_string().contains("`rows`"), "{e}");
    }

    #[test]
    fn bad_shapes_and_non_finite_values_are_errors() {
        let mut q = [0i8; 4];
        let mut s = [0.0f32; 2];
        let e = quantize_rows_into(&[1.0; 3], 2, 2, &mut q, &mut s).unwrap_err();
        assert!(e.to_string().contains("`x`"), "{e}");
        let e = quantize_rows_into(&[1.0; 4], 2, 2, &mut q, &mut s[..1]).unwrap_err();
        assert!(e.to_string().contains("`scales`"), "{e}");
        let e = quantize_rows_into(&[1.0, f32::NAN, 0.0, 0.0], 2, 2, &mut q, &mut s).unwrap_err();
        assert!(e.to_string().contains("x[0][1] = NaN"), "{e}");
        assert_eq!(s, [0.0, 0.0], "nothing written");
        assert!(dequantize_rows(&q, &s[..1], 2, 2).is_err());
    }
}
