//! Structural checks of every kernel: IR embedded for every target (the Hopper kernels: for
//! sm90 only), and for the targets this build compiled (`--features all-targets`): the
//! flydsl_build code-object check (kernarg layout, no scratch, LDS as declared), LDS within
//! the target's limit, and the matrix instructions of the target's atom in the forward
//! kernels (MFMA on gfx942/gfx950, WMMA on gfx1201/gfx1250, `mma.sync` m16n8k16 on sm90;
//! no local memory in the PTX; the fp8 variants' hardware unpack where they use it); the Hopper kernels' PTX has both wgmmas (SS for `Q K^T`,
//! register-A for `P V`), TMA loads, mbarrier waits and no local memory.

use fly_attn::table::HopperTile;
use flydsl_build::check::check_code_object;
use flydsl_devtools::inspect::{count_instructions, disassemble};
use flydsl_ir::Target;

/// A Hopper kernel's (dtype, head dim) from its name `attn_wgmma_{dt}_d{d}_{mask}`.
fn hopper_kind(name: &str) -> Option<(&str, u32)> {
    let rest = name.strip_prefix("attn_wgmma_")?;
    let mut it = rest.split('_');
    let dt = it.next()?;
    let d = it.next()?.strip_prefix('d')?.parse().ok()?;
    Some((dt, d))
}

#[test]
fn every_kernel_has_ir_for_every_target_and_fits_lds() {
    let v = fly_attn::kernel_variants();
    assert_eq!(
        v.len(),
        8 + 3 + 12 + 18,
        "3 head tiles x 2 dtypes + 2 combine kernels + 3 fp8 head tiles + 12 Hopper kernels \
         + 18 decode kernels"
    );
    for (name, k) in v {
        if let Some((_, d)) = hopper_kind(name) {
            let var = k.for_target(Target::Sm90).expect("Hopper IR for sm90");
            let ir = flydsl_ir::from_bytes(var.ir).unwrap();
            let tile = HopperTile::of(d as usize).unwrap();
            // Static (the mbarriers), aligned, then the dynamic tiles, within
            // the 227 KiB a workgroup may opt in to on sm_90.
            let total = ir.dynamic_lds_offset() + tile.lds_bytes();
            assert!(total <= 227 * 1024, "{name}: {total} B of LDS");
            assert!(ir.dynamic_lds.is_some(), "{name}: no dynamic LDS region");
            for t in Target::ALL.into_iter().filter(|&t| t != Target::Sm90) {
                assert!(k.for_target(t).is_none(), "{name}: IR for {t}");
            }
            continue;
        }
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
            if let Some((dt, d)) = hopper_kind(name) {
                hopper_ptx(name, std::str::from_utf8(code).unwrap(), dt, d);
                continue;
            }
            if name.starts_with("attn_decode_") {
                decode_code(name, t, code);
                continue;
            }
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
                // fp8 variants: the hardware unpack (OCP, or gfx942's FNUZ one), except
                // gfx1250's 256 tile, which takes the integer decode.
                if let Some(d) = name.strip_prefix("attn_fwd_e4m3fn_bf16_d") {
                    let hw = !(t == Target::Gfx1250 && d == "256");
                    let n = count_instructions(&asm, "v_cvt_pk_f32_fp8");
                    assert_eq!(n > 0, hw, "{name} ({t}): {n} x v_cvt_pk_f32_fp8");
                }
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

/// A decode kernel's code: 128-bit global loads of K and V (`ld.global[.nc].v4` in the PTX,
/// `global_load_dwordx4` on AMD), lane shuffles for the row dot products, no matrix
/// instructions and no local memory.
fn decode_code(name: &str, t: Target, code: &[u8]) {
    if t == Target::Sm90 {
        let text = std::str::from_utf8(code).unwrap();
        let v4 = text
            .lines()
            .filter(|l| l.contains("ld.global") && l.contains(".v4."))
            .count();
        assert!(v4 >= 2, "{name}: {v4} 128-bit global loads");
        assert!(
            text.contains("shfl.sync.bfly"),
            "{name}: no butterfly shuffles"
        );
        assert!(!text.contains("mma.sync"), "{name}: matrix instructions");
        assert!(!text.contains(".local"), "{name}: local memory (spills)");
        return;
    }
    let asm = match disassemble(code, t.mcpu()) {
        Ok(a) => a,
        Err(e) => {
            println!("skipped disassembly of {name} ({t}): {e}");
            return;
        }
    };
    let n = count_instructions(&asm, "global_load_dwordx4")
        + count_instructions(&asm, "global_load_b128");
    assert!(n >= 2, "{name} ({t}): {n} 128-bit global loads");
    assert_eq!(
        count_instructions(&asm, "scratch_"),
        0,
        "{name} ({t}): scratch"
    );
}

/// The Hopper kernel's PTX: per head dim the SS wgmma of `Q K^T` (N = block_n, K-major B)
/// and the register-A wgmma of `P V` (N = D, `tnspB` = 1), both unrolled over their k16
/// steps, the 4-d TMA loads, mbarrier waits and arrivals, exp2, and no local memory.
fn hopper_ptx(name: &str, ptx: &str, dt: &str, d: u32) {
    let tile = HopperTile::of(d as usize).unwrap();
    let norm: String = ptx.split_whitespace().collect::<Vec<_>>().join(" ");
    let ss = format!("m64n{}k16.f32.{dt}.{dt}", tile.block_n());
    let rs = format!("m64n{d}k16.f32.{dt}.{dt}");
    let count = |pat: &str, tail: &str| {
        norm.match_indices(pat)
            .filter(|(i, _)| {
                let rest = &norm[*i..];
                rest[..rest.find(';').unwrap()].ends_with(tail)
            })
            .count()
    };
    assert_eq!(
        count(&ss, "1, 1, 1, 0, 0"),
        (d / 16) as usize,
        "{name}: SS wgmmas"
    );
    assert_eq!(
        count(&rs, "1, 1, 1, 1"),
        (tile.block_n() / 16) as usize,
        "{name}: RS wgmmas"
    );
    for want in [
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "mbarrier.arrive.shared::cta.b64",
        "ex2.approx",
    ] {
        assert!(norm.contains(want), "{name}: no `{want}` in the PTX");
    }
    assert!(!ptx.contains(".local"), "{name}: uses local memory");
}

#[test]
fn sequence_and_head_bases_are_64_bit() {
    // The q/k/v/out bases (sequence start * row length + head * dim), the workspace
    // offsets and the Hopper kernel's out and LSE offsets are i64 products: offsets past
    // 2^31 elements stay exact.
    for (name, k) in fly_attn::kernel_variants() {
        for t in Target::ALL {
            let Some(var) = k.for_target(t) else {
                assert!(hopper_kind(name).is_some(), "{name}: no IR for {t}");
                continue;
            };
            let ir = flydsl_ir::from_bytes(var.ir).unwrap();
            let llvm = flydsl_codegen::lower(&ir).expect("lowers");
            let n = llvm.matches("mul i64").count();
            let want = if name.starts_with("attn_fwd")
                || name.starts_with("attn_decode_")
                || hopper_kind(name).is_some()
            {
                4
            } else {
                2
            };
            assert!(
                n >= want,
                "{name} on {t}: {n} i64 multiplies, want >= {want}"
            );
        }
    }
}
