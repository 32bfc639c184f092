//! The custom all-reduce on CUDA devices (H200): correctness against the f32 reference over
//! every visible device (or, with one GPU, two ranks emulated on it with their own memory
//! and streams), graph capture and replay, and NCCL through `AllReduce`'s vendor path when
//! libnccl loads. Skips with the reason when there is no CUDA device or the crate was built
//! without `sm90`; fails instead where `FLYDSL_REQUIRE_GPU` is set.

// Rank loops index several per-rank vectors (ranks, streams, inputs, outputs) at once.
#![allow(clippy::needless_range_loop)]

mod common;

use common::input;
use fly_comm::{Algorithm, Config, CustomAllReduce, VendorAllReduce};
use flydsl_rt::half::bf16;
use flydsl_rt::{Backend, Device, DeviceBuffer, Stream};
use flydsl_testutil::comm::{all_reduce_atol, all_reduce_ref};
use flydsl_testutil::compare::{assert_close, widen, Storage};
use flydsl_testutil::gpu;

/// The devices of a CUDA group: every device if there are 2, 4 or 8 (else the first 2 or
/// 4), or device 0 twice.
fn devices() -> Option<Vec<Device>> {
    let all = match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => d,
        other => {
            gpu::skip(&format!("no CUDA device ({other:?})"));
            return None;
        }
    };
    if fly_comm::kernel_variants().any(|k| {
        k.for_target(all[0].target())
            .is_none_or(|v| v.code.is_none())
    }) {
        gpu::skip("fly-comm was built without the `sm90` feature");
        return None;
    }
    Some(match all.len() {
        1 => vec![all[0].clone(), all[0].clone()],
        n if n >= 8 => all[..8].to_vec(),
        n if n >= 4 => all[..4].to_vec(),
        _ => all[..2].to_vec(),
    })
}

fn want(inputs: &[Vec<bf16>]) -> Vec<f64> {
    all_reduce_ref(&inputs.iter().map(|v| widen(v)).collect::<Vec<_>>())
        .into_iter()
        .map(|v| Storage::to_f64(<bf16 as Storage>::from_f32(v as f32)))
        .collect()
}

#[test]
fn all_reduce_on_cuda_matches_the_reference_and_replays_from_a_graph() {
    let Some(devs) = devices() else { return };
    let ws = devs.len();
    let cfg = Config {
        max_bytes: 64 << 20,
        ..Config::default()
    };
    let ranks = CustomAllReduce::new_group(&devs, &cfg).expect("group");
    let streams: Vec<Stream> = devs.iter().map(|d| d.stream().unwrap()).collect();
    for (m, n) in [
        (2usize, 7168usize),
        (16, 4096),
        (128, 8192),
        (1024, 8192),
        (3, 1001),
    ] {
        let len = m * n;
        let inputs: Vec<Vec<bf16>> = (0..ws).map(|r| input(r, len, 3)).collect();
        let xs: Vec<_> = (0..ws)
            .map(|r| DeviceBuffer::from_slice(&devs[r], &inputs[r]).unwrap())
            .collect();
        for algo in [Algorithm::OneStage, Algorithm::TwoStage] {
            let mut ys: Vec<_> = devs
                .iter()
                .map(|d| DeviceBuffer::<bf16>::zeroed(d, len).unwrap())
                .collect();
            for r in 0..ws {
                ranks[r]
                    .all_reduce_with(&streams[r], &xs[r], &mut ys[r], algo)
                    .unwrap();
            }
            for r in 0..ws {
                ranks[r].check(&streams[r]).unwrap();
                let got = widen(&ys[r].to_vec().unwrap());
                assert_close(
                    &format!("cuda ws{ws} [{m},{n}] {algo:?} rank {r}"),
                    &got,
                    &want(&inputs),
                    all_reduce_atol("bf16", ws),
                    0.0,
                );
            }
        }
    }
    // Graph capture: one eager call (loads modules, settles buffer owners), capture, replay
    // twice with new inputs written in between.
    let len = 16 * 4096;
    let mut xs: Vec<_> = devs
        .iter()
        .map(|d| DeviceBuffer::<bf16>::zeroed(d, len).unwrap())
        .collect();
    let mut ys: Vec<_> = devs
        .iter()
        .map(|d| DeviceBuffer::<bf16>::zeroed(d, len).unwrap())
        .collect();
    for r in 0..ws {
        ranks[r]
            .all_reduce(&streams[r], &xs[r], &mut ys[r])
            .unwrap();
    }
    for r in 0..ws {
        streams[r].synchronize().unwrap();
    }
    let graphs: Vec<_> = (0..ws)
        .map(|r| {
            streams[r].begin_capture().unwrap();
            let res = ranks[r].all_reduce(&streams[r], &xs[r], &mut ys[r]);
            let g = streams[r].end_capture().unwrap();
            res.unwrap();
            g
        })
        .collect();
    for round in 0..2u64 {
        let inputs: Vec<Vec<bf16>> = (0..ws).map(|r| input(r, len, 10 + round)).collect();
        for r in 0..ws {
            xs[r].copy_from_slice(&inputs[r]).unwrap();
        }
        for r in 0..ws {
            graphs[r].launch(&streams[r]).unwrap();
        }
        for r in 0..ws {
            ranks[r].check(&streams[r]).unwrap();
            let got = widen(&ys[r].to_vec().unwrap());
            assert_close(
                &format!("graph replay {round} rank {r}"),
                &got,
                &want(&inputs),
                all_reduce_atol("bf16", ws),
                0.0,
            );
        }
    }
}

#[test]
fn nccl_fallback_when_available() {
    let Some(devs) = devices() else { return };
    if devs[0] == devs[1] {
        println!("skipped: NCCL needs distinct devices (one GPU visible)");
        return;
    }
    if !VendorAllReduce::available(&devs[0]) {
        gpu::skip("libnccl.so.2 does not load (set FLY_COMM_NCCL_LIB)");
        return;
    }
    let ws = devs.len();
    let vendor = VendorAllReduce::init_all(&devs).unwrap();
    let streams: Vec<Stream> = devs.iter().map(|d| d.stream().unwrap()).collect();
    let len = 4096;
    let inputs: Vec<Vec<bf16>> = (0..ws).map(|r| input(r, len, 5)).collect();
    let xs: Vec<_> = (0..ws)
        .map(|r| DeviceBuffer::from_slice(&devs[r], &inputs[r]).unwrap())
        .collect();
    let mut ys: Vec<_> = devs
        .iter()
        .map(|d| DeviceBuffer::<bf16>::zeroed(d, len).unwrap())
        .collect();
    VendorAllReduce::group(&devs[0], || {
        for r in 0..ws {
            vendor[r].all_reduce(&streams[r], &xs[r], &mut ys[r])?;
        }
        Ok(())
    })
    .unwrap();
    for r in 0..ws {
        streams[r].synchronize().unwrap();
        let got = widen(&ys[r].to_vec().unwrap());
        // NCCL's order of summation is its own: one more rounding of slack.
        assert_close(
            &format!("nccl rank {r}"),
            &got,
            &want(&inputs),
            all_reduce_atol("bf16", ws),
            2f64.powi(-8),
        );
    }
}
