//! Bad input: every mistake is a clear error before any rank blocks (group calls check all
//! ranks before the first launch); a rank whose peer never comes gets a bounded wait and a
//! `Timeout` (the Sim reports it at once); ranks whose calls differ get `PeerMismatch` and
//! keep working afterwards.

mod common;

use common::{on_ranks, sim_devices};
use fly_comm::{AllReduceGroup, CommError, Config, CustomAllReduce};
use flydsl_rt::half::f16;
use flydsl_rt::{Device, DeviceBuffer, Target};
use std::time::{Duration, Instant};

fn group(world: usize) -> (Vec<Device>, AllReduceGroup) {
    let devs = sim_devices(world, Target::Sm90);
    let g = AllReduceGroup::new(
        &devs,
        &Config {
            max_bytes: 4096,
            ..Config::default()
        },
    )
    .unwrap();
    (devs, g)
}

#[test]
fn group_calls_check_every_rank_before_launching() {
    let (devs, g) = group(2);
    let streams: Vec<_> = devs.iter().map(|d| d.stream().unwrap()).collect();
    let x0 = DeviceBuffer::from_slice(&devs[0], &[1.0f32; 16]).unwrap();
    let x1 = DeviceBuffer::from_slice(&devs[1], &[1.0f32; 12]).unwrap();
    let mut y0 = DeviceBuffer::from_slice(&devs[0], &[7.0f32; 16]).unwrap();
    let mut y1 = DeviceBuffer::from_slice(&devs[1], &[7.0f32; 12]).unwrap();
    let e = g
        .all_reduce(&streams, &[&x0, &x1], &mut [&mut y0, &mut y1])
        .unwrap_err();
    assert!(
        matches!(
            e,
            CommError::RankMismatch {
                rank: 1,
                argument: "inputs.len()",
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("fly_comm::AllReduceGroup::all_reduce"),
        "{e}"
    );
    // Nothing ran: rank 0's output is untouched.
    assert_eq!(y0.to_vec().unwrap(), vec![7.0; 16]);

    // A world size the group was not built for.
    let e = g
        .all_reduce(&streams[..1], &[&x0], &mut [&mut y0])
        .unwrap_err();
    assert!(
        matches!(
            e,
            CommError::WorldSize {
                got: 1,
                built: 2,
                ..
            }
        ),
        "{e}"
    );

    // A rank's buffers on another rank's device.
    let x1b = DeviceBuffer::from_slice(&devs[0], &[1.0f32; 16]).unwrap();
    let mut y1b = DeviceBuffer::<f32>::zeroed(&devs[1], 16).unwrap();
    let e = g
        .all_reduce(&streams, &[&x0, &x1b], &mut [&mut y0, &mut y1b])
        .unwrap_err();
    assert!(e.to_string().contains("`inputs` = [1] on"), "{e}");

    // Over the registered size.
    let big: Vec<_> = devs
        .iter()
        .map(|d| DeviceBuffer::<f32>::zeroed(d, 2048).unwrap())
        .collect();
    let mut bo: Vec<_> = devs
        .iter()
        .map(|d| DeviceBuffer::<f32>::zeroed(d, 2048).unwrap())
        .collect();
    let e = g
        .all_reduce(
            &streams,
            &[&big[0], &big[1]],
            &mut bo.iter_mut().collect::<Vec<_>>(),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            CommError::TooLarge {
                bytes: 8192,
                max: 4096,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn set_up_and_per_rank_mistakes() {
    let devs = sim_devices(3, Target::Sm90);
    let e = CustomAllReduce::new_group(&devs, &Config::default()).unwrap_err();
    assert!(e.to_string().contains("`world size` = 3"), "{e}");
    let rdna = [
        Device::new_sim(Target::Gfx1201),
        Device::new_sim(Target::Gfx1201),
    ];
    let e = CustomAllReduce::new_group(&rdna, &Config::default()).unwrap_err();
    assert!(
        matches!(
            e,
            CommError::UnsupportedTarget {
                target: Target::Gfx1201
            }
        ),
        "{e}"
    );

    let (devs, g) = group(2);
    let r = &g.ranks()[0];
    let s = devs[0].stream().unwrap();
    let other = devs[1].stream().unwrap();
    let x = DeviceBuffer::from_slice(&devs[0], &[1.0f32; 8]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&devs[0], 8).unwrap();
    let e = r.all_reduce(&other, &x, &mut y).unwrap_err();
    assert!(
        e.to_string().contains("pass a stream of the rank's device"),
        "{e}"
    );
    let mut short = DeviceBuffer::<f32>::zeroed(&devs[0], 7).unwrap();
    let e = r.all_reduce(&s, &x, &mut short).unwrap_err();
    assert!(e.to_string().contains("`output` = 7 elements"), "{e}");
    // Not the registered staging view.
    let e = r.all_reduce_registered(&s, &x, &mut y).unwrap_err();
    assert!(matches!(e, CommError::NotRegistered { .. }), "{e}");
    // Fused: rows that are no whole 16-byte vectors.
    let w = DeviceBuffer::from_slice(&devs[0], &[1.0f32; 6]).unwrap();
    let x6 = DeviceBuffer::<f32>::zeroed(&devs[0], 6).unwrap();
    let mut o = DeviceBuffer::<f32>::zeroed(&devs[0], 6).unwrap();
    let mut ro = DeviceBuffer::<f32>::zeroed(&devs[0], 6).unwrap();
    let e = r
        .fused_all_reduce_rms_norm(&s, &x6, &x6, &w, &mut o, &mut ro, (1, 6), 1e-6)
        .unwrap_err();
    assert!(e.to_string().contains("`n` = 6"), "{e}");
}

#[test]
fn a_missing_peer_times_out_and_poisons_the_rank() {
    let devs = sim_devices(2, Target::Gfx942);
    let cfg = Config {
        max_bytes: 4096,
        timeout: Duration::from_millis(200),
        ..Config::default()
    };
    let ranks = CustomAllReduce::new_group(&devs, &cfg).unwrap();
    let s = devs[0].stream().unwrap();
    let x = DeviceBuffer::from_slice(&devs[0], &[1.0f32; 64]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&devs[0], 64).unwrap();
    // Rank 1 never calls: rank 0 must not hang.
    let t = Instant::now();
    let e = ranks[0].all_reduce(&s, &x, &mut y).unwrap_err();
    assert!(
        matches!(
            e,
            CommError::Timeout {
                rank: 0,
                timeout_ms: 200,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t.elapsed()
    );
    // Poisoned: the next call does nothing and reports it again at once.
    let t = Instant::now();
    assert!(matches!(
        ranks[0].all_reduce(&s, &x, &mut y),
        Err(CommError::Timeout { .. })
    ));
    assert!(
        t.elapsed() < Duration::from_millis(150),
        "a poisoned rank waited"
    );
}

#[test]
fn ranks_with_different_calls_report_a_mismatch_then_recover() {
    let devs = sim_devices(2, Target::Sm90);
    let ranks = CustomAllReduce::new_group(
        &devs,
        &Config {
            max_bytes: 4096,
            ..Config::default()
        },
    )
    .unwrap();
    // Rank 0 reduces 64 f32, rank 1 128 f16: the same bytes, another dtype.
    let res = on_ranks(&ranks, |r| {
        let s = r.device().stream().unwrap();
        if r.rank() == 0 {
            let x = DeviceBuffer::from_slice(r.device(), &[1.0f32; 64]).unwrap();
            let mut y = DeviceBuffer::<f32>::zeroed(r.device(), 64).unwrap();
            r.all_reduce(&s, &x, &mut y).map(|_| ())
        } else {
            let x = DeviceBuffer::from_slice(r.device(), &[f16::ONE; 128]).unwrap();
            let mut y = DeviceBuffer::<f16>::zeroed(r.device(), 128).unwrap();
            r.all_reduce(&s, &x, &mut y).map(|_| ())
        }
    });
    for (r, e) in res.iter().enumerate() {
        assert!(
            matches!(e, Err(CommError::PeerMismatch { rank, .. }) if *rank == r),
            "{e:?}"
        );
    }
    // The next, matching call works.
    let outs = on_ranks(&ranks, |r| {
        let s = r.device().stream().unwrap();
        let x = DeviceBuffer::from_slice(r.device(), &[2.0f32; 64]).unwrap();
        let mut y = DeviceBuffer::<f32>::zeroed(r.device(), 64).unwrap();
        r.all_reduce(&s, &x, &mut y).unwrap();
        y.to_vec().unwrap()
    });
    assert_eq!(outs, vec![vec![4.0f32; 64]; 2]);
}
