//! `cargo xtask build-all`: every variant for every target, with a resource table.

use crate::families;
use flydsl_build::{parse_targets, Builder};
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `build-all`.
#[derive(clap::Args)]
pub struct Args {
    /// Comma list of targets (default: all five).
    #[arg(long, default_value = "all")]
    targets: String,
    /// Family to build (`all` or one of the families).
    #[arg(long, default_value = "all")]
    family: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Output folder for artifacts (default: target/xtask-build-all).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Ignore the cache (measure cold compile times).
    #[arg(long)]
    cold: bool,
}

pub fn run(a: Args) -> Result<ExitCode, String> {
    let targets = parse_targets(&a.targets)?;
    if targets.is_empty() {
        return Err("--targets selected no target".into());
    }
    let out = a
        .out
        .unwrap_or_else(|| std::path::PathBuf::from("target/xtask-build-all"));
    if a.cold {
        let _ = std::fs::remove_dir_all(&out);
    }
    let json = a.json;
    let b = Builder::new("xtask", &out, &targets).on_progress(move |done, total, k, t| {
        if !json {
            eprint!("\r[{done}/{total}] {k} ({t})\x1b[K");
            let _ = std::io::stderr().flush();
        }
    });
    let b = families::register(b, &a.family)?;
    let t0 = Instant::now();
    let report = b.run().map_err(|e| e.to_string())?;
    let wall = t0.elapsed().as_secs_f64();
    if !json {
        eprintln!();
    }
    if json {
        let rows: Vec<serde_json::Value> = report
            .variants
            .iter()
            .map(|v| {
                let r = &v.resources;
                serde_json::json!({
                    "kernel": v.kernel, "target": v.target.name(), "vgpr": r.vgpr, "agpr": r.agpr,
                    "sgpr": r.sgpr, "lds_bytes": r.lds_bytes, "scratch_bytes": r.scratch_bytes,
                    "occupancy": r.occupancy, "code_bytes": r.code_bytes, "compile_s": v.compile_s,
                    "cached": v.cached,
                })
            })
            .collect();
        let doc = serde_json::json!({ "wall_s": wall, "variants": rows });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "{:<40} {:<8} {:>5} {:>5} {:>5} {:>7} {:>7} {:>4} {:>8} {:>8}",
            "kernel",
            "target",
            "vgpr",
            "agpr",
            "sgpr",
            "lds",
            "scratch",
            "occ",
            "code B",
            "compile"
        );
        for v in &report.variants {
            let r = &v.resources;
            let amd = v.target.is_amd();
            let n = |x: u32| if amd { x.to_string() } else { "-".into() };
            println!(
                "{:<40} {:<8} {:>5} {:>5} {:>5} {:>7} {:>7} {:>4} {:>8} {:>8}",
                v.kernel,
                v.target.name(),
                n(r.vgpr),
                n(r.agpr),
                n(r.sgpr),
                r.lds_bytes,
                r.scratch_bytes,
                n(r.occupancy),
                r.code_bytes,
                if v.cached {
                    "cached".to_string()
                } else {
                    format!("{:.2}s", v.compile_s)
                }
            );
        }
        let compiled: Vec<f64> = report
            .variants
            .iter()
            .filter(|v| !v.cached)
            .map(|v| v.compile_s)
            .collect();
        println!(
            "{} variants, {} compiled (mean {:.3}s each, cpu sum {:.1}s), wall {:.1}s",
            report.variants.len(),
            compiled.len(),
            compiled.iter().sum::<f64>() / compiled.len().max(1) as f64,
            compiled.iter().sum::<f64>(),
            wall
        );
    }
    Ok(ExitCode::SUCCESS)
}
