//! `cargo xtask device-bundle`: build the sm90 test binaries, the bench/verify binary
//! (xtask itself), the launch-overhead and drop-cost examples, fly-norm's forward and backward
//! plan sweeps (`fwd_sweep`, `bwd_sweep`) and its torch cross-check (`torch_check`), the GEMM proof bench and the
//! fly-attn bench (`gemm_bench`, `attn_bench`: both fly-attn kernels on sm90) and fly-comm's
//! `allreduce_bench` in release mode (stripped), and copy them with the torch peer and
//! cross-check scripts, `py_check.py` and (`--wheel DIR`) a built `flydsl` wheel and an
//! entry script into one folder for the GPU machine. `run.sh` there runs the tests and the torch cross-check, the plan sweep, then our
//! benches and the torch peers on the same shapes in the same run, and prints a side-by-side
//! table with ratios.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Arguments of `device-bundle`.
#[derive(clap::Args)]
pub struct Args {
    /// Output folder (git-ignored; carried to the GPU machine).
    #[arg(long, default_value = ".device")]
    out: PathBuf,
    /// A folder with a built `flydsl` wheel (`cargo xtask wheel --zig --out DIR`) to ship;
    /// `run.sh` installs it and runs `py_check.py`. Without it the bundle has no wheel and
    /// `run.sh` says so.
    #[arg(long)]
    wheel: Option<PathBuf>,
}

const MAX_BYTES: u64 = 64 << 20;

/// Test binaries that read the workspace's sources (at the path they were built in), not a
/// GPU: CI runs them; the GPU machine has no sources at that path.
const SOURCE_TESTS: [&str; 1] = ["module_cycles"];

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Run cargo with `--message-format=json` and return the executables it reports.
fn executables(args: &[&str], tests_only: bool) -> Result<Vec<(String, PathBuf)>, String> {
    eprintln!("device-bundle: cargo {}", args.join(" "));
    let out = cargo()
        .args(args)
        .arg("--message-format=json")
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if m["reason"] != "compiler-artifact" {
            continue;
        }
        let (Some(exe), Some(name)) = (m["executable"].as_str(), m["target"]["name"].as_str())
        else {
            continue;
        };
        if tests_only && m["profile"]["test"] != true {
            continue;
        }
        let pkg = m["package_id"].as_str().unwrap_or("").to_string();
        let krate = pkg
            .rsplit('/')
            .next()
            .unwrap_or("")
            .split(['#', '@'])
            .next()
            .unwrap_or("")
            .to_string();
        let kind = m["target"]["kind"][0].as_str().unwrap_or("");
        let label = if kind == "lib" {
            format!("{krate}-unit")
        } else {
            format!("{krate}-{name}")
        };
        v.push((label, PathBuf::from(exe)));
    }
    Ok(v)
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copy {} -> {}: {e}", from.display(), to.display()))
}

pub fn run(a: Args) -> Result<ExitCode, String> {
    let tests = executables(
        &[
            "test",
            "--release",
            "--no-run",
            "-p",
            "fly-norm",
            "-p",
            "fly-softmax",
            "-p",
            "flydsl-tests",
            "-p",
            "flydsl-rt",
            "-p",
            "fly-gemm",
            "-p",
            "fly-attn",
            "-p",
            "fly-comm",
            "--features",
            "fly-norm/sm90,fly-softmax/sm90,flydsl-tests/sm90,fly-gemm/sm90,fly-attn/sm90,\
             fly-comm/sm90",
        ],
        true,
    )?;
    let bins = executables(
        &["build", "--release", "-p", "xtask", "--features", "sm90"],
        false,
    )?;
    let mut ex = executables(
        &[
            "build",
            "--release",
            "-p",
            "flydsl-rt",
            "--example",
            "launch_overhead",
            "--example",
            "drop_cost",
        ],
        false,
    )?;
    ex.extend(executables(
        &[
            "build",
            "--release",
            "-p",
            "fly-norm",
            "--features",
            "sm90",
            "--example",
            "fwd_sweep",
            "--example",
            "bwd_sweep",
            "--example",
            "torch_check",
        ],
        false,
    )?);
    ex.extend(executables(
        &[
            "build",
            "--release",
            "-p",
            "flydsl-tests",
            "--features",
            "sm90",
            "--example",
            "gemm_bench",
            "--example",
            "attn_bench",
        ],
        false,
    )?);
    ex.extend(executables(
        &[
            "build",
            "--release",
            "-p",
            "fly-comm",
            "--features",
            "sm90,fly-norm/sm90",
            "--example",
            "allreduce_bench",
        ],
        false,
    )?);
    let wheels: Vec<PathBuf> = match &a.wheel {
        None => Vec::new(),
        Some(dir) => {
            let w: Vec<PathBuf> = std::fs::read_dir(dir)
                .map_err(|e| format!("--wheel {}: {e}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "whl"))
                .collect();
            if w.len() != 1 {
                return Err(format!(
                    "--wheel {}: {} wheels there, want exactly one (cargo xtask wheel --zig --out DIR)",
                    dir.display(),
                    w.len()
                ));
            }
            w
        }
    };
    let _ = std::fs::remove_dir_all(&a.out);
    let stage = a.out.join("stage");
    let tdir = stage.join("tests");
    let bdir = stage.join("bin");
    for d in [&tdir, &bdir] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    for (label, exe) in &tests {
        if SOURCE_TESTS.iter().any(|t| label.ends_with(t)) {
            continue;
        }
        copy(exe, &tdir.join(label))?;
    }
    for (_, exe) in bins.iter().chain(&ex) {
        let name = exe.file_name().ok_or("executable without a file name")?;
        copy(exe, &bdir.join(name))?;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in [
        "bench/peers.py",
        "bench/compare.py",
        "bench/torch_check.py",
        "bench/peers_gemm.py",
        "bench/peers_attn.py",
        "bench/py_check.py",
        "bench/peers_allreduce.py",
        "bench/sweep.py",
        "bench/run.sh",
    ] {
        let src = root.join(f);
        copy(&src, &stage.join(src.file_name().ok_or("bad path")?))?;
    }
    // Every test binary embeds the same kernel crates, so the tarball is mostly repeats: xz
    // with a dictionary larger than the tarball stores each once (gzip's 32 KiB window
    // cannot; the GPU machine has xz but no zstd). About 90 s for 350 MiB.
    let status = Command::new("tar")
        .arg("-C")
        .arg(&stage)
        .arg("-cJf")
        .arg(std::path::absolute(a.out.join("bundle.txz")).map_err(|e| e.to_string())?)
        .arg(".")
        .env("XZ_OPT", "-3 -T1 --lzma2=dict=512MiB")
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    if !status.success() {
        return Err("tar failed".into());
    }
    std::fs::remove_dir_all(&stage).map_err(|e| e.to_string())?;
    copy(&root.join("bench/run.sh"), &a.out.join("run.sh"))?;
    // The wheel is compressed already: next to the tarball, not in it.
    for w in &wheels {
        copy(w, &a.out.join(w.file_name().ok_or("bad wheel path")?))?;
    }
    let total: u64 = walk(&a.out)?;
    eprintln!(
        "device-bundle: {} test binaries + {} tools in {} ({:.1} MiB); run it there with `bash {}/run.sh`",
        tests.len(),
        bins.len() + ex.len(),
        a.out.display(),
        total as f64 / (1 << 20) as f64,
        a.out.display()
    );
    if total > MAX_BYTES {
        return Err(format!(
            "the bundle is {total} bytes, over the 64 MiB the GPU machine accepts"
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn walk(p: &Path) -> Result<u64, String> {
    let mut n = 0;
    for e in std::fs::read_dir(p).map_err(|e| format!("{}: {e}", p.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        let md = e.metadata().map_err(|e| e.to_string())?;
        n += if md.is_dir() {
            walk(&e.path())?
        } else {
            md.len()
        };
    }
    Ok(n)
}
