//! The hardware fp8 pack/unpack and permlane ops (`AmdOp::CvtPkFp8`, `CvtPkF32Fp8`,
//! `PermlaneSwap`, `PermlaneX16`) compiled with llc-22 on every AMD target that has them,
//! and the machine code checked for the instruction (and for no `ds_bpermute`: the point of
//! a permlane is to replace it). Their Sim semantics are tested in flydsl-tests'
//! `amd_cvt_permlane`.

mod common_lower;
use common_lower::*;
use flydsl_dsl::ir::{AmdOp, Kernel, ScalarType, Target};
use flydsl_dsl::*;

fn count(asm: &str, mnemonic: &str) -> usize {
    asm.lines()
        .map(|l| l.trim())
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|m| m.starts_with(mnemonic))
        })
        .count()
}

fn fp8_kernel(target: Target, t: ScalarType) -> Kernel {
    KernelBuilder::new("fp8_pk", target, 64)
        .build(|k| {
            let x = k.tensor("x", ScalarType::F32);
            let p = k.tensor_mut("p", ScalarType::I32);
            let y = k.tensor_mut("y", ScalarType::F32);
            let i = thread_id_x();
            let packed = cvt_pk_fp8x4(x.load_vec(i * 4, 4, 16), t);
            p.store(i, packed);
            y.store_aligned(i * 2, cvt_pk_f32_fp8(packed, true, t), 8, false);
        })
        .unwrap()
}

#[test]
fn fp8_pack_is_v_cvt_pk_on_every_amd_target() {
    let Some(tools) = tools() else { return };
    for target in [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
    ] {
        for &t in AmdOp::fp8_types(target) {
            let c = compile(&tools, &fp8_kernel(target, t));
            let kind = if matches!(t, ScalarType::F8E5M2 | ScalarType::F8E5M2FNUZ) {
                "bf8"
            } else {
                "fp8"
            };
            let pack = format!("v_cvt_pk_{kind}_f32");
            let unpack = format!("v_cvt_pk_f32_{kind}");
            assert_eq!(
                count(&c.asm, &pack),
                2,
                "{target} {t}: two {pack}\n{}",
                c.asm
            );
            assert!(
                count(&c.asm, &unpack) >= 1,
                "{target} {t}: no {unpack}\n{}",
                c.asm
            );
        }
    }
}

#[test]
fn permlane_swaps_are_v_permlane_swap_on_gfx950() {
    let Some(tools) = tools() else { return };
    for rows in [16u32, 32] {
        let k = KernelBuilder::new("swap", Target::Gfx950, 64)
            .build(|k| {
                let y = k.tensor_mut("y", ScalarType::F32);
                let t = thread_id_x();
                let v = t.cast(ScalarType::F32);
                let (a, b) = permlane_swap(v, v * 2.0f32, rows);
                y.store(t, a + b);
            })
            .unwrap();
        let c = compile(&tools, &k);
        let m = format!("v_permlane{rows}_swap_b32");
        assert_eq!(count(&c.asm, &m), 1, "{m}\n{}", c.asm);
        assert_eq!(count(&c.asm, "ds_bpermute"), 0, "{}", c.asm);
    }
}

#[test]
fn permlanex16_is_v_permlanex16_on_gfx12() {
    let Some(tools) = tools() else { return };
    for target in [Target::Gfx1201, Target::Gfx1250] {
        let k = KernelBuilder::new("x16", target, 32)
            .build(|k| {
                let y = k.tensor_mut("y", ScalarType::F32);
                let t = thread_id_x();
                let v = t.cast(ScalarType::F32);
                y.store(t, v + permlanex16(v, PERMLANEX16_SWAP_ROWS));
            })
            .unwrap();
        let c = compile(&tools, &k);
        assert_eq!(count(&c.asm, "v_permlanex16_b32"), 1, "{target}\n{}", c.asm);
        assert_eq!(count(&c.asm, "ds_bpermute"), 0, "{target}\n{}", c.asm);
    }
}
