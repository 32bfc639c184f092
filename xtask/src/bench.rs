//! `cargo xtask bench`: time our kernels on the current device at the issues' shapes, or at
//! the caller's (`--shape`, repeatable; `--dtype` filters), or at a sweep file's
//! (`--sweep`, see `bench_sweep`).
//! On a GPU: events + L2 flush + median (see `timing`). Output: a table and JSON rows
//! (op, dtype, shape, median_ms, bytes, GBps, and TFLOPs for GEMM) that `bench/compare.py`
//! pairs with the torch peers measured in the same run.
//!
//! ```sh
//! cargo xtask bench --family norm --shape 3000x5000 --dtype bf16
//! cargo xtask bench --family gemm --shape 4096x4096x4096
//! ```

use crate::bench_ctx::{e, Ctx, R};
use crate::devsel::{pick, DeviceArgs};
use crate::elem::{parse_dtype, parse_shape};
use crate::timing::Timer;
use flydsl_rt::Backend;
use std::process::ExitCode;

/// Arguments of `bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    dev: DeviceArgs,
    /// Families to bench: `all`, `softmax`, `norm`, `gemm`.
    #[arg(long, default_value = "all")]
    family: String,
    /// Time this shape instead of the family's default list (repeatable): `MxN` for norm
    /// and softmax, `MxNxK` for gemm; each family takes the shapes of its rank.
    #[arg(long = "shape")]
    shapes: Vec<String>,
    /// Time only this dtype (repeatable): bf16, f16, f32 (norm, softmax), bf16, f16 (gemm).
    #[arg(long = "dtype")]
    dtypes: Vec<String>,
    /// Time every op of one family at the shapes of this sweep file (`bench/sweep.py gen`;
    /// `--family`, `--shape` and `--dtype` are then ignored).
    #[arg(long)]
    sweep: Option<std::path::PathBuf>,
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
        shapes: a.shapes.iter().map(|s| parse_shape(s)).collect::<R<_>>()?,
        dtypes: a.dtypes.iter().map(|s| parse_dtype(s)).collect::<R<_>>()?,
    };
    if let Some(file) = &a.sweep {
        crate::bench_sweep::run(&mut c, file)?;
    }
    let fam = |f: &str| a.sweep.is_none() && (a.family == "all" || a.family == f);
    if !["all", "softmax", "norm", "gemm"].contains(&a.family.as_str()) {
        return Err(format!(
            "unknown --family `{}`: expected all, softmax, norm or gemm",
            a.family
        ));
    }
    if fam("norm") {
        crate::bench_norm::run(&mut c)?;
    }
    if fam("softmax") {
        crate::bench_softmax::run(&mut c)?;
    }
    if fam("gemm") {
        crate::bench_gemm::run(&mut c)?;
    }
    if let Some(p) = a.json {
        let rows: Vec<serde_json::Value> = c
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({"op": r.op, "impl": "ours", "dtype": r.dtype, "shape": r.shape,
                    "median_ms": r.ms, "bytes": r.bytes, "GBps": r.bytes / (r.ms * 1e-3) / 1e9,
                    "TFLOPs": r.flops / (r.ms * 1e-3) / 1e12})
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
