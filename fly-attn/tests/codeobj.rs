//! Structural checks of every kernel: IR embedded for every target, and for the targets
//! this build compiled (`--features all-targets`): the flydsl_build code-object check
//! (kernarg layout, no scratch, LDS as declared), LDS within the target's limit, and the
//! matrix instructions of the target's atom in the forward kernels (MFMA on gfx942/gfx950,
//! WMMA on gfx1201/gfx1250, `mma.sync` m16n8k16 on sm90; no local memory in the PTX).

use flydsl_build::check::check_code_object;
use flydsl_devtools::inspect::{count_instructions, disassemble};
use flydsl_ir::Target;

#[test]
fn every_kernel_has_ir_for_every_target_and_fits_lds() {
    let v = fly_attn::kernel_variants();
    assert_eq!(v.len(), 8, "3 head tiles x 2 dtypes + 2 combine kernels");
    for (name, k) in v {
        for t in Target::ALL {
            let var = k
                .for_target(t)
                .unwrap_or_else(|| panic!("{name}: no IR for {t}"));
            let ir = flydsl_ir::from_bytes(var.ir).unwrap();
            assert!(
                ir.lds_bytes() <= t.max_lds_bytes(),
                "{name} on {t}: {} bytes of LDS > {}",
                ir.lds_bytes(),
                t.max_lds_bytes()
            );
        }
    }
}

#[test]
fn built_code_objects_have_the_matrix_atoms_and_no_scratch() {
    let mut seen = 0;
    for (name, k) in fly_attn::kernel_variants() {
        for v in k.variants {
            let Some(code) = v.code else { continue };
            seen += 1;
            let t = v.target;
            let ir = flydsl_ir::from_bytes(v.ir).unwrap();
            check_code_object(&ir, code).unwrap_or_else(|e| panic!("{name} ({t}): {e}"));
            if !name.starts_with("attn_fwd") {
                continue;
            }
            if t == Target::Sm90 {
                let text = std::str::from_utf8(code).unwrap();
                let n = text.matches("mma.sync.aligned.m16n8k16").count();
                assert!(n >= 8, "{name}: {n} mma.sync m16n8k16 in the PTX");
                assert!(!text.contains(".local"), "{name}: local memory (spills)");
            } else {
                let asm = match disassemble(code, t.mcpu()) {
                    Ok(a) => a,
                    Err(e) => {
                        println!("skipped disassembly of {name} ({t}): {e}");
                        continue;
                    }
                };
                let ins = if matches!(t, Target::Gfx942 | Target::Gfx950) {
                    "v_mfma_f32_16x16"
                } else {
                    "v_wmma_f32_16x16"
                };
                let n = count_instructions(&asm, ins);
                assert!(n >= 4, "{name} ({t}): {n} x {ins}");
            }
        }
    }
    if seen == 0 {
        println!("no target built: only the IR is embedded, nothing to inspect");
        assert!(
            std::env::var_os("CI").is_none(),
            "CI builds every target: run with --features all-targets"
        );
    }
}

#[test]
fn sequence_and_head_bases_are_64_bit() {
    // The q/k/v/out bases (sequence start * row length + head * dim) and the workspace
    // offsets are i64 products: offsets past 2^31 elements stay exact.
    for (name, k) in fly_attn::kernel_variants() {
        for t in Target::ALL {
            let ir = flydsl_ir::from_bytes(k.for_target(t).unwrap().ir).unwrap();
            let llvm = flydsl_codegen::lower(&ir).expect("lowers");
            let n = llvm.matches("mul i64").count();
            let want = if name.starts_with("attn_fwd") { 4 } else { 2 };
            assert!(
                n >= want,
                "{name} on {t}: {n} i64 multiplies, want >= {want}"
            );
        }
    }
}
