//! Times the GEMMs on a CUDA GPU: `fly_gemm::gemm` (the Hopper kernel: TMA + mbarrier
//! pipeline + wgmma) at every shape, and the tile-layer proof (`tiled_mma_bf16`: mma.sync,
//! multi-stage swizzled LDS, f32 out) at the square shapes. Both with CUDA events, a 256 MiB L2 flush before each rep, median. Inputs are the
//! deterministic values of [`value`], which `bench/peers_gemm.py` generates identically for
//! torch, so both time the same data. Each shape is also spot-checked against an f64 dot
//! product. Prints a table and writes JSON rows to `$OUT/gemm_ours.json`.
//!
//! `cargo run --release -p flydsl-tests --features sm90 --example gemm_bench`

use fly_gemm::{gemm, Epilogue, GemmArgs};
use flydsl_rt::half::bf16;
use flydsl_rt::timing::Timer;
use flydsl_rt::{Backend, Device, DeviceBuffer, LaunchConfig};
use flydsl_tests::proof;

/// (M, N, K): the square case and the GEMM issue's (N, K) pairs at M = 4096 and 8192.
const SHAPES: [(usize, usize, usize); 9] = [
    (8192, 8192, 8192),
    (4096, 8192, 8192),
    (1024, 8192, 8192),
    (4096, 5120, 8192),
    (8192, 5120, 8192),
    (4096, 4096, 14336),
    (8192, 4096, 14336),
    (4096, 28672, 4096),
    (8192, 28672, 4096),
];

/// Element `i` of input `seed`: a hash of the index mapped to [-1, 1), rounded to bf16.
/// `bench/peers_gemm.py` computes the same values.
fn value(seed: u64, i: u64) -> bf16 {
    let h =
        (i.wrapping_add(seed.wrapping_mul(0x9E37_79B9))).wrapping_mul(2_654_435_761) % (1 << 32);
    bf16::from_f32((h as f64 / 4_294_967_296.0 * 2.0 - 1.0) as f32)
}

fn main() -> Result<(), String> {
    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    let dev = match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => d.into_iter().next().expect("non-empty"),
        Ok(_) => return Err("no CUDA device".into()),
        Err(e) => return Err(format!("CUDA unavailable: {e}")),
    };
    let s = dev.stream().map_err(|e| e.to_string())?;
    let mut timer = Timer::new(&dev, 256 << 20).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for (m, n, k) in SHAPES {
        let a: Vec<bf16> = (0..(m * k) as u64).map(|i| value(1, i)).collect();
        let b: Vec<bf16> = (0..(n * k) as u64).map(|i| value(2, i)).collect();
        let e = |x: flydsl_rt::Error| x.to_string();
        let da = DeviceBuffer::from_slice(&dev, &a).map_err(e)?;
        let db = DeviceBuffer::from_slice(&dev, &b).map_err(e)?;
        let mut dc = DeviceBuffer::<bf16>::zeroed(&dev, m * n).map_err(e)?;
        let args = GemmArgs {
            m,
            n,
            k,
            epilogue: Epilogue::None,
            ..Default::default()
        };
        let mut run = || gemm(&s, &da, &db, None, &mut dc, args);
        let ms = timer.median(&s, 3, 30, &mut run).map_err(e)?;
        // Spot check: 64 entries against f64 dot products (bf16 output: 2^-8 relative).
        let c = dc.to_vec().map_err(e)?;
        let mut worst = 0.0f64;
        for t in 0..64u64 {
            let (i, j) = ((t * 7919) as usize % m, (t * 104_729) as usize % n);
            let want: f64 = (0..k)
                .map(|p| a[i * k + p].to_f64() * b[j * k + p].to_f64())
                .sum();
            let got = c[i * n + j].to_f64();
            let scale = (0..k)
                .map(|p| (a[i * k + p].to_f64() * b[j * k + p].to_f64()).abs())
                .sum::<f64>()
                .max(1e-30);
            worst = worst.max((got - want).abs() / scale);
        }
        let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
        let ok = worst < 1e-2;
        println!(
            "fly_gemm   bf16 {m:>5}x{n:>5}x{k:>5} {ms:>9.4} ms {tflops:>7.1} TFLOP/s  \
             spot-check worst |err|/sum|ab| = {worst:.2e} {}",
            if ok { "ok" } else { "WRONG" }
        );
        if !ok {
            return Err(format!("{m}x{n}x{k}: wrong results (worst {worst:.2e})"));
        }
        rows.push(format!(
            "{{\"op\": \"gemm\", \"impl\": \"fly_gemm (wgmma)\", \"dtype\": \"bf16\", \
             \"shape\": [{m}, {n}, {k}], \"median_ms\": {ms}, \"tflops\": {tflops}}}"
        ));
    }
    // The tile-layer proof (mma.sync) at the square shapes.
    for (m, n, k) in SHAPES.into_iter().take(3) {
        let e = |x: flydsl_rt::Error| x.to_string();
        let a: Vec<bf16> = (0..(m * k) as u64).map(|i| value(1, i)).collect();
        let b: Vec<bf16> = (0..(n * k) as u64).map(|i| value(2, i)).collect();
        let da = DeviceBuffer::from_slice(&dev, &a).map_err(e)?;
        let db = DeviceBuffer::from_slice(&dev, &b).map_err(e)?;
        let mut dc = DeviceBuffer::<f32>::zeroed(&dev, m * n).map_err(e)?;
        flydsl_devtools::proof::tiled_mma_check(dev.target(), m, n, k)?;
        let (grid, block) = flydsl_devtools::proof::tiled_mma_launch(dev.target(), m, n);
        let cfg = LaunchConfig {
            grid,
            block,
            dynamic_lds_bytes: 0,
        };
        let mut run = || {
            // SAFETY: a holds m*k, b n*k, c m*n elements (tiled_mma_check passed); the kernel
            // guards every access by m, n, k.
            unsafe {
                proof::tiled_mma_bf16(&s, cfg, &da, &db, &mut dc, m as i32, n as i32, k as i32)
            }
        };
        let ms = timer.median(&s, 3, 20, &mut run).map_err(e)?;
        let c = dc.to_vec().map_err(e)?;
        let mut worst = 0.0f64;
        for t in 0..64u64 {
            let (i, j) = ((t * 7919) as usize % m, (t * 104_729) as usize % n);
            let want: f64 = (0..k)
                .map(|p| a[i * k + p].to_f64() * b[j * k + p].to_f64())
                .sum();
            worst = worst.max((c[i * n + j] as f64 - want).abs() / (1.0 + want.abs()));
        }
        let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
        println!(
            "tiled_mma  bf16 {m:>5}x{n:>5}x{k:>5} {ms:>9.4} ms {tflops:>7.1} TFLOP/s  \
             spot-check worst rel err = {worst:.2e}"
        );
        if worst > 1e-3 {
            return Err(format!(
                "tiled_mma {m}x{n}x{k}: wrong results (worst {worst:.2e})"
            ));
        }
        rows.push(format!(
            "{{\"op\": \"gemm\", \"impl\": \"flydsl_mma_sync\", \"dtype\": \"bf16\", \
             \"shape\": [{m}, {n}, {k}], \"median_ms\": {ms}, \"tflops\": {tflops}}}"
        ));
    }
    let path = format!("{out}/gemm_ours.json");
    std::fs::write(&path, format!("[\n{}\n]\n", rows.join(",\n")))
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(())
}
