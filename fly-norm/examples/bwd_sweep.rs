//! Backward plan sweep: on the best device, times the LayerNorm and RMSNorm backward (bf16
//! and f32; LayerNorm with dbeta) at the bench shapes for every plan the kernels can run
//! ([`fly_norm::backward_plans`]: each built fast-path tile count with every block size that
//! covers a row, and the generic path, on the dispatcher's persistent grid) under both
//! weight-gradient strategies (`2s` two-stage, `at` atomic), plus the fastest fast-path plan on
//! other persistent grids (1, 2 and 4 blocks per compute unit). Marks the dispatcher's choice
//! (`*`: its plan under `BwdStrategy::Auto`) and the fastest (`<`), and ends with a
//! default-against-best summary. Exits 0 with a reason printed when there is no GPU (the Sim)
//! or the crate was built without the device's code objects.
//!
//! ```sh
//! cargo run --release -p fly-norm --features sm90 --example bwd_sweep
//! cargo run --release -p fly-norm --features sm90 --example bwd_sweep -- \
//!     --norm layernorm --dtype bf16 --shape 4096x16384 --reps 50
//! ```
//!
//! Timing: CUDA/HIP events around each call (both kernels), a 256 MiB L2 flush before every
//! timed call, median of `--reps` (default 30) after `--warmup` (5). Bytes: x and dy read, dx
//! written, the weights and weight gradients once. `%copy` is against `--ceil` GB/s (default
//! 4272, the H200's measured copy ceiling). For at most 2^24 elements each plan's dx and
//! dgamma are compared with the default plan's (`maxdiff`, `BAD` past the dtype's tolerance).
//! `--budget S` (default 100) stops starting new cases after S seconds. `--sim` runs on the
//! Sim anyway, a smoke test of the harness (use small `--shape`s; the times mean nothing).

#[path = "sweep_harness/mod.rs"]
mod harness;
use fly_norm::{
    backward_plans, norm_bwd_with_plan, plan_backward, BwdBuffers, BwdStrategy, Element, Norm,
    NormBwdArgs, Path, Plan,
};
use flydsl_rt::timing::Timer;
use flydsl_rt::{Device, DeviceBuffer, LaunchConfig, Result, Stream};
use half::bf16;
use harness::Summary;
use std::time::Instant;

const SHAPES: [(usize, usize); 7] = [
    (4096, 8192),
    (32768, 4096),
    (4096, 14336),
    (4096, 16384),
    (2048, 32768),
    (4096, 8191),
    (8192, 4095),
];
/// Largest output compared against the default plan's.
const CHECK_MAX: usize = 1 << 24;

struct Opts {
    reps: usize,
    warmup: usize,
    norms: Vec<Norm>,
    dtypes: Vec<String>,
    shapes: Vec<(usize, usize)>,
    ceil: f64,
    budget_s: f64,
    sim: bool,
}

fn usage() -> String {
    "usage: bwd_sweep [--norm layernorm|rmsnorm] [--dtype bf16|f32] [--shape MxN]... \
     [--reps N] [--warmup N] [--ceil GBPS] [--budget SECONDS] [--sim]"
        .into()
}

fn parse_args() -> std::result::Result<Opts, String> {
    let mut o = Opts {
        reps: 30,
        warmup: 5,
        norms: vec![Norm::Layer, Norm::Rms],
        dtypes: vec!["bf16".into(), "f32".into()],
        shapes: vec![],
        ceil: 4272.0,
        budget_s: 100.0,
        sim: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |what: &str| args.next().ok_or(format!("{a} needs {what}; {}", usage()));
        let num = |s: String| s.parse::<f64>().map_err(|e| format!("{a} {s}: {e}"));
        match a.as_str() {
            "--norm" => {
                o.norms = match val("a norm")?.as_str() {
                    "layernorm" => vec![Norm::Layer],
                    "rmsnorm" => vec![Norm::Rms],
                    s => return Err(format!("unknown norm `{s}`: layernorm or rmsnorm")),
                }
            }
            "--dtype" => {
                let d = val("a dtype")?;
                if d != "bf16" && d != "f32" {
                    return Err(format!("unknown dtype `{d}`: bf16 or f32"));
                }
                o.dtypes = vec![d];
            }
            "--shape" => {
                let s = val("MxN")?;
                let v: Vec<usize> = s
                    .split('x')
                    .map(str::parse)
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| format!("--shape {s}: {e}"))?;
                match v[..] {
                    [m, n] if m > 0 && n > 0 => o.shapes.push((m, n)),
                    _ => return Err(format!("--shape {s}: expected MxN with M, N >= 1")),
                }
            }
            "--reps" => o.reps = num(val("a count")?)?.max(1.0) as usize,
            "--warmup" => o.warmup = num(val("a count")?)? as usize,
            "--ceil" => o.ceil = num(val("GB/s")?)?,
            "--budget" => o.budget_s = num(val("seconds")?)?,
            "--sim" => o.sim = true,
            "-h" | "--help" => return Err(usage()),
            _ => return Err(format!("unknown argument `{a}`; {}", usage())),
        }
    }
    if o.shapes.is_empty() {
        o.shapes = SHAPES.to_vec();
    }
    Ok(o)
}

/// Deterministic values in [-3, 3) (`lo`, `hi` shift them: rstd must be positive).
fn inputs<T: Element>(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            T::from_f32(lo + (s >> 40) as f32 / (1u64 << 24) as f32 * (hi - lo))
        })
        .collect()
}

fn label(p: &Plan, st: BwdStrategy) -> String {
    let st = match st {
        BwdStrategy::Atomic => "at",
        _ => "2s",
    };
    format!(
        "{:<9} b{:<5} g{:<7} {st}",
        format!("{:?}", p.path),
        p.cfg.block[0],
        p.cfg.grid[0]
    )
}

struct Timed {
    plan: Plan,
    strategy: BwdStrategy,
    ms: f64,
    maxdiff: Option<f64>,
    err: Option<String>,
}

fn max_diff<T: Element>(a: &[T], b: &[T]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let (x, y) = (x.to_f32() as f64, y.to_f32() as f64);
            (x - y).abs() / (1.0 + y.abs())
        })
        .fold(0.0, f64::max)
}

/// Persistent-grid variants of `p`: 1, 2 and 4 blocks per compute unit (at most `m`).
fn grid_variants(p: &Plan, m: usize, cus: u32) -> Vec<Plan> {
    [1u32, 2, 4]
        .iter()
        .map(|k| (k * cus.max(1)).min(m.max(1) as u32))
        .filter(|&g| g != p.cfg.grid[0])
        .map(|g| Plan {
            cfg: LaunchConfig::linear(g, p.cfg.block[0]),
            ..*p
        })
        .collect()
}

struct Ctx {
    dev: Device,
    timer: Timer,
    opts: Opts,
    summary: Vec<Summary>,
    t0: Instant,
}

fn run_shape<T: Element>(c: &mut Ctx, s: &Stream, dt: &str, (m, n): (usize, usize)) -> Result<()> {
    let dev = c.dev.clone();
    let x = DeviceBuffer::from_slice(&dev, &inputs::<T>(1, m * n, -3.0, 3.0))?;
    let dy = DeviceBuffer::from_slice(&dev, &inputs::<T>(2, m * n, -3.0, 3.0))?;
    let g = DeviceBuffer::from_slice(&dev, &inputs::<T>(3, n, -3.0, 3.0))?;
    let mean = DeviceBuffer::from_slice(&dev, &inputs::<f32>(4, m, -0.1, 0.1))?;
    let rstd = DeviceBuffer::from_slice(&dev, &inputs::<f32>(5, m, 0.5, 1.5))?;
    let mut dx = DeviceBuffer::<T>::zeroed(&dev, m * n)?;
    let mut dg = DeviceBuffer::<T>::zeroed(&dev, n)?;
    let mut db = DeviceBuffer::<T>::zeroed(&dev, n)?;
    let (ws, cus) = (dev.wave_size(), dev.compute_units());
    let es = std::mem::size_of::<T>();
    let tol = if es == 2 { 2e-2 } else { 1e-3 };
    for norm in c.opts.norms.clone() {
        let layer = norm == Norm::Layer;
        let what = format!("{}_bwd {dt} {m}x{n}", norm.name());
        if c.t0.elapsed().as_secs_f64() > c.opts.budget_s {
            println!(
                "== {what}: skipped, past the --budget of {} s",
                c.opts.budget_s
            );
            continue;
        }
        let wbytes = if layer { 3 * n * es } else { 2 * n * es };
        let bytes = (3 * m * n * es + wbytes) as f64;
        let default = plan_backward(norm, m, n, T::DTYPE, ws, cus);
        let mut plans = backward_plans(norm, m, n, T::DTYPE, ws, cus);
        let mut rows: Vec<Timed> = Vec::new();
        let mut reference: Option<(Vec<T>, Vec<T>)> = None;
        // Time `plan` under `strategy` and compare its outputs with the first timed plan's.
        let mut timed =
            |c: &mut Ctx, rows: &mut Vec<Timed>, plan: Plan, strategy: BwdStrategy| -> Result<()> {
                let mut run = || {
                    let bufs = BwdBuffers {
                        x: &x,
                        gamma: &g,
                        dy: &dy,
                        mean: layer.then_some(&mean),
                        rstd: &rstd,
                        dresidual: None,
                        dx: &mut dx,
                        dgamma: &mut dg,
                        dbeta: if layer { Some(&mut db) } else { None },
                    };
                    norm_bwd_with_plan(s, norm, bufs, NormBwdArgs { m, n, strategy }, plan)
                };
                let (ms, err) = match c.timer.median(s, c.opts.warmup, c.opts.reps, &mut run) {
                    Ok(ms) => (ms, None),
                    Err(e) => (f64::INFINITY, Some(e.to_string())),
                };
                let mut t = Timed {
                    plan,
                    strategy,
                    ms,
                    maxdiff: None,
                    err,
                };
                if m * n <= CHECK_MAX && t.err.is_none() {
                    let got = (dx.to_vec()?, dg.to_vec()?);
                    match &reference {
                        None => reference = Some(got),
                        Some((rx, rg)) => {
                            t.maxdiff = Some(max_diff(&got.0, rx).max(max_diff(&got.1, rg)));
                        }
                    }
                }
                rows.push(t);
                Ok(())
            };
        // The dispatcher's choice first: its outputs are the reference of the check.
        let auto = if BwdStrategy::Auto.two_stage(m, n, default.path) {
            BwdStrategy::TwoStage
        } else {
            BwdStrategy::Atomic
        };
        timed(c, &mut rows, default, auto)?;
        for &p in &plans {
            for st in [BwdStrategy::TwoStage, BwdStrategy::Atomic] {
                if !(p == default && st == auto) {
                    timed(c, &mut rows, p, st)?;
                }
            }
        }
        // The fastest fast-path plan on other persistent grids.
        let fastest = rows
            .iter()
            .filter(|t| t.err.is_none() && t.plan.path != Path::Generic)
            .min_by(|a, b| a.ms.total_cmp(&b.ms))
            .map(|t| (t.plan, t.strategy));
        if let Some((p, st)) = fastest {
            plans = grid_variants(&p, m, cus);
            for g in plans {
                timed(c, &mut rows, g, st)?;
            }
        }
        let ok = |t: &&Timed| t.err.is_none() && t.maxdiff.is_none_or(|d| d <= tol);
        let best = rows.iter().filter(ok).min_by(|a, b| a.ms.total_cmp(&b.ms));
        let best_key = best.map(|t| (t.plan, t.strategy));
        println!(
            "== {what} ({:.1} MB; * dispatcher's choice, < fastest)",
            bytes / 1e6
        );
        println!(
            "   {:<30} {:>9} {:>8} {:>6} {:>9}",
            "plan", "ms", "GB/s", "%copy", "maxdiff"
        );
        let gbps = |ms: f64| bytes / (ms * 1e-3) / 1e9;
        for t in &rows {
            let is_default = t.plan == default && t.strategy == auto;
            let is_best = best_key == Some((t.plan, t.strategy));
            let mark = match (is_default, is_best) {
                (true, true) => "*<",
                (true, false) => "* ",
                (false, true) => " <",
                _ => "  ",
            };
            let l = label(&t.plan, t.strategy);
            match &t.err {
                Some(e) => println!("{mark} {l:<30} failed: {e}"),
                None => {
                    let diff = match t.maxdiff {
                        Some(d) if d > tol => format!("{d:.1e} BAD"),
                        Some(d) => format!("{d:.1e}"),
                        None => "-".into(),
                    };
                    let gb = gbps(t.ms);
                    let pct = 100.0 * gb / c.opts.ceil;
                    println!(
                        "{mark} {l:<30} {:>9.4} {gb:>8.0} {pct:>6.1} {diff:>9}",
                        t.ms
                    );
                }
            }
        }
        let dflt = rows
            .first()
            .filter(|t| t.err.is_none())
            .map(|t| (label(&t.plan, t.strategy), t.ms));
        c.summary.push(Summary {
            what,
            default: dflt,
            best: best.map(|t| (label(&t.plan, t.strategy), t.ms)),
            bytes,
        });
    }
    Ok(())
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bwd_sweep: {e}");
            std::process::exit(2);
        }
    };
    let Some(dev) = harness::device_or_skip("bwd_sweep", opts.sim) else {
        return;
    };
    if let Err(e) = sweep(dev, opts) {
        eprintln!("bwd_sweep: {e}");
        std::process::exit(1);
    }
}

fn sweep(dev: Device, opts: Opts) -> Result<()> {
    let o = &opts;
    harness::print_header("bwd_sweep", &dev, o.reps, o.warmup, o.ceil);
    let stream = dev.stream()?;
    let mut c = Ctx {
        timer: Timer::new(&dev, 256 << 20)?,
        dev,
        opts,
        summary: vec![],
        t0: Instant::now(),
    };
    for dt in c.opts.dtypes.clone() {
        for sh in c.opts.shapes.clone() {
            let r = match dt.as_str() {
                "bf16" => run_shape::<bf16>(&mut c, &stream, &dt, sh),
                _ => run_shape::<f32>(&mut c, &stream, &dt, sh),
            };
            if let Err(e) = r {
                println!("== {dt} {}x{}: failed: {e}", sh.0, sh.1);
            }
        }
    }
    let secs = c.t0.elapsed().as_secs_f64();
    harness::print_summary("bwd_sweep", "choice", &c.summary, c.opts.ceil, secs);
    Ok(())
}
