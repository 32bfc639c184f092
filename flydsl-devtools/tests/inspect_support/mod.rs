//! Toolchain helpers for the `inspect_*` tests: `llc-22` and `rust-lld` on the LLVM IR in
//! `tests/data`. A missing toolchain skips (prints why), or fails when `CI` is set.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Tools {
    pub llc: PathBuf,
    pub lld: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn rust_lld() -> Option<PathBuf> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let vv = Command::new(&rustc).arg("-vV").output().ok()?;
    let host = String::from_utf8_lossy(&vv.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))?;
    let p = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin/rust-lld");
    p.is_file().then_some(p)
}

/// The tools (and an objdump for `disassemble`), or `None` with a printed reason.
pub fn tools() -> Option<Tools> {
    let llc = std::env::var_os("FLYDSL_LLC")
        .map(PathBuf::from)
        .or_else(|| on_path("llc-22"))
        .or_else(|| Some(PathBuf::from("/usr/lib/llvm-22/bin/llc")).filter(|p| p.is_file()));
    let lld = rust_lld();
    let objdump = flydsl_devtools::inspect::find_objdump();
    match (llc, lld, objdump) {
        (Some(llc), Some(lld), Ok(_)) => Some(Tools { llc, lld }),
        (llc, lld, objdump) => {
            let reason = format!(
                "toolchain missing (llc-22: {}, rust-lld: {}, llvm-objdump: {:?}); install llvm-22",
                llc.is_some(),
                lld.is_some(),
                objdump.err().map(|e| e.to_string())
            );
            if std::env::var_os("CI").is_some() {
                panic!("{reason}");
            }
            eprintln!("skipping: {reason}");
            None
        }
    }
}

pub fn data(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn scratch(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "inspect-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

impl Tools {
    /// Compile and link; returns the `.hsaco` path.
    pub fn hsaco(&self, ll: &str, mcpu: &str) -> PathBuf {
        let dir = scratch(mcpu);
        let (src, obj, so) = (dir.join("k.ll"), dir.join("k.o"), dir.join("k.hsaco"));
        std::fs::write(&src, ll).unwrap();
        run(Command::new(&self.llc)
            .args([
                "-O3",
                "-mtriple=amdgcn-amd-amdhsa",
                &format!("-mcpu={mcpu}"),
                "-filetype=obj",
            ])
            .arg(&src)
            .arg("-o")
            .arg(&obj));
        run(Command::new(&self.lld)
            .args(["-flavor", "gnu", "-shared"])
            .arg(&obj)
            .arg("-o")
            .arg(&so));
        so
    }

    /// The assembly text `llc` prints for the same input (an independent instruction list).
    pub fn asm(&self, ll: &str, mcpu: &str) -> String {
        let dir = scratch(mcpu);
        let src = dir.join("k.ll");
        std::fs::write(&src, ll).unwrap();
        String::from_utf8(run(Command::new(&self.llc)
            .args([
                "-O3",
                "-mtriple=amdgcn-amd-amdhsa",
                &format!("-mcpu={mcpu}"),
            ])
            .arg(&src)
            .args(["-o", "-"])))
        .unwrap()
    }

    pub fn ptx(&self, ll: &str) -> String {
        let dir = scratch("ptx");
        let src = dir.join("k.ll");
        std::fs::write(&src, ll).unwrap();
        String::from_utf8(run(Command::new(&self.llc)
            .args([
                "-O3",
                "-mtriple=nvptx64-nvidia-cuda",
                "-mcpu=sm_90a",
                "-mattr=+ptx84",
            ])
            .arg(&src)
            .args(["-o", "-"])))
        .unwrap()
    }
}
