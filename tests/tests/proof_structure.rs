//! Structural checks of the proof kernels' built code objects, for every target this crate
//! was built for: arch, wave size, kernarg layout (metadata == launcher packing), no scratch,
//! LDS within limits (all via `flydsl_build::check`), and the expected instruction classes in
//! the disassembly / PTX.

use flydsl_build::check::check_code_object;
use flydsl_devtools::inspect::{
    count_instructions, count_ptx_instructions, disassemble, ObjectInput,
};
use flydsl_ir::Target;
use flydsl_tests::proof;

fn all() -> [&'static flydsl_rt::KernelVariants; 6] {
    [
        &proof::VADD_F32,
        &proof::VADD_F16,
        &proof::BLOCK_SUM_F32,
        &proof::SEGMENT_REVERSE_F32,
        &proof::TILED_MMA_F16,
        &proof::TILED_MMA_BF16,
    ]
}

/// The targets whose code objects must be present: those selected at build time.
fn selected() -> Vec<Target> {
    proof::VADD_F32.built_targets().collect()
}

#[test]
fn every_selected_target_has_every_proof_kernel() {
    let sel = selected();
    if sel.is_empty() {
        println!("no GPU target selected in this build (Sim only): nothing to inspect");
        if std::env::var_os("CI").is_some() {
            panic!("CI must build every target: run with --all-features");
        }
        return;
    }
    for k in all() {
        let built: Vec<Target> = k.built_targets().collect();
        assert_eq!(built, sel, "{}: built targets differ", k.name);
    }
}

#[test]
fn code_objects_pass_structural_checks() {
    for k in all() {
        for v in k.variants {
            let Some(code) = v.code else { continue };
            let ir = flydsl_ir::from_bytes(v.ir).unwrap();
            let r = check_code_object(&ir, code)
                .unwrap_or_else(|e| panic!("{} {}: {e}", k.name, v.target));
            assert_eq!(r.scratch_bytes, 0);
            assert_eq!(r.wave_size, v.target.wave_size(), "{} {}", k.name, v.target);
            if v.target.is_amd() {
                assert!(r.occupancy >= 1, "{} {}: occupancy 0", k.name, v.target);
            }
        }
    }
}

fn listing(t: Target, code: &[u8]) -> String {
    if t.is_amd() {
        disassemble(ObjectInput::Bytes(code), t.mcpu()).unwrap()
    } else {
        String::from_utf8(code.to_vec()).unwrap()
    }
}

/// Instructions starting with `amd` (AMD targets) or `ptx` (NVIDIA); an empty prefix counts
/// nothing.
fn count(t: Target, text: &str, amd: &str, ptx: &str) -> usize {
    let prefix = if t.is_amd() { amd } else { ptx };
    if prefix.is_empty() {
        0
    } else if t.is_amd() {
        count_instructions(text, amd)
    } else {
        count_ptx_instructions(text, ptx)
    }
}

#[test]
fn tiled_mma_uses_the_matrix_instruction() {
    for k in [&proof::TILED_MMA_F16, &proof::TILED_MMA_BF16] {
        for v in k.variants {
            let Some(code) = v.code else { continue };
            let text = listing(v.target, code);
            let (amd, what) = match v.target {
                Target::Gfx942 | Target::Gfx950 => ("v_mfma", "v_mfma_*"),
                Target::Gfx1201 | Target::Gfx1250 => ("v_wmma", "v_wmma_*"),
                Target::Sm90 => ("", "mma.sync"),
            };
            let n = count(v.target, &text, amd, "mma.sync");
            assert!(n >= 1, "{} {}: no {what} instruction", k.name, v.target);
        }
    }
}

#[test]
fn block_sum_uses_cross_lane_ops_and_barriers() {
    for v in proof::BLOCK_SUM_F32.variants {
        let Some(code) = v.code else { continue };
        let text = listing(v.target, code);
        let shuffles = count(v.target, &text, "ds_bpermute", "shfl.sync");
        let barriers = count(v.target, &text, "s_barrier", "bar.sync")
            + count(v.target, &text, "", "barrier.sync");
        assert!(shuffles >= 1, "{}: no cross-lane instruction", v.target);
        assert!(barriers >= 1, "{}: no barrier", v.target);
    }
}

#[test]
fn segment_reverse_declares_a_dynamic_region_and_no_static_lds() {
    for v in proof::SEGMENT_REVERSE_F32.variants {
        let Some(code) = v.code else { continue };
        let ir = flydsl_ir::from_bytes(v.ir).unwrap();
        let r = check_code_object(&ir, code).unwrap();
        assert_eq!(r.lds_bytes, 0, "{}: static LDS", v.target);
        let text = listing(v.target, code);
        if v.target.is_amd() {
            // LDS reads and writes through the dynamic region (gfx9 `ds_write`/`ds_read`,
            // gfx12 `ds_store`/`ds_load`).
            let (w, r) = match v.target {
                Target::Gfx942 | Target::Gfx950 => ("ds_write", "ds_read"),
                _ => ("ds_store", "ds_load"),
            };
            assert!(count(v.target, &text, w, "") >= 1, "{}: no {w}", v.target);
            assert!(count(v.target, &text, r, "") >= 1, "{}: no {r}", v.target);
        } else {
            assert!(text.contains(".extern .shared .align 16 .b8 __flydsl_dyn_lds[]"));
            assert!(count(v.target, &text, "", "st.shared") >= 1);
            assert!(count(v.target, &text, "", "ld.shared") >= 1);
        }
    }
}
