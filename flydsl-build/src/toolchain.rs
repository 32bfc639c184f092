//! Finding and driving the LLVM toolchain: `llc` (LLVM >= 22) and `rust-lld`.

use flydsl_ir::Target;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The toolchain could not be found, lacks a target, or a tool failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ToolchainError {
    /// No `llc` able to build the target was found.
    #[error(
        "no LLVM `llc` that supports {target} was found (searched: {searched}).\n\
         Install LLVM 22 or newer: `apt-get install llvm-22` (Debian 12: bookworm-security), \
         or point FLYDSL_LLC at an llc binary, or set ROCM_PATH to a ROCm install \
         ($ROCM_PATH/llvm/bin/llc). To build without GPU code objects (Sim only), \
         select no GPU target feature and unset FLYDSL_TARGETS."
    )]
    NoLlc {
        /// Target that needs it.
        target: Target,
        /// What was tried.
        searched: String,
    },
    /// A kernel asks for rotated loops and no `opt` was found.
    #[error(
        "kernel `{0}` rotates its loops with LLVM's `opt`, and none was found beside {1} \
         (install the LLVM package's opt, e.g. `opt-22` of Debian's llvm-22, or set FLYDSL_OPT)"
    )]
    NoOpt(String, String),
    /// No linker for AMDGPU code objects.
    #[error(
        "no `rust-lld` or `ld.lld` found to link AMDGPU code objects (searched: {0}). \
         Install a rustup toolchain (it ships rust-lld) or set FLYDSL_LLD to an ld.lld binary."
    )]
    NoLld(String),
    /// A tool ran and failed.
    #[error("`{cmd}` failed for kernel `{kernel}` ({target}):\n{stderr}")]
    ToolFailed {
        /// Command line.
        cmd: String,
        /// Kernel.
        kernel: String,
        /// Target.
        target: Target,
        /// Its stderr.
        stderr: String,
    },
    /// I/O error around the tools.
    #[error("I/O error at {path}: {msg}")]
    Io {
        /// Path.
        path: String,
        /// Message.
        msg: String,
    },
}

/// A discovered `llc` + linker pair and their identity (for cache keys).
#[derive(Debug, Clone)]
pub struct Toolchain {
    /// `llc` path.
    pub llc: PathBuf,
    /// Linker path (`rust-lld` needs `-flavor gnu`).
    pub lld: Option<PathBuf>,
    /// `opt` beside `llc` (`FLYDSL_OPT` overrides), for kernels whose loops are rotated
    /// (`KernelAttrs::rotate_loops`); `None` when there is none.
    pub opt: Option<PathBuf>,
    /// True when `lld` is `rust-lld` (needs `-flavor gnu`).
    pub lld_is_rust: bool,
    /// `llc --version` output, the linker path and the NVPTX code-generation flags: part of
    /// every cache key.
    pub identity: String,
    /// Targets this `llc` can build.
    pub targets: Vec<Target>,
}

fn io_err(path: &Path, e: std::io::Error) -> ToolchainError {
    ToolchainError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    }
}

fn llc_candidates() -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(p) = std::env::var_os("FLYDSL_LLC") {
        c.push(PathBuf::from(p));
        return c;
    }
    if let Some(r) = std::env::var_os("ROCM_PATH") {
        c.push(Path::new(&r).join("llvm/bin/llc"));
    }
    for name in ["llc-22", "llc-23", "llc-24", "llc"] {
        if let Some(p) = which(name) {
            c.push(p);
        }
    }
    c.push(PathBuf::from("/usr/lib/llvm-22/bin/llc"));
    c
}

/// Whether a kernel's `rotate_loops` changes its code on `target`: AMD only (its MFMA and
/// WMMA accumulators are what the rotation frees; NVIDIA's ptxas allocates registers
/// itself).
pub fn rotates(rotate_loops: bool, target: Target) -> bool {
    rotate_loops && target.is_amd()
}

/// `opt` for the `llc` at `llc`: `FLYDSL_OPT`, else the file beside it named as `llc` with
/// `opt` for `llc` (`llc-22` -> `opt-22`).
fn find_opt(llc: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FLYDSL_OPT") {
        return Some(PathBuf::from(p));
    }
    let name = llc.file_name()?.to_str()?.replacen("llc", "opt", 1);
    let p = llc.with_file_name(name);
    p.is_file().then_some(p)
}

/// Find `name` on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn run_capture(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    Some(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Which of `wanted` this llc can build: `-mcpu=help` must list the cpu for the triple.
fn capable_targets(llc: &Path, wanted: &[Target]) -> Vec<Target> {
    let mut ok = Vec::new();
    let mut cache: Vec<(&str, String)> = Vec::new();
    for &t in wanted {
        let triple = t.triple();
        let help = match cache.iter().find(|(tr, _)| *tr == triple) {
            Some((_, h)) => h.clone(),
            None => {
                let h = run_capture(
                    Command::new(llc)
                        .arg(format!("-mtriple={triple}"))
                        .arg("-mcpu=help"),
                )
                .unwrap_or_default();
                cache.push((triple, h.clone()));
                h
            }
        };
        let listed = help
            .lines()
            .any(|l| l.split_whitespace().next() == Some(t.mcpu()));
        if listed {
            ok.push(t);
        }
    }
    ok
}

fn find_lld() -> Option<(PathBuf, bool)> {
    if let Some(p) = std::env::var_os("FLYDSL_LLD") {
        let p = PathBuf::from(p);
        let is_rust = p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains("rust-lld"));
        return Some((p, is_rust));
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    if let Some(sysroot) = run_capture(Command::new(&rustc).args(["--print", "sysroot"])) {
        let sysroot = PathBuf::from(sysroot.lines().next().unwrap_or("").trim());
        let host = std::env::var("HOST").ok().or_else(|| {
            run_capture(Command::new(&rustc).args(["-vV"]))?
                .lines()
                .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        });
        if let Some(host) = host {
            let p = sysroot.join("lib/rustlib").join(host).join("bin/rust-lld");
            if p.is_file() {
                return Some((p, true));
            }
        }
    }
    if let Some(r) = std::env::var_os("ROCM_PATH") {
        let p = Path::new(&r).join("llvm/bin/ld.lld");
        if p.is_file() {
            return Some((p, false));
        }
    }
    for name in ["ld.lld-22", "ld.lld"] {
        if let Some(p) = which(name) {
            return Some((p, false));
        }
    }
    None
}

impl Toolchain {
    /// Discover a toolchain able to build every target in `targets` (brief's order:
    /// `FLYDSL_LLC`/`FLYDSL_LLD`, `$ROCM_PATH/llvm/bin`, `llc-22`/`llc` on PATH,
    /// `/usr/lib/llvm-22/bin`), checking capability with `llc -mcpu=help`.
    ///
    /// ```no_run
    /// use flydsl_build::toolchain::Toolchain;
    /// use flydsl_build::ir::Target;
    /// let tc = Toolchain::discover(&[Target::Gfx942]).unwrap();
    /// println!("{}", tc.llc.display());
    /// ```
    pub fn discover(targets: &[Target]) -> Result<Toolchain, ToolchainError> {
        let cands = llc_candidates();
        let mut searched = Vec::new();
        let mut best: Option<(PathBuf, Vec<Target>)> = None;
        for c in &cands {
            searched.push(c.display().to_string());
            if !c.is_file() {
                continue;
            }
            let caps = capable_targets(c, targets);
            let all = caps.len() == targets.len();
            if best.as_ref().is_none_or(|(_, b)| caps.len() > b.len()) {
                best = Some((c.clone(), caps));
            }
            if all {
                break;
            }
        }
        let searched = searched.join(", ");
        let (llc, caps) = best.ok_or_else(|| ToolchainError::NoLlc {
            target: targets.first().copied().unwrap_or(Target::Gfx942),
            searched: searched.clone(),
        })?;
        if let Some(&missing) = targets.iter().find(|t| !caps.contains(t)) {
            return Err(ToolchainError::NoLlc {
                target: missing,
                searched,
            });
        }
        let needs_lld = targets.iter().any(|t| t.is_amd());
        let lld = find_lld();
        if needs_lld && lld.is_none() {
            return Err(ToolchainError::NoLld(
                "FLYDSL_LLD, rustc sysroot rust-lld, $ROCM_PATH/llvm/bin/ld.lld, ld.lld on PATH"
                    .into(),
            ));
        }
        let version = run_capture(Command::new(&llc).arg("--version")).unwrap_or_default();
        let opt = find_opt(&llc);
        // The code-generation flags (`-mcpu`, `-mattr`) enter the cache key per target through
        // `Target::codegen_id` (see `Builder`), so changing them never serves a code object
        // built with the old ones from a shared cache.
        let identity = format!(
            "{}|{}|{}|{}",
            llc.display(),
            version.trim(),
            lld.as_ref()
                .map(|l| l.0.display().to_string())
                .unwrap_or_default(),
            opt.as_ref()
                .map(|o| o.display().to_string())
                .unwrap_or_default()
        );
        Ok(Toolchain {
            llc,
            opt,
            lld_is_rust: lld.as_ref().is_some_and(|l| l.1),
            lld: lld.map(|l| l.0),
            identity,
            targets: caps,
        })
    }

    fn run(&self, mut cmd: Command, kernel: &str, target: Target) -> Result<(), ToolchainError> {
        let line = format!("{cmd:?}");
        let out = cmd.output().map_err(|e| ToolchainError::ToolFailed {
            cmd: line.clone(),
            kernel: kernel.into(),
            target,
            stderr: e.to_string(),
        })?;
        if !out.status.success() {
            return Err(ToolchainError::ToolFailed {
                cmd: line,
                kernel: kernel.into(),
                target,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(())
    }

    /// Compile LLVM IR text to the target's code object (HSACO bytes for AMD, PTX text for
    /// NVIDIA), using `work` as a scratch directory (AMD: `llc` to an object, then `rust-lld
    /// -shared`).
    pub fn compile(
        &self,
        llvm_ir: &str,
        kernel: &str,
        target: Target,
        work: &Path,
    ) -> Result<Vec<u8>, ToolchainError> {
        self.compile_with(llvm_ir, kernel, target, work, false)
    }

    /// [`Toolchain::compile`], with the kernel's loops rotated first when `rotate_loops`
    /// applies to `target` ([`rotates`]).
    pub fn compile_with(
        &self,
        llvm_ir: &str,
        kernel: &str,
        target: Target,
        work: &Path,
        rotate_loops: bool,
    ) -> Result<Vec<u8>, ToolchainError> {
        std::fs::create_dir_all(work).map_err(|e| io_err(work, e))?;
        let stem = format!("{kernel}.{}", target.name());
        let ll = work.join(format!("{stem}.ll"));
        std::fs::write(&ll, llvm_ir).map_err(|e| io_err(&ll, e))?;
        let (ll, flags) = self.prepare(&ll, kernel, target, rotate_loops)?;
        let mut llc = Command::new(&self.llc);
        llc.arg("-O3")
            .arg(format!("-mtriple={}", target.triple()))
            .arg(format!("-mcpu={}", target.mcpu()))
            .args(flags);
        if target.is_amd() {
            let obj = work.join(format!("{stem}.o"));
            llc.arg("-filetype=obj").arg(&ll).arg("-o").arg(&obj);
            self.run(llc, kernel, target)?;
            let hsaco = work.join(format!("{stem}.hsaco"));
            let lld = self
                .lld
                .as_ref()
                .ok_or_else(|| ToolchainError::NoLld("none".into()))?;
            let mut link = Command::new(lld);
            if self.lld_is_rust {
                link.args(["-flavor", "gnu"]);
            }
            link.arg("-shared").arg(&obj).arg("-o").arg(&hsaco);
            self.run(link, kernel, target)?;
            std::fs::read(&hsaco).map_err(|e| io_err(&hsaco, e))
        } else {
            let ptx = work.join(format!("{stem}.ptx"));
            llc.arg(format!("-mattr={}", target.llc_mattr()))
                .arg(&ll)
                .arg("-o")
                .arg(&ptx);
            self.run(llc, kernel, target)?;
            std::fs::read(&ptx).map_err(|e| io_err(&ptx, e))
        }
    }

    /// Emit the target assembly (`.s`) of LLVM IR text (for `FLYDSL_DUMP_DIR`).
    pub fn assembly(
        &self,
        llvm_ir_path: &Path,
        kernel: &str,
        target: Target,
        out: &Path,
        rotate_loops: bool,
    ) -> Result<(), ToolchainError> {
        let (ll, flags) = self.prepare(llvm_ir_path, kernel, target, rotate_loops)?;
        let mut llc = Command::new(&self.llc);
        llc.arg("-O3")
            .arg(format!("-mtriple={}", target.triple()))
            .arg(format!("-mcpu={}", target.mcpu()))
            .args(flags);
        if !target.llc_mattr().is_empty() {
            llc.arg(format!("-mattr={}", target.llc_mattr()));
        }
        llc.arg(&ll).arg("-o").arg(out);
        self.run(llc, kernel, target)
    }

    /// The LLVM IR file `llc` reads for `ll` and its extra flags: `ll` itself, or (for a
    /// kernel whose loops rotate on `target`) `opt -passes=loop-rotate` of it beside it, and
    /// `-amdgpu-codegenprepare-break-large-phis=false`.
    fn prepare(
        &self,
        ll: &Path,
        kernel: &str,
        target: Target,
        rotate_loops: bool,
    ) -> Result<(PathBuf, Vec<&'static str>), ToolchainError> {
        if !rotates(rotate_loops, target) {
            return Ok((ll.to_path_buf(), vec![]));
        }
        let opt = self.opt.as_ref().ok_or_else(|| {
            ToolchainError::NoOpt(kernel.to_string(), self.llc.display().to_string())
        })?;
        let rotated = ll.with_extension("rotated.ll");
        let mut cmd = Command::new(opt);
        cmd.arg("-passes=loop-rotate")
            .arg("-S")
            .arg(ll)
            .arg("-o")
            .arg(&rotated);
        self.run(cmd, kernel, target)?;
        Ok((
            rotated,
            vec!["-amdgpu-codegenprepare-break-large-phis=false"],
        ))
    }
}
