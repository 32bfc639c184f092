//! The Hopper GEMM proof (`flydsl_devtools::wgmma_gemm`: TMA, an mbarrier pipeline and wgmma)
//! against a CPU reference: on the sm90 Sim always, on a CUDA GPU when one is present.
//!
//! Inputs are multiples of 1/2 in [-1, 1], so every product and partial sum is exact in f32
//! and the bf16 outputs must equal the rounded exact sums bit for bit.

use flydsl_devtools::wgmma_gemm::{self as wg, BK, BM, BN, LDS_BYTES, THREADS};
use flydsl_ir::Target;
use flydsl_rt::half::bf16;
use flydsl_rt::{Backend, Device, DeviceBuffer, LaunchConfig, TensorMap, TmaSwizzle};
use flydsl_tests::proof;
use flydsl_testutil::rng::Rng;

fn halves(rng: &mut Rng, n: usize) -> Vec<bf16> {
    rng.randn(n)
        .into_iter()
        .map(|x| bf16::from_f32(((x * 1.5).round() / 2.0).clamp(-1.0, 1.0)))
        .collect()
}

/// Run `C = A * B^T` on `dev`; returns C.
fn run(dev: &Device, a: &[bf16], b: &[bf16], m: usize, n: usize, k: usize) -> Vec<bf16> {
    let s = dev.stream().unwrap();
    let da = DeviceBuffer::from_slice(dev, a).unwrap();
    let db = DeviceBuffer::from_slice(dev, b).unwrap();
    let mut dc = DeviceBuffer::<bf16>::zeroed(dev, m * n).unwrap();
    let (k64, bk) = (k as u64, BK);
    let am = TensorMap::tiled(&da, &[k64, m as u64], &[k64], &[bk, BM], TmaSwizzle::B128).unwrap();
    let bm = TensorMap::tiled(&db, &[k64, n as u64], &[k64], &[bk, BN], TmaSwizzle::B128).unwrap();
    let cfg =
        LaunchConfig::linear(wg::grid(m as u32, n as u32), THREADS).with_dynamic_lds(LDS_BYTES);
    // SAFETY: the maps describe `da` and `db` exactly (K x M and K x N elements, checked by
    // TensorMap::tiled), C holds m * n elements and the epilogue guards rows < m, cols < n.
    unsafe {
        proof::wgmma_gemm_bf16(
            &s,
            cfg,
            am.buffer(),
            bm.buffer(),
            &mut dc,
            m as i32,
            n as i32,
            k as i32,
        )
    }
    .unwrap();
    s.synchronize().unwrap();
    dc.to_vec().unwrap()
}

fn check(dev: &Device, m: usize, n: usize, k: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let a = halves(&mut rng, m * k);
    let b = halves(&mut rng, n * k);
    let c = run(dev, &a, &b, m, n, k);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| a[i * k + p].to_f64() * b[j * k + p].to_f64())
                .sum();
            let want = bf16::from_f64(want);
            assert_eq!(
                c[i * n + j].to_bits(),
                want.to_bits(),
                "{} {m}x{n}x{k}: C[{i}][{j}] = {}, want {want}",
                dev.name(),
                c[i * n + j]
            );
        }
    }
}

#[test]
fn wgmma_gemm_is_exact_on_the_sm90_sim_at_ragged_sizes() {
    let dev = Device::new_sim(Target::Sm90);
    // Ragged M, N and K (K a multiple of 8), more K tiles than stages, several workgroups.
    check(&dev, 200, 300, 392, 1);
    check(&dev, 1, 8, 8, 2);
}

#[test]
fn wgmma_gemm_matches_on_a_cuda_gpu() {
    let devs = match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => return flydsl_testutil::gpu::skip("no CUDA device"),
        Err(e) => return flydsl_testutil::gpu::skip(&format!("CUDA unavailable: {e}")),
    };
    for dev in devs {
        check(&dev, 200, 300, 392, 1);
        check(&dev, 1000, 520, 1032, 3);
        check(&dev, 1, 8, 8, 2);
    }
}
