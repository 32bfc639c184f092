//! What `bench` and its families share: the issues' shapes, one measured case ([`Row`]), the
//! bench context and how a case is recorded and reported.

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
    pub shape: (usize, usize),
    pub ms: f64,
    pub bytes: f64,
}

pub struct Ctx {
    pub timer: Timer,
    pub stream: Stream,
    pub dev: flydsl_rt::Device,
    pub rows: Vec<Row>,
    pub shrink: usize,
}

/// Record (and print) one measured case.
pub fn add(
    rows: &mut Vec<Row>,
    op: &'static str,
    dtype: &'static str,
    shape: (usize, usize),
    ms: f64,
    bytes: f64,
) {
    eprintln!(
        "{op:<16} {dtype:<5} {:>6}x{:<6} {ms:>9.4} ms {:>8.1} GB/s",
        shape.0,
        shape.1,
        bytes / (ms * 1e-3) / 1e9
    );
    rows.push(Row {
        op,
        dtype,
        shape,
        ms,
        bytes,
    });
}

impl Ctx {
    pub fn shape(&self, (m, n): (usize, usize)) -> (usize, usize) {
        ((m / self.shrink).max(1), n)
    }
}

pub type R<T> = Result<T, String>;
pub fn e(x: flydsl_rt::Error) -> String {
    x.to_string()
}

/// Keep going after a failed case (the table shows what ran); print why it failed.
pub fn report(op: &str, shape: (usize, usize), r: R<()>) {
    if let Err(x) = r {
        eprintln!("FAILED {op} {}x{}: {x}", shape.0, shape.1);
    }
}
