//! Shared helpers of fly-comm's tests: Sim groups, per-rank inputs, the reference check.

#![allow(dead_code)]

use fly_comm::{Algorithm, Config, CustomAllReduce};
use flydsl_rt::{Device, DeviceBuffer, Element, Target};
use flydsl_testutil::comm::{all_reduce_atol, all_reduce_ref};
use flydsl_testutil::compare::{widen, Storage};
use flydsl_testutil::rng::Rng;

/// `world` fresh Sim devices of `target`.
pub fn sim_devices(world: usize, target: Target) -> Vec<Device> {
    (0..world).map(|_| Device::new_sim(target)).collect()
}

/// Rank `r`'s input of `n` elements (randn, cast to `T`).
pub fn input<T: Storage>(r: usize, n: usize, seed: u64) -> Vec<T> {
    let mut rng = Rng::new(seed * 1000 + r as u64);
    flydsl_testutil::compare::cast_vec(&rng.randn(n))
}

/// Run `f(rank)` on every rank, each on its own thread (the Sim's launches are synchronous),
/// and collect the results in rank order.
pub fn on_ranks<R: Send>(
    ranks: &[CustomAllReduce],
    f: impl Fn(&CustomAllReduce) -> R + Sync,
) -> Vec<R> {
    std::thread::scope(|s| {
        let hs: Vec<_> = ranks.iter().map(|r| s.spawn(|| f(r))).collect();
        hs.into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    })
}

/// All-reduce `n` random elements per rank over `world` Sim ranks of `target` with
/// `algorithm` (`None`: by size), check every rank against the f32 reference with the
/// issue's tolerance and that all ranks got the same bits; returns rank 0's output bits.
pub fn check_all_reduce<T: Element + Storage>(
    world: usize,
    target: Target,
    n: usize,
    algorithm: Option<Algorithm>,
    in_place: bool,
) -> Vec<f64> {
    let devs = sim_devices(world, target);
    let cfg = Config {
        max_bytes: (n as u64 * 4).max(1024),
        ..Config::default()
    };
    let ranks = CustomAllReduce::new_group(&devs, &cfg).expect("group");
    let inputs: Vec<Vec<T>> = (0..world).map(|r| input::<T>(r, n, n as u64)).collect();
    let outs = on_ranks(&ranks, |r| {
        let s = r.device().stream().expect("stream");
        let mut x = DeviceBuffer::from_slice(r.device(), &inputs[r.rank()]).expect("x");
        let got = if in_place {
            r.all_reduce_in_place(&s, &mut x)
                .expect("all_reduce_in_place");
            x.to_vec().expect("read")
        } else {
            let mut y = DeviceBuffer::<T>::zeroed(r.device(), n).expect("y");
            match algorithm {
                Some(a) => r.all_reduce_with(&s, &x, &mut y, a),
                None => r.all_reduce(&s, &x, &mut y),
            }
            .expect("all_reduce");
            y.to_vec().expect("read")
        };
        widen(&got)
    });
    // The f32 sum rounded once to `T`, as the output is stored: the absolute
    // tolerances are below half an ulp of bf16 / f16 at the sums' magnitudes, so they apply
    // to the rounded reference (an f32 sum in another order or a second rounding fails).
    let want: Vec<f64> = all_reduce_ref(&inputs.iter().map(|v| widen(v)).collect::<Vec<_>>())
        .into_iter()
        .map(|v| Storage::to_f64(<T as Storage>::from_f32(v as f32)))
        .collect();
    let atol = all_reduce_atol(T::DTYPE.name(), world);
    for (r, got) in outs.iter().enumerate() {
        flydsl_testutil::compare::assert_close(
            &format!("{:?} ws{world} n={n} {algorithm:?} rank {r}", T::DTYPE),
            got,
            &want,
            atol,
            0.0,
        );
        assert!(
            got.iter()
                .zip(&outs[0])
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "rank {r} differs from rank 0 in some bits"
        );
    }
    outs[0].clone()
}
