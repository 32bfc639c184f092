//! Emission of the Rust launch glue a kernel crate `include!`s: the variant tables and one
//! typed launcher per kernel, whose argument packing comes from the kernel's signature.

use flydsl_ir::{Kernel, ParamKind, ScalarType, Target};
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
