//! The all-reduce reference and tolerances (issue 17): the f32 sum of every rank's input,
//! and the max-abs tolerance per dtype and world size.

/// The sum over ranks of `inputs[r][i]`, accumulated in f32 in rank order (what the
/// kernels compute before their one rounding), as f64.
///
/// ```
/// let s = flydsl_testutil::comm::all_reduce_ref(&[vec![1.0, 2.0], vec![0.5, -2.0]]);
/// assert_eq!(s, vec![1.5, 0.0]);
/// ```
pub fn all_reduce_ref(inputs: &[Vec<f64>]) -> Vec<f64> {
    let n = inputs.first().map_or(0, |v| v.len());
    (0..n)
        .map(|i| f64::from(inputs.iter().map(|v| v[i] as f32).sum::<f32>()))
        .collect()
}

/// Max-abs tolerance of an all-reduce of `world` ranks in `dtype` against
/// [`all_reduce_ref`]: f32 1e-4, f16 `2e-3 * sqrt(ws) + 2e-3`, bf16 `2e-3 * ws + 2e-3`.
///
/// ```
/// assert_eq!(flydsl_testutil::comm::all_reduce_atol("f32", 8), 1e-4);
/// assert_eq!(flydsl_testutil::comm::all_reduce_atol("bf16", 2), 6e-3);
/// ```
pub fn all_reduce_atol(dtype: &str, world: usize) -> f64 {
    match dtype {
        "f32" => 1e-4,
        "f16" => 2e-3 * (world as f64).sqrt() + 2e-3,
        _ => 2e-3 * world as f64 + 2e-3,
    }
}
