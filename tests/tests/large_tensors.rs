//! Tensors past 2^31 elements (and 4 GiB) on a real GPU, checking rows at both ends and the
//! row holding element 2^31 against the CPU reference: RMSNorm and softmax on a bf16
//! [m, 8192] tensor (the fast paths), and fly-norm's multi-row and generic paths with the
//! residual add, stats, int8 quant and the backward (both strategies); and fly-gemm's sm90
//! kernels with A and C, then B, past 2^31 elements. Needs a GPU with more
//! than 30 GiB free; skips with a printed reason otherwise, or fails when `FLYDSL_REQUIRE_GPU`
//! is set. The Sim cannot interpret that much work, so this is GPU-only: on AMD the same
//! kernel descriptions' 64-bit row offsets are unexercised at this size.

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

/// Rows to check of an `[m, n]` tensor with m * n > 2^31: the first, the one holding element
/// 2^31, and the last.
fn boundary_rows(m: usize, n: usize) -> [usize; 3] {
    [0, (1usize << 31) / n, m - 1]
}

/// `what` of rows `rows` of `got` (all rows, `n` per row) against `want(row)`; widens only
/// those rows (a whole 2^31-element tensor in f64 would take 16 GiB of host memory).
fn check_rows(
    what: &str,
    got: &[bf16],
    n: usize,
    rows: &[usize],
    atol: f64,
    rtol: f64,
    want: impl Fn(usize) -> Vec<f64>,
) {
    for &r in rows {
        flydsl_testutil::compare::assert_close(
            &format!("{what} row {r}"),
            &widen(&got[r * n..(r + 1) * n]),
            &want(r),
            atol,
            rtol,
        );
    }
}

/// fly-norm past 2^31 elements (bf16) on its other paths: the multi-row path (n = 1024) and
/// the generic path (n = 1021). LayerNorm with the residual add (x + x), mean and rstd;
/// RMSNorm with dynamic int8 quant; the RMSNorm backward with both weight-gradient strategies
/// (dgamma sums all 2^31 elements; dx is checked on the boundary rows). The fast path's
/// 64-bit offsets are covered by `rmsnorm_and_softmax_past_2_pow_31_elements`.
#[test]
fn norm_paths_past_2_pow_31_elements() {
    use fly_norm::{BwdStrategy, FwdBuffers, FwdOut, Norm, NormArgs, NormBwdArgs};
    use flydsl_testutil::norm::{layer_norm_fwd, quant, rms_norm_bwd, rms_norm_fwd, Tol};
    let Some(dev) = gpu() else {
        flydsl_testutil::gpu::skip("no GPU present (needs > 30 GiB of device memory)");
        return;
    };
    let s = dev.stream().unwrap();
    let tol = Tol::BF16;
    for n in [1024usize, 1021] {
        let m = (1usize << 31) / n + 3;
        let len = m * n;
        let rows = boundary_rows(m, n);
        let host: Vec<bf16> = (0..len).map(val).collect();
        let row = |r: usize| widen(&host[r * n..(r + 1) * n]);
        let x = DeviceBuffer::from_slice(&dev, &host).unwrap();
        let wv = |k: usize| -> Vec<bf16> {
            (0..n)
                .map(|j| bf16::from_f32(0.5 + ((j + k) % 7) as f32 * 0.1))
                .collect()
        };
        let (gh, bh) = (wv(0), wv(3));
        let (gf, bf) = (widen(&gh), widen(&bh));
        let g = DeviceBuffer::from_slice(&dev, &gh).unwrap();
        let b = DeviceBuffer::from_slice(&dev, &bh).unwrap();

        // LayerNorm, residual add, mean and rstd.
        let mut y = DeviceBuffer::<bf16>::zeroed(&dev, len).unwrap();
        let mut res_out = DeviceBuffer::<bf16>::zeroed(&dev, len).unwrap();
        let mut mean = DeviceBuffer::<f32>::zeroed(&dev, m).unwrap();
        let mut rstd = DeviceBuffer::<f32>::zeroed(&dev, m).unwrap();
        let bufs = FwdBuffers {
            x: &x,
            residual: Some((&x, &mut res_out)),
            gamma: &g,
            beta: Some(&b),
            out: FwdOut::Y(&mut y),
            mean: Some(&mut mean),
            rstd: Some(&mut rstd),
        };
        fly_norm::norm_fwd(&s, Norm::Layer, bufs, NormArgs::new(m, n)).unwrap();
        let want = |r: usize| {
            let xr = row(r);
            layer_norm_fwd::<bf16>(&xr, Some(&xr), &gf, Some(&bf), 1, n, 1e-5)
        };
        let what = format!("layer_norm_add n={n}");
        let got = y.to_vec().unwrap();
        check_rows(&what, &got, n, &rows, tol.fwd_atol, tol.fwd_rtol, |r| {
            want(r).y
        });
        let got = res_out.to_vec().unwrap();
        check_rows(
            &format!("{what} residual_out"),
            &got,
            n,
            &rows,
            0.0,
            0.0,
            |r| want(r).input,
        );
        drop((y, res_out));
        let (mean, rstd_ln) = (mean.to_vec().unwrap(), rstd.to_vec().unwrap());
        for &r in &rows {
            let w = want(r);
            let (gm, gr) = (f64::from(mean[r]), f64::from(rstd_ln[r]));
            assert!(
                (gm - w.mean[0]).abs() <= 1e-4 * (1.0 + w.mean[0].abs()),
                "{what} mean row {r}"
            );
            assert!(
                (gr - w.rstd[0]).abs() <= 1e-4 * w.rstd[0],
                "{what} rstd row {r}"
            );
        }

        // RMSNorm with dynamic int8 quant.
        let mut q = DeviceBuffer::<i8>::zeroed(&dev, len).unwrap();
        let mut ys = DeviceBuffer::<f32>::zeroed(&dev, m).unwrap();
        fly_norm::rms_norm_quant(&s, &x, &g, None, &mut q, &mut ys, NormArgs::new(m, n)).unwrap();
        let (qh, ysh) = (q.to_vec().unwrap(), ys.to_vec().unwrap());
        drop(q);
        for &r in &rows {
            let yr = rms_norm_fwd::<bf16>(&row(r), None, &gf, 1, n, 1e-5).y;
            let (wq, ws) = quant(&yr, None, 1, n);
            let got_s = f64::from(ysh[r]);
            assert!(
                (got_s - ws[0]).abs() <= tol.yscale * ws[0],
                "rms_norm_quant n={n} yscale row {r}: {got_s} against {}",
                ws[0]
            );
            for (j, (&gq, &w)) in qh[r * n..(r + 1) * n].iter().zip(&wq).enumerate() {
                assert!(
                    (i32::from(gq) - i32::from(w)).abs() <= tol.q,
                    "rms_norm_quant n={n} q[{r}, {j}] = {gq}, want {w}"
                );
            }
        }
        drop(qh);

        // RMSNorm backward (dy = x), rstd from the forward, both strategies.
        let mut y = DeviceBuffer::<bf16>::zeroed(&dev, len).unwrap();
        let mut rstd = DeviceBuffer::<f32>::zeroed(&dev, m).unwrap();
        fly_norm::rms_norm_rstd(&s, &x, &g, &mut y, &mut rstd, NormArgs::new(m, n)).unwrap();
        drop(y);
        let rstd_h: Vec<f64> = rstd.to_vec().unwrap().into_iter().map(f64::from).collect();
        // The reference over every row: dgamma sums all of them.
        let mut dgamma_want = vec![0.0f64; n];
        for r in 0..m {
            let xr = row(r);
            let w = rms_norm_bwd(&xr, &gf, &xr, &rstd_h[r..r + 1], None, 1, n);
            for (a, d) in dgamma_want.iter_mut().zip(&w.dgamma) {
                *a += d;
            }
        }
        let mut dx = DeviceBuffer::<bf16>::zeroed(&dev, len).unwrap();
        for strategy in [BwdStrategy::Atomic, BwdStrategy::TwoStage] {
            let mut dg = DeviceBuffer::<bf16>::zeroed(&dev, n).unwrap();
            let args = NormBwdArgs { m, n, strategy };
            fly_norm::rms_norm_bwd(&s, &x, &g, &x, &rstd, None, &mut dx, &mut dg, args).unwrap();
            let what = format!("rms_norm_bwd {strategy:?} n={n}");
            let got = dx.to_vec().unwrap();
            check_rows(&what, &got, n, &rows, tol.dx_atol, tol.dx_rtol, |r| {
                let xr = row(r);
                rms_norm_bwd(&xr, &gf, &xr, &rstd_h[r..r + 1], None, 1, n).dx
            });
            let got = widen(&dg.to_vec().unwrap());
            // bf16 dgamma: the dw tolerance plus the output's rounding (2^-8 relative).
            flydsl_testutil::compare::assert_close(
                &format!("{what} dgamma"),
                &got,
                &dgamma_want,
                tol.dw_atol,
                tol.dw_rtol + 1.0 / 256.0,
            );
        }
    }
}

/// Row `i` of `c` (`n` columns) against the f64 dot products of row `i` of `a` with the rows
/// of `b` (both `k` wide) at `cols`, within `elem_tolerance` (bf16 out, f32 accumulation).
fn check_gemm_row(
    what: &str,
    (a, b, c): (&[bf16], &[bf16], &[bf16]),
    i: usize,
    n: usize,
    k: usize,
    cols: &[usize],
) {
    use flydsl_testutil::gemm::{elem_tolerance, Act};
    for &j in cols {
        let (mut want, mut mag) = (0.0f64, 0.0f64);
        for p in 0..k {
            let t = a[i * k + p].to_f64() * b[j * k + p].to_f64();
            want += t;
            mag += t.abs();
        }
        let got = c[i * n + j].to_f64();
        let tol = elem_tolerance("bf16", k, mag, 0.0, want, want, Act::None);
        assert!(
            (got - want).abs() <= tol,
            "{what}: C[{i}][{j}] = {got}, want {want} (tolerance {tol})"
        );
    }
}

/// fly-gemm past 2^31 elements (bf16, the sm90 wgmma kernels): A and C of 262208 x 8192
/// (2^31 + 2^19 elements, 4 GiB each) through the large-M tile, checked on the rows of C
/// around element 2^31 (A's and C's); then B of 262400 x 8192 (4 GiB) at M = 16 through the
/// swapped small-M tile, whose wgmma rows are C's columns, checked on the columns reading B
/// past element 2^31. Needs an sm90 build; skips with a printed reason elsewhere.
#[test]
fn gemm_past_2_pow_31_elements() {
    let Some(dev) = gpu() else {
        flydsl_testutil::gpu::skip("no GPU present (needs > 20 GiB of device memory)");
        return;
    };
    if dev.target() != flydsl_rt::Target::Sm90 {
        flydsl_testutil::gpu::skip("the large-tensor GEMM check runs the sm90 wgmma kernels");
        return;
    }
    let s = dev.stream().unwrap();
    let k = 8192usize;
    let args = |m, n| fly_gemm::GemmArgs {
        m,
        n,
        k,
        epilogue: fly_gemm::Epilogue::None,
        ..Default::default()
    };
    let pick = |n: usize, seed: usize| -> Vec<bf16> { (0..n).map(|i| val(i * 3 + seed)).collect() };

    // A and C past 2^31 elements.
    let (m, n) = ((1usize << 31) / k + 64, 8192usize);
    let a = pick(m * k, 0);
    let b = pick(n * k, 1);
    let (da, db) = (
        DeviceBuffer::from_slice(&dev, &a).unwrap(),
        DeviceBuffer::from_slice(&dev, &b).unwrap(),
    );
    let mut dc = DeviceBuffer::<bf16>::zeroed(&dev, m * n).unwrap();
    fly_gemm::gemm(&s, &da, &db, None, &mut dc, args(m, n)).unwrap();
    let c = dc.to_vec().unwrap();
    let cols: Vec<usize> = (0..n).step_by(61).chain([n - 1]).collect();
    for i in boundary_rows(m, n) {
        check_gemm_row("large A and C", (&a, &b, &c), i, n, k, &cols);
    }
    drop((da, dc, a, c));

    // B past 2^31 elements at M = 16 (the swapped tile: 1025 tiles, unsplit).
    let (m, n) = (16usize, (1usize << 31) / k + 256);
    let a = pick(m * k, 2);
    let b = pick(n * k, 3);
    let (da, db) = (
        DeviceBuffer::from_slice(&dev, &a).unwrap(),
        DeviceBuffer::from_slice(&dev, &b).unwrap(),
    );
    let mut dc = DeviceBuffer::<bf16>::zeroed(&dev, m * n).unwrap();
    fly_gemm::gemm(&s, &da, &db, None, &mut dc, args(m, n)).unwrap();
    let c = dc.to_vec().unwrap();
    // B's row 2^31 / k holds its element 2^31: check the columns around it and at both ends.
    let mid = (1usize << 31) / k;
    let cols: Vec<usize> = [0, 1, mid - 1, mid, mid + 1, n - 2, n - 1].to_vec();
    for i in [0, 7, m - 1] {
        check_gemm_row("large B", (&a, &b, &c), i, n, k, &cols);
    }
}
