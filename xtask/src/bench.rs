//! `cargo xtask bench`: time our kernels on the current device at the issues' shapes.
//! On a GPU: events + L2 flush + median (see `timing`). Output: a table and JSON rows
//! (op, dtype, shape, median_ms, bytes, GBps) that `bench/compare.py` pairs with the torch
//! peers measured in the same run.

use crate::bench_ctx::{add, e, report, Ctx, FWD_SHAPES, R, SMX_BWD_SHAPES};
use crate::devsel::{pick, DeviceArgs};
use crate::elem::{inputs, Dtype};
use crate::timing::Timer;
use flydsl_rt::half::bf16;
use flydsl_rt::{Backend, DeviceBuffer};
use flydsl_testutil::compare::Storage;
use std::process::ExitCode;

/// Arguments of `bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    dev: DeviceArgs,
    /// Families to bench: `all`, `softmax`, `norm`.
    #[arg(long, default_value = "all")]
    family: String,
    /// Write JSON rows here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Measuring time per case in ms.
    #[arg(long, default_value_t = 100.0)]
    rep_ms: f64,
    /// Scale every M down by this factor (for Sim smoke runs).
    #[arg(long, default_value_t = 1)]
    shrink: usize,
}

fn softmax_fwd<T: fly_softmax::Element + Storage>(
    c: &mut Ctx,
    dt: Dtype,
    shape: (usize, usize),
) -> R<()> {
    let (m, n) = c.shape(shape);
    let x = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(1, m * n)).map_err(e)?;
    let mut y = DeviceBuffer::<T>::zeroed(&c.dev, m * n).map_err(e)?;
    let s = &c.stream;
    let ms = c.timer.median(s, &mut || {
        fly_softmax::softmax(s, &x, &mut y, fly_softmax::SoftmaxArgs { m, n }).map_err(e)
    })?;
    add(
        &mut c.rows,
        "softmax_fwd",
        dt.name(),
        (m, n),
        ms,
        (2 * m * n * dt.bytes() as usize) as f64,
    );
    Ok(())
}

fn softmax_bwd(c: &mut Ctx, shape: (usize, usize)) -> R<()> {
    let (m, n) = c.shape(shape);
    let y = DeviceBuffer::from_slice(&c.dev, &inputs::<bf16>(2, m * n)).map_err(e)?;
    let dy = DeviceBuffer::from_slice(&c.dev, &inputs::<bf16>(3, m * n)).map_err(e)?;
    let mut dx = DeviceBuffer::<bf16>::zeroed(&c.dev, m * n).map_err(e)?;
    let s = &c.stream;
    let ms = c.timer.median(s, &mut || {
        fly_softmax::softmax_backward(s, &y, &dy, &mut dx, fly_softmax::SoftmaxArgs { m, n })
            .map_err(e)
    })?;
    add(
        &mut c.rows,
        "softmax_bwd",
        "bf16",
        (m, n),
        ms,
        (3 * m * n * 2) as f64,
    );
    Ok(())
}

pub fn run(a: Args) -> R<ExitCode> {
    let dev = pick(&a.dev)?;
    if dev.backend() == Backend::Sim && a.shrink == 1 {
        // No GPU: host-side and Sim timings through criterion (the GPU shapes would take
        // hours in a CPU interpreter; `--shrink N` runs them scaled down instead).
        eprintln!("no GPU: running the criterion host/Sim benches (cargo bench -p flydsl-rt --bench host)");
        let st =
            std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args(["bench", "-p", "flydsl-rt", "--bench", "host"])
                .status()
                .map_err(|x| format!("cannot run cargo bench: {x}"))?;
        return Ok(if st.success() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    eprintln!("bench on {} ({})", dev.name(), dev.backend());
    let mut c = Ctx {
        timer: Timer::new(&dev, a.rep_ms)?,
        stream: dev.stream().map_err(e)?,
        dev,
        rows: vec![],
        shrink: a.shrink,
    };
    let fam = |f: &str| a.family == "all" || a.family == f;
    if !["all", "softmax", "norm"].contains(&a.family.as_str()) {
        return Err(format!(
            "unknown --family `{}`: expected all, softmax or norm",
            a.family
        ));
    }
    if fam("norm") {
        crate::bench_norm::run(&mut c)?;
    }
    if fam("softmax") {
        for dt in [Dtype::BF16, Dtype::F32] {
            for sh in FWD_SHAPES {
                let r = match dt {
                    Dtype::BF16 => softmax_fwd::<bf16>(&mut c, dt, sh),
                    _ => softmax_fwd::<f32>(&mut c, dt, sh),
                };
                report("softmax_fwd", sh, r);
            }
        }
        for sh in SMX_BWD_SHAPES {
            report("softmax_bwd", sh, softmax_bwd(&mut c, sh));
        }
    }
    if let Some(p) = a.json {
        let rows: Vec<serde_json::Value> = c
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({"op": r.op, "impl": "ours", "dtype": r.dtype, "shape": [r.shape.0, r.shape.1],
                    "median_ms": r.ms, "bytes": r.bytes, "GBps": r.bytes / (r.ms * 1e-3) / 1e9})
            })
            .collect();
        let doc = serde_json::json!({"device": c.dev.name(), "rows": rows});
        std::fs::write(
            &p,
            serde_json::to_string_pretty(&doc).map_err(|x| x.to_string())?,
        )
        .map_err(|x| format!("{}: {x}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
