//! Structural checks of the portable GEMM's code objects (built with `--features
//! all-targets`), 16-bit and 8-bit: per AMD target valid ELF, kernarg layout equal to the
//! launcher's, no scratch, LDS as declared and within the target's limit, the expected
//! MFMA / WMMA count per K step (of the 8-bit atom for 8-bit inputs), 128-bit buffer loads
//! on the vector variants, no waterfall loop around a buffer access (descriptors in SGPRs);
//! `mma.sync` (m16n8k16, or m16n8k32 for 8-bit inputs) and no local
//! memory in the sm90 PTX. Prints VGPR / AGPR / occupancy next to the reference's anchors
//! (`amd-codeobject-anchors.md`, preshuffle GEMM, whose K step is longer; bf16 16x128x256
//! gfx942 128 VGPRs / 4 waves, gfx950 134 / 3; 64x256x128 gfx942 190 / 2, gfx950 256 / 2;
//! fp8 16x128x256 gfx942 88 / 5, gfx950 96 / 5; 64x256x128 gfx942 148 / 3, gfx950 194 / 2).

use fly_gemm::{TileConfig, PORTABLE_CONFIGS, PORTABLE_CONFIGS8};
use flydsl_devtools::inspect::{count_instructions, disassemble};
use flydsl_ir::codeobj::{check_kernarg_layout, occupancy, parse_hsaco};
use flydsl_ir::{MmaAtom, Target};

/// The 8-bit input type of a variant's name (`gemm_tile_e4m3fn_bf16_...`), if it has one:
/// whether it is int8.
fn int8_input(name: &str) -> Option<bool> {
    let rest = name.strip_prefix("gemm_tile_")?;
    if rest.starts_with("e4m3fn_") || rest.starts_with("e4m3fnuz_") {
        Some(false)
    } else if rest.starts_with("i8_") {
        Some(true)
    } else {
        None
    }
}

fn config_of(name: &str) -> TileConfig {
    let table = if int8_input(name).is_some() {
        PORTABLE_CONFIGS8
    } else {
        PORTABLE_CONFIGS
    };
    table
        .into_iter()
        .find(|c| name.contains(&format!("_{}_", c.name())))
        .unwrap_or_else(|| panic!("{name}: no config in the name"))
}

/// The matrix atom a variant of `cfg` issues on `t` (gfx950 fp8: the block-scaled
/// 16x16x128 MFMA where `tile_k` holds two or more).
fn atom_of(name: &str, t: Target, cfg: TileConfig) -> MmaAtom {
    match int8_input(name) {
        Some(false) if t == Target::Gfx950 && cfg.tile_k.is_multiple_of(256) => {
            MmaAtom::MfmaScale16x16x128Fp8
        }
        Some(int) => MmaAtom::native_8bit(t, int),
        None => MmaAtom::native_16bit(t, name.starts_with("gemm_tile_bf16")),
    }
}

/// Matrix atoms per wave per K step of `cfg` on `t`.
fn atoms_per_step(atom: MmaAtom, cfg: TileConfig) -> usize {
    let (am, an, ak) = atom.shape();
    let reps = (cfg.tile_m / am) * (cfg.tile_n / (4 * an));
    (reps * (cfg.tile_k / ak)) as usize
}

/// Waterfall loops in `asm`: a `v_cmp_eq_u64` of `v_readfirstlane` results (how LLVM
/// serializes an access through a buffer descriptor it holds in VGPRs).
fn waterfall_loops(asm: &str) -> usize {
    let lines: Vec<&str> = asm.lines().collect();
    (0..lines.len())
        .filter(|&i| {
            lines[i].contains("v_cmp_eq_u64")
                && lines[i.saturating_sub(5)..i]
                    .iter()
                    .any(|l| l.contains("v_readfirstlane_b32"))
        })
        .count()
}

#[test]
fn portable_code_objects_have_the_expected_structure() {
    let mut seen = 0;
    for (name, k) in fly_gemm::portable_variants() {
        let cfg = config_of(name);
        let elem_bytes = if int8_input(name).is_some() { 1 } else { 2 };
        for v in k.variants {
            let Some(code) = v.code else { continue };
            seen += 1;
            let t = v.target;
            let ir = flydsl_ir::from_bytes(v.ir).unwrap();
            let per_step = atoms_per_step(atom_of(name, t, cfg), cfg);
            if !t.is_amd() {
                let text = std::str::from_utf8(code).unwrap();
                let shape = if elem_bytes == 1 {
                    "m16n8k32"
                } else {
                    "m16n8k16"
                };
                let n = text.matches(&format!("mma.sync.aligned.{shape}")).count();
                assert!(
                    n >= per_step && n.is_multiple_of(per_step),
                    "{name} ({t}): {n} mma.sync, want a multiple of {per_step} per K step"
                );
                assert!(!text.contains(".local"), "{name}: local memory");
                println!("{name} (sm90): {n} mma.sync ({per_step} per K step)");
                continue;
            }
            let co = parse_hsaco(code).unwrap_or_else(|e| panic!("{name} ({t}): {e}"));
            let meta = co
                .kernel(name)
                .unwrap_or_else(|| panic!("{name} ({t}): no metadata"));
            check_kernarg_layout(meta, &ir.kernarg_layout())
                .unwrap_or_else(|e| panic!("{name} ({t}): {e}"));
            assert!(!meta.uses_scratch(), "{name} ({t}): scratch / spills");
            assert_eq!(
                meta.group_segment_fixed_size,
                ir.lds_bytes(),
                "{name} ({t}): LDS"
            );
            // Preshuffled B skips LDS where the atom's B operand is whole 16-byte K chunks
            // (MFMA 16x16x32 on gfx950, the gfx12 WMMAs); then only A is staged.
            let a_only = cfg.tile_m * cfg.tile_k * elem_bytes * cfg.lds_stage;
            let direct_b = name.ends_with("preshuffled") && ir.lds_bytes() == a_only;
            assert!(
                ir.lds_bytes() == cfg.lds_bytes_of(elem_bytes) || direct_b,
                "{name} ({t}): LDS {} is neither the config's A + B ({}) nor A only ({a_only})",
                ir.lds_bytes(),
                cfg.lds_bytes_of(elem_bytes)
            );
            assert!(
                ir.lds_bytes() <= t.max_lds_bytes(),
                "{name} ({t}): {} bytes of LDS",
                ir.lds_bytes()
            );
            let agpr = meta.agpr_count.unwrap_or(0);
            let occ = occupancy(t, meta.arch_vgprs(), agpr, ir.lds_bytes(), 4);
            assert!(occ >= 1, "{name} ({t}): does not fit");
            let asm = match disassemble(code, t.mcpu()) {
                Ok(a) => a,
                Err(e) => {
                    println!("skipped disassembly of {name} ({t}): {e}");
                    continue;
                }
            };
            // Every descriptor is built from uniform values and stays in SGPRs.
            assert_eq!(waterfall_loops(&asm), 0, "{name} ({t}): waterfall loops");
            let mma = if matches!(t, Target::Gfx942 | Target::Gfx950) {
                "v_mfma"
            } else {
                "v_wmma"
            };
            let n = count_instructions(&asm, mma);
            assert!(
                n >= per_step && n.is_multiple_of(per_step),
                "{name} ({t}): {n} {mma}, want a multiple of {per_step} per K step"
            );
            let ld128 = match t {
                Target::Gfx942 | Target::Gfx950 => "buffer_load_dwordx4",
                _ => "buffer_load_b128",
            };
            let loads = count_instructions(&asm, ld128);
            if !name.ends_with("plain_scalar") {
                assert!(loads >= 1, "{name} ({t}): no 128-bit buffer load");
            }
            println!(
                "{name} ({t}): {} VGPR + {agpr} AGPR, {} B LDS, occupancy {occ} waves/SIMD, \
                 {n} {mma} ({per_step} per K step), {loads} {ld128}{}",
                meta.arch_vgprs(),
                ir.lds_bytes(),
                if direct_b {
                    ", B global -> registers"
                } else {
                    ""
                }
            );
        }
    }
    if seen == 0 {
        println!("no code objects in this build (build with --features all-targets)");
        assert!(
            std::env::var_os("CI").is_none(),
            "CI builds every target: run with --all-features"
        );
    }
}
