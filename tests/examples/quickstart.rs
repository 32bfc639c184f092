//! Quickstart: RMSNorm and softmax on the best backend present (HIP, then CUDA, then the
//! Sim on a machine without a GPU), checked against the CPU reference, with timings.
//!
//! ```sh
//! cargo run --release --example quickstart
//! ```

use flydsl_rt::half::bf16;
use flydsl_rt::{Device, DeviceBuffer, Event};
use flydsl_testutil::compare::{max_abs_err, widen};
use flydsl_testutil::rng::Rng;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::best()?;
    println!(
        "device: {} ({} backend, target {}, wave{})",
        dev.name(),
        dev.backend(),
        dev.target(),
        dev.wave_size()
    );
    let s = dev.stream()?;
    if dev.backend() == flydsl_rt::Backend::Sim {
        println!(
            "(no GPU found: running on the Sim, a CPU interpreter; its timings are not GPU speed)"
        );
    }
    // A small problem on the Sim (a CPU interpreter), a realistic one on a GPU.
    let (m, n) = if dev.backend() == flydsl_rt::Backend::Sim {
        (64, 4096)
    } else {
        (8192, 8192)
    };
    let mut rng = Rng::new(7);
    let x: Vec<bf16> = rng.randn(m * n).into_iter().map(bf16::from_f32).collect();
    let g: Vec<bf16> = rng.rand(n).into_iter().map(bf16::from_f32).collect();
    let dx = DeviceBuffer::from_slice(&dev, &x)?;
    let dg = DeviceBuffer::from_slice(&dev, &g)?;
    let mut y = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;

    // RMSNorm.
    let args = fly_norm::RmsNormArgs { m, n, eps: 1e-6 };
    let ms = time(&dev, &s, || fly_norm::rms_norm(&s, &dx, &dg, &mut y, args))?;
    let want =
        flydsl_testutil::norm::rms_norm_fwd::<bf16>(&widen(&x), None, &widen(&g), m, n, 1e-6).y;
    let err = max_abs_err(&widen(&y.to_vec()?), &want).abs_err;
    let tol = flydsl_testutil::norm::Tol::BF16.fwd_atol;
    report(
        "rms_norm",
        m,
        n,
        ms,
        (2 * m * n * 2 + n * 2) as f64,
        err,
        tol,
    )?;

    // Softmax.
    let sargs = fly_softmax::SoftmaxArgs { m, n };
    let ms = time(&dev, &s, || fly_softmax::softmax(&s, &dx, &mut y, sargs))?;
    let want = flydsl_testutil::softmax::forward(&widen(&x), m, n);
    let err = max_abs_err(&widen(&y.to_vec()?), &want).abs_err;
    let tol = flydsl_testutil::softmax::tolerance("bf16").max_abs;
    report("softmax", m, n, ms, (2 * m * n * 2) as f64, err, tol)?;
    Ok(())
}

/// Median of 5 runs in ms (device events on GPUs, wall clock on the Sim).
fn time(
    dev: &Device,
    s: &flydsl_rt::Stream,
    mut f: impl FnMut() -> flydsl_rt::Result<()>,
) -> flydsl_rt::Result<f64> {
    f()?;
    let mut ts = Vec::new();
    for _ in 0..5 {
        let (a, b) = (dev.event()?, dev.event()?);
        let t0 = Instant::now();
        a.record(s)?;
        f()?;
        b.record(s)?;
        b.synchronize()?;
        let ev = Event::elapsed_ms(&a, &b)? as f64;
        ts.push(if dev.backend() == flydsl_rt::Backend::Sim {
            t0.elapsed().as_secs_f64() * 1e3
        } else {
            ev
        });
    }
    ts.sort_by(f64::total_cmp);
    Ok(ts[2])
}

fn report(
    op: &str,
    m: usize,
    n: usize,
    ms: f64,
    bytes: f64,
    err: f64,
    tol: f64,
) -> Result<(), String> {
    let ok = err <= tol;
    println!(
        "{op:<9} bf16 {m}x{n}: {ms:8.3} ms, {:7.1} GB/s, max abs err {err:.2e} (tolerance {tol:.0e}) {}",
        bytes / (ms * 1e-3) / 1e9,
        if ok { "PASS" } else { "FAIL" }
    );
    if ok {
        Ok(())
    } else {
        Err(format!("{op}: error {err} over the tolerance {tol}"))
    }
}
