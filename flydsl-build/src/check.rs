//! Structural checks of built code objects against the kernel they were built from: target
//! arch, wave size, kernarg layout (metadata == the launcher's packing), no scratch, LDS
//! within the target's limit. Returns the resources for reports.

use flydsl_ir::codeobj::{
    check_kernarg_layout, check_kernarg_layout_ptx, occupancy, parse_hsaco, parse_ptx,
};
use flydsl_ir::Kernel;

/// Resource usage read back from a code object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Architectural VGPRs (AMD).
    pub vgpr: u32,
    /// Accumulation VGPRs (AMD, gfx90a+).
    pub agpr: u32,
    /// SGPRs (AMD).
    pub sgpr: u32,
    /// Static LDS / shared bytes.
    pub lds_bytes: u32,
    /// Scratch bytes per work-item (AMD; must be 0).
    pub scratch_bytes: u32,
    /// Waves per SIMD the registers and LDS allow (AMD; 0 when not modelled).
    pub occupancy: u32,
    /// Machine-code bytes of the kernel (AMD), or PTX text bytes (NVIDIA).
    pub code_bytes: u64,
    /// Wave size the code object declares.
    pub wave_size: u32,
}

/// Check a code object against the kernel it was built from.
///
/// ```no_run
/// # let (kernel, code): (flydsl_build::ir::Kernel, Vec<u8>) = unimplemented!();
/// let r = flydsl_build::check::check_code_object(&kernel, &code)?;
/// println!("{} VGPRs, occupancy {}", r.vgpr, r.occupancy);
/// # Ok::<(), String>(())
/// ```
pub fn check_code_object(ir: &Kernel, code: &[u8]) -> Result<Resources, String> {
    let t = ir.target;
    let layout = ir.kernarg_layout();
    if t.is_amd() {
        let co = parse_hsaco(code).map_err(|e| e.to_string())?;
        if co.target() != Some(t) {
            return Err(format!(
                "code object is for {:?}, expected {t}",
                co.arch.name()
            ));
        }
        let meta = co
            .kernel(&ir.name)
            .ok_or_else(|| format!("no kernel `{}` in the metadata", ir.name))?;
        check_kernarg_layout(meta, &layout)?;
        if meta.wavefront_size != t.wave_size() {
            return Err(format!(
                "wavefront size {} but {t} kernels are built for wave{}",
                meta.wavefront_size,
                t.wave_size()
            ));
        }
        if meta.private_segment_fixed_size != 0 || meta.uses_dynamic_stack {
            return Err(format!(
                "uses {} bytes of scratch (register spills or stack): reduce register pressure",
                meta.private_segment_fixed_size
            ));
        }
        if meta.group_segment_fixed_size > t.max_lds_bytes() {
            return Err(format!(
                "LDS {} bytes exceeds the limit of {}",
                meta.group_segment_fixed_size,
                t.max_lds_bytes()
            ));
        }
        // The runtime sizes launches (and places the dynamic region) from the IR's static
        // LDS: the code object must not use more.
        if meta.group_segment_fixed_size > ir.dynamic_lds_offset() {
            return Err(format!(
                "the code object uses {} bytes of static LDS but the IR declares {}",
                meta.group_segment_fixed_size,
                ir.lds_bytes()
            ));
        }
        if let Some(cap) = ir.attrs.max_registers {
            if meta.vgpr_count > cap {
                return Err(format!(
                    "the code object uses {} VGPRs per lane (architectural plus accumulation) \
                     but KernelAttrs::max_registers is {cap}: LLVM raises a cap below the \
                     target's minimum; raise max_registers or leave it unset on {t}",
                    meta.vgpr_count
                ));
            }
        }
        let agpr = meta.agpr_count.unwrap_or(0);
        Ok(Resources {
            vgpr: meta.arch_vgprs(),
            agpr,
            sgpr: meta.sgpr_count,
            lds_bytes: meta.group_segment_fixed_size,
            scratch_bytes: meta.private_segment_fixed_size,
            occupancy: occupancy(
                t,
                meta.arch_vgprs(),
                agpr,
                meta.group_segment_fixed_size,
                meta.waves_per_workgroup(),
            ),
            code_bytes: meta.code_size.unwrap_or(co.text_size),
            wave_size: meta.wavefront_size,
        })
    } else {
        let text = std::str::from_utf8(code).map_err(|e| format!("PTX is not UTF-8: {e}"))?;
        let m = parse_ptx(text).map_err(|e| e.to_string())?;
        m.check_target(t)?;
        check_ptx_no_calls(&ir.name, text)?;
        let entry = m
            .entry(&ir.name)
            .ok_or_else(|| format!("no .entry `{}` in the PTX", ir.name))?;
        check_kernarg_layout_ptx(entry, &layout)?;
        let shared = m.static_shared_bytes(entry);
        if shared > t.max_lds_bytes() as u64 {
            return Err(format!(
                "static shared memory {shared} bytes exceeds {}",
                t.max_lds_bytes()
            ));
        }
        if shared > u64::from(ir.dynamic_lds_offset()) {
            return Err(format!(
                "the PTX declares {shared} bytes of static shared memory but the IR declares {}",
                ir.lds_bytes()
            ));
        }
        Ok(Resources {
            lds_bytes: shared as u32,
            code_bytes: code.len() as u64,
            wave_size: t.wave_size(),
            ..Resources::default()
        })
    }
}

/// Fail PTX that makes a call or declares an external function (`call`, `.extern .func`):
/// ptxas then silently drops `setmaxnreg` and serializes `wgmma`, and the kernel gets an ABI
/// stack. Every flydsl kernel is fully inlined, so a call means an op was lowered to a
/// library function (for example a math routine or `vprintf`). The error names `kernel`,
/// the offending PTX line and the fix. [`check_code_object`] runs it on every NVIDIA build.
///
/// ```
/// use flydsl_build::check::check_ptx_no_calls;
/// let ok = ".visible .entry k()\n{\n\tret;\n}\n";
/// assert!(check_ptx_no_calls("k", ok).is_ok());
/// let bad = ".extern .func (.param .b32 r) vprintf(.param .b64 f, .param .b64 a);\n\
///            .visible .entry k()\n{\n\tcall.uni (r), vprintf, (f, a);\n\tret;\n}\n";
/// let e = check_ptx_no_calls("k", bad).unwrap_err();
/// assert!(e.contains("`k`") && e.contains("vprintf"));
/// ```
pub fn check_ptx_no_calls(kernel: &str, ptx: &str) -> Result<(), String> {
    for (no, raw) in ptx.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("").trim();
        let mut toks = line.split_whitespace().peekable();
        // Skip a label (`$L__BB0_1:`) and a guard predicate (`@%p1`, `@!%p1`).
        if toks.peek().is_some_and(|t| t.ends_with(':')) {
            toks.next();
        }
        if toks.peek().is_some_and(|t| t.starts_with('@')) {
            toks.next();
        }
        let Some(first) = toks.next() else { continue };
        let what = if first == "call" || first.starts_with("call.") {
            "makes a call"
        } else if line.contains(".extern") && line.split_whitespace().any(|t| t == ".func") {
            "declares an external function"
        } else {
            continue;
        };
        return Err(format!(
            "kernel `{kernel}`: its PTX {what} (line {}: `{line}`); ptxas then silently drops \
             setmaxnreg and serializes wgmma. Some op was lowered to a library call: replace it \
             with inline code (or an intrinsic that lowers to instructions)",
            no + 1
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_code_object;
    use flydsl_ir::{Kernel, Target};

    fn ptx(target_line: &str) -> String {
        format!(
            ".version 8.4\n.target {target_line}\n.address_size 64\n\
             .visible .entry k()\n.maxntid 256, 1, 1\n{{\n ret;\n}}\n"
        )
    }

    #[test]
    fn ptx_target_must_be_the_targets_ptx_target() {
        let k = Kernel::empty("k", Target::Sm90);
        let want = Target::Sm90.ptx_target().unwrap();
        let r = check_code_object(&k, ptx(want).as_bytes()).unwrap();
        assert_eq!(r.wave_size, Target::Sm90.wave_size());
        for wrong in ["sm_90", "sm_80", "sm_100a"] {
            let e = check_code_object(&k, ptx(wrong).as_bytes()).unwrap_err();
            assert!(
                e.contains(&format!("`.target {wrong}`"))
                    && e.contains(&format!("expected `.target {want}`")),
                "{wrong}: {e}"
            );
        }
    }
}
