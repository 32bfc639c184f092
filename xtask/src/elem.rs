//! Element types the family commands accept, as values of `--dtype`.

use flydsl_testutil::compare::Storage;

/// A `--dtype` value: the dtype vocabulary every kernel crate shares.
pub use flydsl_rt::DType as Dtype;

/// Parse a `--dtype` value.
pub fn parse_dtype(s: &str) -> Result<Dtype, String> {
    Dtype::from_name(s).ok_or_else(|| format!("unknown dtype `{s}`: expected f32, f16 or bf16"))
}

/// Deterministic inputs in [-3, 3) as the storage type: a seeded pattern of at most 2^20
/// values, repeated (GiB-sized bench inputs then cost a copy per element, not a random draw
/// and a conversion; the kernels' speed does not depend on the values).
pub fn inputs<T: Storage>(seed: u64, n: usize) -> Vec<T> {
    let mut r = flydsl_testutil::rng::Rng::new(seed);
    let pattern: Vec<T> = (0..n.min(1 << 20))
        .map(|_| T::from_f32((r.uniform() * 6.0 - 3.0) as f32))
        .collect();
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let k = pattern.len().min(n - v.len());
        v.extend_from_slice(&pattern[..k]);
    }
    v
}

/// Parse `MxN` or `MxNxK`.
pub fn parse_shape(s: &str) -> Result<Vec<usize>, String> {
    let v: Result<Vec<usize>, _> = s.split('x').map(str::parse).collect();
    match v {
        Ok(v) if (2..=3).contains(&v.len()) => Ok(v),
        _ => Err(format!(
            "bad --shape `{s}`: expected MxN or MxNxK, e.g. 4096x8192"
        )),
    }
}
