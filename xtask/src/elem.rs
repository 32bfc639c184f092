//! Element types the family commands accept, as values of `--dtype`.

use flydsl_testutil::compare::Storage;

/// A `--dtype` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// f32
    F32,
    /// f16
    F16,
    /// bf16
    Bf16,
}

impl std::str::FromStr for Dtype {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(Dtype::F32),
            "f16" => Ok(Dtype::F16),
            "bf16" => Ok(Dtype::Bf16),
            _ => Err(format!("unknown dtype `{s}`: expected f32, f16 or bf16")),
        }
    }
}

impl Dtype {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        if self == Dtype::F32 {
            4
        } else {
            2
        }
    }
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
