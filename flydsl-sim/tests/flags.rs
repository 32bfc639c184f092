//! Cross-device flags on the Sim: a producer kernel on one Sim memory writes data into a
//! peer's memory and releases a flag there; a consumer kernel on the peer, running on
//! another host thread, waits for the flag and then reads the data. A wait nobody answers
//! ends at its timeout with `false`; a peer's memory is out of reach until enabled.

mod common;

use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, SimError, SimMemory, SimOptions};
use std::time::{Duration, Instant};

/// producer: data[tid] = tid + 100 (32 threads), barrier, thread 0: flag[0] = 7 (release).
fn producer(target: Target) -> Kernel {
    let mut b = B::new("producer", target);
    let (data, _) = b.tensor("data", ScalarType::I32);
    let (flag, _) = b.tensor("flag", ScalarType::I32);
    let tid = b.tid();
    let c100 = b.i32(100);
    let v = b.bin(BinOp::Add, tid, c100);
    b.store(data, tid, v);
    b.op0(OpKind::FenceRelease);
    b.barrier();
    let zero = b.i32(0);
    let first = b.cmp(CmpPred::Eq, tid, zero);
    b.when(first, |b| {
        let seven = b.i32(7);
        b.op0(OpKind::FlagStore {
            ptr: flag,
            index: zero,
            value: seven,
        });
    });
    b.finish()
}

/// consumer: seen = wait(flag[0] == 7, timeout); out[tid] = seen ? data[tid] : -1.
fn consumer(target: Target) -> Kernel {
    let mut b = B::new("consumer", target);
    let (data, _) = b.tensor("data", ScalarType::I32);
    let (flag, _) = b.tensor("flag", ScalarType::I32);
    let (out, _) = b.tensor("out", ScalarType::I32);
    let timeout = b.scalar("timeout", ScalarType::I64);
    let tid = b.tid();
    let zero = b.i32(0);
    let seven = b.i32(7);
    let seen = b.op(
        OpKind::FlagWait {
            ptr: flag,
            index: zero,
            expect: seven,
            timeout,
        },
        I1,
    );
    let d = b.load(data, tid, I32);
    let m1 = b.i32(-1);
    let v = b.select(seen, d, m1);
    b.store(out, tid, v);
    b.finish()
}

#[test]
fn a_waiting_kernel_sees_the_peer_kernels_writes() {
    for target in [Target::Gfx942, Target::Sm90] {
        let (a, bm) = (SimMemory::new(), SimMemory::new());
        a.enable_peer(bm.id()).unwrap();
        let data = bm.alloc(32 * 4).unwrap();
        let flag = bm.alloc(4).unwrap();
        let out = bm.alloc(32 * 4).unwrap();
        let opts = SimOptions::default();
        let hz = target.steady_counter_hz() as i64;
        let (p, c) = (producer(target), consumer(target));
        std::thread::scope(|s| {
            let cons = s.spawn(|| {
                let args = pack(
                    &c,
                    &[
                        Arg::Tensor(data, 32),
                        Arg::Tensor(flag, 1),
                        Arg::Tensor(out, 32),
                        Arg::I64(10 * hz),
                    ],
                );
                launch(&c, [1, 1, 1], [32, 1, 1], &args, &bm, &opts)
            });
            std::thread::sleep(Duration::from_millis(30));
            let args = pack(&p, &[Arg::Tensor(data, 32), Arg::Tensor(flag, 1)]);
            launch(&p, [1, 1, 1], [32, 1, 1], &args, &a, &opts).unwrap();
            cons.join().unwrap().unwrap();
        });
        let want: Vec<u32> = (100..132).collect();
        assert_eq!(download_u32(&bm, out, 32), want, "{target}");
    }
}

#[test]
fn an_unanswered_wait_times_out_with_false() {
    let target = Target::Sm90;
    let m = SimMemory::new();
    let (data, flag, out) = (
        m.alloc(128).unwrap(),
        m.alloc(4).unwrap(),
        m.alloc(128).unwrap(),
    );
    let c = consumer(target);
    let ms50 = target.steady_counter_hz() as i64 / 20;
    let args = pack(
        &c,
        &[
            Arg::Tensor(data, 32),
            Arg::Tensor(flag, 1),
            Arg::Tensor(out, 32),
            Arg::I64(ms50),
        ],
    );
    let t = Instant::now();
    launch(&c, [1, 1, 1], [32, 1, 1], &args, &m, &SimOptions::default()).unwrap();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(50) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert_eq!(download_u32(&m, out, 32), vec![u32::MAX; 32]);
}

#[test]
fn peer_memory_needs_peer_access() {
    let (a, bm) = (SimMemory::new(), SimMemory::new());
    let data = bm.alloc(32 * 4).unwrap();
    let flag = bm.alloc(4).unwrap();
    let p = producer(Target::Gfx942);
    let args = pack(&p, &[Arg::Tensor(data, 32), Arg::Tensor(flag, 1)]);
    let e = launch(&p, [1, 1, 1], [32, 1, 1], &args, &a, &SimOptions::default()).unwrap_err();
    assert!(matches!(e, SimError::OutOfBounds { .. }), "{e}");
    assert!(!a.peer_enabled(bm.id()));
}
