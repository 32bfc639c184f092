//! The build-script API: declare kernels, select targets, compile (cached, in parallel),
//! check, and write artifacts plus Rust glue into `OUT_DIR`.

use crate::cache::Cache;
use crate::glue;
use crate::toolchain::{Toolchain, ToolchainError};
use flydsl_dsl::BuildError;
use flydsl_ir::{Kernel, Target};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Everything that can stop a kernel crate's build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenError {
    /// A kernel description is invalid.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Lowering to LLVM IR failed.
    #[error("lowering kernel `{kernel}` for {target}: {msg}")]
    Lower {
        /// Kernel.
        kernel: String,
        /// Target.
        target: Target,
        /// Reason.
        msg: String,
    },
    /// The toolchain is missing or failed.
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    /// A built code object failed a structural check.
    #[error("code object of kernel `{kernel}` for {target} failed a check: {msg}")]
    Check {
        /// Kernel.
        kernel: String,
        /// Target.
        target: Target,
        /// What failed.
        msg: String,
    },
    /// Bad configuration (target names, environment, kernel names).
    #[error("{0}")]
    Config(String),
    /// File I/O.
    #[error("I/O error at {path}: {msg}")]
    Io {
        /// Path.
        path: String,
        /// Message.
        msg: String,
    },
}

type GenFn = dyn Fn(Target) -> Result<Kernel, BuildError> + Send + Sync;

/// One declared kernel: a name and a function that builds it for a target.
#[derive(Clone)]
pub struct KernelSpec {
    /// Kernel (and launcher) name: lowercase identifier.
    pub name: String,
    /// Targets it exists on (default all).
    pub targets: Vec<Target>,
    gen: Arc<GenFn>,
}

impl std::fmt::Debug for KernelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSpec")
            .field("name", &self.name)
            .field("targets", &self.targets)
            .finish()
    }
}

impl KernelSpec {
    /// Build this kernel's IR for `target`, checking that it carries the declared name.
    pub fn build_ir(&self, target: Target) -> Result<Kernel, GenError> {
        let k = (self.gen)(target)?;
        if k.name != self.name {
            return Err(GenError::Config(format!(
                "kernel declared as `{}` built a kernel named `{}`; the names must match",
                self.name, k.name
            )));
        }
        Ok(k)
    }
}

/// Resources and timings of one built variant.
#[derive(Debug, Clone)]
pub struct VariantReport {
    /// Kernel.
    pub kernel: String,
    /// Target.
    pub target: Target,
    /// Seconds spent lowering + compiling (0 when cached).
    pub compile_s: f64,
    /// Whether the code object came from the cache.
    pub cached: bool,
    /// Structural facts read back from the code object.
    pub resources: crate::check::Resources,
}

/// The result of a build.
#[derive(Debug, Clone, Default)]
pub struct BuildReport {
    /// One entry per (kernel, built target).
    pub variants: Vec<VariantReport>,
    /// Path of the generated Rust glue.
    pub glue: PathBuf,
}

/// Declares kernels and builds them.
///
/// ```no_run
/// // build.rs of a kernel crate
/// use flydsl_build::{Builder, ir::{ScalarType::F32, Target}};
/// use flydsl_dsl::*; // in the kernel crate's kernels/ files
/// fn main() {
///     Builder::from_env()
///         .kernel("scale_f32", |t: Target| {
///             KernelBuilder::new("scale_f32", t, 256).build(|k| {
///                 let x = k.tensor_mut("x", F32);
///                 let i = block_id_x() * 256 + thread_id_x();
///                 if_(i.cast(flydsl_build::ir::ScalarType::I64).lt(x.len()), || x.store(i, x.load(i) * 2.0));
///             })
///         })
///         .run_or_exit();
/// }
/// ```
pub struct Builder {
    crate_name: String,
    out_dir: Option<PathBuf>,
    targets: Result<Vec<Target>, String>,
    kernels: Vec<KernelSpec>,
    tables: Vec<glue::DispatchTable>,
    cache_dir: Option<PathBuf>,
    dump_dir: Option<PathBuf>,
    progress: Option<Arc<ProgressFn>>,
}

/// Called after each (kernel, target) job with (jobs done, jobs total, kernel, target).
pub type ProgressFn = dyn Fn(usize, usize, &str, Target) + Send + Sync;

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("crate_name", &self.crate_name)
            .field("out_dir", &self.out_dir)
            .field("targets", &self.targets)
            .field("kernels", &self.kernels)
            .finish_non_exhaustive()
    }
}

/// Parse a `FLYDSL_TARGETS`-style comma list (`all` selects every target).
///
/// ```
/// use flydsl_build::{parse_targets, ir::Target};
/// assert_eq!(parse_targets("gfx942, sm90").unwrap(), vec![Target::Gfx942, Target::Sm90]);
/// assert_eq!(parse_targets("all").unwrap().len(), 5);
/// assert!(parse_targets("gfx908").is_err());
/// ```
pub fn parse_targets(list: &str) -> Result<Vec<Target>, String> {
    let mut v = Vec::new();
    for part in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if part == "all" || part == "all-targets" {
            return Ok(Target::ALL.to_vec());
        }
        let t: Target = part
            .parse()
            .map_err(|e: flydsl_ir::target::UnknownTarget| format!("FLYDSL_TARGETS: {e}"))?;
        if !v.contains(&t) {
            v.push(t);
        }
    }
    v.sort();
    Ok(v)
}

fn targets_from_env() -> Result<Vec<Target>, String> {
    if let Ok(list) = std::env::var("FLYDSL_TARGETS") {
        return parse_targets(&list);
    }
    if std::env::var_os("CARGO_FEATURE_ALL_TARGETS").is_some() {
        return Ok(Target::ALL.to_vec());
    }
    Ok(Target::ALL
        .into_iter()
        .filter(|t| {
            std::env::var_os(format!("CARGO_FEATURE_{}", t.name().to_ascii_uppercase())).is_some()
        })
        .collect())
}

fn io(path: &Path, e: std::io::Error) -> GenError {
    GenError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    }
}

impl Builder {
    /// A builder configured from a build script's environment: `OUT_DIR`, `CARGO_PKG_NAME`,
    /// the crate's target features (`CARGO_FEATURE_GFX942`, ..., `CARGO_FEATURE_ALL_TARGETS`)
    /// or `FLYDSL_TARGETS`, `FLYDSL_CACHE_DIR` and `FLYDSL_DUMP_DIR`.
    pub fn from_env() -> Builder {
        for var in [
            "FLYDSL_TARGETS",
            "FLYDSL_LLC",
            "FLYDSL_LLD",
            "ROCM_PATH",
            "FLYDSL_DUMP_DIR",
            "FLYDSL_CACHE_DIR",
        ] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        Builder {
            crate_name: std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "unknown".into()),
            out_dir: std::env::var_os("OUT_DIR").map(PathBuf::from),
            targets: targets_from_env(),
            kernels: Vec::new(),
            tables: Vec::new(),
            cache_dir: std::env::var_os("FLYDSL_CACHE_DIR").map(PathBuf::from),
            dump_dir: std::env::var_os("FLYDSL_DUMP_DIR").map(PathBuf::from),
            progress: None,
        }
    }
    /// A builder with explicit settings (tests, xtask).
    pub fn new(crate_name: &str, out_dir: impl Into<PathBuf>, targets: &[Target]) -> Builder {
        Builder {
            crate_name: crate_name.into(),
            out_dir: Some(out_dir.into()),
            targets: Ok(targets.to_vec()),
            kernels: Vec::new(),
            tables: Vec::new(),
            cache_dir: None,
            dump_dir: std::env::var_os("FLYDSL_DUMP_DIR").map(PathBuf::from),
            progress: None,
        }
    }
    /// Report progress after every (kernel, target) job (for long builds in tools).
    pub fn on_progress(
        mut self,
        f: impl Fn(usize, usize, &str, Target) + Send + Sync + 'static,
    ) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }
    /// Use a specific cache directory (default `OUT_DIR/flydsl-cache`).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }
    /// Declare a kernel available on every target.
    pub fn kernel(
        self,
        name: &str,
        gen: impl Fn(Target) -> Result<Kernel, BuildError> + Send + Sync + 'static,
    ) -> Self {
        self.kernel_on(name, &Target::ALL, gen)
    }
    /// Declare a kernel that exists only on `targets`.
    pub fn kernel_on(
        mut self,
        name: &str,
        targets: &[Target],
        gen: impl Fn(Target) -> Result<Kernel, BuildError> + Send + Sync + 'static,
    ) -> Self {
        self.kernels.push(KernelSpec {
            name: name.into(),
            targets: targets.to_vec(),
            gen: Arc::new(gen),
        });
        self
    }
    /// Write the typed dispatch table `table` into the glue, after the launchers (see
    /// [`glue::DispatchTable`]); its kernels must be declared.
    ///
    /// ```no_run
    /// use flydsl_build::{glue::DispatchTable, ir::DType, Builder};
    /// # fn build(d: DType, t: flydsl_build::ir::Target) -> Result<flydsl_build::ir::Kernel, flydsl_dsl::BuildError> { unimplemented!() }
    /// let mut b = Builder::from_env();
    /// let mut table = DispatchTable::new("SCALE", "crate::ScaleFns");
    /// for d in DType::ALL {
    ///     let name = format!("scale_{}", d.name());
    ///     b = b.kernel(&name, move |t| build(d, t));
    ///     table = table.entry(&[d], "()", &name);
    /// }
    /// b.table(table).run_or_exit();
    /// ```
    pub fn table(mut self, table: glue::DispatchTable) -> Self {
        self.tables.push(table);
        self
    }
    /// The declared kernels.
    pub fn specs(&self) -> &[KernelSpec] {
        &self.kernels
    }
    /// The selected GPU targets.
    pub fn selected_targets(&self) -> Result<Vec<Target>, GenError> {
        self.targets.clone().map_err(GenError::Config)
    }

    /// Build everything; on error print it for cargo and exit with status 1 (no backtrace).
    pub fn run_or_exit(self) -> BuildReport {
        match self.run() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: flydsl kernel build failed: {e}");
                std::process::exit(1);
            }
        }
    }

    /// Build every kernel: IR for all targets (Sim), code objects for the selected ones.
    pub fn run(self) -> Result<BuildReport, GenError> {
        let out = self.out_dir.clone().ok_or_else(|| {
            GenError::Config(
                "OUT_DIR is not set: run from a build script or use Builder::new".into(),
            )
        })?;
        let selected = self.selected_targets()?;
        for k in &self.kernels {
            if k.name.is_empty()
                || !k
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(GenError::Config(format!(
                    "kernel name `{}` must be a lowercase identifier ([a-z0-9_])",
                    k.name
                )));
            }
            if self.kernels.iter().filter(|o| o.name == k.name).count() > 1 {
                return Err(GenError::Config(format!(
                    "kernel `{}` is declared twice",
                    k.name
                )));
            }
        }
        self.check_tables()?;
        std::fs::create_dir_all(&out).map_err(|e| io(&out, e))?;
        let toolchain = if selected.is_empty() {
            None
        } else {
            Some(Toolchain::discover(&selected)?)
        };
        let cache = Cache::new(
            self.cache_dir
                .clone()
                .unwrap_or_else(|| out.join("flydsl-cache")),
        );

        // IR for every (kernel, target it exists on): always, for the Sim backend.
        let jobs: Vec<(&KernelSpec, Target)> = self
            .kernels
            .iter()
            .flat_map(|k| k.targets.iter().map(move |&t| (k, t)))
            .collect();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let total = jobs.len();
        let results: Vec<Result<(Kernel, Option<VariantReport>), GenError>> = jobs
            .par_iter()
            .map(|&(spec, t)| {
                let ir = spec.build_ir(t)?;
                let irp = out.join(glue::artifact_name(&spec.name, t, "ir"));
                write_if_changed(&irp, &flydsl_ir::to_bytes(&ir))?;
                let report = match (&toolchain, selected.contains(&t)) {
                    (Some(tc), true) => Some(self.compile_variant(tc, &cache, &ir, &out)?),
                    _ => None,
                };
                if let Some(p) = &self.progress {
                    let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    p(d, total, &spec.name, t);
                }
                Ok((ir, report))
            })
            .collect();
        let mut report = BuildReport::default();
        let mut glue_src = String::from("// @generated by flydsl-build. Do not edit.\n\n");
        let mut per_kernel: Vec<(String, Kernel, Vec<Target>, Vec<Target>)> = Vec::new();
        for r in results {
            let (ir, v) = r?;
            let entry = match per_kernel.iter_mut().find(|e| e.0 == ir.name) {
                Some(e) => e,
                None => {
                    per_kernel.push((ir.name.clone(), ir.clone(), vec![], vec![]));
                    per_kernel.last_mut().expect("just pushed")
                }
            };
            entry.3.push(ir.target);
            if let Some(v) = v {
                entry.2.push(v.target);
                report.variants.push(v);
            }
        }
        for (_, ir, built, have_ir) in &per_kernel {
            glue::emit_kernel(&mut glue_src, &self.crate_name, ir, built, have_ir)
                .map_err(GenError::Config)?;
        }
        glue_src.push_str(
            "/// Every kernel of this crate, in declaration order.\n#[allow(dead_code)]\npub static ALL_KERNELS: &[&::flydsl_rt::KernelVariants] = &[\n",
        );
        for (name, ..) in &per_kernel {
            glue_src.push_str(&format!("    &{},\n", glue::static_name(name)));
        }
        glue_src.push_str("];\n\n");
        for t in &self.tables {
            t.emit(&mut glue_src).map_err(GenError::Config)?;
        }
        let glue_path = out.join("flydsl_kernels.rs");
        write_if_changed(&glue_path, glue_src.as_bytes())?;
        report.glue = glue_path;
        let summary = report_text(&report);
        write_if_changed(&out.join("flydsl_report.txt"), summary.as_bytes())?;
        Ok(report)
    }

    /// Every table names declared kernels, and no two statics of the glue share a name.
    fn check_tables(&self) -> Result<(), GenError> {
        let mut statics: Vec<String> = self
            .kernels
            .iter()
            .map(|k| glue::static_name(&k.name))
            .collect();
        statics.push("ALL_KERNELS".into());
        for t in &self.tables {
            if let Some(k) = t
                .kernels()
                .find(|k| !self.kernels.iter().any(|s| s.name == *k))
            {
                return Err(GenError::Config(format!(
                    "dispatch table `{}` names kernel `{k}`, which is not declared; declare it \
                     with Builder::kernel first",
                    t.name()
                )));
            }
            if statics.iter().any(|s| s == t.name()) {
                return Err(GenError::Config(format!(
                    "dispatch table `{}` has the name of another static of the glue (a kernel's \
                     variant table or ALL_KERNELS); rename it",
                    t.name()
                )));
            }
            statics.push(t.name().to_string());
        }
        Ok(())
    }

    fn compile_variant(
        &self,
        tc: &Toolchain,
        cache: &Cache,
        ir: &Kernel,
        out: &Path,
    ) -> Result<VariantReport, GenError> {
        let t0 = Instant::now();
        let t = ir.target;
        let llvm = flydsl_codegen::lower(ir).map_err(|e| GenError::Lower {
            kernel: ir.name.clone(),
            target: t,
            msg: e.to_string(),
        })?;
        let rotate = ir.attrs.rotate_loops;
        // Rotated loops are code generation of their own: part of the key where they apply.
        let codegen = if crate::toolchain::rotates(rotate, t) {
            format!("{}|rotate-loops", t.codegen_id())
        } else {
            t.codegen_id()
        };
        let key = Cache::key(&llvm, &codegen, &tc.identity);
        let (code, cached) = match cache.get(&key) {
            Some(c) => (c, true),
            None => {
                let work = out
                    .join("flydsl-work")
                    .join(format!("{}.{}", ir.name, t.name()));
                let code = tc.compile_with(&llvm, &ir.name, t, &work, rotate)?;
                cache.put(&key, &code).map_err(|e| io(cache.dir(), e))?;
                let _ = std::fs::remove_dir_all(&work);
                (code, false)
            }
        };
        if let Some(dump) = &self.dump_dir {
            self.dump(tc, dump, ir, &llvm, &code)?;
        }
        let resources =
            crate::check::check_code_object(ir, &code).map_err(|msg| GenError::Check {
                kernel: ir.name.clone(),
                target: t,
                msg,
            })?;
        let path = out.join(glue::artifact_name(&ir.name, t, glue::code_ext(t)));
        write_if_changed(&path, &code)?;
        Ok(VariantReport {
            kernel: ir.name.clone(),
            target: t,
            compile_s: if cached {
                0.0
            } else {
                t0.elapsed().as_secs_f64()
            },
            cached,
            resources,
        })
    }

    fn dump(
        &self,
        tc: &Toolchain,
        dir: &Path,
        ir: &Kernel,
        llvm: &str,
        code: &[u8],
    ) -> Result<(), GenError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let t = ir.target;
        let ll = dir.join(glue::artifact_name(&ir.name, t, "ll"));
        std::fs::write(&ll, llvm).map_err(|e| io(&ll, e))?;
        let s = dir.join(glue::artifact_name(&ir.name, t, "s"));
        tc.assembly(&ll, &ir.name, t, &s, ir.attrs.rotate_loops)?;
        let obj = dir.join(glue::artifact_name(&ir.name, t, glue::code_ext(t)));
        std::fs::write(&obj, code).map_err(|e| io(&obj, e))?;
        Ok(())
    }
}

/// One line per built variant: kernel, target, cached, seconds, resources.
pub fn report_text(r: &BuildReport) -> String {
    let mut s = String::new();
    for v in &r.variants {
        let x = &v.resources;
        s.push_str(&format!(
            "{} {} cached={} compile_s={:.3} vgpr={} agpr={} sgpr={} lds={} scratch={} occupancy={} code_bytes={}\n",
            v.kernel, v.target, v.cached, v.compile_s, x.vgpr, x.agpr, x.sgpr, x.lds_bytes, x.scratch_bytes, x.occupancy, x.code_bytes
        ));
    }
    s
}

/// [`glue::write_if_changed`], with the path in the error.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), GenError> {
    glue::write_if_changed(path, bytes).map_err(|e| io(path, e))
}
