//! GEMM benches: `C = A * B^T` through `fly_gemm::gemm` (bf16, f16; no epilogue) at the GEMM
//! issue's shapes, M in {1, 16, 128, 1024, 4096, 8192} x (N, K) in {(8192, 8192),
//! (5120, 8192), (4096, 14336), (28672, 4096)}, or at the `--shape MxNxK`s. TFLOP/s counts
//! `2 M N K`; bytes are A and B read and C written once (the floor for small M, where the
//! weight read bounds the time). The torch peers (`torch.matmul`) are in
//! `bench/peers_gemm.py`.

use crate::bench_ctx::{add_row, e, report_dims, Ctx, R};
use crate::elem::{inputs, Dtype};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::DeviceBuffer;
use flydsl_testutil::compare::Storage;

/// The issue's `(N, K)` pairs.
const NK: [(usize, usize); 4] = [(8192, 8192), (5120, 8192), (4096, 14336), (28672, 4096)];
/// The issue's `M`s.
const MS: [usize; 6] = [1, 16, 128, 1024, 4096, 8192];

fn gemm<T: flydsl_rt::Element + Storage>(
    c: &mut Ctx,
    dt: Dtype,
    (m, n, k): (usize, usize, usize),
) -> R<()> {
    let m = (m / c.shrink).max(1);
    let a = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(11, m * k)).map_err(e)?;
    let b = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(12, n * k)).map_err(e)?;
    let mut out = DeviceBuffer::<T>::zeroed(&c.dev, m * n).map_err(e)?;
    let s = &c.stream;
    let args = fly_gemm::GemmArgs {
        m,
        n,
        k,
        epilogue: fly_gemm::Epilogue::None,
    };
    let ms = c.timer.median(s, &mut || {
        fly_gemm::gemm(s, &a, &b, None, &mut out, args).map_err(e)
    })?;
    let es = dt.bytes() as f64;
    let bytes = (m * k + n * k + m * n) as f64 * es;
    let flops = 2.0 * (m * n) as f64 * k as f64;
    add_row(
        &mut c.rows,
        "gemm",
        dt.name(),
        vec![m, n, k],
        ms,
        bytes,
        flops,
    );
    Ok(())
}

pub fn run(c: &mut Ctx) -> R<()> {
    let shapes: Vec<(usize, usize, usize)> = if c.shapes.is_empty() {
        NK.iter()
            .flat_map(|&(n, k)| MS.iter().map(move |&m| (m, n, k)))
            .collect()
    } else {
        c.shapes
            .iter()
            .filter(|s| s.len() == 3)
            .map(|s| (s[0], s[1], s[2]))
            .collect()
    };
    for dt in c.dtypes(&[Dtype::BF16, Dtype::F16], &[Dtype::BF16, Dtype::F16]) {
        for &sh in &shapes {
            let r = match dt {
                Dtype::BF16 => gemm::<bf16>(c, dt, sh),
                _ => gemm::<f16>(c, dt, sh),
            };
            report_dims("gemm", &[sh.0, sh.1, sh.2], r);
        }
    }
    Ok(())
}
