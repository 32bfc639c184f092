//! Toolchain helpers shared by the `codeobj_*` tests: compile the LLVM IR in `tests/data`
//! with `llc-22` + `rust-lld`, and run `llvm-readelf-22`.
//!
//! A missing toolchain skips a test with a printed reason, or fails it when `CI` is set.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The LLVM tools the tests use.
pub struct Tools {
    pub llc: PathBuf,
    pub readelf: PathBuf,
    pub lld: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn find(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    names.iter().find_map(|n| {
        if n.starts_with('/') {
            Some(PathBuf::from(n)).filter(|p| p.is_file())
        } else {
            on_path(n)
        }
    })
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

/// The tools, or `None` (test skipped) with a printed reason; panics when `CI` is set.
pub fn tools() -> Option<Tools> {
    let llc = find("FLYDSL_LLC", &["llc-22", "/usr/lib/llvm-22/bin/llc"]);
    let readelf = find(
        "FLYDSL_READELF",
        &["llvm-readelf-22", "/usr/lib/llvm-22/bin/llvm-readelf"],
    );
    let lld = rust_lld();
    match (llc, readelf, lld) {
        (Some(llc), Some(readelf), Some(lld)) => Some(Tools { llc, readelf, lld }),
        (llc, readelf, lld) => {
            let reason = format!(
                "LLVM 22 tools missing (llc-22: {}, llvm-readelf-22: {}, rust-lld: {}); \
                 install llvm-22 (apt-get install llvm-22)",
                llc.is_some(),
                readelf.is_some(),
                lld.is_some()
            );
            if std::env::var_os("CI").is_some() {
                panic!("{reason}");
            }
            eprintln!("skipping: {reason}");
            None
        }
    }
}

/// A fresh scratch directory for one compilation.
pub fn scratch(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "codeobj-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The text of a file in `tests/data`.
pub fn data(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Ask for code object v5 with the module flag.
pub fn with_v5_flag(ll: &str) -> String {
    format!("{ll}\n!llvm.module.flags = !{{!900}}\n!900 = !{{i32 1, !\"amdhsa_code_object_version\", i32 500}}\n")
}

/// Compiled outputs: the relocatable object and the linked code object.
pub struct Built {
    pub obj: PathBuf,
    pub hsaco: PathBuf,
}

impl Built {
    pub fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.hsaco).unwrap()
    }
}

impl Tools {
    /// `llc-22 -O3 -mtriple=amdgcn-amd-amdhsa -mcpu=<mcpu> -filetype=obj`, then
    /// `rust-lld -flavor gnu -shared`.
    pub fn build_amd(&self, ll: &str, mcpu: &str) -> Built {
        let dir = scratch(mcpu);
        let src = dir.join("k.ll");
        std::fs::write(&src, ll).unwrap();
        let obj = dir.join("k.o");
        let hsaco = dir.join("k.hsaco");
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
            .arg(&hsaco));
        Built { obj, hsaco }
    }

    /// AMDGPU assembly text (with LLVM's resource remarks).
    pub fn asm_amd(&self, ll: &str, mcpu: &str) -> String {
        let dir = scratch(mcpu);
        let src = dir.join("k.ll");
        std::fs::write(&src, ll).unwrap();
        let out = run(Command::new(&self.llc)
            .args([
                "-O3",
                "-mtriple=amdgcn-amd-amdhsa",
                &format!("-mcpu={mcpu}"),
            ])
            .arg(&src)
            .arg("-o")
            .arg("-"));
        String::from_utf8(out).unwrap()
    }

    /// PTX text from `llc-22 -mcpu=sm_90 -mattr=+ptx80`.
    pub fn ptx(&self, ll: &str) -> String {
        let dir = scratch("ptx");
        let src = dir.join("k.ll");
        std::fs::write(&src, ll).unwrap();
        let out = run(Command::new(&self.llc)
            .args(["-O3", "-mtriple=nvptx64-nvidia-cuda", "-mattr=+ptx80"])
            .arg(format!(
                "-mcpu={}",
                flydsl_ir::Target::Sm90.ptx_target().unwrap()
            ))
            .arg(&src)
            .arg("-o")
            .arg("-"));
        String::from_utf8(out).unwrap()
    }

    /// `llvm-readelf-22 <args> <file>` as text.
    pub fn readelf(&self, args: &[&str], file: &Path) -> String {
        String::from_utf8(run(Command::new(&self.readelf).args(args).arg(file))).unwrap()
    }
}
