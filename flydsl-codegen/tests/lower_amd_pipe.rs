//! The AMD pipeline primitives (`AmdOp`) compiled with llc-22 on every AMD target that has
//! them, and the machine code checked: the LDS-only barrier leaves a prefetch in flight (no
//! `vmcnt` / `loadcnt` wait between the load and the barrier), waits and priorities appear
//! with their counts, direct-to-LDS loads become `buffer_load_dword{,x4} ... lds`.

mod common_lower;
use common_lower::*;
use flydsl_dsl::ir::{sched_mask, AmdOp, Kernel, OpKind, ScalarType, Target};
use flydsl_dsl::*;

const AMD: [Target; 4] = [
    Target::Gfx942,
    Target::Gfx950,
    Target::Gfx1201,
    Target::Gfx1250,
];

/// The instruction lines of a disassembly (mnemonic and operands, no encodings).
fn insts(asm: &str) -> Vec<String> {
    asm.lines()
        .map(|l| l.split("//").next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty() && !l.ends_with(':') && !l.starts_with('.'))
        .collect()
}

fn is_barrier(l: &str) -> bool {
    l.starts_with("s_barrier")
}

/// A prefetch (`buffer_load` into registers) issued before an LDS ping-pong barrier and used
/// after it; `lds_only` picks `lds_barrier` or the fenced `barrier`.
fn prefetch_kernel(t: Target, lds_only: bool) -> Kernel {
    KernelBuilder::new("prefetch", t, 256)
        .build(|k| {
            let x = k.tensor("x", ScalarType::F32);
            let y = k.tensor_mut("y", ScalarType::F32);
            let s = k.lds("s", ScalarType::F32, 256);
            let tid = thread_id_x();
            let next = x.rsrc().load_vec(tid * 4 + 1024, 4, 16);
            s.store(tid, tid.cast(ScalarType::F32));
            if lds_only {
                lds_barrier();
            } else {
                barrier();
            }
            let o = s.load(tid ^ 1);
            y.rsrc()
                .store_aligned(tid * 4, next + splat(o, 4), 16, false);
        })
        .unwrap()
}

/// The lines from the first register buffer load to the first barrier after it.
fn load_to_barrier(asm: &str) -> Vec<String> {
    let l = insts(asm);
    let start = l
        .iter()
        .position(|x| x.starts_with("buffer_load") && !x.ends_with(" lds"))
        .unwrap_or_else(|| panic!("no buffer load:\n{asm}"));
    let end = l[start..]
        .iter()
        .position(|x| is_barrier(x))
        .unwrap_or_else(|| panic!("the buffer load is not before the barrier:\n{asm}"));
    l[start..start + end].to_vec()
}

fn waits_on_loads(window: &[String]) -> Vec<&String> {
    window
        .iter()
        .filter(|x| x.contains("vmcnt") || x.contains("loadcnt"))
        .collect()
}

#[test]
fn lds_barrier_leaves_the_prefetch_in_flight() {
    let Some(tools) = tools() else { return };
    for t in AMD {
        let c = compile(&tools, &prefetch_kernel(t, true));
        assert!(
            c.ir.contains("!mmra"),
            "{t}: no MMRA on the fences:\n{}",
            c.ir
        );
        let w = load_to_barrier(&c.asm);
        assert!(
            waits_on_loads(&w).is_empty(),
            "{t}: a load wait between the prefetch and the LDS barrier: {w:#?}"
        );
        // The LDS store before the barrier is waited for.
        let lds_wait = if t.wave_size() == 64 {
            "lgkmcnt(0)"
        } else {
            "dscnt 0x0"
        };
        assert!(
            w.iter().any(|x| x.contains(lds_wait)),
            "{t}: no LDS wait before the barrier: {w:#?}"
        );
    }
}

/// The check above can fail: on gfx12 the fenced barrier waits for the prefetch.
#[test]
fn fenced_barrier_waits_for_the_prefetch_on_gfx12() {
    let Some(tools) = tools() else { return };
    for t in [Target::Gfx1201, Target::Gfx1250] {
        let c = compile(&tools, &prefetch_kernel(t, false));
        let w = load_to_barrier(&c.asm);
        assert!(
            !waits_on_loads(&w).is_empty(),
            "{t}: expected a loadcnt wait before the fenced barrier: {w:#?}"
        );
    }
}

#[test]
fn wait_vmcnt_emits_the_count() {
    let Some(tools) = tools() else { return };
    for t in AMD {
        let k = KernelBuilder::new("wait", t, 64)
            .build(|k| {
                let x = k.tensor("x", ScalarType::F32);
                let y = k.tensor_mut("y", ScalarType::F32);
                let tid = thread_id_x();
                let r = x.rsrc();
                let a = r.load(tid);
                let b = r.load(tid + 64);
                let c = r.load(tid + 128);
                wait_vmcnt(2);
                let s = k.lds("s", ScalarType::F32, 64);
                s.store(tid, tid.cast(ScalarType::F32));
                lds_barrier();
                y.store(tid, a + s.load(tid ^ 1));
                y.store(tid + 64, b + c);
            })
            .unwrap();
        let c = compile(&tools, &k);
        let want = if t.wave_size() == 64 {
            "s_waitcnt vmcnt(2)"
        } else {
            "s_wait_loadcnt 0x2"
        };
        assert!(
            insts(&c.asm).iter().any(|l| l == want),
            "{t}: no `{want}`:\n{}",
            c.asm
        );
    }
}

#[test]
fn scheduling_controls_lower_to_their_intrinsics() {
    let Some(tools) = tools() else { return };
    for t in AMD {
        let k = KernelBuilder::new("sched", t, 64)
            .build(|k| {
                let x = k.tensor("x", ScalarType::F32);
                let y = k.tensor_mut("y", ScalarType::F32);
                let tid = thread_id_x();
                let v = x.load(tid);
                set_prio(1);
                sched_group_barrier(sched_mask::VMEM_READ, 1, 0);
                sched_group_barrier(sched_mask::VALU, 2, 0);
                let w = v * v + v;
                sched_barrier(sched_mask::NONE);
                set_prio(0);
                y.store(tid, w);
            })
            .unwrap();
        let c = compile(&tools, &k);
        for s in [
            "call void @llvm.amdgcn.sched.group.barrier(i32 32, i32 1, i32 0)",
            "call void @llvm.amdgcn.sched.group.barrier(i32 2, i32 2, i32 0)",
            "call void @llvm.amdgcn.sched.barrier(i32 0)",
        ] {
            assert!(c.ir.contains(s), "{t}: no `{s}` in\n{}", c.ir);
        }
        let l = insts(&c.asm);
        let one = l.iter().position(|x| x == "s_setprio 1");
        let zero = l.iter().position(|x| x == "s_setprio 0");
        assert!(
            matches!((one, zero), (Some(a), Some(b)) if a < b),
            "{t}: s_setprio 1 then 0 expected:\n{}",
            c.asm
        );
    }
}

/// A direct-to-LDS load of `bytes` per lane, an LDS-only or fenced barrier, and a read of
/// the data.
fn dma_kernel(t: Target, bytes: u32, lds_only: bool) -> Kernel {
    KernelBuilder::new("dma", t, 256)
        .build(|k| {
            let x = k.tensor("x", ScalarType::F32);
            let y = k.tensor_mut("y", ScalarType::F32);
            let per = (bytes / 4) as i32;
            let s = k.lds("s", ScalarType::F32, 256 * bytes / 4);
            let tid = thread_id_x();
            let wave_base = (tid / wave_size() as i32) * (wave_size() as i32 * per);
            buffer_load_to_lds(&x.rsrc(), tid * per, &s, read_first_lane(wave_base), bytes);
            if lds_only {
                lds_barrier();
            } else {
                barrier();
            }
            y.store(tid, s.load(tid * per));
        })
        .unwrap()
}

#[test]
fn direct_to_lds_loads_become_buffer_load_lds() {
    let Some(tools) = tools() else { return };
    for ((t, bytes, mnemonic), lds_only) in [
        (Target::Gfx942, 4, "buffer_load_dword"),
        (Target::Gfx950, 4, "buffer_load_dword"),
        (Target::Gfx950, 16, "buffer_load_dwordx4"),
    ]
    .into_iter()
    .flat_map(|c| [(c, true), (c, false)])
    {
        let c = compile(&tools, &dma_kernel(t, bytes, lds_only));
        let l = insts(&c.asm);
        let at = l
            .iter()
            .position(|x| x.starts_with(&format!("{mnemonic} ")) && x.ends_with(" lds"))
            .unwrap_or_else(|| panic!("{t}: no `{mnemonic} ... lds`:\n{}", c.asm));
        // The wave waits for its own direct-to-LDS load before either barrier.
        let bar = at
            + l[at..]
                .iter()
                .position(|x| is_barrier(x))
                .unwrap_or_else(|| panic!("{t}: no barrier after the load:\n{}", c.asm));
        assert!(
            l[at..bar].iter().any(|x| x.contains("vmcnt(0)")),
            "{t}: no vmcnt wait between the direct-to-LDS load and the barrier:\n{}",
            c.asm
        );
    }
}

#[test]
fn amd_ops_are_rejected_where_they_do_not_exist() {
    let r = KernelBuilder::new("nv", Target::Sm90, 64).build(|_| lds_barrier());
    let e = r.unwrap_err().to_string();
    assert!(e.contains("LdsBarrier") && e.contains("sm90"), "{e}");
    let e = KernelBuilder::new("rdna", Target::Gfx1201, 64)
        .build(|k| {
            let x = k.tensor("x", ScalarType::F32);
            let s = k.lds("s", ScalarType::F32, 64);
            buffer_load_to_lds(&x.rsrc(), thread_id_x(), &s, 0, 4);
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("BufferLoadToLds") && e.contains("gfx1201") && e.contains("gfx942"),
        "{e}"
    );
    let e = KernelBuilder::new("big", Target::Gfx942, 64)
        .build(|k| {
            let x = k.tensor("x", ScalarType::F32);
            let s = k.lds("s", ScalarType::F32, 256);
            buffer_load_to_lds(&x.rsrc(), thread_id_x() * 4, &s, 0, 16);
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("16 bytes per lane") && e.contains("[4]"), "{e}");
    // The lowering's error names the op, too.
    let mut k = Kernel::empty("low", Target::Sm90);
    k.body.ops.push(flydsl_dsl::ir::Op {
        results: vec![],
        kind: OpKind::Amd(AmdOp::SetPrio(1)),
    });
    let e = flydsl_codegen::lower(&k).unwrap_err();
    assert_eq!(e.op_name, "SetPrio");
}

#[test]
fn transposing_lds_read_is_ds_read_b64_tr_b16_on_gfx950() {
    let Some(tools) = tools() else { return };
    for e in [ScalarType::BF16, ScalarType::F16, ScalarType::I16] {
        let k = KernelBuilder::new("tr16", Target::Gfx950, 64)
            .build(|k| {
                let x = k.tensor("x", e);
                let y = k.tensor_mut("y", e);
                let s = k.lds("s", e, 256);
                let t = thread_id_x();
                s.store(t * 4, x.load_vec(t * 4, 4, 8));
                lds_barrier();
                y.store(t * 4, lds_read_tr16(&s, (t ^ 5) * 4));
            })
            .unwrap();
        let c = compile(&tools, &k);
        assert!(
            insts(&c.asm)
                .iter()
                .any(|l| l.starts_with("ds_read_b64_tr_b16 ")),
            "{e}: no ds_read_b64_tr_b16:\n{}",
            c.asm
        );
    }
    let e = KernelBuilder::new("tr16", Target::Gfx942, 64)
        .build(|k| {
            let s = k.lds("s", ScalarType::BF16, 256);
            let _ = lds_read_tr16(&s, thread_id_x() * 4);
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("LdsReadTr16 does not exist on gfx942"), "{e}");
}

#[test]
fn tensor_load_to_lds_and_its_wait_on_gfx1250() {
    let Some(tools) = tools() else { return };
    for groups in [2usize, 4] {
        let k = KernelBuilder::new("tdm", Target::Gfx1250, 32)
            .build(|k| {
                let n = if groups == 2 { 12 } else { 20 };
                let w: Vec<Val> = (0..n)
                    .map(|i| k.scalar(&format!("d{i}"), ScalarType::I32))
                    .collect();
                let mut g = vec![vec_of(&w[..4]), vec_of(&w[4..12])];
                if groups == 4 {
                    g.push(vec_of(&w[12..16]));
                    g.push(vec_of(&w[16..20]));
                }
                tensor_load_to_lds(&g);
                wait_tensorcnt(0);
            })
            .unwrap();
        let c = compile(&tools, &k);
        let l = insts(&c.asm);
        let load = l
            .iter()
            .position(|x| x.starts_with("tensor_load_to_lds "))
            .unwrap_or_else(|| panic!("{groups} groups: no tensor_load_to_lds:\n{}", c.asm));
        let operands = l[load].matches("s[").count();
        assert_eq!(operands, groups, "{}", l[load]);
        assert!(
            l[load..].iter().any(|x| x == "s_wait_tensorcnt 0x0"),
            "no s_wait_tensorcnt after the load:\n{}",
            c.asm
        );
    }
}

#[test]
fn dpp_row_sum_uses_dpp_moves_not_ds_bpermute() {
    use flydsl_dsl::ir::DppCtrl::*;
    let Some(tools) = tools() else { return };
    for t in AMD {
        let k = KernelBuilder::new("rowsum", t, 64)
            .build(|k| {
                let x = k.tensor("x", ScalarType::F32);
                let y = k.tensor_mut("y", ScalarType::F32);
                let tid = thread_id_x();
                let mut s = x.load(tid);
                for c in [
                    QuadPerm([1, 0, 3, 2]),
                    QuadPerm([2, 3, 0, 1]),
                    RowHalfMirror,
                    RowMirror,
                    RowShr(1),
                ] {
                    s = s + dpp(s, c);
                }
                y.store(tid, s);
            })
            .unwrap();
        let c = compile(&tools, &k);
        let l = insts(&c.asm);
        for pat in [
            "quad_perm:[1,0,3,2]",
            "quad_perm:[2,3,0,1]",
            "row_half_mirror",
            "row_mirror",
            "row_shr:1",
        ] {
            assert!(
                l.iter().any(|x| x.contains("_dpp ") && x.contains(pat)),
                "{t}: no DPP instruction with {pat}:\n{}",
                c.asm
            );
        }
        assert!(
            !l.iter().any(|x| x.starts_with("ds_bpermute")),
            "{t}: ds_bpermute in a DPP reduction:\n{}",
            c.asm
        );
    }
}
