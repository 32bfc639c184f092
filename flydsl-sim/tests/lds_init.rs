//! initcheck: reading LDS the workgroup never wrote is an error (a GPU does not clear LDS
//! between workgroups, so such a read sees stale data there).

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, SimError, SimMemory, SimOptions};

/// Threads `t < written` (and `block id < blocks_writing`) store `tile[t] = t + 1`; after a
/// barrier every thread loads `tile[t]` into `y[gid]`.
fn partial_fill() -> Kernel {
    let mut b = B::new("partial_fill", Target::Gfx942);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let written = b.scalar("written", ScalarType::I32);
    let blocks_writing = b.scalar("blocks_writing", ScalarType::I32);
    let arr = b.lds("tile", ScalarType::I32, 64);
    let p = b.lds_base(arr);
    let t = b.tid();
    let bid = b.special(Special::BlockId(Dim::X));
    let in_t = b.cmp(CmpPred::Lt, t, written);
    let in_b = b.cmp(CmpPred::Lt, bid, blocks_writing);
    let w = b.bin(BinOp::And, in_t, in_b);
    b.when(w, |b| {
        let one = b.i32(1);
        let v = b.bin(BinOp::Add, t, one);
        b.store(p, t, v);
    });
    b.barrier();
    let v = b.load(p, t, I32);
    let g = b.gid();
    b.store(py, g, v);
    b.finish()
}

fn run_fill(
    written: i32,
    blocks: u32,
    blocks_writing: i32,
    opts: &SimOptions,
) -> (Result<(), SimError>, Vec<u32>) {
    let k = partial_fill();
    let mem = SimMemory::new();
    let n = blocks as usize * 64;
    let dy = upload_u32(&mem, &vec![u32::MAX; n]);
    let args = pack(
        &k,
        &[
            Arg::Tensor(dy, n as i64),
            Arg::I32(written),
            Arg::I32(blocks_writing),
        ],
    );
    let r = launch(&k, [blocks, 1, 1], [64, 1, 1], &args, &mem, opts);
    (r, download_u32(&mem, dy, n))
}

#[test]
fn fully_written_lds_reads_cleanly() {
    let (r, y) = run_fill(64, 3, 3, &SimOptions::default());
    r.unwrap();
    for (g, v) in y.iter().enumerate() {
        assert_eq!(*v, (g % 64) as u32 + 1, "y[{g}]");
    }
}

#[test]
fn load_of_unwritten_lds_names_kernel_array_index_and_thread() {
    let (r, _) = run_fill(60, 1, 1, &SimOptions::default());
    let e = r.unwrap_err();
    match &e {
        SimError::LdsUninit {
            kernel,
            array,
            access,
            index,
            at,
        } => {
            assert_eq!(kernel, "partial_fill");
            assert_eq!(array, "tile");
            assert_eq!(*access, "load");
            assert_eq!(*index, 60);
            assert_eq!(at.thread, [60, 0, 0]);
        }
        other => panic!("wrong error: {other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("uninitialised LDS") && msg.contains("`tile` element 60"),
        "{msg}"
    );
}

#[test]
fn written_state_does_not_carry_over_to_the_next_workgroup() {
    // One worker runs block 0 (which writes every element) and then block 1 (which writes
    // none): block 1 reads what block 0 left, a bug on a GPU.
    let opts = SimOptions {
        threads: 1,
        ..Default::default()
    };
    let (r, _) = run_fill(64, 2, 1, &opts);
    match r.unwrap_err() {
        SimError::LdsUninit { index, at, .. } => {
            assert_eq!(index, 0);
            assert_eq!(at.block, [1, 0, 0]);
            assert_eq!(at.thread, [0, 0, 0]);
        }
        other => panic!("wrong error: {other}"),
    }
}

#[test]
fn initcheck_off_reads_zeros() {
    let opts = SimOptions {
        initcheck: false,
        ..Default::default()
    };
    let (r, y) = run_fill(60, 1, 1, &opts);
    r.unwrap();
    for (t, v) in y.iter().enumerate() {
        let want = if t < 60 { t as u32 + 1 } else { 0 };
        assert_eq!(*v, want, "y[{t}]");
    }
}

/// Thread 0 writes the i32 elements of `tile[0..4]` except `skip`, then loads them as one
/// `<4 x i32>` vector.
fn vector_gap(skip: i32) -> Kernel {
    let mut b = B::new("vector_gap", Target::Gfx1201);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let arr = b.lds("quad", ScalarType::I32, 4);
    let p = b.lds_base(arr);
    let t = b.tid();
    let zero = b.i32(0);
    let is0 = b.cmp(CmpPred::Eq, t, zero);
    b.when(is0, |b| {
        for e in (0..4).filter(|&e| e != skip) {
            let i = b.i32(e);
            b.store(p, i, i);
        }
        let v = b.load(p, zero, Type::vec(ScalarType::I32, 4));
        let s = b.op(OpKind::Slice(v, 3), I32);
        b.store(py, zero, s);
    });
    b.finish()
}

#[test]
fn vector_load_reports_its_first_unwritten_element() {
    for skip in 0..4 {
        let k = vector_gap(skip);
        let mem = SimMemory::new();
        let dy = upload_u32(&mem, &[0]);
        let args = pack(&k, &[Arg::Tensor(dy, 1)]);
        let e = launch(
            &k,
            [1, 1, 1],
            [32, 1, 1],
            &args,
            &mem,
            &SimOptions::default(),
        )
        .unwrap_err();
        assert!(
            matches!(e, SimError::LdsUninit { index, ref array, .. } if index == skip as i64 && array == "quad"),
            "skip {skip}: {e}"
        );
    }
    // Nothing skipped: clean, and the last lane came through.
    let k = vector_gap(-1);
    let mem = SimMemory::new();
    let dy = upload_u32(&mem, &[0]);
    launch(
        &k,
        [1, 1, 1],
        [32, 1, 1],
        &pack(&k, &[Arg::Tensor(dy, 1)]),
        &mem,
        &SimOptions::default(),
    )
    .unwrap();
    assert_eq!(download_u32(&mem, dy, 1), [3]);
}

/// Every thread adds 1 to an LDS counter; thread 0 clears it first when `clear`.
fn lds_counter(clear: bool) -> Kernel {
    let mut b = B::new("lds_counter", Target::Sm90);
    let (py, _) = b.tensor("y", ScalarType::I32);
    let arr = b.lds("count", ScalarType::I32, 1);
    let p = b.lds_base(arr);
    let t = b.tid();
    let zero = b.i32(0);
    let one = b.i32(1);
    let is0 = b.cmp(CmpPred::Eq, t, zero);
    if clear {
        b.when(is0, |b| b.store(p, zero, zero));
        b.barrier();
    }
    b.op(
        OpKind::AtomicAdd {
            ptr: p,
            index: zero,
            value: one,
        },
        I32,
    );
    b.barrier();
    let v = b.load(p, zero, I32);
    b.when(is0, |b| b.store(py, zero, v));
    b.finish()
}

#[test]
fn atomic_on_unwritten_lds_is_reported() {
    let mem = SimMemory::new();
    let dy = upload_u32(&mem, &[0]);
    let run = |k: &Kernel| {
        launch(
            k,
            [1, 1, 1],
            [96, 1, 1],
            &pack(k, &[Arg::Tensor(dy, 1)]),
            &mem,
            &SimOptions::default(),
        )
    };
    let e = run(&lds_counter(false)).unwrap_err();
    assert!(
        matches!(e, SimError::LdsUninit { access: "atomic", index: 0, ref array, .. } if array == "count"),
        "{e}"
    );
    assert!(e.to_string().contains("atomic of uninitialised LDS"), "{e}");
    run(&lds_counter(true)).unwrap();
    assert_eq!(download_u32(&mem, dy, 1), [96]);
}
