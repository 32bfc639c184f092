//! Tensors past 2^31 elements (and 4 GiB) on a real GPU: RMSNorm and softmax on a bf16
//! [m, 8192] tensor with m * 8192 > 2^31, checking rows at both ends and past the 2^31-element
//! boundary against the CPU reference. Needs a GPU with > 20 GiB free; skips with a printed
//! reason otherwise, or fails when `FLYDSL_REQUIRE_GPU` is set (the Sim cannot interpret that
//! much work; 64-bit row offsets are checked there structurally by the kernels' tests).

use flydsl_rt::half::bf16;
use flydsl_rt::{Backend, Device, DeviceBuffer};
use flydsl_testutil::compare::widen;

fn gpu() -> Option<Device> {
    for b in [Backend::Cuda, Backend::Hip] {
        if let Ok(ds) = Device::enumerate(b) {
            if let Some(d) = ds.into_iter().next() {
                return Some(d);
            }
        }
    }
    None
}

/// A cheap deterministic value in [-2, 2) for element `i`.
fn val(i: usize) -> bf16 {
    let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    bf16::from_f32((h % 1000) as f32 / 250.0 - 2.0)
}

#[test]
fn rmsnorm_and_softmax_past_2_pow_31_elements() {
    let Some(dev) = gpu() else {
        flydsl_testutil::gpu::skip("no GPU present (needs > 20 GiB of device memory)");
        return;
    };
    let n = 8192usize;
    let m = (1usize << 31) / n + 3; // 2^31 + 3 * 8192 elements, 4 GiB + 48 KiB per tensor
    let len = m * n;
    let host: Vec<bf16> = (0..len).map(val).collect();
    let x = DeviceBuffer::from_slice(&dev, &host).unwrap();
    let gamma: Vec<bf16> = (0..n)
        .map(|j| bf16::from_f32(0.5 + (j % 7) as f32 * 0.1))
        .collect();
    let g = DeviceBuffer::from_slice(&dev, &gamma).unwrap();
    let mut y = DeviceBuffer::<bf16>::zeroed(&dev, len).unwrap();
    let s = dev.stream().unwrap();
    // Rows to check: first, the one containing element 2^31, and the last.
    let rows = [0, (1usize << 31) / n, m - 1];

    fly_norm::rms_norm(
        &s,
        &x,
        &g,
        &mut y,
        fly_norm::RmsNormArgs { m, n, eps: 1e-6 },
    )
    .unwrap();
    let out = y.to_vec().unwrap();
    for &r in &rows {
        let xr = widen(&host[r * n..(r + 1) * n]);
        let want =
            flydsl_testutil::norm::rms_norm_fwd::<bf16>(&xr, None, &widen(&gamma), 1, n, 1e-6).y;
        let got = widen(&out[r * n..(r + 1) * n]);
        flydsl_testutil::compare::assert_close(
            &format!("rms_norm row {r}"),
            &got,
            &want,
            2e-2,
            0.0,
        );
    }

    fly_softmax::softmax(&s, &x, &mut y, fly_softmax::SoftmaxArgs { m, n }).unwrap();
    let out = y.to_vec().unwrap();
    for &r in &rows {
        let want = flydsl_testutil::softmax::forward(&widen(&host[r * n..(r + 1) * n]), 1, n);
        let got = widen(&out[r * n..(r + 1) * n]);
        flydsl_testutil::compare::assert_close(&format!("softmax row {r}"), &got, &want, 2e-2, 0.0);
    }
}
