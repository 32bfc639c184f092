//! Host launch overhead of `Stream::launch` (validate + pack + launch, no synchronisation) in
//! microseconds per launch, over 10 000 launches of a one-element vector add on the best
//! backend (`FLYDSL_BACKEND` overrides).
//!
//! ```sh
//! cargo run --release -p flydsl-rt --example launch_overhead
//! ```
//!
//! Code objects: the Sim runs the IR; CUDA uses the sm_90 PTX of `tests/data/vadd_sm90.ptx`;
//! HIP needs an HSACO of the same kernel in `FLYDSL_BENCH_HSACO` (the fake-HIP test builds
//! one). On the Sim every launch also executes the kernel, so the figure includes it.
//!
//! `--validate-only` times launches of an empty grid instead (packing the arguments and every
//! check of `Stream::launch`, nothing launched): the fastest of 20 batches of 100 000, in
//! nanoseconds per launch. Results: `bench/rt-launch-overhead.md`.

#[path = "../tests/common/mod.rs"]
mod common;

use flydsl_rt::*;
use std::time::Instant;

const LAUNCHES: u32 = 10_000;

fn main() -> Result<()> {
    let dev = Device::best()?;
    let target = dev.target();
    let code: Option<&'static [u8]> = match dev.backend() {
        Backend::Sim => None,
        Backend::Cuda => Some(include_str!("../tests/data/vadd_sm90.ptx").as_bytes()),
        Backend::Hip => match std::env::var("FLYDSL_BENCH_HSACO") {
            Ok(p) => Some(common::leak(std::fs::read(&p).map_err(|e| {
                Error::BadVariant {
                    kernel: "vadd".into(),
                    reason: format!("cannot read FLYDSL_BENCH_HSACO={p}: {e}"),
                }
            })?)),
            Err(_) => {
                eprintln!("HIP needs FLYDSL_BENCH_HSACO=<vadd hsaco for {target}>");
                return Ok(());
            }
        },
    };
    let k = common::vadd(target, 256);
    let size = k.kernarg_layout().size as usize;
    let table = common::table("bench", vec![(k, code)]);
    let a = DeviceBuffer::from_slice(&dev, &[1.0f32])?;
    let c = DeviceBuffer::<f32>::zeroed(&dev, 1)?;
    let s = dev.stream()?;
    let cfg = LaunchConfig::linear(1, 64);
    let launch = || {
        let mut args = KernelArgs::new(size);
        args.tensor(0, &a);
        args.tensor(16, &a);
        args.tensor(32, &c);
        // SAFETY: one element, guarded by c.len; buffers outlive the final synchronize.
        unsafe { s.launch(table, cfg, &args) }
    };
    launch()?; // load the module, warm caches
    s.synchronize()?;
    if std::env::args().any(|a| a == "--validate-only") {
        let empty = LaunchConfig::linear(0, 64);
        let mut best = f64::INFINITY;
        for _ in 0..20 {
            let t = Instant::now();
            for _ in 0..100_000 {
                let mut args = KernelArgs::new(size);
                args.tensor(0, &a);
                args.tensor(16, &a);
                args.tensor(32, &c);
                // SAFETY: an empty grid launches nothing.
                unsafe { s.launch(table, empty, &args) }?;
            }
            best = best.min(t.elapsed().as_secs_f64() * 1e9 / 100_000.0);
        }
        println!(
            "{} ({}): {best:.1} ns/launch to pack and validate (empty grid, best of 20 x 100000)",
            dev.name(),
            dev.backend()
        );
        return Ok(());
    }
    let t0 = Instant::now();
    for _ in 0..LAUNCHES {
        launch()?;
    }
    let host = t0.elapsed();
    s.synchronize()?;
    let total = t0.elapsed();
    println!(
        "{} ({}): {:.2} us/launch host overhead, {:.2} us/launch including completion, {} launches",
        dev.name(),
        dev.backend(),
        host.as_secs_f64() * 1e6 / f64::from(LAUNCHES),
        total.as_secs_f64() * 1e6 / f64::from(LAUNCHES),
        LAUNCHES
    );
    assert_eq!(c.to_vec()?, vec![2.0]);
    Ok(())
}
