//! memcheck, racecheck, buffer resources, atomics and parallel grids.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, launch_report, LdsAccess, SimError, SimMemory, SimOptions, ThreadRef};

/// y[gid + off] = 1.0 for gid < n (no guard on `off`).
fn offset_store() -> Kernel {
    let mut b = B::new("planted_oob", Target::Gfx942);
    let (_px, _) = b.tensor("x", ScalarType::F32);
    let (py, _) = b.tensor("out", ScalarType::F32);
    let off = b.scalar("off", ScalarType::I32);
    let i = b.gid();
    let j = b.bin(BinOp::Add, i, off);
    let one = b.f32(1.0);
    b.store(py, j, one);
    b.finish()
}

#[test]
fn out_of_bounds_store_names_param_index_and_thread() {
    let k = offset_store();
    let mem = SimMemory::new();
    let dx = upload_f32(&mem, &[0.0; 300]);
    let dy = upload_f32(&mem, &[0.0; 256]);
    let args = |off| {
        pack(
            &k,
            &[Arg::Tensor(dx, 300), Arg::Tensor(dy, 256), Arg::I32(off)],
        )
    };
    launch(
        &k,
        [4, 1, 1],
        [64, 1, 1],
        &args(0),
        &mem,
        &SimOptions::default(),
    )
    .unwrap();
    // off = 3: thread 61 of block 3 writes element 256 (the first one past the end).
    let e = launch(
        &k,
        [4, 1, 1],
        [64, 1, 1],
        &args(3),
        &mem,
        &SimOptions::default(),
    )
    .unwrap_err();
    match &e {
        SimError::OutOfBounds {
            kernel,
            buffer,
            index,
            len,
            at,
            access,
        } => {
            assert_eq!(
                (kernel.as_str(), buffer.as_str(), *access),
                ("planted_oob", "out", "store")
            );
            assert_eq!((*index, *len), (256, 256));
            assert_eq!(
                *at,
                ThreadRef {
                    block: [3, 0, 0],
                    thread: [61, 0, 0]
                }
            );
        }
        other => panic!("wrong error {other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("`out`") && msg.contains("256") && msg.contains("thread (61,0,0)"),
        "{msg}"
    );
    // Negative index: reported against the same buffer.
    let e = launch(
        &k,
        [1, 1, 1],
        [64, 1, 1],
        &args(-1),
        &mem,
        &SimOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(e, SimError::OutOfBounds { index: -1, ref buffer, .. } if buffer == "out"),
        "{e}"
    );
    // memcheck off: silently dropped, and nothing else was touched.
    let opts = SimOptions {
        memcheck: false,
        ..Default::default()
    };
    launch(&k, [4, 1, 1], [64, 1, 1], &args(3), &mem, &opts).unwrap();
    assert!(download_f32(&mem, dx, 300).iter().all(|&v| v == 0.0));
}

/// LDS: thread t writes lds[t / 2] (pairs collide), optional barrier, then reads lds[t/2].
fn lds_pair_kernel(collide: bool, barrier_between: bool) -> Kernel {
    let mut b = B::new("lds_race", Target::Gfx942);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let arr = b.lds("tile", ScalarType::I32, 64);
    let t = b.tid();
    let p = b.lds_base(arr);
    let two = b.i32(if collide { 2 } else { 1 });
    let slot = b.bin(BinOp::Div, t, two);
    b.store(p, slot, t);
    if barrier_between {
        b.barrier();
    }
    // Read the neighbour's slot.
    let one = b.i32(1);
    let n = b.bin(BinOp::Xor, slot, one);
    let v = b.load(p, n, I32);
    b.store(py, t, v);
    b.finish()
}

#[test]
fn lds_race_is_reported_and_barrier_makes_it_clean() {
    let mem = SimMemory::new();
    let dy = upload_u32(&mem, &[0; 64]);
    let run = |k: &Kernel| {
        launch(
            k,
            [1, 1, 1],
            [64, 1, 1],
            &pack(k, &[Arg::Tensor(dy, 64)]),
            &mem,
            &SimOptions::default(),
        )
    };
    // Two threads write the same element: write-write race.
    let e = run(&lds_pair_kernel(true, true)).unwrap_err();
    match &e {
        SimError::LdsRace {
            array,
            index,
            first,
            second,
            first_kind,
            second_kind,
            ..
        } => {
            assert_eq!(array, "tile");
            assert_eq!(*index, 0);
            assert_eq!((first.thread[0], second.thread[0]), (0, 1));
            assert_eq!(
                (*first_kind, *second_kind),
                (LdsAccess::Write, LdsAccess::Write)
            );
        }
        other => panic!("wrong error {other}"),
    }
    // Distinct slots, but read of a neighbour's slot without a barrier: read-after-write race.
    let e = run(&lds_pair_kernel(false, false)).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::LdsRace {
                first_kind: LdsAccess::Write,
                second_kind: LdsAccess::Read,
                ..
            }
        ),
        "{e}"
    );
    // With a barrier in between: clean, and the data moved.
    run(&lds_pair_kernel(false, true)).unwrap();
    let y = download_u32(&mem, dy, 64);
    for t in 0..64u32 {
        assert_eq!(y[t as usize], t ^ 1);
    }
    // racecheck off: the racy kernel runs.
    let k = lds_pair_kernel(false, false);
    let opts = SimOptions {
        racecheck: false,
        ..Default::default()
    };
    launch(
        &k,
        [1, 1, 1],
        [64, 1, 1],
        &pack(&k, &[Arg::Tensor(dy, 64)]),
        &mem,
        &opts,
    )
    .unwrap();
}

#[test]
fn lds_out_of_bounds_and_divergent_barrier() {
    let mut b = B::new("lds_oob", Target::Gfx1201);
    let arr = b.lds("small", ScalarType::F32, 16);
    let _big = b.lds("after", ScalarType::F32, 64);
    let t = b.tid();
    let p = b.lds_base(arr);
    let x = b.f32(2.0);
    b.store(p, t, x);
    let k = b.finish();
    let mem = SimMemory::new();
    let e = launch(&k, [1, 1, 1], [32, 1, 1], &[], &mem, &SimOptions::default()).unwrap_err();
    assert!(
        matches!(e, SimError::LdsOutOfBounds { ref array, index: 16, len: 16, .. } if array == "small"),
        "{e}"
    );

    let mut b = B::new("div_barrier", Target::Gfx1201);
    let t = b.tid();
    let c = b.i32(5);
    let lt = b.cmp(CmpPred::Lt, t, c);
    b.when(lt, |b| b.barrier());
    let k = b.finish();
    let e = launch(&k, [1, 1, 1], [32, 1, 1], &[], &mem, &SimOptions::default()).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::DivergentBarrier {
                active: 5,
                threads: 32,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("barrier in divergent control flow"));
}

/// y[t] = buffer_load(rsrc(x, n), t + off) as <w x f32>, stored element-wise.
fn buffer_copy(w: u32) -> Kernel {
    let mut b = B::new("buf", Target::Gfx942);
    let (px, _) = b.tensor("x", ScalarType::F32);
    let (py, _) = b.tensor("y", ScalarType::F32);
    let n = b.scalar("n", ScalarType::I32);
    let off = b.scalar("off", ScalarType::I32);
    let n64 = b.cast(CastKind::Convert, n, I64);
    let r = b.op(
        OpKind::MakeRsrc {
            ptr: px,
            num_elems: n64,
        },
        Type::BufferRsrc(ScalarType::F32),
    );
    let t = b.tid();
    let cw = b.i32(w as i32);
    let base = b.bin(BinOp::Mul, t, cw);
    let idx = b.bin(BinOp::Add, base, off);
    let ty = Type::vec(ScalarType::F32, w);
    let v = b.op(
        OpKind::BufferLoad {
            rsrc: r,
            index: idx,
            flags: MemFlags::default(),
        },
        ty,
    );
    b.store(py, base, v);
    b.finish()
}

#[test]
fn buffer_load_out_of_range_reads_zero() {
    let x: Vec<f32> = (1..=40).map(|i| i as f32).collect();
    let mem = SimMemory::new();
    let dx = upload_f32(&mem, &x);
    let dy = upload_f32(&mem, &[-1.0; 64 * 4]);
    let k = buffer_copy(1);
    // n = 30 valid elements (fewer than allocated), offset -5: t < 5 and t >= 35 read 0.
    let args = pack(
        &k,
        &[
            Arg::Tensor(dx, 40),
            Arg::Tensor(dy, 256),
            Arg::I32(30),
            Arg::I32(-5),
        ],
    );
    launch(
        &k,
        [1, 1, 1],
        [64, 1, 1],
        &args,
        &mem,
        &SimOptions::default(),
    )
    .unwrap();
    let y = download_f32(&mem, dy, 64);
    for t in 0..64i32 {
        let j = t - 5;
        let want = if (0..30).contains(&j) {
            x[j as usize]
        } else {
            0.0
        };
        assert_eq!(y[t as usize], want, "t {t}");
    }
    // Vector loads of 4: entirely-out vectors read 0; a partially in-range one is an error.
    let k = buffer_copy(4);
    let args = |n| {
        pack(
            &k,
            &[
                Arg::Tensor(dx, 40),
                Arg::Tensor(dy, 256),
                Arg::I32(n),
                Arg::I32(0),
            ],
        )
    };
    launch(
        &k,
        [1, 1, 1],
        [64, 1, 1],
        &args(32),
        &mem,
        &SimOptions::default(),
    )
    .unwrap();
    let y = download_f32(&mem, dy, 64 * 4);
    for i in 0..256 {
        assert_eq!(y[i], if i < 32 { x[i] } else { 0.0 }, "i {i}");
    }
    let e = launch(
        &k,
        [1, 1, 1],
        [64, 1, 1],
        &args(30),
        &mem,
        &SimOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("partially out-of-range vector buffer access"),
        "{e}"
    );
    // num_elems larger than the allocation: the in-range access is still memchecked.
    let e = launch(
        &k,
        [1, 1, 1],
        [64, 1, 1],
        &args(1000),
        &mem,
        &SimOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(e, SimError::OutOfBounds { ref buffer, index: 40, .. } if buffer == "x"),
        "{e}"
    );
}

#[test]
fn atomics_from_many_workgroups_sum_correctly() {
    // Every thread adds its gid to sum_i (i32) and 0.5 to sum_f (f32), globally and in LDS.
    let mut b = B::new("atomics", Target::Gfx942);
    let (pi, _) = b.tensor("sum_i", ScalarType::I32);
    let (pf, _) = b.tensor("sum_f", ScalarType::F32);
    let (pold, _) = b.tensor("old_max", ScalarType::I32);
    let arr = b.lds("acc", ScalarType::I32, 1);
    let g = b.gid();
    let zero = b.i32(0);
    let old = b.op(
        OpKind::AtomicAdd {
            ptr: pi,
            index: zero,
            value: g,
        },
        I32,
    );
    let _ = old;
    let half = b.f32(0.5);
    b.op(
        OpKind::AtomicAdd {
            ptr: pf,
            index: zero,
            value: half,
        },
        F32,
    );
    let l = b.lds_base(arr);
    let one = b.i32(1);
    // LDS is not zeroed on a GPU (initcheck): thread 0 clears the counter first.
    let t0 = b.tid();
    let is_t0 = b.cmp(CmpPred::Eq, t0, zero);
    b.when(is_t0, |b| b.store(l, zero, zero));
    b.barrier();
    let lold = b.op(
        OpKind::AtomicAdd {
            ptr: l,
            index: zero,
            value: one,
        },
        I32,
    );
    b.barrier();
    let total = b.load(l, zero, I32);
    // Per-block: the LDS counter reached blockDim and each thread saw a distinct old value;
    // record max(old) + total in old_max[block].
    let bid = b.special(Special::BlockId(Dim::X));
    let t = b.tid();
    let bd = b.special(Special::BlockDim(Dim::X));
    let last = b.bin(BinOp::Sub, bd, one);
    let is_last = b.cmp(CmpPred::Eq, lold, last);
    b.when(is_last, |b| {
        let s = b.bin(BinOp::Add, t, total);
        b.store(pold, bid, s);
    });
    let k = b.finish();
    let blocks = 300u32;
    let threads = 128u32;
    let mem = SimMemory::new();
    let di = upload_u32(&mem, &[0]);
    let df = upload_f32(&mem, &[0.0]);
    let dold = upload_u32(&mem, &vec![0; blocks as usize]);
    let args = pack(
        &k,
        &[
            Arg::Tensor(di, 1),
            Arg::Tensor(df, 1),
            Arg::Tensor(dold, blocks as i64),
        ],
    );
    let rep = launch_report(
        &k,
        [blocks, 1, 1],
        [threads, 1, 1],
        &args,
        &mem,
        &SimOptions::default(),
    )
    .unwrap();
    assert_eq!(rep.workgroups, 300);
    let n = (blocks * threads) as u64;
    assert_eq!(
        download_u32(&mem, di, 1)[0] as u64,
        (n * (n - 1) / 2) & 0xFFFF_FFFF
    );
    assert_eq!(download_f32(&mem, df, 1)[0], n as f32 * 0.5);
    // Threads run their atomics in thread order inside a workgroup: the last thread saw 127.
    assert!(download_u32(&mem, dold, blocks as usize)
        .iter()
        .all(|&v| v == 127 + 128));
}

#[test]
fn large_grid_runs_in_parallel_and_matches_sequential() {
    // y[g] = g * 3 + 1 over 2^16 workgroups x 64 threads.
    let mut b = B::new("fill", Target::Sm90);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let g = b.gid();
    let three = b.i32(3);
    let one = b.i32(1);
    let m = b.bin(BinOp::Mul, g, three);
    let v = b.bin(BinOp::Add, m, one);
    b.store(py, g, v);
    let k = b.finish();
    let blocks = 1u32 << 14;
    let n = (blocks * 64) as usize;
    for threads in [0usize, 1, 2] {
        let mem = SimMemory::new();
        let dy = mem.alloc(n as u64 * 4).unwrap();
        let opts = SimOptions {
            threads,
            ..Default::default()
        };
        launch(
            &k,
            [blocks, 1, 1],
            [64, 1, 1],
            &pack(&k, &[Arg::Tensor(dy, n as i64)]),
            &mem,
            &opts,
        )
        .unwrap();
        let y = download_u32(&mem, dy, n);
        assert!(
            y.iter().enumerate().all(|(i, &v)| v == (i as u32) * 3 + 1),
            "threads {threads}"
        );
    }
}

#[test]
fn memory_api_errors_and_large_allocation() {
    let mem = SimMemory::new();
    let a = mem.alloc(16).unwrap();
    assert_ne!(a, 0);
    assert!(mem.write(a + 10, &[0; 8]).is_err());
    assert!(mem.read(a + 16, &mut [0; 1]).is_err());
    assert!(mem.free(a + 4).is_err());
    assert_eq!(mem.bytes_in_use(), 16);
    mem.free(a).unwrap();
    assert!(mem.free(a).is_err());
    assert!(mem.write(a, &[1]).is_err());
    assert_eq!(mem.bytes_in_use(), 0);
    // > 4 GiB: zero pages are lazy; touch only both ends.
    let big = 5u64 << 30;
    match mem.alloc(big) {
        Ok(p) => {
            mem.write(p + big - 4, &[1, 2, 3, 4]).unwrap();
            let mut out = [9u8; 8];
            mem.read(p + big - 8, &mut out).unwrap();
            assert_eq!(out, [0, 0, 0, 0, 1, 2, 3, 4]);
            mem.fill(p, 7, 3).unwrap();
            let mut o = [0u8; 4];
            mem.read(p, &mut o).unwrap();
            assert_eq!(o, [7, 7, 7, 0]);
            mem.free(p).unwrap();
        }
        Err(e) => eprintln!("host refused a lazy 5 GiB allocation: {e}"),
    }
}

/// out[gid] = sum of x[4 gid + off .. + 4], read as one `<4 x f32>` declared 16-byte
/// aligned (global), or staged through LDS and read back the same way (`lds`).
fn vector_load_at(lds: bool) -> Kernel {
    let mut b = B::new("vec_at", Target::Sm90);
    let (px, _) = b.tensor("x", ScalarType::F32);
    let (py, _) = b.tensor("out", ScalarType::F32);
    let off = b.scalar("off", ScalarType::I32);
    let arr = b.lds("stage", ScalarType::F32, 4 * 64 + 4);
    let g = b.gid();
    let four = b.i32(4);
    let i4 = b.bin(BinOp::Mul, g, four);
    let at = b.bin(BinOp::Add, i4, off);
    let v4 = Type::Vector(ScalarType::F32, 4);
    let aligned = |ptr, index| OpKind::Load {
        ptr,
        index,
        flags: MemFlags {
            align: 16,
            ..MemFlags::default()
        },
    };
    let v = if lds {
        // Thread t writes its four elements at LDS index 4 t + off, one at a time, then reads
        // them back as one vector.
        let base = b.lds_base(arr);
        for e in 0..4 {
            let ce = b.i32(e);
            let src = b.bin(BinOp::Add, i4, ce);
            let x = b.load(px, src, Type::Scalar(ScalarType::F32));
            let dst = b.bin(BinOp::Add, at, ce);
            b.store(base, dst, x);
        }
        b.op(aligned(base, at), v4)
    } else {
        b.op(aligned(px, at), v4)
    };
    let mut sum = b.f32(0.0);
    for e in 0..4 {
        let x = b.op(OpKind::Extract(v, e), Type::Scalar(ScalarType::F32));
        sum = b.bin(BinOp::Add, sum, x);
    }
    b.store(py, g, sum);
    b.finish()
}

#[test]
fn a_misaligned_vector_access_is_a_fault() {
    for lds in [false, true] {
        let k = vector_load_at(lds);
        let mem = SimMemory::new();
        let dx = upload_f32(&mem, &(0..260).map(|i| i as f32).collect::<Vec<_>>());
        let dy = upload_f32(&mem, &[0.0; 64]);
        let run = |off| {
            let args = pack(
                &k,
                &[Arg::Tensor(dx, 260), Arg::Tensor(dy, 64), Arg::I32(off)],
            );
            launch(
                &k,
                [1, 1, 1],
                [64, 1, 1],
                &args,
                &mem,
                &SimOptions::default(),
            )
        };
        // Offsets of whole vectors are aligned.
        run(4).unwrap_or_else(|e| panic!("lds {lds}: {e}"));
        let got = download_f32(&mem, dy, 64);
        if !lds {
            assert_eq!(got[1], (8 + 9 + 10 + 11) as f32);
        } else {
            assert_eq!(got[1], (4 + 5 + 6 + 7) as f32);
        }
        // One element off: every thread's 16-byte access is 4 bytes off.
        let e = run(1).unwrap_err();
        let msg = e.to_string();
        let space = if lds {
            "misaligned LDS load"
        } else {
            "misaligned global load"
        };
        assert!(
            matches!(e, SimError::Fault { .. }) && msg.contains(space) && msg.contains("16-byte"),
            "lds {lds}: {msg}"
        );
        // With memcheck off the Sim runs it (as it does out-of-bounds accesses).
        let args = pack(
            &k,
            &[Arg::Tensor(dx, 260), Arg::Tensor(dy, 64), Arg::I32(1)],
        );
        let quiet = SimOptions {
            memcheck: false,
            ..SimOptions::default()
        };
        launch(&k, [1, 1, 1], [64, 1, 1], &args, &mem, &quiet).unwrap();
    }
}
