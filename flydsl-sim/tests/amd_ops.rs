//! The AMD-only ops on the Sim: where direct-to-LDS loads land and when they are visible,
//! the LDS-only barrier as a racecheck epoch, waits, and the scheduling controls as no-ops.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, SimError, SimMemory, SimOptions};

/// How a kernel synchronises between its direct-to-LDS load and its read of the data.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sync {
    None,
    LdsBarrier,
    Barrier,
    Wait0,
    Wait0ThenLdsBarrier,
}

const THREADS: u32 = 128;

/// The element thread `t` loads from: a permutation of the threads, times the elements per lane.
fn src_index(t: u32, per: u32) -> u32 {
    ((t * 37 + 11) % THREADS) * per
}

fn rsrc(b: &mut B, p: ValueId, n: ValueId) -> ValueId {
    b.op(
        OpKind::MakeRsrc {
            ptr: p,
            num_elems: n,
        },
        Type::BufferRsrc(ScalarType::I32),
    )
}

/// Thread `t` direct-loads `bytes` from `x[src_index(t)]` into LDS at (wave base + lane *
/// bytes); after `sync`, it copies `per` elements at element `read(t) * per` of LDS to
/// `y[t * per..]`. `valid` is the resource's element count.
fn dma_kernel(target: Target, bytes: u32, sync: Sync, read_neighbour: bool) -> Kernel {
    let per = bytes / 4;
    let w = target.wave_size();
    let mut b = B::new("dma", target);
    let (px, _) = b.tensor("x", ScalarType::I32);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let valid = b.scalar("valid", ScalarType::I64);
    let arr = b.lds("s", ScalarType::I32, THREADS * per);
    let r = rsrc(&mut b, px, valid);
    let t = b.tid();
    let (c37, c11, cn, cper, cw) = (
        b.i32(37),
        b.i32(11),
        b.i32(THREADS as i32),
        b.i32(per as i32),
        b.i32(w as i32),
    );
    let m = b.bin(BinOp::Mul, t, c37);
    let m = b.bin(BinOp::Add, m, c11);
    let m = b.bin(BinOp::URem, m, cn);
    let idx = b.bin(BinOp::Mul, m, cper);
    let wave = b.bin(BinOp::UDiv, t, cw);
    let wave_elems = b.i32((w * per) as i32);
    let base = b.bin(BinOp::Mul, wave, wave_elems);
    let lds = b.lds_base(arr);
    let dst = b.op(OpKind::PtrAdd(lds, base), b.ty(lds));
    b.op0(OpKind::Amd(AmdOp::BufferLoadToLds {
        rsrc: r,
        index: idx,
        lds: dst,
        bytes,
    }));
    match sync {
        Sync::None => {}
        Sync::LdsBarrier => b.op0(OpKind::Amd(AmdOp::LdsBarrier)),
        Sync::Barrier => b.barrier(),
        Sync::Wait0 => b.op0(OpKind::Amd(AmdOp::WaitVmcnt(0))),
        Sync::Wait0ThenLdsBarrier => {
            b.op0(OpKind::Amd(AmdOp::WaitVmcnt(0)));
            b.op0(OpKind::Amd(AmdOp::LdsBarrier));
        }
    }
    let who = if read_neighbour {
        let one = b.i32(1);
        b.bin(BinOp::Xor, t, one)
    } else {
        t
    };
    let at = b.bin(BinOp::Mul, who, cper);
    let vt = Type::vec(ScalarType::I32, per);
    let v = b.load(lds, at, vt);
    let out = b.bin(BinOp::Mul, t, cper);
    b.store(py, out, v);
    b.finish()
}

/// What thread `t` reads: element `who * per + j` of LDS holds what lane `l` of wave `wv`
/// loaded, where `who * per + j = wv * wave * per + l * per + j`.
fn expected(x: &[u32], valid: u32, per: u32, wave: u32, read_neighbour: bool) -> Vec<u32> {
    let mut y = vec![0u32; (THREADS * per) as usize];
    for t in 0..THREADS {
        let who = if read_neighbour { t ^ 1 } else { t };
        let p = who * per;
        let (wv, lane) = (p / (wave * per), (p % (wave * per)) / per);
        let src = src_index(wv * wave + lane, per);
        for j in 0..per {
            // A lane's access is wholly in range or wholly out in these tests.
            y[(t * per + j) as usize] = if src + per <= valid {
                x[(src + j) as usize]
            } else {
                0
            };
        }
    }
    y
}

fn run_dma(k: &Kernel, x: &[u32], valid: u32, per: u32) -> Result<Vec<u32>, SimError> {
    let mem = SimMemory::new();
    let dx = upload_u32(&mem, x);
    let dy = upload_u32(&mem, &vec![0xdead_beef; (THREADS * per) as usize]);
    launch(
        k,
        [1, 1, 1],
        [THREADS, 1, 1],
        &pack(
            k,
            &[
                Arg::Tensor(dx, x.len() as i64),
                Arg::Tensor(dy, (THREADS * per) as i64),
                Arg::I64(valid as i64),
            ],
        ),
        &mem,
        &SimOptions::default(),
    )?;
    Ok(download_u32(&mem, dy, (THREADS * per) as usize))
}

fn input(n: u32) -> Vec<u32> {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    (0..n).map(|_| r.next() as u32).collect()
}

#[test]
fn direct_to_lds_lands_at_m0_plus_lane_times_size() {
    for (target, bytes) in [
        (Target::Gfx942, 4),
        (Target::Gfx950, 4),
        (Target::Gfx950, 16),
    ] {
        let per = bytes / 4;
        let x = input(THREADS * per);
        // All in range, then the last quarter of the source wholly out of range (zeros).
        for valid in [THREADS * per, THREADS * per * 3 / 4] {
            for (sync, neighbour) in [
                (Sync::LdsBarrier, true),
                (Sync::Barrier, true),
                (Sync::Wait0, false),
                (Sync::Wait0ThenLdsBarrier, true),
            ] {
                let k = dma_kernel(target, bytes, sync, neighbour);
                let y = run_dma(&k, &x, valid, per)
                    .unwrap_or_else(|e| panic!("{target} {bytes} B {sync:?}: {e}"));
                let want = expected(&x, valid, per, target.wave_size(), neighbour);
                assert_eq!(y, want, "{target} {bytes} B valid {valid} {sync:?}");
            }
        }
    }
}

#[test]
fn reading_before_the_load_lands_is_reported() {
    let x = input(THREADS * 4);
    // No wait, no barrier: even the issuing thread's own bytes are pending.
    let k = dma_kernel(Target::Gfx950, 16, Sync::None, false);
    let e = run_dma(&k, &x, THREADS * 4, 4).unwrap_err().to_string();
    assert!(
        e.contains("direct-to-LDS") && e.contains("WaitVmcnt"),
        "{e}"
    );
    // Waited, but another thread reads without a barrier: an LDS race.
    let k = dma_kernel(Target::Gfx950, 16, Sync::Wait0, true);
    let e = run_dma(&k, &x, THREADS * 4, 4).unwrap_err();
    assert!(matches!(e, SimError::LdsRace { .. }), "{e}");
}

/// Two direct-to-LDS loads into two arrays, then `WaitVmcnt(1)`: the older has landed, the
/// newer has not.
#[test]
fn wait_vmcnt_retires_all_but_the_newest() {
    for read_second in [false, true] {
        let mut b = B::new("two", Target::Gfx942);
        let (px, _) = b.tensor("x", ScalarType::I32);
        let (py, _) = b.tensor("y", ScalarType::I32);
        let n = b.scalar("n", ScalarType::I64);
        let a0 = b.lds("first", ScalarType::I32, 64);
        let a1 = b.lds("second", ScalarType::I32, 64);
        let r = rsrc(&mut b, px, n);
        let t = b.tid();
        let c64 = b.i32(64);
        let i1 = b.bin(BinOp::Add, t, c64);
        let (l0, l1) = (b.lds_base(a0), b.lds_base(a1));
        for (lds, index) in [(l0, t), (l1, i1)] {
            b.op0(OpKind::Amd(AmdOp::BufferLoadToLds {
                rsrc: r,
                index,
                lds,
                bytes: 4,
            }));
        }
        b.op0(OpKind::Amd(AmdOp::WaitVmcnt(1)));
        let v = b.load(if read_second { l1 } else { l0 }, t, I32);
        b.store(py, t, v);
        let k = b.finish();
        let x = input(128);
        let mem = SimMemory::new();
        let dx = upload_u32(&mem, &x);
        let dy = upload_u32(&mem, &[0; 64]);
        let r = launch(
            &k,
            [1, 1, 1],
            [64, 1, 1],
            &pack(
                &k,
                &[Arg::Tensor(dx, 128), Arg::Tensor(dy, 64), Arg::I64(128)],
            ),
            &mem,
            &SimOptions::default(),
        );
        if read_second {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("second") && e.contains("direct-to-LDS"), "{e}");
        } else {
            r.unwrap();
            assert_eq!(download_u32(&mem, dy, 64), x[..64].to_vec());
        }
    }
}

#[test]
fn divergent_lds_pointer_is_reported() {
    let mut b = B::new("divergent", Target::Gfx942);
    let (px, pn) = b.tensor("x", ScalarType::I32);
    let arr = b.lds("s", ScalarType::I32, 128);
    let r = rsrc(&mut b, px, pn);
    let t = b.tid();
    let lds = b.lds_base(arr);
    let dst = b.op(OpKind::PtrAdd(lds, t), b.ty(lds));
    b.op0(OpKind::Amd(AmdOp::BufferLoadToLds {
        rsrc: r,
        index: t,
        lds: dst,
        bytes: 4,
    }));
    let k = b.finish();
    let mem = SimMemory::new();
    let dx = upload_u32(&mem, &[0; 64]);
    let e = launch(
        &k,
        [1, 1, 1],
        [64, 1, 1],
        &pack(&k, &[Arg::Tensor(dx, 64)]),
        &mem,
        &SimOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("wave-uniform"), "{e}");
}

/// A neighbour exchange through LDS with `LdsBarrier` between (clean, data moved) and the
/// scheduling controls around it (no effect on results), on every AMD target.
#[test]
fn lds_barrier_is_an_epoch_and_sched_ops_are_no_ops() {
    for target in [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
    ] {
        for barrier in [false, true] {
            let mut b = B::new("xchg", target);
            let (py, _) = b.tensor("y", ScalarType::I32);
            let arr = b.lds("s", ScalarType::I32, 128);
            let lds = b.lds_base(arr);
            let t = b.tid();
            b.op0(OpKind::Amd(AmdOp::SetPrio(2)));
            b.op0(OpKind::Amd(AmdOp::SchedGroupBarrier {
                mask: sched_mask::DS_WRITE,
                size: 1,
                sync_id: 0,
            }));
            b.store(lds, t, t);
            b.op0(OpKind::Amd(AmdOp::SchedBarrier(sched_mask::NONE)));
            if barrier {
                b.op0(OpKind::Amd(AmdOp::LdsBarrier));
            }
            b.op0(OpKind::Amd(AmdOp::SetPrio(0)));
            let one = b.i32(1);
            let n = b.bin(BinOp::Xor, t, one);
            let v = b.load(lds, n, I32);
            b.store(py, t, v);
            let k = b.finish();
            let mem = SimMemory::new();
            let dy = upload_u32(&mem, &[0; 128]);
            let r = launch(
                &k,
                [1, 1, 1],
                [128, 1, 1],
                &pack(&k, &[Arg::Tensor(dy, 128)]),
                &mem,
                &SimOptions::default(),
            );
            if barrier {
                r.unwrap_or_else(|e| panic!("{target}: {e}"));
                let y = download_u32(&mem, dy, 128);
                assert!(
                    (0..128u32).all(|t| y[t as usize] == t ^ 1),
                    "{target}: {y:?}"
                );
            } else {
                assert!(
                    matches!(r, Err(SimError::LdsRace { .. })),
                    "{target}: {r:?}"
                );
            }
        }
    }
}

#[test]
fn amd_ops_off_their_targets_are_rejected_at_launch() {
    let mut k = Kernel::empty("nv", Target::Sm90);
    k.body.ops.push(Op {
        results: vec![],
        kind: OpKind::Amd(AmdOp::LdsBarrier),
    });
    let mem = SimMemory::new();
    let e = launch(&k, [1, 1, 1], [32, 1, 1], &[], &mem, &SimOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("LdsBarrier") && e.contains("sm90"), "{e}");
}

/// `LdsReadTr16` on a 16-bit array: thread `t` names chunk `chunk(t)` (4 elements); the result
/// is checked against the exchange rule computed here from the per-lane chunks.
fn tr16_kernel(threads: u32, skip_lane: Option<u32>) -> Kernel {
    let mut b = B::new("tr16", Target::Gfx950);
    let (px, _) = b.tensor("x", ScalarType::I16);
    let (py, _) = b.tensor("y", ScalarType::I16);
    let arr = b.lds("s", ScalarType::I16, threads * 4);
    let lds = b.lds_base(arr);
    let t = b.tid();
    let c4 = b.i32(4);
    let at = b.bin(BinOp::Mul, t, c4);
    let v4 = Type::vec(ScalarType::I16, 4);
    let v = b.load(px, at, v4);
    b.store(lds, at, v);
    b.op0(OpKind::Amd(AmdOp::LdsBarrier));
    let (c5, c3, cn) = (b.i32(5), b.i32(3), b.i32(threads as i32));
    let c = b.bin(BinOp::Mul, t, c5);
    let c = b.bin(BinOp::Add, c, c3);
    let c = b.bin(BinOp::URem, c, cn);
    let idx = b.bin(BinOp::Mul, c, c4);
    let read = |b: &mut B| {
        let r = b.op(
            OpKind::Amd(AmdOp::LdsReadTr16 {
                ptr: lds,
                index: idx,
            }),
            v4,
        );
        b.store(py, at, r);
    };
    match skip_lane {
        None => read(&mut b),
        Some(l) => {
            let cl = b.i32(l as i32);
            let ne = b.cmp(CmpPred::Ne, t, cl);
            b.when(ne, read);
        }
    }
    b.finish()
}

fn run_tr16(k: &Kernel, threads: u32, x: &[u16]) -> Result<Vec<u16>, SimError> {
    let mem = SimMemory::new();
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let dx = upload_bytes(&mem, &bytes);
    let dy = upload_bytes(&mem, &vec![0; bytes.len()]);
    let n = x.len() as i64;
    launch(
        k,
        [1, 1, 1],
        [threads, 1, 1],
        &pack(k, &[Arg::Tensor(dx, n), Arg::Tensor(dy, n)]),
        &mem,
        &SimOptions::default(),
    )?;
    Ok(download_u16(&mem, dy, x.len()))
}

#[test]
fn lds_read_tr16_transposes_each_16_lane_group() {
    for threads in [64, 128] {
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        let x: Vec<u16> = (0..threads * 4).map(|_| r.next() as u16).collect();
        let y = run_tr16(&tr16_kernel(threads, None), threads, &x).unwrap();
        let chunk = |l: u32| ((l * 5 + 3) % threads) as usize * 4;
        for t in 0..threads {
            let (g, j) = (t / 16 * 16, t % 16);
            for i in 0..4 {
                let src = g + 4 * i + j / 4;
                let want = x[chunk(src) + (j % 4) as usize];
                assert_eq!(
                    y[(t * 4 + i) as usize],
                    want,
                    "threads {threads} t {t} i {i}"
                );
            }
        }
    }
    let e = run_tr16(&tr16_kernel(64, Some(21)), 64, &[0; 256])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lane group 16..32") && e.contains("thread 21"),
        "{e}"
    );
}

#[test]
fn tensor_load_to_lds_forms_the_sim_does_not_model_are_reported() {
    // The 4-group (3-D to 5-D) form, and a 2-group descriptor with gather mode on.
    for groups in [4usize, 2] {
        let mut b = B::new("tdm", Target::Gfx1250);
        let w: Vec<ValueId> = (0..20)
            // Word 0: the gather bit (31); word 3: type 2 (bits 31:30), the same value.
            .map(|i| b.i32(if i == 0 || i == 3 { 1 << 31 } else { 0 }))
            .collect();
        let v4 = Type::vec(ScalarType::I32, 4);
        let g0 = b.op(OpKind::Build(w[..4].to_vec()), v4);
        let g1 = b.op(
            OpKind::Build(w[4..12].to_vec()),
            Type::vec(ScalarType::I32, 8),
        );
        let mut gs = vec![g0, g1];
        if groups == 4 {
            gs.push(b.op(OpKind::Build(w[12..16].to_vec()), v4));
            gs.push(b.op(OpKind::Build(w[16..20].to_vec()), v4));
        }
        b.op0(OpKind::Amd(AmdOp::TensorLoadToLds { groups: gs }));
        b.op0(OpKind::Amd(AmdOp::WaitTensorcnt(0)));
        let k = b.finish();
        let mem = SimMemory::new();
        let e = launch(&k, [1, 1, 1], [32, 1, 1], &[], &mem, &SimOptions::default()).unwrap_err();
        let want = if groups == 4 {
            "4 descriptor groups"
        } else {
            "gather"
        };
        assert!(
            matches!(&e, SimError::Unsupported { what, .. } if what.contains("TensorLoadToLds") && what.contains(want)),
            "{e}"
        );
    }
}

/// `y[t] = Dpp(x[t], ctrl)` (i32) over `threads` threads, or `None` where lane `skip` idles.
fn dpp_kernel(target: Target, ctrl: DppCtrl, skip: Option<u32>) -> Kernel {
    let mut b = B::new("dpp", target);
    let (px, _) = b.tensor("x", ScalarType::I32);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let t = b.tid();
    let v = b.load(px, t, I32);
    let body = |b: &mut B| {
        let r = b.op(OpKind::Amd(AmdOp::Dpp { value: v, ctrl }), I32);
        b.store(py, t, r);
    };
    match skip {
        None => body(&mut b),
        Some(l) => {
            let cl = b.i32(l as i32);
            let ne = b.cmp(CmpPred::Ne, t, cl);
            b.when(ne, body);
        }
    }
    b.finish()
}

fn run_i32(k: &Kernel, threads: u32, x: &[u32]) -> Result<Vec<u32>, SimError> {
    let mem = SimMemory::new();
    let dx = upload_u32(&mem, x);
    let dy = upload_u32(&mem, &vec![0; x.len()]);
    let n = x.len() as i64;
    launch(
        k,
        [1, 1, 1],
        [threads, 1, 1],
        &pack(k, &[Arg::Tensor(dx, n), Arg::Tensor(dy, n)]),
        &mem,
        &SimOptions::default(),
    )?;
    Ok(download_u32(&mem, dy, x.len()))
}

#[test]
fn dpp_moves_within_rows_of_16() {
    let threads = 64;
    let x: Vec<u32> = {
        let mut r = Rng(0x1234_5678_9abc_def1);
        (0..threads).map(|_| r.next() as u32).collect()
    };
    // Each pattern's lane map written out by its definition.
    type Want = fn(u32) -> Option<u32>;
    let cases: [(DppCtrl, Want); 6] = [
        (DppCtrl::QuadPerm([3, 2, 1, 0]), |i| {
            Some(i - i % 4 + 3 - i % 4)
        }),
        (DppCtrl::RowShl(3), |i| (i < 13).then_some(i + 3)),
        (DppCtrl::RowShr(1), |i| (i >= 1).then(|| i - 1)),
        (DppCtrl::RowRor(5), |i| Some((i + 11) % 16)),
        (DppCtrl::RowMirror, |i| Some(15 - i)),
        (DppCtrl::RowHalfMirror, |i| {
            Some(if i < 8 { 7 - i } else { 23 - i })
        }),
    ];
    for target in [Target::Gfx942, Target::Gfx1201] {
        for (ctrl, want) in cases {
            let y = run_i32(&dpp_kernel(target, ctrl, None), threads, &x).unwrap();
            for t in 0..threads {
                let row = t / 16 * 16;
                let w = match want(t % 16) {
                    Some(s) => x[(row + s) as usize],
                    None => x[t as usize],
                };
                assert_eq!(y[t as usize], w, "{target} {ctrl:?} t {t}");
            }
        }
    }
    let e = run_i32(
        &dpp_kernel(Target::Gfx942, DppCtrl::RowMirror, Some(40)),
        threads,
        &x,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("row 32..48") && e.contains("thread 40"), "{e}");
}
