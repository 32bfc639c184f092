//! Buffer resources built from wave-uniform values (`flydsl_ir::uniform`) reach the AMD
//! descriptor through `readfirstlane`, so LLVM keeps them in SGPRs even when it computed a
//! uniform count in VGPRs; resources built from per-lane values are left alone (a
//! `readfirstlane` there would change results). Checked on the lowered LLVM IR of every AMD
//! target; that the GEMM's code objects have no waterfall loop is
//! `fly-gemm/tests/codeobj_portable.rs`.

use flydsl_dsl::ir::{ScalarType::*, Target};
use flydsl_dsl::*;

/// `y[t] = x[t] (+ x[t] again through a per-lane resource when `divergent`)`, with the
/// uniform resource's count computed through a loop-carried value.
fn kernel(target: Target, divergent: bool) -> flydsl_dsl::ir::Kernel {
    KernelBuilder::new("rsrc", target, 64)
        .build(|k| {
            let x = k.tensor("x", F32);
            let y = k.tensor_mut("y", F32);
            let n = k.scalar("n", I32);
            let t = thread_id_x();
            // A uniform count carried through a loop (the analysis' fixpoint).
            let m = for_range(c_i32(0), c_i32(4), c_i32(1), &[n], |_, c| vec![c[0] + 1]);
            let r = x.rsrc_n(m[0].cast(I64));
            let mut v = r.load(t);
            if divergent {
                // The count depends on the lane: not uniform.
                let rd = x.rsrc_n((n - t).cast(I64));
                v = v + rd.load(t);
            }
            y.store(t, v);
        })
        .unwrap()
}

fn readfirstlanes(ll: &str) -> usize {
    ll.matches("call ptr addrspace(1) @llvm.amdgcn.readfirstlane.p1")
        .count()
}

#[test]
fn uniform_resources_read_the_first_lane_and_divergent_ones_do_not() {
    for t in [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
    ] {
        let one = flydsl_codegen::lower(&kernel(t, false)).unwrap();
        assert_eq!(readfirstlanes(&one), 1, "{t}:\n{one}");
        let two = flydsl_codegen::lower(&kernel(t, true)).unwrap();
        assert_eq!(
            readfirstlanes(&two),
            1,
            "{t}: the per-lane resource too:\n{two}"
        );
    }
    // NVPTX has no descriptors: nothing changes there.
    let nv = flydsl_codegen::lower(&kernel(Target::Sm90, false)).unwrap();
    assert_eq!(readfirstlanes(&nv), 0);
}

#[test]
fn the_analysis_tracks_loops_and_lanes() {
    use flydsl_dsl::ir::{uniform::uniform_values, OpKind};
    let k = kernel(Target::Gfx942, true);
    let u = uniform_values(&k);
    let mut rsrcs = Vec::new();
    let mut walk = vec![&k.body];
    while let Some(b) = walk.pop() {
        for op in &b.ops {
            match &op.kind {
                OpKind::MakeRsrc { .. } => rsrcs.push(u[op.results[0].0 as usize]),
                OpKind::For { body, .. } => walk.push(body),
                OpKind::If {
                    then_block,
                    else_block,
                    ..
                } => walk.extend([then_block, else_block]),
                _ => {}
            }
        }
    }
    assert_eq!(rsrcs, [true, false]);
}
