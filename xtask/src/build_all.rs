//! `cargo xtask build-all`: every kernel variant of every family for every target, with a
//! resource table. It builds the kernel crates with `FLYDSL_TARGETS` (so the variants are
//! exactly the ones their build scripts declare), then reads each build script's
//! `flydsl_report.txt`. A variant with scratch or LDS over the target's limit fails the
//! build itself (`flydsl_build::check`). For the compute-bound families (fly-gemm, fly-attn)
//! on AMD it also prints the hot loop's instruction mix (the loop with the most matrix
//! instructions in `llvm-objdump`'s listing of the code object:
//! `flydsl_devtools::inspect::hot_loop_mix`).

use flydsl_build::parse_targets;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// Arguments of `build-all`.
#[derive(clap::Args)]
pub struct Args {
    /// Comma list of targets (default: all five).
    #[arg(long, default_value = "all")]
    targets: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Compile every variant again (fresh code-object cache), to measure compile times.
    #[arg(long)]
    cold: bool,
}

/// The kernel crates (the `flydsl-tests` crate holds the generator's proof kernels).
const CRATES: [&str; 5] = [
    "flydsl-tests",
    "fly-norm",
    "fly-softmax",
    "fly-gemm",
    "fly-attn",
];

/// The crates whose AMD variants get the hot-loop instruction mix.
const MIX_CRATES: [&str; 2] = ["fly-gemm", "fly-attn"];

/// One row of a build script's report.
struct Row {
    krate: String,
    fields: BTreeMap<String, String>,
    kernel: String,
    target: String,
}

/// The hot-loop mix of an AMD variant's code object in `out_dir`, as report fields
/// (`mma`, `vmem`, `ds_r`, `ds_w`, `wait`, `bar`), or a note of why there is none.
fn hot_loop_fields(out_dir: &str, r: &Row) -> BTreeMap<String, String> {
    let mut f = BTreeMap::new();
    let Some(t) = r
        .target
        .parse::<flydsl_ir::Target>()
        .ok()
        .filter(|t| t.is_amd())
    else {
        return f;
    };
    let path = std::path::Path::new(out_dir).join(format!("{}.{}.hsaco", r.kernel, r.target));
    let mix = flydsl_devtools::inspect::disassemble(path.as_path(), t.mcpu())
        .map(|d| flydsl_devtools::inspect::hot_loop_mix(&d));
    match mix {
        Ok(Some(m)) => {
            for (k, v) in [
                ("mma", m.mma),
                ("vmem", m.vmem_load + m.vmem_store),
                ("ds_r", m.ds_read),
                ("ds_w", m.ds_write),
                ("wait", m.waitcnt),
                ("bar", m.barrier),
            ] {
                f.insert(k.to_string(), v.to_string());
            }
        }
        Ok(None) => {
            f.insert("mma".into(), "no-loop".into());
        }
        Err(e) => {
            f.insert("mma".into(), format!("({e})").replace(' ', "_"));
        }
    }
    f
}

fn parse_report(krate: &str, text: &str) -> Vec<Row> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let kernel = it.next()?.to_string();
            let target = it.next()?.to_string();
            let fields = it
                .filter_map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                })
                .collect();
            Some(Row {
                krate: krate.to_string(),
                fields,
                kernel,
                target,
            })
        })
        .collect()
}

pub fn run(a: Args) -> Result<ExitCode, String> {
    let targets = parse_targets(&a.targets)?;
    if targets.is_empty() {
        return Err("--targets selected no target".into());
    }
    let list: Vec<&str> = targets.iter().map(|t| t.name()).collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cache = if a.cold {
        let d = std::env::temp_dir().join(format!("flydsl-build-all-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    } else {
        root.join("target/flydsl-cache")
    };
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(&root)
        .args(["build", "--message-format=json-render-diagnostics"])
        .env("FLYDSL_TARGETS", list.join(","))
        .env("FLYDSL_CACHE_DIR", &cache)
        .stdout(Stdio::piped());
    for c in CRATES {
        cmd.args(["-p", c]);
    }
    eprintln!(
        "build-all: building {} for {} (cache {})",
        CRATES.join(", "),
        list.join(","),
        cache.display()
    );
    let t0 = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot run cargo: {e}"))?;
    let mut out_dirs: BTreeMap<String, String> = BTreeMap::new();
    let stdout = child.stdout.take().ok_or("no cargo stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| e.to_string())?;
        let Ok(m) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if m["reason"] == "build-script-executed" {
            let id = m["package_id"].as_str().unwrap_or("");
            if let Some(c) = CRATES.iter().find(|c| {
                id.contains(&format!("/{c}#"))
                    || id.contains(&format!("{c}@"))
                    || id.contains(&format!("/{c}@"))
            }) {
                out_dirs.insert(
                    c.to_string(),
                    m["out_dir"].as_str().unwrap_or("").to_string(),
                );
                eprintln!(
                    "build-all: {c}: kernels built ({:.0} s)",
                    t0.elapsed().as_secs_f64()
                );
            }
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err("the build failed (see the errors above: a scratch spill or LDS over a target's limit fails it)".into());
    }
    let wall = t0.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for c in CRATES {
        let dir = out_dirs
            .get(c)
            .ok_or_else(|| format!("cargo reported no build-script output for {c}"))?;
        let text = std::fs::read_to_string(std::path::Path::new(dir).join("flydsl_report.txt"))
            .map_err(|e| format!("{c}: reading flydsl_report.txt: {e}"))?;
        let mut part = parse_report(c, &text);
        if MIX_CRATES.contains(&c) {
            for r in &mut part {
                let mix = hot_loop_fields(dir, r);
                r.fields.extend(mix);
            }
        }
        rows.extend(part);
    }
    let f = |r: &Row, k: &str| r.fields.get(k).cloned().unwrap_or_default();
    if a.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let mut o = serde_json::Map::new();
                o.insert("crate".into(), r.krate.clone().into());
                o.insert("kernel".into(), r.kernel.clone().into());
                o.insert("target".into(), r.target.clone().into());
                for (k, val) in &r.fields {
                    let j = val
                        .parse::<f64>()
                        .map(serde_json::Value::from)
                        .unwrap_or_else(|_| val.clone().into());
                    o.insert(k.clone(), j);
                }
                serde_json::Value::Object(o)
            })
            .collect();
        let doc = serde_json::json!({"wall_s": wall, "targets": list, "variants": v});
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<12} {:<40} {:<8} {:>5} {:>5} {:>5} {:>6} {:>7} {:>4} {:>8} {:>8}  hot loop: mma vmem ds_r ds_w wait bar",
        "crate",
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
    let mut compiled = Vec::new();
    for r in &rows {
        let amd = r.target != "sm90";
        let n = |k: &str| if amd { f(r, k) } else { "-".into() };
        let secs: f64 = f(r, "compile_s").parse().unwrap_or(0.0);
        let cached = f(r, "cached") == "true";
        if !cached {
            compiled.push(secs);
        }
        let mix: String = ["mma", "vmem", "ds_r", "ds_w", "wait", "bar"]
            .iter()
            .filter_map(|k| r.fields.get(*k).map(|v| format!(" {v:>4}")))
            .collect();
        println!(
            "{:<12} {:<40} {:<8} {:>5} {:>5} {:>5} {:>6} {:>7} {:>4} {:>8} {:>8} {mix}",
            r.krate,
            r.kernel,
            r.target,
            n("vgpr"),
            n("agpr"),
            n("sgpr"),
            f(r, "lds"),
            f(r, "scratch"),
            n("occupancy"),
            f(r, "code_bytes"),
            if cached {
                "cached".into()
            } else {
                format!("{secs:.2}s")
            }
        );
    }
    println!(
        "{} variants ({} compiled now, mean {:.3} s each, {:.1} s in total), wall {:.1} s",
        rows.len(),
        compiled.len(),
        compiled.iter().sum::<f64>() / compiled.len().max(1) as f64,
        compiled.iter().sum::<f64>(),
        wall
    );
    Ok(ExitCode::SUCCESS)
}
