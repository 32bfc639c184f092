//! `occupancy` against LLVM's own figure: `llc-22` prints `; Occupancy: N` for every kernel
//! (with `; NumVgprs`, `; NumAgprs`, `; LDSByteSize`). A grid of register clobbers, LDS sizes
//! and workgroup sizes per target must give the same number from our formula.

#![cfg(feature = "codeobj")]

mod codeobj_support;

use codeobj_support::tools;
use flydsl_ir::codeobj::occupancy;
use flydsl_ir::Target;
use std::fmt::Write;

struct Case {
    vgpr: u32,
    agpr: u32,
    lds: u32,
    wg: u32,
}

fn module(cases: &[Case]) -> String {
    let mut s = String::from("target triple = \"amdgcn-amd-amdhsa\"\n");
    for (i, c) in cases.iter().enumerate() {
        if c.lds > 0 {
            writeln!(
                s,
                "@lds{i} = internal addrspace(3) global [{} x i8] poison, align 16",
                c.lds
            )
            .unwrap();
        }
        writeln!(
            s,
            "define amdgpu_kernel void @k{i}(ptr addrspace(1) %p, i32 %i) #{i} {{"
        )
        .unwrap();
        writeln!(
            s,
            "  call void asm sideeffect \"\", \"~{{v{}}}\"()",
            c.vgpr - 1
        )
        .unwrap();
        if c.agpr > 0 {
            writeln!(
                s,
                "  call void asm sideeffect \"\", \"~{{a{}}}\"()",
                c.agpr - 1
            )
            .unwrap();
        }
        if c.lds > 0 {
            writeln!(
                s,
                "  %q = getelementptr i8, ptr addrspace(3) @lds{i}, i32 %i"
            )
            .unwrap();
            writeln!(s, "  store volatile i8 1, ptr addrspace(3) %q").unwrap();
        }
        writeln!(s, "  ret void\n}}").unwrap();
        writeln!(
            s,
            "attributes #{i} = {{ \"amdgpu-flat-work-group-size\"=\"{0},{0}\" }}",
            c.wg
        )
        .unwrap();
    }
    s
}

/// Per kernel, in order: (NumVgprs, NumAgprs, LDSByteSize, Occupancy).
fn remarks(asm: &str) -> Vec<(u32, u32, u32, u32)> {
    let num = |line: &str| -> u32 {
        line.split(':')
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut out = Vec::new();
    let (mut v, mut a, mut l) = (0, 0, 0);
    for line in asm.lines() {
        let line = line.trim();
        if line.starts_with("; NumVgprs:") {
            v = num(line);
            a = 0;
        } else if line.starts_with("; NumAgprs:") {
            a = num(line);
        } else if line.starts_with("; LDSByteSize:") {
            l = num(line);
        } else if line.starts_with("; Occupancy:") {
            out.push((v, a, l, num(line)));
        }
    }
    out
}

#[test]
fn occupancy_matches_llc_remarks() {
    let Some(t) = tools() else { return };
    for target in [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
    ] {
        let wave = target.wave_size();
        let agprs: &[u32] = if wave == 64 { &[0, 11, 64] } else { &[0] };
        let mut cases = Vec::new();
        for wg in [64, 256, 1024] {
            // Registers a wave may use with this workgroup size (else llc refuses the clobber).
            let waves_per_simd = (wg / wave).div_ceil(4).max(1);
            for &vgpr in &[1u32, 24, 57, 65, 73, 81, 101, 129, 201, 256] {
                for &agpr in agprs {
                    for lds in [0, 4096, 16384, 24576, 40000, 65536] {
                        let regs = if agpr > 0 {
                            vgpr.next_multiple_of(4) + agpr
                        } else {
                            vgpr
                        };
                        let budget = match target {
                            Target::Gfx1201 => 1536,
                            Target::Gfx1250 => 1024,
                            _ => 512,
                        } / waves_per_simd;
                        if regs <= budget.min(if wave == 64 { 512 } else { 256 }) && vgpr <= 256 {
                            cases.push(Case {
                                vgpr,
                                agpr,
                                lds,
                                wg,
                            });
                        }
                    }
                }
            }
        }
        let asm = t.asm_amd(&module(&cases), target.mcpu());
        let got = remarks(&asm);
        assert_eq!(
            got.len(),
            cases.len(),
            "{target}: one remark block per kernel"
        );
        let mut checked = 0;
        for (c, (v, a, lds, llvm)) in cases.iter().zip(&got) {
            assert_eq!(*lds, c.lds, "{target}: LDS of the case");
            let ours = occupancy(target, *v, *a, *lds, c.wg.div_ceil(wave));
            assert_eq!(
                ours, *llvm,
                "{target}: vgpr {v} agpr {a} lds {lds} wg {}: ours {ours}, llc {llvm}",
                c.wg
            );
            checked += 1;
        }
        assert!(checked > 50, "{target}: only {checked} cases");
    }
}

#[test]
fn anchors_from_the_reference_library() {
    // (target, VGPR, AGPR, LDS, waves per workgroup, occupancy) from amd-codeobject-anchors.md.
    let anchors = [
        (Target::Gfx942, 60, 0, 32, 4, 8),
        (Target::Gfx942, 76, 0, 32, 4, 6),
        (Target::Gfx1201, 66, 0, 64, 8, 16),
        (Target::Gfx942, 88, 0, 8192, 4, 5),
        (Target::Gfx950, 96, 0, 8192, 4, 5),
        (Target::Gfx942, 148, 0, 16384, 4, 3),
        (Target::Gfx950, 194, 0, 16384, 4, 2),
        (Target::Gfx942, 128, 0, 16384, 4, 4),
        (Target::Gfx950, 256, 0, 32768, 4, 2),
        (Target::Gfx942, 256, 26, 33792, 4, 1),
        (Target::Gfx950, 227, 0, 33280, 4, 2),
        (Target::Gfx1201, 140, 0, 0, 4, 10),
    ];
    for (target, v, a, lds, wpw, want) in anchors {
        assert_eq!(
            occupancy(target, v, a, lds, wpw),
            want,
            "{target} v{v} a{a} lds{lds}"
        );
    }
    assert_eq!(occupancy(Target::Sm90, 32, 0, 0, 4), 0);
    assert_eq!(
        occupancy(Target::Gfx1201, 32, 0, 65537, 4),
        0,
        "over 64 KiB per workgroup"
    );
    assert_eq!(
        occupancy(Target::Gfx942, 0, 0, 0, 0),
        8,
        "degenerate inputs do not panic"
    );
    assert_eq!(
        occupancy(Target::Gfx942, u32::MAX, u32::MAX, u32::MAX, u32::MAX),
        0
    );
}
