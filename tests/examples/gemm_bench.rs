//! Times the GEMMs on a CUDA GPU: `fly_gemm::gemm` (the Hopper kernel: TMA + mbarrier
//! pipeline + wgmma) at every shape, and the tile-layer proof (`tiled_mma_bf16`: mma.sync,
//! multi-stage swizzled LDS, f32 out) at the square shapes. Both with CUDA events, a 256 MiB L2 flush before each rep, median. Inputs are the
//! deterministic values of [`value`], which `bench/peers_gemm.py` generates identically for
//! torch, so both time the same data. Each shape is also spot-checked against an f64 dot
//! product. Prints a table and writes JSON rows to `$OUT/gemm_ours.json`.
//!
//! Then the 8-bit GEMM (`fly_gemm::gemm_scaled`, fp8 e4m3fn and int8 inputs, per-row and
//! per-column scales, bf16 out, no bias) at the GEMM issue's shapes ([`SHAPES8`]), on the
//! deterministic inputs of [`quant_inputs`] (which `bench/peers_gemm.py` also makes, for
//! `torch._scaled_mm` and `torch._int_mm`). `GEMM8=0` skips it, `GEMM16=0` skips the 16-bit
//! part.
//!
//! Last, the tile sweep (`GEMM_TILES=0` skips it): every tile config of both kernels
//! (`fly_gemm::table::TILES`, pinned with `gemm_with_tile` / `gemm_scaled_with`) at M = 16, 64,
//! 128, 512 and 1024 with (N, K) = (8192, 8192), next to the dispatcher's pick
//! (`Tile::pick`, `Tile::pick_scaled` for fp8), written to `$OUT/gemm_tiles.json`: the measurement behind the
//! dispatcher's rule.
//!
//! Before it, the split sweep (`GEMM_SPLITS=0` skips it): K split over 1, 2, 3, 4, 6 and 8
//! workgroups per tile (`gemm_with_split` / `gemm_scaled_with_split`, the dispatcher's tile)
//! at M = 1, 16 and 128 (`GEMM_SWEEP_M=1,2,4` picks others) with the (N, K) pairs,
//! bf16 and fp8, next to the dispatcher's count (`table::split_k`), written to
//! `$OUT/gemm_splits.json`.
//!
//! `GEMM_SHAPES=MxNxK,...` keeps only those shapes in the 16-bit and 8-bit parts (for a
//! profiler run of one kernel).
//!
//! `cargo run --release -p flydsl-tests --features sm90 --example gemm_bench`

use fly_gemm::{gemm, Epilogue, GemmArgs, QuantElement};
use flydsl_rt::half::bf16;
use flydsl_rt::timing::Timer;
use flydsl_rt::{Backend, Device, DeviceBuffer, LaunchConfig};
use flydsl_tests::proof;

/// (M, N, K): the square case, the GEMM issue's (N, K) pairs at M = 4096 and 8192, and
/// at the small M (1, 16, 128) the small-tile configs are for.
const SHAPES: [(usize, usize, usize); 21] = [
    (8192, 8192, 8192),
    (4096, 8192, 8192),
    (1024, 8192, 8192),
    (4096, 5120, 8192),
    (8192, 5120, 8192),
    (4096, 4096, 14336),
    (8192, 4096, 14336),
    (4096, 28672, 4096),
    (8192, 28672, 4096),
    (1, 8192, 8192),
    (16, 8192, 8192),
    (128, 8192, 8192),
    (1, 5120, 8192),
    (16, 5120, 8192),
    (128, 5120, 8192),
    (1, 4096, 14336),
    (16, 4096, 14336),
    (128, 4096, 14336),
    (1, 28672, 4096),
    (16, 28672, 4096),
    (128, 28672, 4096),
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
    let shapes16 = if std::env::var("GEMM16").as_deref() == Ok("0") {
        &SHAPES[..0]
    } else {
        &SHAPES[..]
    };
    for &(m, n, k) in shapes16.iter().filter(|&&(m, n, k)| keep(m, n, k)) {
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
            let prod = |p: usize| a[i * k + p].to_f64() * b[j * k + p].to_f64();
            worst = worst.max(rel_err(c[i * n + j].to_f64(), k, prod));
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
    for &(m, n, k) in shapes16.iter().take(3).filter(|&&(m, n, k)| keep(m, n, k)) {
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
    // A wrong 8-bit shape fails the bench after the JSON and the tile sweep are written.
    let quant = if std::env::var("GEMM8").as_deref() != Ok("0") {
        quant_bench(&dev, &s, &mut timer, &mut rows)
    } else {
        Ok(())
    };
    let path = format!("{out}/gemm_ours.json");
    std::fs::write(&path, format!("[\n{}\n]\n", rows.join(",\n")))
        .map_err(|e| format!("{path}: {e}"))?;
    if std::env::var("GEMM_SPLITS").as_deref() != Ok("0") {
        let splits = split_sweep(&dev, &s, &mut timer)?;
        let path = format!("{out}/gemm_splits.json");
        std::fs::write(&path, format!("[\n{}\n]\n", splits.join(",\n")))
            .map_err(|e| format!("{path}: {e}"))?;
    }
    if std::env::var("GEMM_TILES").as_deref() != Ok("0") {
        let tiles = tile_sweep(&dev, &s, &mut timer)?;
        let path = format!("{out}/gemm_tiles.json");
        std::fs::write(&path, format!("[\n{}\n]\n", tiles.join(",\n")))
            .map_err(|e| format!("{path}: {e}"))?;
    }
    quant
}

/// Whether `GEMM_SHAPES` (comma-separated `MxNxK`) is unset or names this shape.
fn keep(m: usize, n: usize, k: usize) -> bool {
    std::env::var("GEMM_SHAPES").map_or(true, |list| {
        list.split(',').any(|t| t.trim() == format!("{m}x{n}x{k}"))
    })
}

/// `|got - sum of prod(p)| / sum of |prod(p)|` over `p < k`: a dot product's error relative
/// to the magnitude its terms add up to.
fn rel_err(got: f64, k: usize, prod: impl Fn(usize) -> f64) -> f64 {
    let (want, mag) = (0..k).fold((0.0f64, 0.0f64), |(w, g), p| {
        let x = prod(p);
        (w + x, g + x.abs())
    });
    (got - want).abs() / mag.max(1e-30)
}

/// The (N, K) pairs and M values of the GEMM issue: every M with every (N, K).
const MS8: [usize; 6] = [1, 16, 128, 1024, 4096, 8192];
/// The (N, K) pairs of the GEMM issue.
const SHAPES8: [(usize, usize); 4] = [(8192, 8192), (5120, 8192), (4096, 14336), (28672, 4096)];

/// Element `i` of input `seed` before rounding: `value`'s f32.
fn value_f32(seed: u64, i: u64) -> f32 {
    let h =
        (i.wrapping_add(seed.wrapping_mul(0x9E37_79B9))).wrapping_mul(2_654_435_761) % (1 << 32);
    (h as f64 / 4_294_967_296.0 * 2.0 - 1.0) as f32
}

/// The 8-bit bench inputs: `len` elements of input `seed`, `Q::quantize(v * range)` with
/// range 4 (fp8, values in [-4, 4)) or 127 (int8), and the scales
/// `scale_a[i] = (1 + (i % 8) / 8) / 256`, `scale_b[j] = (1 + (j % 4) / 4) / 128`.
/// `bench/peers_gemm.py` makes the same values (`.to(torch.float8_e4m3fn)` and
/// `round().to(torch.int8)` also round to nearest even).
fn quant_inputs<Q: fly_gemm::QuantElement>(seed: u64, len: usize) -> Vec<Q> {
    let range = if Q::QUANT == fly_gemm::Quant::Int8 {
        127.0
    } else {
        4.0
    };
    (0..len as u64)
        .map(|i| Q::quantize(value_f32(seed, i) * range))
        .collect()
}

fn quant_bench(
    dev: &Device,
    s: &flydsl_rt::Stream,
    timer: &mut Timer,
    rows: &mut Vec<String>,
) -> Result<(), String> {
    // A wrong shape is reported and left out; the bench fails at the end, after the rest.
    let mut failures = Vec::new();
    quant_one::<flydsl_rt::F8E4M3FN>(dev, s, timer, rows, "fp8", &mut failures)?;
    quant_one::<i8>(dev, s, timer, rows, "int8", &mut failures)?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("wrong results: {}", failures.join(", ")))
    }
}

fn quant_one<Q: fly_gemm::QuantElement>(
    dev: &Device,
    s: &flydsl_rt::Stream,
    timer: &mut Timer,
    rows: &mut Vec<String>,
    name: &str,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    use fly_gemm::gemm_scaled;
    let e = |x: flydsl_rt::Error| x.to_string();
    let mmax = *MS8.iter().max().expect("non-empty");
    let sa: Vec<f32> = (0..mmax)
        .map(|i| (1.0 + (i % 8) as f32 / 8.0) / 256.0)
        .collect();
    for (n, k) in SHAPES8 {
        if !MS8.iter().any(|&m| keep(m, n, k)) {
            continue;
        }
        // A of every M is a prefix of the largest (row-major, same index formula).
        let a_all: Vec<Q> = quant_inputs(1, mmax * k);
        let b: Vec<Q> = quant_inputs(2, n * k);
        let sb: Vec<f32> = (0..n)
            .map(|j| (1.0 + (j % 4) as f32 / 4.0) / 128.0)
            .collect();
        let db = DeviceBuffer::from_slice(dev, &b).map_err(e)?;
        let dsb = DeviceBuffer::from_slice(dev, &sb).map_err(e)?;
        let dbp = DeviceBuffer::from_slice(dev, &fly_gemm::preshuffle_b(&b, n, k).map_err(e)?)
            .map_err(e)?;
        // (M, preshuffled B): every M with plain B (the wgmma kernel), and M = 128 with
        // preshuffled B (sm90's portable mma.sync fallback).
        let runs = MS8
            .iter()
            .map(|&m| (m, false))
            .chain([(128, true)])
            .filter(|&(m, _)| keep(m, n, k));
        for (m, pre) in runs {
            let a = &a_all[..m * k];
            let da = DeviceBuffer::from_slice(dev, a).map_err(e)?;
            let dsa = DeviceBuffer::from_slice(dev, &sa[..m]).map_err(e)?;
            let mut dc = DeviceBuffer::<bf16>::zeroed(dev, m * n).map_err(e)?;
            let args = GemmArgs {
                m,
                n,
                k,
                epilogue: Epilogue::None,
                b_layout: if pre {
                    fly_gemm::BLayout::Preshuffled
                } else {
                    fly_gemm::BLayout::Plain
                },
            };
            let dbm = if pre { &dbp } else { &db };
            let mut run = || gemm_scaled(s, &da, dbm, &dsa, &dsb, None, &mut dc, args);
            let ms = timer.median(s, 3, 30, &mut run).map_err(e)?;
            let c = dc.to_vec().map_err(e)?;
            // |err| / sum |a b| of C[i][j] (scales applied to both).
            let err_at = |i: usize, j: usize| {
                let scale = sa[i] as f64 * sb[j] as f64;
                let prod = |p: usize| {
                    a[i * k + p].dequantize() as f64 * b[j * k + p].dequantize() as f64 * scale
                };
                rel_err(c[i * n + j].to_f64(), k, prod)
            };
            let mut worst = 0.0f64;
            for t in 0..64u64 {
                let (i, j) = ((t * 7919) as usize % m, (t * 104_729) as usize % n);
                worst = worst.max(err_at(i, j));
            }
            let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
            // Weight (B) bytes read once per call, the memory-bound figure at small M.
            let gbs = (n * k) as f64 / (ms * 1e-3) / 1e9;
            let ok = worst < 1e-2;
            println!(
                "fly_gemm   {name:<4} {m:>5}x{n:>5}x{k:>5}{} {ms:>9.4} ms {tflops:>7.1} TFLOP/s \
                 {gbs:>7.0} GB/s of B  spot-check worst |err|/sum|ab| = {worst:.2e} {}",
                if pre { " preshuffled" } else { "" },
                if ok { "ok" } else { "WRONG" }
            );
            if !ok {
                // Which outputs are wrong: the whole first row against the reference, so a
                // wrong kernel's pattern (columns, tiles) shows in the log.
                let wrong: Vec<usize> = (0..n).filter(|&j| err_at(0, j) >= 1e-2).collect();
                println!(
                    "  row 0: {} of {n} columns wrong; first: {:?}",
                    wrong.len(),
                    &wrong[..wrong.len().min(24)]
                );
                failures.push(format!("{name} {m}x{n}x{k} pre={pre} (worst {worst:.2e})"));
                continue;
            }
            if pre {
                continue; // timed for its error; the JSON rows are the plain-B kernel's
            }
            rows.push(format!(
                "{{\"op\": \"gemm\", \"impl\": \"fly_gemm_scaled (wgmma)\", \"dtype\": \"{name}\", \
                 \"shape\": [{m}, {n}, {k}], \"median_ms\": {ms}, \"tflops\": {tflops}, \
                 \"b_gbs\": {gbs}}}"
            ));
        }
    }
    Ok(())
}

/// The M values of the split sweep: `GEMM_SWEEP_M` (comma-separated, each 1 ..= 1024) or
/// 1, 16 and 128.
fn sweep_ms() -> Result<Vec<usize>, String> {
    let Ok(list) = std::env::var("GEMM_SWEEP_M") else {
        return Ok(vec![1, 16, 128]);
    };
    list.split(',')
        .map(|t| match t.trim().parse::<usize>() {
            Ok(m) if (1..=1024).contains(&m) => Ok(m),
            _ => Err(format!("GEMM_SWEEP_M: {t:?} is not an M in 1..=1024")),
        })
        .collect()
}

/// K split counts of the bf16 and fp8 kernels at small M (see the module docs).
fn split_sweep(
    dev: &Device,
    s: &flydsl_rt::Stream,
    timer: &mut Timer,
) -> Result<Vec<String>, String> {
    use fly_gemm::table::{split_k, Quant, Tile, BK, BK8};
    use fly_gemm::{gemm_scaled_with_split, gemm_with_split};
    use flydsl_rt::F8E4M3FN;
    let e = |x: flydsl_rt::Error| x.to_string();
    let mut rows = Vec::new();
    let ms = sweep_ms()?;
    let mmax = *ms.iter().max().expect("non-empty");
    for (n, k) in SHAPES8 {
        let a: Vec<bf16> = (0..(mmax * k) as u64).map(|i| value(1, i)).collect();
        let b: Vec<bf16> = (0..(n * k) as u64).map(|i| value(2, i)).collect();
        let a8: Vec<F8E4M3FN> = quant_inputs(1, mmax * k);
        let b8: Vec<F8E4M3FN> = quant_inputs(2, n * k);
        let up = |v: &[bf16]| DeviceBuffer::from_slice(dev, v).map_err(e);
        let up8 = |v: &[F8E4M3FN]| DeviceBuffer::from_slice(dev, v).map_err(e);
        let (db, db8) = (up(&b)?, up8(&b8)?);
        let sb = DeviceBuffer::from_slice(dev, &vec![1.0f32 / 128.0; n]).map_err(e)?;
        for &m in &ms {
            let (da, da8) = (up(&a[..m * k])?, up8(&a8[..m * k])?);
            let sa = DeviceBuffer::from_slice(dev, &vec![1.0f32 / 256.0; m]).map_err(e)?;
            let mut dc = DeviceBuffer::<bf16>::zeroed(dev, m * n).map_err(e)?;
            let args = GemmArgs {
                m,
                n,
                k,
                epilogue: Epilogue::None,
                ..Default::default()
            };
            for dtype in ["bf16", "fp8"] {
                let (tile, bk) = if dtype == "bf16" {
                    (Tile::pick(m, n), BK)
                } else {
                    (Tile::pick_scaled(Quant::Fp8, m, n), BK8)
                };
                let rule = split_k(tile, m, n, k, bk as usize);
                for splits in [1usize, 2, 3, 4, 6, 8] {
                    let mut run = || {
                        if dtype == "bf16" {
                            gemm_with_split(s, &da, &db, None, &mut dc, args, tile, splits)
                        } else {
                            gemm_scaled_with_split(
                                s, &da8, &db8, &sa, &sb, None, &mut dc, args, tile, splits,
                            )
                        }
                    };
                    let ms = timer.median(s, 3, 20, &mut run).map_err(e)?;
                    let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
                    let b_gbs =
                        (n * k * if dtype == "bf16" { 2 } else { 1 }) as f64 / (ms * 1e-3) / 1e9;
                    let c = dc.to_vec().map_err(e)?;
                    let mut worst = 0.0f64;
                    for t in 0..8u64 {
                        let (i, j) = ((t * 7919) as usize % m, (t * 104_729) as usize % n);
                        let prod = |p: usize| {
                            if dtype == "bf16" {
                                a[i * k + p].to_f64() * b[j * k + p].to_f64()
                            } else {
                                a8[i * k + p].dequantize() as f64
                                    * b8[j * k + p].dequantize() as f64
                                    / (256.0 * 128.0)
                            }
                        };
                        worst = worst.max(rel_err(c[i * n + j].to_f64(), k, prod));
                    }
                    let picked = if splits == rule { " (rule)" } else { "" };
                    println!(
                        "split sweep {dtype:<4} {m:>4}x{n}x{k} {:<14} {splits} splits \
                         {ms:>9.4} ms {tflops:>7.1} TFLOP/s {b_gbs:>6.0} GB/s of B{picked}  \
                         worst |err|/sum|ab| = {worst:.2e}{}",
                        tile.dims(),
                        if worst < 1e-2 { "" } else { " WRONG" }
                    );
                    rows.push(format!(
                        "{{\"dtype\": \"{dtype}\", \"shape\": [{m}, {n}, {k}], \"tile\": \"{}\", \
                         \"splits\": {splits}, \"rule\": {rule}, \"median_ms\": {ms}, \
                         \"tflops\": {tflops}}}",
                        tile.dims()
                    ));
                }
            }
        }
    }
    Ok(rows)
}

/// Every tile config of the bf16 and fp8 kernels at small and mid M (see the module docs).
fn tile_sweep(
    dev: &Device,
    s: &flydsl_rt::Stream,
    timer: &mut Timer,
) -> Result<Vec<String>, String> {
    use fly_gemm::table::{Quant, Tile, TILES};
    use fly_gemm::{gemm_scaled_with, gemm_with_tile};
    use flydsl_rt::F8E4M3FN;
    let e = |x: flydsl_rt::Error| x.to_string();
    let (n, k) = (8192usize, 8192usize);
    let mut rows = Vec::new();
    for m in [16usize, 64, 128, 512, 1024] {
        let a: Vec<bf16> = (0..(m * k) as u64).map(|i| value(1, i)).collect();
        let b: Vec<bf16> = (0..(n * k) as u64).map(|i| value(2, i)).collect();
        let (da, db) = (
            DeviceBuffer::from_slice(dev, &a).map_err(e)?,
            DeviceBuffer::from_slice(dev, &b).map_err(e)?,
        );
        let a8: Vec<F8E4M3FN> = quant_inputs(1, m * k);
        let b8: Vec<F8E4M3FN> = quant_inputs(2, n * k);
        let (da8, db8) = (
            DeviceBuffer::from_slice(dev, &a8).map_err(e)?,
            DeviceBuffer::from_slice(dev, &b8).map_err(e)?,
        );
        let sa = DeviceBuffer::from_slice(dev, &vec![1.0f32 / 256.0; m]).map_err(e)?;
        let sb = DeviceBuffer::from_slice(dev, &vec![1.0f32 / 128.0; n]).map_err(e)?;
        let mut dc = DeviceBuffer::<bf16>::zeroed(dev, m * n).map_err(e)?;
        let args = GemmArgs {
            m,
            n,
            k,
            epilogue: Epilogue::None,
            ..Default::default()
        };
        for tile in TILES {
            for dtype in ["bf16", "fp8"] {
                let mut run = || {
                    if dtype == "bf16" {
                        gemm_with_tile(s, &da, &db, None, &mut dc, args, tile)
                    } else {
                        gemm_scaled_with(s, &da8, &db8, &sa, &sb, None, &mut dc, args, tile)
                    }
                };
                let ms = timer.median(s, 3, 20, &mut run).map_err(e)?;
                let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
                let pick = if dtype == "bf16" {
                    Tile::pick(m, n)
                } else {
                    Tile::pick_scaled(Quant::Fp8, m, n)
                };
                let picked = if tile == pick { " (picked)" } else { "" };
                // 16 outputs against f64 dot products of the exact inputs.
                let c = dc.to_vec().map_err(e)?;
                let mut worst = 0.0f64;
                for t in 0..16u64 {
                    let (i, j) = ((t * 7919) as usize % m, (t * 104_729) as usize % n);
                    let prod = |p: usize| {
                        if dtype == "bf16" {
                            a[i * k + p].to_f64() * b[j * k + p].to_f64()
                        } else {
                            a8[i * k + p].dequantize() as f64 * b8[j * k + p].dequantize() as f64
                                / (256.0 * 128.0)
                        }
                    };
                    worst = worst.max(rel_err(c[i * n + j].to_f64(), k, prod));
                }
                println!(
                    "tile sweep {dtype:<4} {m:>5}x{n}x{k} {:<14} {ms:>9.4} ms \
                     {tflops:>7.1} TFLOP/s{picked}  worst |err|/sum|ab| = {worst:.2e}{}",
                    tile.dims(),
                    if worst < 1e-2 { "" } else { " WRONG" }
                );
                rows.push(format!(
                    "{{\"dtype\": \"{dtype}\", \"shape\": [{m}, {n}, {k}], \"tile\": \"{}\", \
                     \"picked\": {}, \"median_ms\": {ms}, \"tflops\": {tflops}}}",
                    tile.dims(),
                    tile == pick
                ));
            }
        }
    }
    Ok(rows)
}
