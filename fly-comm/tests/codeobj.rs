//! Structural checks of the built code objects (targets not built are reported and
//! skipped): every kernel exists on gfx942, gfx950 and sm90 and on no other target; AMD
//! objects parse, name their target, use no scratch and little LDS, access memory with
//! 128-bit loads, and carry the system-scope flag protocol (`buffer_wbl2 sc0 sc1` before the
//! release store, `sc0 sc1` accesses, `buffer_inv sc0 sc1` after the acquire load,
//! `s_memrealtime` for the bounded wait; through `llvm-objdump`); PTX has
//! `st.release.sys`, `ld.acquire.sys`, `%globaltimer`, 128-bit accesses and no local memory.

use flydsl_devtools::inspect::{disassemble_with, find_objdump, parse_hsaco, parse_ptx};
use flydsl_rt::Target;

#[test]
fn code_objects_carry_the_flag_protocol() {
    let tool = find_objdump().ok();
    if tool.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "llvm-objdump-22 not found (CI installs llvm-22)"
        );
        println!("note: llvm-objdump not found; AMD instruction checks skipped");
    }
    let kernels: Vec<_> = fly_comm::kernel_variants().collect();
    assert_eq!(kernels.len(), 27);
    for t in [Target::Gfx1201, Target::Gfx1250] {
        assert!(
            kernels.iter().all(|k| k.for_target(t).is_none()),
            "{t} has no kernels"
        );
    }
    for t in [Target::Gfx942, Target::Gfx950, Target::Sm90] {
        let built = kernels
            .iter()
            .filter(|k| k.for_target(t).is_some_and(|v| v.code.is_some()))
            .count();
        if built == 0 {
            println!(
                "skipped {t}: not built (enable the `{}` feature)",
                t.feature()
            );
            continue;
        }
        assert_eq!(built, kernels.len(), "{t}: only {built} kernels built");
        for k in &kernels {
            let code = k.for_target(t).and_then(|v| v.code).expect("built");
            if t.is_amd() {
                let co = parse_hsaco(code).unwrap_or_else(|e| panic!("{} {t}: {e}", k.name));
                assert_eq!(co.target(), Some(t), "{}", k.name);
                let meta = co
                    .kernel(k.name)
                    .unwrap_or_else(|| panic!("{} {t}: missing", k.name));
                assert!(!meta.uses_scratch(), "{} {t}: scratch: {meta:?}", k.name);
                assert!(meta.group_segment_fixed_size <= 1024, "{} {t}: LDS", k.name);
                if let Some(tool) = &tool {
                    let asm = disassemble_with(tool, code, t.mcpu())
                        .unwrap_or_else(|e| panic!("{} {t}: {e}", k.name));
                    for want in [
                        "buffer_wbl2 sc0 sc1",
                        "buffer_inv sc0 sc1",
                        "s_memrealtime",
                        "global_load_dwordx4",
                    ] {
                        assert!(asm.contains(want), "{} {t}: no `{want}`", k.name);
                    }
                    assert!(
                        asm.lines()
                            .any(|l| l.contains("global_store_dword ") && l.contains("sc0 sc1")),
                        "{} {t}: no system-scope flag store",
                        k.name
                    );
                }
            } else {
                let text = std::str::from_utf8(code).expect("PTX is text");
                let m = parse_ptx(text).unwrap_or_else(|e| panic!("{} {t}: {e}", k.name));
                m.entry(k.name)
                    .unwrap_or_else(|| panic!("{} {t}: entry missing", k.name));
                for want in [
                    "st.release.sys.global",
                    "ld.acquire.sys.global",
                    "%globaltimer",
                    ".v4.",
                ] {
                    assert!(text.contains(want), "{} {t}: no `{want}`", k.name);
                }
                assert!(!text.contains(".local"), "{} {t}: local memory", k.name);
            }
        }
        println!("{t}: {} kernels checked", kernels.len());
    }
}
