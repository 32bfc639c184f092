//! The keep-in-L2 load hint (`MemFlags::keep_l2`): on sm_90 every 4-, 8- and 16-byte global
//! load with it becomes `ld.global.L2::cache_hint` under an `L2::evict_last` policy (other
//! sizes stay plain loads); on AMD the hint changes nothing (the lowered IR is identical).
//! That the hinted loads read the right values is checked on the H200 (fly-norm's forward
//! tests run the kernels that use it) and in the Sim, which ignores hints.

mod common_lower;
use common_lower::*;
use flydsl_ir::*;

use ScalarType::*;

/// y[..] = x[..] through loads (at distinct indices) of 2, 4, 8 and 16 bytes, every one with `keep_l2` as given,
/// half of them through buffer resources (bounds-checked on NVPTX).
fn kernel(target: Target, keep_l2: bool) -> Kernel {
    let mut b = KB::new("hint", target);
    let (x, nx) = b.tensor("x", F32, false);
    let (xb, nxb) = b.tensor("xb", BF16, false);
    let (y, _) = b.tensor("y", F32, true);
    let (yb, _) = b.tensor("yb", BF16, true);
    let tid = b.tid();
    let rx = b.op(
        OpKind::MakeRsrc {
            ptr: x,
            num_elems: nx,
        },
        Type::BufferRsrc(F32),
    );
    let rxb = b.op(
        OpKind::MakeRsrc {
            ptr: xb,
            num_elems: nxb,
        },
        Type::BufferRsrc(BF16),
    );
    let flags = |align| MemFlags {
        align,
        nontemporal: false,
        keep_l2,
    };
    for (k, (lanes, buffer)) in [(1u32, false), (2, true), (4, false), (4, true)]
        .into_iter()
        .enumerate()
    {
        // A distinct index per load, so that LLVM merges none of them.
        let off = b.i32(16 * k as i64);
        let tid = b.op(OpKind::Binary(BinOp::Add, tid, off), Type::s(I32));
        let t = Type::vec(F32, lanes);
        let v = if buffer {
            b.op(
                OpKind::BufferLoad {
                    rsrc: rx,
                    index: tid,
                    flags: flags(4 * lanes),
                },
                t,
            )
        } else {
            b.op(
                OpKind::Load {
                    ptr: x,
                    index: tid,
                    flags: flags(4 * lanes),
                },
                t,
            )
        };
        b.op0(OpKind::Store {
            ptr: y,
            index: tid,
            value: v,
            flags: MemFlags::default(),
        });
    }
    let h = b.op(
        OpKind::BufferLoad {
            rsrc: rxb,
            index: tid,
            flags: flags(2),
        },
        Type::s(BF16),
    );
    b.op0(OpKind::Store {
        ptr: yb,
        index: tid,
        value: h,
        flags: MemFlags::default(),
    });
    b.finish()
}

#[test]
fn sm90_hinted_loads_carry_an_evict_last_policy() {
    let Some(t) = tools() else { return };
    let c = compile(&t, &kernel(Target::Sm90, true));
    let count = |s: &str| c.asm.matches(s).count();
    assert!(
        count("createpolicy.fractional.L2::evict_last.b64") >= 1,
        "{}",
        c.asm
    );
    assert_eq!(count("ld.global.L2::cache_hint.v4.b32"), 2, "{}", c.asm);
    assert_eq!(count("ld.global.L2::cache_hint.v2.b32"), 1, "{}", c.asm);
    assert_eq!(count("ld.global.L2::cache_hint.b32"), 1, "{}", c.asm);
    // The 2-byte load is not hinted, and nothing else is.
    assert_eq!(count("L2::cache_hint"), 4, "{}", c.asm);
    let plain = compile(&t, &kernel(Target::Sm90, false));
    assert!(!plain.asm.contains("cache_hint") && !plain.asm.contains("createpolicy"));
}

#[test]
fn amd_ignores_the_hint() {
    for target in [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
    ] {
        let hinted = flydsl_codegen::lower(&kernel(target, true)).unwrap();
        let plain = flydsl_codegen::lower(&kernel(target, false)).unwrap();
        assert_eq!(hinted, plain, "{target}");
    }
    let Some(t) = tools() else { return };
    let k = kernel(Target::Gfx942, true);
    check_amd_object(&k, &compile(&t, &k));
}
