//! `cargo xtask wheel`: build the `flydsl` Python wheel (abi3, CPython >= 3.9) from
//! `flydsl-py` with maturin, with the code objects of the chosen GPU targets (sm90 by
//! default), into a folder; print the wheel's path, size and the glibc it needs (this
//! machine's, or glibc 2.28 with `--zig`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Arguments of `wheel`.
#[derive(clap::Args)]
pub struct Args {
    /// Folder to write the wheel into.
    #[arg(long, default_value = "target/wheels")]
    out: PathBuf,
    /// GPU targets to embed code objects for (comma list of flydsl-py features: sm90,
    /// gfx942, gfx950, gfx1201, gfx1250, all-targets). A HIP wheel takes the AMD targets.
    #[arg(long, default_value = "sm90")]
    targets: String,
    /// The maturin executable (default: `$MATURIN`, else `maturin` on PATH, else
    /// `python3 -m maturin`).
    #[arg(long)]
    maturin: Option<String>,
    /// Link with zig for the manylinux_2_28 policy (glibc >= 2.28, torch's own wheel
    /// policy) instead of this machine's glibc; needs `python3 -m pip install ziglang` in the
    /// first `python3` on PATH.
    #[arg(long)]
    zig: bool,
}

/// The oldest maturin that sets `PYO3_BUILD_EXTENSION_MODULE` (PyO3 >= 0.26 needs it to
/// build an extension module that does not link libpython).
const MIN_MATURIN: (u32, u32, u32) = (1, 9, 4);

/// Wheels larger than this are refused (they are carried to the GPU machine).
const MAX_BYTES: u64 = 30 << 20;

const INSTALL: &str = "install it with `python3 -m pip install 'maturin>=1.9.4'` (or pass \
                       --maturin PATH / set MATURIN=PATH)";

/// A maturin command (program + leading args) and its version.
fn find_maturin(explicit: Option<&str>) -> Result<(Vec<String>, String), String> {
    let mut candidates: Vec<Vec<String>> = Vec::new();
    if let Some(m) = explicit {
        candidates.push(vec![m.to_string()]);
    } else if let Ok(m) = std::env::var("MATURIN") {
        candidates.push(vec![m]);
    } else {
        candidates.push(vec!["maturin".into()]);
        candidates.push(vec!["python3".into(), "-m".into(), "maturin".into()]);
    }
    for c in &candidates {
        let Ok(out) = Command::new(&c[0]).args(&c[1..]).arg("--version").output() else {
            continue;
        };
        if out.status.success() {
            let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
            return Ok((c.clone(), v));
        }
    }
    let tried: Vec<String> = candidates.iter().map(|c| c.join(" ")).collect();
    Err(format!(
        "maturin is missing (tried: {}); {INSTALL}",
        tried.join(", ")
    ))
}

/// `(major, minor, patch)` of `maturin 1.16.0`.
fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let num = v.split_whitespace().last()?;
    let mut it = num.split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

/// The glibc a wheel needs, from its platform tag (`..-manylinux_2_28_x86_64.whl`).
fn glibc_of(wheel: &Path) -> Option<String> {
    let name = wheel.file_name()?.to_str()?;
    let tag = name.split("manylinux_").nth(1)?;
    let mut it = tag.split('_');
    Some(format!("{}.{}", it.next()?, it.next()?))
}

pub fn run(a: Args) -> Result<ExitCode, String> {
    let (maturin, version) = find_maturin(a.maturin.as_deref())?;
    match parse_version(&version) {
        Some(v) if v >= MIN_MATURIN => {}
        _ => {
            return Err(format!(
                "`{version}` is older than maturin 1.9.4 (or unreadable); {INSTALL}"
            ))
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent folder")?
        .to_path_buf();
    std::fs::create_dir_all(&a.out).map_err(|e| format!("cannot create {:?}: {e}", a.out))?;
    let out = a
        .out
        .canonicalize()
        .map_err(|e| format!("{:?}: {e}", a.out))?;
    let before: Vec<PathBuf> = wheels(&out);
    eprintln!("wheel: {version}; targets {}", a.targets);
    let status = Command::new(&maturin[0])
        .args(&maturin[1..])
        .args(["build", "--release", "--manifest-path"])
        .arg(root.join("flydsl-py/Cargo.toml"))
        .args(["--features", &a.targets, "--out"])
        .arg(&out)
        .args(if a.zig {
            &["--zig", "--compatibility", "manylinux_2_28"][..]
        } else {
            &[][..]
        })
        .status()
        .map_err(|e| format!("cannot run {}: {e}", maturin.join(" ")))?;
    if !status.success() {
        let hint = if a.zig {
            " (with --zig: is ziglang installed? `python3 -m pip install ziglang`)"
        } else {
            ""
        };
        return Err(format!("maturin build failed ({status}){hint}"));
    }
    let mut built: Vec<PathBuf> = wheels(&out);
    built.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    let Some(wheel) = built
        .last()
        .filter(|w| !before.contains(w) || built.len() == 1)
    else {
        return Err(format!("maturin wrote no wheel into {}", out.display()));
    };
    let size = std::fs::metadata(wheel).map_err(|e| e.to_string())?.len();
    println!(
        "wheel: {} ({:.1} MiB)",
        wheel.display(),
        size as f64 / (1 << 20) as f64
    );
    match glibc_of(wheel) {
        Some(g) => println!("wheel: installs where glibc >= {g} (its manylinux tag)"),
        None => println!("wheel: no manylinux tag (linux only: this machine's glibc)"),
    }
    if size > MAX_BYTES {
        eprintln!(
            "wheel: {} bytes is over the {} MiB limit",
            size,
            MAX_BYTES >> 20
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn wheels(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "whl"))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maturin_versions() {
        assert_eq!(parse_version("maturin 1.16.0"), Some((1, 16, 0)));
        assert_eq!(parse_version("maturin 1.9.4"), Some((1, 9, 4)));
        assert!(parse_version("maturin 1.9.3").unwrap() < MIN_MATURIN);
        assert_eq!(parse_version("maturin 2.0.0-beta.1"), Some((2, 0, 0)));
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn glibc_from_the_platform_tag() {
        let w = Path::new("d/flydsl-0.1.0-cp39-abi3-manylinux_2_28_x86_64.whl");
        assert_eq!(glibc_of(w).as_deref(), Some("2.28"));
        assert_eq!(
            glibc_of(Path::new("flydsl-0.1.0-cp39-abi3-linux_x86_64.whl")),
            None
        );
    }

    #[test]
    fn a_missing_maturin_says_how_to_install_it() {
        let e = find_maturin(Some("/nonexistent/maturin")).unwrap_err();
        assert!(e.contains("pip install"), "{e}");
        assert!(e.contains("/nonexistent/maturin"), "{e}");
    }
}
