//! Element types the family commands accept, as values of `--dtype`.

use flydsl_testutil::compare::Storage;

/// A `--dtype` value: the dtype vocabulary every kernel crate shares.
pub use flydsl_rt::DType as Dtype;

/// Parse a `--dtype` value.
pub fn parse_dtype(s: &str) -> Result<Dtype, String> {
    Dtype::from_name(s).ok_or_else(|| format!("unknown dtype `{s}`: expected f32, f16 or bf16"))
}

/// Deterministic inputs in [-3, 3) as the storage type (cheap enough for GiB-sized benches).
pub fn inputs<T: Storage>(seed: u64, n: usize) -> Vec<T> {
    let mut r = flydsl_testutil::rng::Rng::new(seed);
    (0..n)
        .map(|_| T::from_f32((r.uniform() * 6.0 - 3.0) as f32))
        .collect()
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
