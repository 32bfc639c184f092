//! What fly-norm's plan sweeps (`fwd_sweep`, `bwd_sweep`) share: the device to time on (or
//! why there is none), the header, and the dispatcher's-choice-against-the-fastest summary.

use flydsl_rt::{Backend, Device};

/// One timed case of a sweep: the dispatcher's choice and the fastest plan, as labels and
/// milliseconds (`None` where it did not run), and the bytes the case moves.
pub struct Summary {
    pub what: String,
    pub default: Option<(String, f64)>,
    pub best: Option<(String, f64)>,
    pub bytes: f64,
}

/// The best device, or `None` after printing why `tool` cannot time anything: no usable
/// device, only the Sim (unless `sim`: a smoke run of the harness), or a kernel without a
/// code object for the device's target.
pub fn device_or_skip(tool: &str, sim: bool) -> Option<Device> {
    let dev = match Device::best() {
        Ok(d) => d,
        Err(e) => {
            println!("{tool}: skipped: no usable device: {e}");
            return None;
        }
    };
    if dev.backend() == Backend::Sim && !sim {
        println!(
            "{tool}: skipped: the best device is the Sim ({}): there is no GPU to time",
            dev.target()
        );
        return None;
    }
    let target = dev.target();
    if let Some(k) = fly_norm::kernels::ALL_KERNELS.iter().find(|k| {
        dev.backend() != Backend::Sim && k.for_target(target).and_then(|v| v.code).is_none()
    }) {
        println!(
            "{tool}: skipped: kernel {} has no {target} code object; build with the \
             target's feature (e.g. --features sm90)",
            k.name
        );
        return None;
    }
    Some(dev)
}

/// The first line of a sweep's output: the device and the method.
pub fn print_header(tool: &str, dev: &Device, reps: usize, warmup: usize, ceil: f64) {
    println!(
        "{tool} on {} ({}, {}, {} compute units, wave {}): median of {reps} reps after \
         {warmup} warm-up, L2 flushed; %copy of {ceil} GB/s",
        dev.name(),
        dev.backend(),
        dev.target(),
        dev.compute_units(),
        dev.wave_size(),
    );
}

/// The summary table (`%copy` against `ceil` GB/s) and the closing line.
pub fn print_summary(tool: &str, choice: &str, summary: &[Summary], ceil: f64, secs: f64) {
    println!("== summary: dispatcher's {choice} against the fastest");
    println!(
        "{:<30} {:<32} {:>9} {:>6} | {:<32} {:>9} {:>6} {:>6}",
        "case", "default", "ms", "%copy", "best", "ms", "%copy", "gain"
    );
    for s in summary {
        let pct = |ms: f64| 100.0 * s.bytes / (ms * 1e-3) / 1e9 / ceil;
        let cell = |p: &Option<(String, f64)>| match p {
            Some((l, ms)) => (l.clone(), *ms, pct(*ms)),
            None => ("-".into(), f64::NAN, f64::NAN),
        };
        let (dl, dms, dp) = cell(&s.default);
        let (bl, bms, bp) = cell(&s.best);
        println!(
            "{:<30} {dl:<32} {dms:>9.4} {dp:>6.1} | {bl:<32} {bms:>9.4} {bp:>6.1} {:>5.1}%",
            s.what,
            100.0 * (dms / bms - 1.0)
        );
    }
    println!("{tool}: {} cases in {secs:.1} s", summary.len());
}
