//! Every OpKind (except Mma, see lower_mma.rs) lowered for every target and compiled with
//! llc-22; the code objects are checked for wave size, kernarg layout, no scratch and the
//! expected instruction classes.

mod common_lower;
use common_lower::*;
use flydsl_ir::*;
use std::collections::HashMap;

use ScalarType::*;

fn s(t: ScalarType) -> Type {
    Type::s(t)
}
fn v(t: ScalarType, n: u32) -> Type {
    Type::vec(t, n)
}

/// Output tensors, one per element type, that keep every computed value alive: value `k`
/// of a type goes to `out[k * 1024 + tid]`, so no store overwrites another.
struct Sinks {
    outs: HashMap<ScalarType, (ValueId, i64)>,
    idx: ValueId,
}

impl Sinks {
    fn put(&mut self, b: &mut KB, x: ValueId) {
        let e = b.k.ty(x).value_elem().unwrap();
        let entry = match self.outs.get(&e) {
            Some(&o) => o,
            None => (b.tensor(&format!("out_{e}"), e, true).0, 0),
        };
        let (out, k) = entry;
        self.outs.insert(e, (out, k + 1));
        let off = b.i32(k * 1024);
        let at = b.op(
            OpKind::Binary(BinOp::Add, self.idx, off),
            Type::s(ScalarType::I32),
        );
        b.op0(OpKind::Store {
            ptr: out,
            index: at,
            value: x,
            flags: MemFlags::default(),
        });
    }
}

/// A kernel that uses every non-matrix op on `target`.
fn all_ops(target: Target) -> Kernel {
    let mut b = KB::new(&format!("all_ops_{target}"), target);
    b.k.attrs.waves_per_eu = Some(2);
    b.k.attrs.max_registers = Some(128);
    let (xf, nx) = b.tensor("xf", F32, false);
    let (xh, _) = b.tensor("xh", F16, false);
    let (xb, _) = b.tensor("xb", BF16, false);
    let (xi, _) = b.tensor("xi", I32, false);
    let (acc, _) = b.tensor("acc", F32, true);
    let (acci, _) = b.tensor("acci", I32, true);
    let n = b.scalar("n", I32);
    let flag = b.scalar("flag", I1);
    let eps = b.scalar("eps", F32);
    let hs = b.scalar("hs", F16);
    let bs = b.scalar("bs", BF16);
    let q8 = b.scalar("q8", target.native_fp8_e4m3());
    let i64s = b.scalar("big", I64);
    let i8s = b.scalar("small", I8);
    let i16s = b.scalar("mid", I16);
    let lds_f = b.lds("tile", F32, 256, 16);
    let lds_i = b.lds("cnt", I32, 4, 4);

    let tid = b.tid();
    let mut sinks = Sinks {
        outs: HashMap::new(),
        idx: tid,
    };
    // Geometry.
    for sp in [
        Special::ThreadId(Dim::Y),
        Special::ThreadId(Dim::Z),
        Special::BlockId(Dim::X),
        Special::BlockId(Dim::Y),
        Special::BlockId(Dim::Z),
        Special::BlockDim(Dim::X),
        Special::BlockDim(Dim::Y),
        Special::BlockDim(Dim::Z),
        Special::GridDim(Dim::X),
        Special::GridDim(Dim::Y),
        Special::GridDim(Dim::Z),
        Special::LaneId,
    ] {
        let g = b.op(OpKind::Special(sp), s(I32));
        sinks.put(&mut b, g);
    }
    // Loads (per-thread values so the fast math stays on the vector ALU).
    let nf = MemFlags::default();
    let f = b.op(
        OpKind::Load {
            ptr: xf,
            index: tid,
            flags: nf,
        },
        s(F32),
    );
    let h = b.op(
        OpKind::Load {
            ptr: xh,
            index: tid,
            flags: nf,
        },
        s(F16),
    );
    let bf = b.op(
        OpKind::Load {
            ptr: xb,
            index: tid,
            flags: nf,
        },
        s(BF16),
    );
    let i = b.op(
        OpKind::Load {
            ptr: xi,
            index: tid,
            flags: nf,
        },
        s(I32),
    );
    let v128 = MemFlags {
        align: 16,
        nontemporal: true,
        keep_l2: false,
    };
    let f4 = b.op(
        OpKind::Load {
            ptr: xf,
            index: tid,
            flags: v128,
        },
        v(F32, 4),
    );
    let h8 = b.op(
        OpKind::Load {
            ptr: xh,
            index: tid,
            flags: v128,
        },
        v(F16, 8),
    );
    let b8 = b.op(
        OpKind::Load {
            ptr: xb,
            index: tid,
            flags: MemFlags {
                align: 16,
                nontemporal: false,
                keep_l2: false,
            },
        },
        v(BF16, 8),
    );
    let i4 = b.op(
        OpKind::Load {
            ptr: xi,
            index: tid,
            flags: v128,
        },
        v(I32, 4),
    );
    // Constants of every kind.
    for (c, t) in [
        (Const::Int(-3), s(I32)),
        (Const::Int(1), s(I1)),
        (Const::Int(300), s(I8)),
        (Const::Int(-1), s(I16)),
        (Const::Int(1 << 40), s(I64)),
        (Const::Float(1.5), s(F16)),
        (Const::Float(-2.25), s(BF16)),
        (Const::Float(0.1), s(F32)),
        (Const::Float(1.0), s(F8E4M3FN)),
        (Const::Float(-3.0), s(F8E4M3FNUZ)),
        (Const::Float(1e9), s(F8E5M2)),
        (Const::Float(0.5), s(F8E5M2FNUZ)),
        (Const::Float(2.0), v(F32, 4)),
        (Const::Float(448.0), v(F8E4M3FN, 4)),
        (Const::Int(7), v(I32, 4)),
        (Const::Int(1), v(I1, 4)),
    ] {
        let x = b.op(OpKind::Const(c), t);
        sinks.put(&mut b, x);
    }
    // Binary ops on ints, floats and vectors.
    use BinOp::*;
    for op in [
        Add, Sub, Mul, Div, UDiv, Rem, URem, And, Or, Xor, Shl, LShr, AShr, Min, Max, UMin, UMax,
    ] {
        let r = b.op(OpKind::Binary(op, i, n), s(I32));
        sinks.put(&mut b, r);
        let r = b.op(OpKind::Binary(op, i4, i4), v(I32, 4));
        sinks.put(&mut b, r);
    }
    for op in [Shl, AShr, Add, Min, UMax] {
        let r = b.op(OpKind::Binary(op, i64s, i64s), s(I64));
        sinks.put(&mut b, r);
        let r = b.op(OpKind::Binary(op, i8s, i8s), s(I8));
        sinks.put(&mut b, r);
        let r = b.op(OpKind::Binary(op, i16s, i16s), s(I16));
        sinks.put(&mut b, r);
    }
    for op in [Add, Sub, Mul, Div, Rem, Min, Max, MinNan, MaxNan] {
        let r = b.op(OpKind::Binary(op, f, eps), s(F32));
        sinks.put(&mut b, r);
        let r = b.op(OpKind::Binary(op, h, hs), s(F16));
        sinks.put(&mut b, r);
        let r = b.op(OpKind::Binary(op, bf, bs), s(BF16));
        sinks.put(&mut b, r);
        let r = b.op(OpKind::Binary(op, f4, f4), v(F32, 4));
        sinks.put(&mut b, r);
        let r = b.op(OpKind::Binary(op, h8, h8), v(F16, 8));
        sinks.put(&mut b, r);
    }
    for op in [And, Or, Xor] {
        let r = b.op(OpKind::Binary(op, flag, flag), s(I1));
        sinks.put(&mut b, r);
    }
    // Unary ops.
    use UnOp::*;
    for op in [Neg, Not, Abs] {
        let r = b.op(OpKind::Unary(op, i), s(I32));
        sinks.put(&mut b, r);
    }
    let r = b.op(OpKind::Unary(Not, flag), s(I1));
    sinks.put(&mut b, r);
    for op in [Neg, Abs, Exp2, Log2, Rsqrt, Rcp, Sqrt, Trunc, UnOp::Floor] {
        for (x, t) in [
            (f, s(F32)),
            (h, s(F16)),
            (bf, s(BF16)),
            (f4, v(F32, 4)),
            (b8, v(BF16, 8)),
        ] {
            let r = b.op(OpKind::Unary(op, x), t);
            sinks.put(&mut b, r);
        }
    }
    // Fma.
    for (x, t) in [(f, s(F32)), (h, s(F16)), (bf, s(BF16)), (f4, v(F32, 4))] {
        let r = b.op(OpKind::Fma(x, x, x), t);
        sinks.put(&mut b, r);
    }
    // Compares and selects.
    use CmpPred::*;
    for p in [Eq, Ne, Lt, Le, Gt, Ge, ULt, ULe, UGt, UGe] {
        let c = b.op(OpKind::Cmp(p, i, n), s(I1));
        let r = b.op(OpKind::Select(c, i, n), s(I32));
        sinks.put(&mut b, r);
        // The unsigned predicates are integer-only (the verifier rejects them on floats).
        if !matches!(p, ULt | ULe | UGt | UGe) {
            let c = b.op(OpKind::Cmp(p, f, eps), s(I1));
            let r = b.op(OpKind::Select(c, f4, f4), v(F32, 4));
            sinks.put(&mut b, r);
            let c = b.op(OpKind::Cmp(p, q8, q8), s(I1));
            sinks.put(&mut b, c);
        }
        let c4 = b.op(OpKind::Cmp(p, i4, i4), v(I1, 4));
        let r = b.op(OpKind::Select(c4, i4, i4), v(I32, 4));
        sinks.put(&mut b, r);
        sinks.put(&mut b, c4);
    }
    // Casts: every float pair, int widths, bool, fp8, bitcasts.
    let floats = [F32, F16, BF16, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ];
    let ints = [I1, I8, I16, I32, I64];
    let mut fvals = vec![(F32, f), (F16, h), (BF16, bf)];
    for t in [F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ] {
        let q = b.op(OpKind::Cast(CastKind::Convert, f), s(t));
        sinks.put(&mut b, q);
        fvals.push((t, q));
    }
    let ivals = [(I1, flag), (I8, i8s), (I16, i16s), (I32, i), (I64, i64s)];
    for &(ft, x) in &fvals {
        for t in floats {
            let r = b.op(OpKind::Cast(CastKind::Convert, x), s(t));
            sinks.put(&mut b, r);
        }
        for t in ints {
            for k in [CastKind::Convert, CastKind::ConvertUnsigned] {
                let r = b.op(OpKind::Cast(k, x), s(t));
                sinks.put(&mut b, r);
            }
        }
        let _ = ft;
    }
    for &(_, x) in &ivals {
        for t in floats.iter().chain(ints.iter()) {
            for k in [CastKind::Convert, CastKind::ConvertUnsigned] {
                let r = b.op(OpKind::Cast(k, x), s(*t));
                sinks.put(&mut b, r);
            }
        }
    }
    for (x, t) in [
        (f, s(I32)),
        (i, s(F32)),
        (h, s(I16)),
        (bf, s(F16)),
        (f4, v(F16, 8)),
        (h8, v(I32, 4)),
        (q8, s(I8)),
        (i8s, s(F8E5M2)),
        (flag, s(I8)),
        (i8s, s(I1)),
        (i4, v(F8E4M3FN, 16)),
    ] {
        let r = b.op(OpKind::Cast(CastKind::Bitcast, x), t);
        sinks.put(&mut b, r);
    }
    let f4h = b.op(OpKind::Cast(CastKind::Convert, f4), v(F16, 4));
    sinks.put(&mut b, f4h);
    let f4q = b.op(OpKind::Cast(CastKind::Convert, f4), v(F8E5M2, 4));
    let f4back = b.op(OpKind::Cast(CastKind::Convert, f4q), v(BF16, 4));
    sinks.put(&mut b, f4back);
    // Vector construction and access.
    let sp = b.op(OpKind::Splat(f), v(F32, 4));
    let ex = b.op(OpKind::Extract(sp, 3), s(F32));
    let ins = b.op(OpKind::Insert(f4, ex, 1), v(F32, 4));
    let bl = b.op(OpKind::Build(vec![h, hs, h, hs]), v(F16, 4));
    let sl = b.op(OpKind::Slice(h8, 4), v(F16, 4));
    let sl1 = b.op(OpKind::Slice(h8, 7), s(F16));
    let add = b.op(OpKind::Binary(BinOp::Add, bl, sl), v(F16, 4));
    let bsp = b.op(OpKind::Splat(flag), v(I1, 4));
    for x in [ins, add, sl1, bsp] {
        sinks.put(&mut b, x);
    }
    // LDS, pointer arithmetic, atomics, barrier.
    let lb = b.op(OpKind::LdsBase(lds_f), Type::Ptr(AddrSpace::Shared, F32));
    let li = b.op(OpKind::LdsBase(lds_i), Type::Ptr(AddrSpace::Shared, I32));
    let four = b.i32(4);
    let t4 = b.op(OpKind::Binary(BinOp::Mul, tid, four), s(I32));
    b.op0(OpKind::Store {
        ptr: lb,
        index: t4,
        value: f4,
        flags: MemFlags {
            align: 16,
            nontemporal: false,
            keep_l2: false,
        },
    });
    b.op0(OpKind::Barrier);
    let lp = b.op(OpKind::PtrAdd(lb, four), Type::Ptr(AddrSpace::Shared, F32));
    let one = b.i32(1);
    let big_idx = b.op(OpKind::Cast(CastKind::Convert, tid), s(I64));
    let lv = b.op(
        OpKind::Load {
            ptr: lp,
            index: big_idx,
            flags: MemFlags::default(),
        },
        s(F32),
    );
    let zero = b.i32(0);
    let old = b.op(
        OpKind::AtomicAdd {
            ptr: li,
            index: zero,
            value: one,
        },
        s(I32),
    );
    sinks.put(&mut b, old);
    let oldf = b.op(
        OpKind::AtomicAdd {
            ptr: acc,
            index: tid,
            value: lv,
        },
        s(F32),
    );
    sinks.put(&mut b, oldf);
    let oldi = b.op(
        OpKind::AtomicAdd {
            ptr: acci,
            index: zero,
            value: i,
        },
        s(I32),
    );
    sinks.put(&mut b, oldi);
    let gp = b.op(
        OpKind::PtrAdd(xf, big_idx),
        Type::Ptr(AddrSpace::Global, F32),
    );
    let gv = b.op(
        OpKind::Load {
            ptr: gp,
            index: one,
            flags: MemFlags::default(),
        },
        s(F32),
    );
    sinks.put(&mut b, gv);
    // Buffer resources: 128-bit loads of f32 and bf16, narrow loads, stores.
    let rf = b.op(
        OpKind::MakeRsrc {
            ptr: xf,
            num_elems: nx,
        },
        Type::BufferRsrc(F32),
    );
    let bf4 = b.op(
        OpKind::BufferLoad {
            rsrc: rf,
            index: t4,
            flags: MemFlags {
                align: 16,
                nontemporal: false,
                keep_l2: false,
            },
        },
        v(F32, 4),
    );
    sinks.put(&mut b, bf4);
    let bf1 = b.op(
        OpKind::BufferLoad {
            rsrc: rf,
            index: tid,
            flags: MemFlags {
                align: 4,
                nontemporal: true,
                keep_l2: false,
            },
        },
        s(F32),
    );
    sinks.put(&mut b, bf1);
    let (xb2, nb) = (xb, nx);
    let rb = b.op(
        OpKind::MakeRsrc {
            ptr: xb2,
            num_elems: nb,
        },
        Type::BufferRsrc(BF16),
    );
    let bb8 = b.op(
        OpKind::BufferLoad {
            rsrc: rb,
            index: t4,
            flags: MemFlags {
                align: 16,
                nontemporal: false,
                keep_l2: false,
            },
        },
        v(BF16, 8),
    );
    sinks.put(&mut b, bb8);
    let bb1 = b.op(
        OpKind::BufferLoad {
            rsrc: rb,
            index: tid,
            flags: MemFlags::default(),
        },
        s(BF16),
    );
    sinks.put(&mut b, bb1);
    let (y8, ny8) = b.tensor("y8", F8E4M3FN, true);
    let r8 = b.op(
        OpKind::MakeRsrc {
            ptr: y8,
            num_elems: ny8,
        },
        Type::BufferRsrc(F8E4M3FN),
    );
    let q1 = b.op(
        OpKind::BufferLoad {
            rsrc: r8,
            index: tid,
            flags: MemFlags::default(),
        },
        s(F8E4M3FN),
    );
    let q4 = b.op(
        OpKind::BufferLoad {
            rsrc: r8,
            index: t4,
            flags: MemFlags {
                align: 4,
                nontemporal: false,
                keep_l2: false,
            },
        },
        v(F8E4M3FN, 4),
    );
    b.op0(OpKind::BufferStore {
        rsrc: r8,
        index: t4,
        value: q4,
        flags: MemFlags {
            align: 4,
            nontemporal: true,
            keep_l2: false,
        },
    });
    b.op0(OpKind::BufferStore {
        rsrc: r8,
        index: tid,
        value: q1,
        flags: MemFlags::default(),
    });
    b.op0(OpKind::BufferStore {
        rsrc: rb,
        index: t4,
        value: bb8,
        flags: MemFlags {
            align: 16,
            nontemporal: false,
            keep_l2: false,
        },
    });
    let (yb, nyb) = b.tensor("ybool", I1, true);
    let rbool = b.op(
        OpKind::MakeRsrc {
            ptr: yb,
            num_elems: nyb,
        },
        Type::BufferRsrc(I1),
    );
    let lbool = b.op(
        OpKind::BufferLoad {
            rsrc: rbool,
            index: tid,
            flags: MemFlags::default(),
        },
        v(I1, 2),
    );
    b.op0(OpKind::BufferStore {
        rsrc: rbool,
        index: tid,
        value: lbool,
        flags: MemFlags::default(),
    });
    // Cross-lane ops.
    for m in [ShuffleMode::Xor, ShuffleMode::Idx, ShuffleMode::Down] {
        let r = b.op(OpKind::Shuffle(m, f, one), s(F32));
        sinks.put(&mut b, r);
        let r = b.op(OpKind::Shuffle(m, i, tid), s(I32));
        sinks.put(&mut b, r);
    }
    for x in [i, f, i64s, h, bf, i8s, flag, q8, i16s] {
        let r = b.op(OpKind::ReadFirstLane(x), b.k.ty(x));
        sinks.put(&mut b, r);
    }
    // Nested control flow: a loop with carried values containing an if and a loop.
    let c = b.op(OpKind::Cmp(CmpPred::Lt, tid, n), s(I1));
    let res = b.if_(
        c,
        &[s(F32), v(I32, 4)],
        |b| {
            let lo = b.i32(0);
            let st = b.i32(2);
            b.for_(lo, n, st, &[f, i4], |b, iv, carried| {
                let odd = b.i32(1);
                let bit = b.op(OpKind::Binary(BinOp::And, iv, odd), s(I32));
                let z = b.i32(0);
                let is0 = b.op(OpKind::Cmp(CmpPred::Eq, bit, z), s(I1));
                let upd = b.if_(
                    is0,
                    &[s(F32)],
                    |b| vec![b.op(OpKind::Binary(BinOp::Add, carried[0], eps), s(F32))],
                    |b| vec![b.op(OpKind::Binary(BinOp::Mul, carried[0], eps), s(F32))],
                );
                let inner = b.for_(lo, iv, odd, &[carried[1]], |b, j, c2| {
                    let sj = b.op(OpKind::Splat(j), v(I32, 4));
                    vec![b.op(OpKind::Binary(BinOp::Add, c2[0], sj), v(I32, 4))]
                });
                vec![upd[0], inner[0]]
            })
        },
        |b| {
            let z = b.fc(0.0, s(F32));
            vec![z, i4]
        },
    );
    sinks.put(&mut b, res[0]);
    sinks.put(&mut b, res[1]);
    // An if without results and an empty else.
    b.if_(
        flag,
        &[],
        |b| {
            b.op0(OpKind::Barrier);
            vec![]
        },
        |_| vec![],
    );
    b.finish()
}

/// The instruction classes each target must show.
fn expected(target: Target) -> &'static [&'static str] {
    match target {
        Target::Gfx942 | Target::Gfx950 => &[
            "ds_bpermute_b32",
            "v_exp_f32",
            "v_log_f32",
            "v_rsq_f32",
            "v_rcp_f32",
            "global_atomic_add_f32",
            "buffer_load_dwordx4",
            "buffer_store_dwordx4",
            "buffer_load_ubyte",
            "s_barrier",
            "v_mbcnt_hi_u32_b32",
            "v_readfirstlane_b32",
        ],
        _ => &[
            "ds_bpermute_b32",
            "v_exp_f32",
            "v_log_f32",
            "v_rsq_f32",
            "v_rcp_f32",
            "global_atomic_add_f32",
            "buffer_load_b128",
            "buffer_store_b128",
            "buffer_load_u8",
            "s_barrier",
            "v_readfirstlane_b32",
        ],
    }
}

#[test]
fn every_op_compiles_for_every_amd_target() {
    let Some(t) = tools() else { return };
    for target in AMD {
        let k = all_ops(target);
        let c = compile(&t, &k);
        check_amd_object(&k, &c);
        for want in expected(target) {
            assert!(
                c.asm.contains(want),
                "{target}: `{want}` missing from the disassembly"
            );
        }
        // The kernel queries BlockDim/GridDim: the implicit-argument block must be present.
        assert!(!c.ir.contains("amdgpu-no-implicitarg-ptr"));
        assert!(c.ir.contains("\"amdgpu-waves-per-eu\"=\"2\""));
        assert!(c.ir.contains("!nontemporal"));
    }
}

#[test]
fn every_op_compiles_for_sm90() {
    let Some(t) = tools() else { return };
    let k = all_ops(Target::Sm90);
    let c = compile(&t, &k);
    for want in [
        "shfl.sync.bfly.b32",
        "shfl.sync.idx.b32",
        "shfl.sync.down.b32",
        "activemask.b32",
        "ex2.approx.ftz.f32",
        "lg2.approx.ftz.f32",
        "rsqrt.approx.ftz.f32",
        "rcp.approx.ftz.f32",
        "atom.global.add.f32",
        "bar.sync",
        "%laneid",
        "%nctaid.z",
        ".maxntid 256",
        ".maxnreg 128",
        "ld.global.nc.v4",
    ] {
        assert!(c.asm.contains(want), "sm90: `{want}` missing from the PTX");
    }
    // Kernel parameters follow kernarg_layout() in order and size.
    let entry = c.asm.split(".entry").nth(1).expect("an .entry");
    let params: Vec<&str> = entry
        .split(')')
        .next()
        .unwrap()
        .lines()
        .filter(|l| l.contains(".param"))
        .collect();
    let slots = k.kernarg_layout().slots;
    assert_eq!(params.len(), slots.len());
    for (p, s) in params.iter().zip(&slots) {
        let bits = s.size * 8;
        let ok = if s.is_pointer {
            p.contains(".u64")
        } else {
            p.contains(&format!("{bits} ")) || p.contains(&format!("[{}]", s.size))
        };
        assert!(ok, "param `{p}` does not match slot {s:?}");
    }
}

#[test]
fn minimal_kernel_drops_implicit_arguments_and_uses_wave32_on_gfx12() {
    let Some(t) = tools() else { return };
    for target in AMD {
        let mut b = KB::new("tiny", target);
        let (x, _) = b.tensor("x", F32, true);
        let tid = b.tid();
        let lane = b.op(OpKind::Special(Special::LaneId), s(I32));
        let lf = b.op(OpKind::Cast(CastKind::Convert, lane), s(F32));
        b.op0(OpKind::Store {
            ptr: x,
            index: tid,
            value: lf,
            flags: MemFlags::default(),
        });
        let k = b.finish();
        let c = compile(&t, &k);
        check_amd_object(&k, &c);
        assert!(c.ir.contains("\"amdgpu-no-implicitarg-ptr\""));
        assert_eq!(
            note_value(&c.notes, ".kernarg_segment_size").as_deref(),
            Some("16")
        );
        // wave64 targets need mbcnt_hi for the lane id, wave32 ones must not.
        assert_eq!(
            c.asm.contains("v_mbcnt_hi"),
            target.wave_size() == 64,
            "{target}"
        );
    }
}
