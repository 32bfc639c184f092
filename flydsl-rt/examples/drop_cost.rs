//! Host cost of dropping a device buffer that a queued kernel still uses, in microseconds:
//! the median over 20 drops, each of a buffer read by the last of 64 queued vector adds over
//! 2^24-element (64 MiB) buffers, so that tens of milliseconds of work are in flight when it
//! is dropped.
//!
//! ```sh
//! cargo run --release -p flydsl-rt --example drop_cost
//! ```
//!
//! Each line also gives the median host time of the allocation (after a synchronize, so a
//! pool that returned its memory to the system shows it). On CUDA it prints two lines: `before`, the previous drop (`cuMemFree` of a `cuMemAlloc`
//! allocation, timed on memory the same way), and `after`, a `DeviceBuffer` drop
//! (`cuMemFreeAsync` on the buffer's stream). On the Sim (launches are synchronous, nothing is
//! in flight) it prints `after` only, with a smaller buffer. Results: `bench/rt-drop-cost.md`.

#[path = "../tests/common/mod.rs"]
mod common;

use flydsl_rt::*;
use std::time::{Duration, Instant};

const DROPS: usize = 20;
const QUEUED: usize = 64;

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn main() -> Result<()> {
    let dev = Device::best()?;
    let target = dev.target();
    let code: Option<&'static [u8]> = match dev.backend() {
        Backend::Cuda => Some(include_str!("../tests/data/vadd_sm90.ptx").as_bytes()),
        Backend::Sim => None,
        Backend::Hip => {
            eprintln!("drop_cost: HIP is not measured here (use the H200 or the Sim)");
            return Ok(());
        }
    };
    let n = if dev.backend() == Backend::Sim {
        1 << 12
    } else {
        1 << 24
    };
    let k = common::vadd(target, 256);
    let size = k.kernarg_layout().size as usize;
    let table = common::table("bench", vec![(k, code)]);
    let s = dev.stream()?;
    let a = DeviceBuffer::<f32>::zeroed(&dev, n)?;
    let mut c = DeviceBuffer::<f32>::zeroed(&dev, n)?;
    let launch = |x: &DeviceBuffer<f32>, out: &mut DeviceBuffer<f32>| {
        let mut args = KernelArgs::new(size);
        args.tensor(0, x);
        args.tensor(16, x);
        args.tensor(32, out);
        // SAFETY: the kernel guards its index with out.len; all buffers have n elements.
        unsafe { s.launch(table, LaunchConfig::for_elements(n as u64, 256), &args) }
    };
    launch(&a, &mut c)?; // load the module
    s.synchronize()?;
    let t = Instant::now();
    for _ in 0..QUEUED {
        launch(&a, &mut c)?;
    }
    s.synchronize()?;
    let queue_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "{} ({}): {QUEUED} queued adds of {n} f32 take {queue_ms:.2} ms",
        dev.name(),
        dev.backend()
    );
    // Queue QUEUED - 1 adds, then one reading `temp`; return the host time of `free(temp)`.
    let mut timed =
        |temp: DeviceBuffer<f32>, free: &dyn Fn(DeviceBuffer<f32>)| -> Result<Duration> {
            for _ in 0..QUEUED - 1 {
                launch(&a, &mut c)?;
            }
            launch(&temp, &mut c)?;
            let t = Instant::now();
            free(temp);
            let dt = t.elapsed();
            s.synchronize()?;
            Ok(dt)
        };
    #[cfg(feature = "cuda")]
    if dev.backend() == Backend::Cuda {
        use cudarc::driver::result;
        let (mut before, mut alloc_before) = (Vec::new(), Vec::new());
        for _ in 0..DROPS {
            // The previous drop: cuMemAlloc'd memory freed with cuMemFree. The context is
            // current: flydsl made it current on this thread.
            // SAFETY: a plain allocation, freed once below after the kernels using it were
            // queued (cuMemFree's wait is what is measured).
            let t = Instant::now();
            let p = unsafe { result::malloc_sync(n * 4) }.expect("cuMemAlloc");
            alloc_before.push(t.elapsed());
            // SAFETY: `p` is n f32 of this device, alive until the free below, which the
            // driver orders after the queued kernels (it waits for them: the measured cost).
            let temp = unsafe { DeviceBuffer::<f32>::from_raw_parts(&s, p, n) }?;
            before.push(timed(temp, &|b| {
                drop(b);
                // SAFETY: see above.
                unsafe { result::free_sync(p) }.expect("cuMemFree");
            })?);
        }
        println!(
            "before (cuMemFree): {:.1} us per drop, {:.1} us per cuMemAlloc (medians of {DROPS})",
            median(before),
            median(alloc_before)
        );
    }
    let (mut after, mut alloc_after) = (Vec::new(), Vec::new());
    for _ in 0..DROPS {
        let t = Instant::now();
        let temp = DeviceBuffer::<f32>::alloc(&dev, n)?;
        alloc_after.push(t.elapsed());
        after.push(timed(temp, &|b| drop(b))?);
    }
    println!(
        "after (DeviceBuffer drop, stream-ordered free): {:.1} us per drop, {:.1} us per \
         DeviceBuffer::alloc (medians of {DROPS})",
        median(after),
        median(alloc_after)
    );
    let errors = diag::drop_errors();
    assert!(errors.is_empty(), "drop errors: {errors:?}");
    Ok(())
}
