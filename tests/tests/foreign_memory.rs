//! Kernels of two families on memory and a stream that other code owns: RMSNorm (fly-norm)
//! then softmax (fly-softmax) on buffers wrapped with `DeviceBuffer::from_raw_parts` and a
//! stream wrapped with `Stream::from_raw_cuda`.
//!
//! On CUDA the "other code" is the raw driver API (cudarc, as an engine would use it): it
//! allocates with `cuMemAlloc`, creates a non-blocking stream, uploads the inputs on it,
//! and after our launches enqueues a memset of the input and the downloads on the same
//! stream; results right means our launches ran after its upload and before its memset. The
//! blocking `to_vec` on a wrapped buffer is also checked (it must wait for the non-blocking
//! stream). Skips with a printed reason without a CUDA device or without the sm90 variants
//! (fails where `FLYDSL_REQUIRE_GPU` is set). The same flow runs on every Sim target with
//! the crate's own buffers standing in for the foreign memory.

use flydsl_rt::{Backend, Device, DeviceBuffer, Stream, Target};
use flydsl_testutil::{norm, softmax};

const M: usize = 37;
const N: usize = 300;
const EPS: f32 = 1e-5;

fn inputs() -> (Vec<f32>, Vec<f32>) {
    let x = (0..M * N)
        .map(|i| ((i * 7919 % 1000) as f32 / 250.0 - 2.0) * (1.0 + (i / N) as f32 * 0.1))
        .collect();
    let g = (0..N).map(|j| 0.5 + (j % 13) as f32 / 13.0).collect();
    (x, g)
}

/// Check `y = rmsnorm(x) * g` and `z = softmax(y)` against the f64 references.
fn check(what: &str, x: &[f32], g: &[f32], y: &[f32], z: &[f32]) {
    let w = |v: &[f32]| v.iter().map(|&a| f64::from(a)).collect::<Vec<f64>>();
    let r = norm::rms_norm_fwd::<f32>(&w(x), None, &w(g), M, N, f64::from(EPS));
    let t = norm::Tol::F32;
    flydsl_testutil::compare::assert_close(
        &format!("{what}: rmsnorm"),
        &w(y),
        &r.y,
        t.fwd_atol,
        t.fwd_rtol,
    );
    let want = softmax::forward(&w(y), M, N);
    softmax::check_forward(
        &format!("{what}: softmax"),
        &w(z),
        &want,
        M,
        N,
        &softmax::tolerance("f32"),
    )
    .unwrap();
}

/// Wrap the four ranges on `s` and run RMSNorm (x, g -> y) then softmax (y -> z) on it.
///
/// # Safety
/// The pointers are `M * N` (`N` for `g`) f32 of `s`'s device, alive and not touched by other
/// code until `s` has run the work enqueued here.
unsafe fn run_on(s: &Stream, x: u64, g: u64, y: u64, z: u64) {
    // SAFETY: forwarded to the caller.
    let (xb, gb, mut yb, mut zb) = unsafe {
        (
            DeviceBuffer::<f32>::from_raw_parts(s, x, M * N).unwrap(),
            DeviceBuffer::<f32>::from_raw_parts(s, g, N).unwrap(),
            DeviceBuffer::<f32>::from_raw_parts(s, y, M * N).unwrap(),
            DeviceBuffer::<f32>::from_raw_parts(s, z, M * N).unwrap(),
        )
    };
    fly_norm::rms_norm(
        s,
        &xb,
        &gb,
        &mut yb,
        fly_norm::RmsNormArgs {
            m: M,
            n: N,
            eps: EPS,
        },
    )
    .unwrap();
    fly_softmax::softmax(s, &yb, &mut zb, fly_softmax::SoftmaxArgs { m: M, n: N }).unwrap();
    assert!(!zb.is_owned());
    assert_eq!(zb.owner_stream(), Some(s.id()));
}

#[test]
fn families_run_on_wrapped_memory_on_every_sim_target() {
    let (x, g) = inputs();
    for target in Target::ALL {
        let dev = Device::new_sim(target);
        let s = dev.stream().unwrap();
        // The "foreign" allocations: buffers of our own, outliving the wrappers.
        let xo = DeviceBuffer::from_slice(&dev, &x).unwrap();
        let go = DeviceBuffer::from_slice(&dev, &g).unwrap();
        let yo = DeviceBuffer::<f32>::zeroed(&dev, M * N).unwrap();
        let zo = DeviceBuffer::<f32>::zeroed(&dev, M * N).unwrap();
        // SAFETY: the owners outlive the wrappers, which `run_on` drops before returning.
        unsafe {
            run_on(
                &s,
                xo.as_device_ptr(),
                go.as_device_ptr(),
                yo.as_device_ptr(),
                zo.as_device_ptr(),
            )
        };
        check(
            &format!("sim {target}"),
            &x,
            &g,
            &yo.to_vec().unwrap(),
            &zo.to_vec().unwrap(),
        );
    }
}

#[test]
fn families_run_on_cuda_memory_and_stream_of_other_code() {
    use cudarc::driver::result;
    let dev = match Device::enumerate(Backend::Cuda) {
        Ok(ds) if !ds.is_empty() => ds[0].clone(),
        Ok(_) => return flydsl_testutil::gpu::skip("no supported CUDA device"),
        Err(e) => return flydsl_testutil::gpu::skip(&format!("no CUDA: {e}")),
    };
    if !cfg!(feature = "sm90") {
        return flydsl_testutil::gpu::skip(
            "built without the sm90 variants (run with --features sm90)",
        );
    }
    let (x, g) = inputs();
    let bytes = M * N * 4;
    // The other code: the primary context (the one PyTorch and flydsl share), a non-blocking
    // stream, four allocations.
    let cu = result::device::get(dev.ordinal() as i32).unwrap();
    // SAFETY: `cu` is a device handle; the primary context is released at the end.
    let ctx = unsafe { result::primary_ctx::retain(cu) }.unwrap();
    // SAFETY: `ctx` is live.
    unsafe { result::ctx::set_current(ctx) }.unwrap();
    let raw = result::stream::create(result::stream::StreamKind::NonBlocking).unwrap();
    // SAFETY: plain allocations in the current context.
    let [px, pg, py, pz] =
        [bytes, N * 4, bytes, bytes].map(|b| unsafe { result::malloc_sync(b) }.unwrap());
    assert_eq!(Device::of_cuda_pointer(py).unwrap(), dev);
    // SAFETY: the host slices outlive the stream synchronisations below; the device ranges
    // are the allocations above.
    unsafe {
        result::memset_d8_async(py, 0xff, bytes, raw).unwrap();
        result::memcpy_htod_async(px, &x, raw).unwrap();
        result::memcpy_htod_async(pg, &g, raw).unwrap();
    }
    // SAFETY: `raw` is a live stream of the device's primary context and outlives `s` and
    // every wrapper (destroyed at the end, after a synchronisation).
    let s = unsafe { Stream::from_raw_cuda(&dev, raw.cast()) }.unwrap();
    // SAFETY: the allocations live until the end; the other code touches them only through
    // work enqueued on `raw` after ours.
    unsafe { run_on(&s, px, pg, py, pz) };
    // The other code, after our launches on its stream: wipe x and y, then read y's copy in z.
    let (mut y, mut z) = (vec![0f32; M * N], vec![0f32; M * N]);
    // SAFETY: as above; the host vectors outlive the synchronisation.
    unsafe {
        result::memcpy_dtoh_async(&mut z, pz, raw).unwrap();
        result::memcpy_dtoh_async(&mut y, py, raw).unwrap();
        result::memset_d8_async(px, 0, bytes, raw).unwrap();
        result::stream::synchronize(raw).unwrap();
    }
    check("cuda, foreign stream", &x, &g, &y, &z);
    assert!(x.iter().any(|&v| v != 0.0));
    // Our blocking copy of a wrapped buffer waits for the non-blocking stream's work queued
    // before it: the other code refills x on its stream, we read x without synchronising.
    // SAFETY: as above.
    let xb = unsafe { DeviceBuffer::<f32>::from_raw_parts(&s, px, M * N) }.unwrap();
    // SAFETY: the range is the allocation `px`.
    unsafe { result::memset_d8_async(px, 0x3f, bytes, raw) }.unwrap();
    let fill = f32::from_bits(0x3f3f_3f3f);
    assert!(xb.to_vec().unwrap().iter().all(|&v| v == fill));
    drop((xb, s));
    // SAFETY: nothing of ours is pending on the memory or the stream any more.
    unsafe {
        result::stream::synchronize(raw).unwrap();
        for p in [px, pg, py, pz] {
            result::free_sync(p).unwrap();
        }
        result::stream::destroy(raw).unwrap();
        result::primary_ctx::release(cu).unwrap();
    }
}
