//! The cross-agent flag ops: `FlagStore` is a system-scope release store, `FlagWait` a loop
//! of system-scope acquire loads bounded by `llvm.readsteadycounter`, `FenceRelease` a
//! system-scope release fence; compiled, gfx942/gfx950 show the AMDGPU memory model's
//! system-scope forms (`buffer_wbl2 sc0 sc1`, `sc0 sc1` accesses, `buffer_inv sc0 sc1`,
//! `s_memrealtime`) and sm_90 `st.release.sys`, `ld.acquire.sys`, `%globaltimer`,
//! `fence.acq_rel.sys`.

mod common_lower;
use common_lower::*;
use flydsl_ir::*;

use ScalarType::*;

fn kernel(target: Target) -> Kernel {
    let mut b = KB::new("flags", target);
    let (f, _) = b.tensor("flags", I32, true);
    let timeout = b.scalar("timeout", I64);
    let tid = b.tid();
    let one = b.i32(1);
    b.op0(OpKind::FenceRelease);
    b.op0(OpKind::FlagStore {
        ptr: f,
        index: tid,
        value: one,
    });
    let seen = b.op(
        OpKind::FlagWait {
            ptr: f,
            index: one,
            expect: one,
            timeout,
        },
        Type::s(I1),
    );
    let v = b.op(OpKind::Cast(CastKind::ConvertUnsigned, seen), Type::s(I32));
    b.op0(OpKind::Store {
        ptr: f,
        index: one,
        value: v,
        flags: MemFlags::default(),
    });
    b.finish()
}

#[test]
fn flag_ops_lower_to_system_scope_release_and_acquire() {
    for t in [Target::Gfx942, Target::Sm90] {
        let ir = flydsl_codegen::lower(&kernel(t)).unwrap();
        assert!(
            ir.contains("store atomic i32 1, ptr addrspace(1)"),
            "{t}: {ir}"
        );
        assert!(ir.contains(" release, align 4"), "{t}");
        assert!(
            ir.contains("load atomic i32, ptr addrspace(1)") && ir.contains(" acquire, align 4"),
            "{t}"
        );
        assert!(ir.contains("@llvm.readsteadycounter()"), "{t}");
        assert!(ir.contains("fence release"), "{t}");
        assert!(
            !ir.contains("syncscope(\"agent\") release"),
            "{t}: flags must be system scope"
        );
    }
    let Some(tools) = tools() else { return };
    for t in [Target::Gfx942, Target::Gfx950] {
        let c = compile(&tools, &kernel(t));
        for want in ["buffer_wbl2 sc0 sc1", "buffer_inv sc0 sc1", "s_memrealtime"] {
            assert!(c.asm.contains(want), "{t}: `{want}` missing");
        }
        assert!(c
            .asm
            .lines()
            .any(|l| l.contains("global_load_dword") && l.contains("sc0 sc1")));
    }
    let c = compile(&tools, &kernel(Target::Sm90));
    for want in [
        "st.release.sys.global",
        "ld.acquire.sys.global",
        "%globaltimer",
        "fence.acq_rel.sys",
    ] {
        assert!(c.asm.contains(want), "sm90: `{want}` missing:\n{}", c.asm);
    }
}

#[test]
fn the_verifier_rejects_ill_typed_flags() {
    let mut b = KB::new("bad", Target::Sm90);
    let (f, _) = b.tensor("flags", F32, true);
    let one = b.i32(1);
    b.op0(OpKind::FlagStore {
        ptr: f,
        index: one,
        value: one,
    });
    let e = verify(&b.finish()).unwrap_err().to_string();
    assert!(e.contains("flag store"), "{e}");
}
