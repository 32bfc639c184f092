//! What `bench` and its families share: the issues' shapes, one measured case ([`Row`]), the
//! bench context and how a case is recorded and reported.

use crate::elem::Dtype;
use crate::timing::Timer;
use flydsl_rt::Stream;

pub const FWD_SHAPES: [(usize, usize); 5] = [
    (32768, 8192),
    (4096, 8192),
    (32768, 4096),
    (8192, 2048),
    (65536, 1024),
];
pub const SMX_BWD_SHAPES: [(usize, usize); 3] = [(32768, 8192), (4096, 32768), (2048, 65536)];
pub const NORM_BWD_SHAPES: [(usize, usize); 2] = [(4096, 8192), (32768, 4096)];

/// One measured case.
pub struct Row {
    pub op: &'static str,
    pub dtype: &'static str,
    /// `[m, n]`, or `[m, n, k]` for GEMM.
    pub shape: Vec<usize>,
    pub ms: f64,
    pub bytes: f64,
    /// Floating-point (or integer) operations of the case; 0 for the bandwidth-bound families.
    pub flops: f64,
}

pub struct Ctx {
    pub timer: Timer,
    pub stream: Stream,
    pub dev: flydsl_rt::Device,
    pub rows: Vec<Row>,
    pub shrink: usize,
    /// `--shape`s: time these instead of each family's default shapes.
    pub shapes: Vec<Vec<usize>>,
    /// `--dtype`s: time only these dtypes (empty: each family's default list).
    pub dtypes: Vec<Dtype>,
}

/// Record (and print) one measured case of a bandwidth-bound family.
pub fn add(
    rows: &mut Vec<Row>,
    op: &'static str,
    dtype: &'static str,
    shape: (usize, usize),
    ms: f64,
    bytes: f64,
) {
    add_row(rows, op, dtype, vec![shape.0, shape.1], ms, bytes, 0.0);
}

/// Record (and print) one measured case: GB/s, and TFLOP/s when `flops` is not 0.
pub fn add_row(
    rows: &mut Vec<Row>,
    op: &'static str,
    dtype: &'static str,
    shape: Vec<usize>,
    ms: f64,
    bytes: f64,
    flops: f64,
) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let rate = if flops > 0.0 {
        format!("{:>8.1} TFLOP/s", flops / (ms * 1e-3) / 1e12)
    } else {
        String::new()
    };
    eprintln!(
        "{op:<16} {dtype:<5} {:>20} {ms:>9.4} ms {:>8.1} GB/s{rate}",
        dims.join("x"),
        bytes / (ms * 1e-3) / 1e9
    );
    rows.push(Row {
        op,
        dtype,
        shape,
        ms,
        bytes,
        flops,
    });
}

impl Ctx {
    pub fn shape(&self, (m, n): (usize, usize)) -> (usize, usize) {
        ((m / self.shrink).max(1), n)
    }
    /// The `MxN` shapes to time: the `--shape`s if given, else `default`.
    pub fn shapes2(&self, default: &[(usize, usize)]) -> Vec<(usize, usize)> {
        if self.shapes.is_empty() {
            return default.to_vec();
        }
        self.shapes
            .iter()
            .filter(|s| s.len() == 2)
            .map(|s| (s[0], s[1]))
            .collect()
    }
    /// The dtypes to time: those of `default` that `--dtype` selects (all without it), or
    /// the selected ones the family supports (`supported`) when `--dtype` names others.
    pub fn dtypes(&self, default: &[Dtype], supported: &[Dtype]) -> Vec<Dtype> {
        if self.dtypes.is_empty() {
            return default.to_vec();
        }
        self.dtypes
            .iter()
            .copied()
            .filter(|d| supported.contains(d))
            .collect()
    }
}

pub type R<T> = Result<T, String>;
pub fn e(x: flydsl_rt::Error) -> String {
    x.to_string()
}

/// Keep going after a failed case (the table shows what ran); print why it failed.
pub fn report(op: &str, shape: (usize, usize), r: R<()>) {
    report_dims(op, &[shape.0, shape.1], r)
}

/// [`report`] for a shape of any rank.
pub fn report_dims(op: &str, shape: &[usize], r: R<()>) {
    if let Err(x) = r {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        eprintln!("FAILED {op} {}: {x}", dims.join("x"));
    }
}
