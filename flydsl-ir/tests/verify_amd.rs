//! Verifier rules of the AMD-only ops: the target, the immediate ranges, the operand types
//! of `BufferLoadToLds`, no results.

use flydsl_ir::*;

fn with_op(target: Target, op: AmdOp) -> Kernel {
    let mut k = Kernel::empty("amd", target);
    k.body.ops.push(Op {
        results: vec![],
        kind: OpKind::Amd(op),
    });
    k
}

fn reason(k: &Kernel) -> String {
    let e = verify(k).unwrap_err();
    format!("{} | {}", e.op_name, e.reason)
}

#[test]
fn immediates_are_range_checked() {
    for t in [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
    ] {
        for ok in [
            AmdOp::LdsBarrier,
            AmdOp::WaitVmcnt(MAX_VMCNT),
            AmdOp::SetPrio(3),
            AmdOp::SchedBarrier(sched_mask::ALL),
            AmdOp::SchedGroupBarrier {
                mask: sched_mask::MFMA | sched_mask::DS_READ,
                size: 4,
                sync_id: 1,
            },
        ] {
            verify(&with_op(t, ok.clone())).unwrap_or_else(|e| panic!("{ok:?} on {t}: {e}"));
        }
        let r = reason(&with_op(t, AmdOp::WaitVmcnt(MAX_VMCNT + 1)));
        assert!(r.starts_with("WaitVmcnt") && r.contains("0..=63"), "{r}");
        let r = reason(&with_op(t, AmdOp::SetPrio(4)));
        assert!(r.contains("0..=3"), "{r}");
        let r = reason(&with_op(t, AmdOp::SchedBarrier(0x800)));
        assert!(r.contains("0x800"), "{r}");
    }
    let r = reason(&with_op(Target::Sm90, AmdOp::SchedBarrier(0)));
    assert!(r.contains("SchedBarrier does not exist on sm90"), "{r}");
}

/// A `BufferLoadToLds` over a resource of `rsrc_elem` into an LDS pointer of `lds_elem`.
fn dma(target: Target, rsrc_elem: ScalarType, lds_elem: ScalarType, bytes: u32) -> Kernel {
    let mut k = Kernel::empty("dma", target);
    let ty = [
        Type::BufferRsrc(rsrc_elem),
        Type::s(ScalarType::I32),
        Type::Ptr(AddrSpace::Shared, lds_elem),
    ];
    let ids: Vec<ValueId> = ty
        .iter()
        .map(|&t| {
            k.values.push(t);
            ValueId(k.values.len() as u32 - 1)
        })
        .collect();
    // The index is a scalar parameter; the LDS pointer and the resource come from ops.
    k.params.push(Param {
        name: "p".into(),
        kind: ParamKind::Scalar(ScalarType::I32),
    });
    k.param_values.push(vec![ids[1]]);
    k.body.ops.push(Op {
        results: vec![ids[2]],
        kind: OpKind::LdsBase(0),
    });
    k.lds.push(LdsArray {
        name: "s".into(),
        elem: lds_elem,
        len: 1024,
        offset: 0,
        align: 16,
    });
    let g = {
        k.values.push(Type::Ptr(AddrSpace::Global, rsrc_elem));
        ValueId(k.values.len() as u32 - 1)
    };
    let n = {
        k.values.push(Type::s(ScalarType::I64));
        ValueId(k.values.len() as u32 - 1)
    };
    k.params.push(Param {
        name: "x".into(),
        kind: ParamKind::Tensor {
            elem: rsrc_elem,
            writable: false,
        },
    });
    k.param_values.push(vec![g, n]);
    k.body.ops.push(Op {
        results: vec![ids[0]],
        kind: OpKind::MakeRsrc {
            ptr: g,
            num_elems: n,
        },
    });
    k.body.ops.push(Op {
        results: vec![],
        kind: OpKind::Amd(AmdOp::BufferLoadToLds {
            rsrc: ids[0],
            index: ids[1],
            lds: ids[2],
            bytes,
        }),
    });
    k
}

#[test]
fn buffer_load_to_lds_rules() {
    use ScalarType::*;
    verify(&dma(Target::Gfx942, F32, F32, 4)).unwrap();
    verify(&dma(Target::Gfx950, BF16, BF16, 16)).unwrap();
    verify(&dma(Target::Gfx950, F32, F32, 4)).unwrap();
    let r = reason(&dma(Target::Gfx942, F32, F32, 16));
    assert!(r.contains("16 bytes per lane: gfx942 supports [4]"), "{r}");
    let r = reason(&dma(Target::Gfx950, F32, F32, 8));
    assert!(r.contains("[4, 16]"), "{r}");
    let r = reason(&dma(Target::Gfx950, F32, I32, 4));
    assert!(
        r.contains("LDS pointer to the resource's element type"),
        "{r}"
    );
    let r = reason(&dma(Target::Gfx1250, F32, F32, 4));
    assert!(
        r.contains("BufferLoadToLds does not exist on gfx1250") && r.contains("gfx942, gfx950"),
        "{r}"
    );
}
