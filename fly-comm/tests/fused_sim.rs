//! The fused all-reduce + residual add + RMSNorm on Sim ranks against the CPU reference
//! (the rounded all-reduce, then fly-norm's fused-add RMSNorm semantics from testutil).

mod common;

use common::{input, on_ranks, sim_devices};
use fly_comm::{Config, CustomAllReduce};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{DeviceBuffer, Element, Target};
use flydsl_testutil::comm::all_reduce_ref;
use flydsl_testutil::compare::{assert_close, widen, Storage};
use flydsl_testutil::norm::rms_norm_fwd;

fn check<T: Element + Storage>(world: usize, target: Target, m: usize, n: usize, atol: f64) {
    let devs = sim_devices(world, target);
    let cfg = Config {
        max_bytes: (m * n * 4) as u64,
        ..Config::default()
    };
    let ranks = CustomAllReduce::new_group(&devs, &cfg).unwrap();
    let xs: Vec<Vec<T>> = (0..world).map(|r| input::<T>(r, m * n, 7)).collect();
    let res: Vec<T> = input::<T>(99, m * n, 8);
    // Weights from `rand`, as in the reference's tests.
    let w: Vec<T> = flydsl_testutil::compare::cast_vec(&flydsl_testutil::rng::Rng::new(9).rand(n));
    let eps = 1e-6;
    let outs = on_ranks(&ranks, |r| {
        let s = r.device().stream().unwrap();
        let d = r.device();
        let x = DeviceBuffer::from_slice(d, &xs[r.rank()]).unwrap();
        let rb = DeviceBuffer::from_slice(d, &res).unwrap();
        let wb = DeviceBuffer::from_slice(d, &w).unwrap();
        let mut y = DeviceBuffer::<T>::zeroed(d, m * n).unwrap();
        let mut ro = DeviceBuffer::<T>::zeroed(d, m * n).unwrap();
        r.fused_all_reduce_rms_norm(&s, &x, &rb, &wb, &mut y, &mut ro, (m, n), eps)
            .unwrap();
        (widen(&y.to_vec().unwrap()), widen(&ro.to_vec().unwrap()))
    });
    let sum: Vec<f64> = all_reduce_ref(&xs.iter().map(|v| widen(v)).collect::<Vec<_>>())
        .into_iter()
        .map(|v| Storage::to_f64(<T as Storage>::from_f32(v as f32)))
        .collect();
    let want = rms_norm_fwd::<T>(&sum, Some(&widen(&res)), &widen(&w), m, n, f64::from(eps));
    for (r, (y, ro)) in outs.iter().enumerate() {
        let what = format!("{:?} ws{world} [{m}, {n}] rank {r}", T::DTYPE);
        assert_close(&format!("{what} residual_out"), ro, &want.input, 0.0, 0.0);
        // fly-norm's absolute tolerance plus the one rounding of y to `T`.
        let rtol = match T::DTYPE.name() {
            "bf16" => 2f64.powi(-8),
            "f16" => 2f64.powi(-11),
            _ => 0.0,
        };
        assert_close(&format!("{what} y"), y, &want.y, atol, rtol);
    }
}

#[test]
fn fused_matches_all_reduce_then_rms_norm_add() {
    check::<f32>(2, Target::Sm90, 5, 1024, 1e-4);
    check::<f16>(4, Target::Gfx942, 16, 4096, 1e-2);
    check::<bf16>(2, Target::Gfx950, 3, 7168, 2e-2);
    check::<bf16>(8, Target::Sm90, 2, 2048, 2e-2);
}
