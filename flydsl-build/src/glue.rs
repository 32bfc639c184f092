//! Emission of the Rust launch glue a kernel crate `include!`s: the variant tables and one
//! typed launcher per kernel, whose argument packing comes from the kernel's signature.

use flydsl_ir::{DType, Kernel, ParamKind, ScalarType, Target};
use std::fmt::Write;

/// The Rust type a launcher uses for elements of `t`, or `None` if `t` cannot cross the
/// kernel boundary.
pub fn rust_type(t: ScalarType) -> Option<&'static str> {
    Some(match t {
        ScalarType::F32 => "f32",
        ScalarType::F16 => "::flydsl_rt::half::f16",
        ScalarType::BF16 => "::flydsl_rt::half::bf16",
        ScalarType::I8 => "i8",
        ScalarType::I16 => "i16",
        ScalarType::I32 => "i32",
        ScalarType::I64 => "i64",
        ScalarType::F8E4M3FN => "::flydsl_rt::F8E4M3FN",
        ScalarType::F8E4M3FNUZ => "::flydsl_rt::F8E4M3FNUZ",
        ScalarType::F8E5M2 => "::flydsl_rt::F8E5M2",
        ScalarType::F8E5M2FNUZ => "::flydsl_rt::F8E5M2FNUZ",
        ScalarType::I1 => return None,
    })
}

/// The name of a kernel's variant-table static (`VADD_F32` for `vadd_f32`).
pub fn static_name(kernel: &str) -> String {
    kernel.to_ascii_uppercase()
}

fn target_path(t: Target) -> &'static str {
    match t {
        Target::Gfx942 => "Gfx942",
        Target::Gfx950 => "Gfx950",
        Target::Gfx1201 => "Gfx1201",
        Target::Gfx1250 => "Gfx1250",
        Target::Sm90 => "Sm90",
    }
}

/// File name of an artifact in OUT_DIR.
pub fn artifact_name(kernel: &str, target: Target, ext: &str) -> String {
    format!("{kernel}.{}.{ext}", target.name())
}

/// The extension of a target's code object.
pub fn code_ext(target: Target) -> &'static str {
    if target.is_amd() {
        "hsaco"
    } else {
        "ptx"
    }
}

/// Emit the glue for one kernel. `ir` is the kernel built for any target (the signature is
/// the same on every target); `built` lists the targets whose code objects exist and
/// `have_ir` the targets the kernel exists on.
pub fn emit_kernel(
    out: &mut String,
    crate_name: &str,
    ir: &Kernel,
    built: &[Target],
    have_ir: &[Target],
) -> Result<(), String> {
    let name = &ir.name;
    let st = static_name(name);
    let layout = ir.kernarg_layout();
    let _ = writeln!(out, "/// All compiled forms of the kernel `{name}` (IR for every target; code objects for the targets built).");
    let _ = writeln!(
        out,
        "pub static {st}: ::flydsl_rt::KernelVariants = ::flydsl_rt::KernelVariants {{"
    );
    let _ = writeln!(
        out,
        "    name: {name:?},\n    crate_name: {crate_name:?},\n    variants: &["
    );
    for t in Target::ALL.into_iter().filter(|t| have_ir.contains(t)) {
        let ir_file = artifact_name(name, t, "ir");
        let code = if built.contains(&t) {
            format!(
                "Some(include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{}\")))",
                artifact_name(name, t, code_ext(t))
            )
        } else {
            "None".into()
        };
        let _ = writeln!(
            out,
            "        ::flydsl_rt::KernelVariant {{ target: ::flydsl_rt::Target::{}, code: {code}, ir: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{ir_file}\")) }},",
            target_path(t)
        );
    }
    let _ = writeln!(out, "    ],\n}};\n");

    let mut sig = String::new();
    let mut body = String::new();
    for (pi, p) in ir.params.iter().enumerate() {
        let pname = sanitize(&p.name);
        let slot = layout.slots.iter().find(|s| s.param == pi).ok_or_else(|| {
            format!(
                "kernel `{name}`: parameter `{}` has no kernarg slot",
                p.name
            )
        })?;
        match p.kind {
            ParamKind::Tensor { elem, writable } => {
                let ty = rust_type(elem).ok_or_else(|| {
                    format!(
                        "kernel `{name}`: tensor `{}` of {elem} cannot be passed from Rust",
                        p.name
                    )
                })?;
                let m = if writable { "&mut " } else { "&" };
                let _ = write!(sig, ", {pname}: {m}::flydsl_rt::DeviceBuffer<{ty}>");
                let _ = writeln!(body, "    args.tensor({}, {pname});", slot.offset);
            }
            ParamKind::Scalar(s) => {
                let ty = rust_type(s).ok_or_else(|| {
                    format!(
                        "kernel `{name}`: scalar `{}` of {s} cannot be passed from Rust; use i32",
                        p.name
                    )
                })?;
                let _ = write!(sig, ", {pname}: {ty}");
                let _ = writeln!(body, "    args.scalar({}, {pname});", slot.offset);
            }
        }
    }
    let _ = writeln!(
        out,
        "/// Launch `{name}` with arguments packed exactly as its kernel signature lays them out."
    );
    let _ = writeln!(out, "///\n/// # Safety\n///\n/// The kernel indexes its buffers with its own arithmetic: the caller must pass");
    let _ = writeln!(out, "/// buffers and scalars for which every access stays in bounds (the Sim backend checks this;");
    let _ = writeln!(
        out,
        "/// GPUs do not). The launch itself (device, sizes, block shape) is validated."
    );
    let _ = writeln!(out, "#[allow(clippy::too_many_arguments, dead_code)]");
    let _ = writeln!(out, "pub unsafe fn {name}(stream: &::flydsl_rt::Stream, cfg: ::flydsl_rt::LaunchConfig{sig}) -> ::flydsl_rt::Result<()> {{");
    let _ = writeln!(
        out,
        "    let mut args = ::flydsl_rt::KernelArgs::new({});",
        layout.size
    );
    out.push_str(&body);
    let _ = writeln!(out, "    // SAFETY: forwarded from this function's contract.\n    unsafe {{ stream.launch(&{st}, cfg, &args) }}\n}}\n");
    Ok(())
}

fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    match s.as_str() {
        "stream" | "cfg" | "args" | "type" | "fn" | "in" | "ref" | "mut" | "self" | "match"
        | "loop" | "move" => format!("{s}_"),
        _ => s,
    }
}

/// A typed dispatch table the builder writes into the glue (see [`crate::Builder::table`]):
/// a `static` of type `::flydsl_rt::PerElement<Map>` (entries of one element type) or
/// `::flydsl_rt::PerElement2<Map>` (two), whose slice for each element type (pair) lists the
/// `::flydsl_rt::Launcher { key, kernel, launch }` of the entries declared for it, in
/// declaration order (element types without entries get an empty slice).
///
/// `Map` is the kernel crate's `flydsl_rt::ElementMap` (`ElementMap2`) whose `Of<T>` is
/// `flydsl_rt::Launchers<Key, LauncherFn<T>>`: the compiler then checks every launcher against
/// the crate's function-pointer type, so a kernel whose signature drifts fails to build, and
/// the dispatcher gets typed launchers for a generic `T` with `TABLE.get::<T>()` (no
/// downcast). `map` and the keys are Rust source resolved where the crate `include!`s the
/// glue.
///
/// ```
/// use flydsl_build::{glue::DispatchTable, ir::DType};
/// let t = DispatchTable::new("SCALE", "ScaleFns")
///     .entry(&[DType::F32], "Path::Fast", "scale_fast_f32")
///     .entry(&[DType::BF16], "Path::Fast", "scale_fast_bf16");
/// let mut src = String::new();
/// t.emit(&mut src).unwrap();
/// assert!(src.contains("pub(crate) static SCALE: ::flydsl_rt::PerElement<ScaleFns>"));
/// assert!(src.contains("key: Path::Fast, kernel: &SCALE_FAST_F32, launch: scale_fast_f32"));
/// // Entries of one table index the same number of element types.
/// let mixed = DispatchTable::new("T", "M")
///     .entry(&[DType::F32], "0", "a")
///     .entry(&[DType::F32, DType::F32], "1", "b");
/// assert!(mixed.emit(&mut String::new()).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct DispatchTable {
    name: String,
    map: String,
    entries: Vec<TableEntry>,
}

#[derive(Clone, Debug)]
struct TableEntry {
    dtypes: Vec<DType>,
    key: String,
    kernel: String,
}

impl DispatchTable {
    /// A table written as the static `name`, typed by the crate's element map `map`.
    pub fn new(name: &str, map: &str) -> DispatchTable {
        DispatchTable {
            name: name.into(),
            map: map.into(),
            entries: Vec::new(),
        }
    }

    /// Add the kernel `kernel` (a declared kernel's name) under `key` (a Rust expression of the
    /// map's key type) for the element types `dtypes` (one, or two for a two-level table).
    pub fn entry(mut self, dtypes: &[DType], key: impl Into<String>, kernel: &str) -> Self {
        self.entries.push(TableEntry {
            dtypes: dtypes.to_vec(),
            key: key.into(),
            kernel: kernel.into(),
        });
        self
    }

    /// The static's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernels the table refers to.
    pub fn kernels(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.kernel.as_str())
    }

    /// Append the table's Rust source to `out`; an error when entries mix one and two element
    /// types or use more.
    pub fn emit(&self, out: &mut String) -> Result<(), String> {
        let arity = self.entries.first().map_or(1, |e| e.dtypes.len());
        if !(1..=2).contains(&arity) || self.entries.iter().any(|e| e.dtypes.len() != arity) {
            return Err(format!(
                "dispatch table `{}`: every entry must name the same number (1 or 2) of element \
                 types",
                self.name
            ));
        }
        let ty = if arity == 1 {
            "PerElement"
        } else {
            "PerElement2"
        };
        let _ = writeln!(
            out,
            "/// Dispatch table `{}` (generated from the build script's declaration).",
            self.name
        );
        let _ = write!(
            out,
            "pub(crate) static {}: ::flydsl_rt::{ty}<{}> = ",
            self.name, self.map
        );
        self.emit_level(out, &[], arity, 0);
        out.push_str(";\n\n");
        Ok(())
    }

    fn emit_level(&self, out: &mut String, prefix: &[DType], arity: usize, depth: usize) {
        let pad = "    ".repeat(depth);
        if prefix.len() == arity {
            out.push_str("&[\n");
            for e in self.entries.iter().filter(|e| e.dtypes == prefix) {
                let _ = writeln!(
                    out,
                    "{pad}    ::flydsl_rt::Launcher {{ key: {}, kernel: &{}, launch: {} }},",
                    e.key,
                    static_name(&e.kernel),
                    e.kernel
                );
            }
            let _ = write!(out, "{pad}]");
            return;
        }
        out.push_str("::flydsl_rt::PerElement {\n");
        for d in DType::ALL {
            let _ = write!(out, "{pad}    {}: ", d.name());
            let mut p = prefix.to_vec();
            p.push(d);
            self.emit_level(out, &p, arity, depth + 1);
            out.push_str(",\n");
        }
        let _ = write!(out, "{pad}}}");
    }
}

/// Write a file only when its content changes (keeps mtimes stable for no-op rebuilds).
pub fn write_if_changed(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes)
}
