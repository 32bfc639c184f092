//! Forward plan sweep: on the best device, times the LayerNorm and RMSNorm forward (bf16 and
//! f32, LayerNorm with a bias) at the bench shapes for every plan the kernels can run
//! ([`fly_norm::forward_plans`]: each fast-path tile count with every block size that covers a
//! row, each multi-row tile count with every lane count, also in smaller blocks, and the
//! generic path; for rows that are not a multiple of the vector width, e.g. `--shape
//! 32768x4095`, the same on the ragged paths), then re-times the dispatcher's plan and the three fastest with the
//! keep-in-L2 hint flipped (`L2` marks plans that read with it) and the three fastest with
//! persistent grids (a few blocks per compute unit looping over the rows). Marks the dispatcher's plan (`*`) and the fastest
//! (`<`), and ends with a default-against-best summary. Exits 0 with a reason printed when
//! there is no GPU (the Sim) or the crate was built without the device's code objects.
//!
//! ```sh
//! cargo run --release -p fly-norm --features sm90 --example fwd_sweep
//! cargo run --release -p fly-norm --features sm90 --example fwd_sweep -- \
//!     --norm layernorm --dtype bf16 --shape 32768x4096 --reps 50 --no-grids
//! # ragged rows: the ragged plans against the generic one
//! cargo run --release -p fly-norm --features sm90 --example fwd_sweep -- \
//!     --shape 32768x4095 --shape 65536x1023 --shape 8192x8191
//! ```
//!
//! Timing as `cargo xtask bench` and `bench/peers.py`: CUDA/HIP events around each launch, a
//! 256 MiB L2 flush before every timed launch, median of `--reps` (default 40) after
//! `--warmup` (5) untimed launches. Bytes: x read + y written + the weights once. `%copy` is
//! against `--ceil` GB/s (default 4272, the H200's measured copy ceiling). For outputs of at
//! most 2^24 elements each plan's y is compared with the default plan's (`maxdiff`, `BAD` past
//! the dtype's tolerance). `--budget S` (default 50) stops starting new cases after S seconds.
//! `--sim` runs on the Sim anyway, a smoke test of the harness (use small `--shape`s; the
//! times mean nothing).

#[path = "sweep_harness/mod.rs"]
mod harness;
use fly_norm::{
    forward_plans, norm_fwd_with_plan, plan_forward, Element, FwdBuffers, FwdOut, Norm, NormArgs,
    Path, Plan,
};
use flydsl_rt::timing::Timer;
use flydsl_rt::{Device, DeviceBuffer, LaunchConfig, Result, Stream};
use half::bf16;
use harness::Summary;
use std::time::Instant;

const SHAPES: [(usize, usize); 5] = [
    (32768, 4096),
    (65536, 1024),
    (8192, 2048),
    (4096, 8192),
    (32768, 8192),
];
/// Largest output compared against the default plan's.
const CHECK_MAX: usize = 1 << 24;

struct Opts {
    reps: usize,
    warmup: usize,
    norms: Vec<Norm>,
    dtypes: Vec<String>,
    shapes: Vec<(usize, usize)>,
    grids: bool,
    ceil: f64,
    budget_s: f64,
    sim: bool,
}

fn usage() -> String {
    "usage: fwd_sweep [--norm layernorm|rmsnorm] [--dtype bf16|f32] [--shape MxN]... \
     [--reps N] [--warmup N] [--no-grids] [--ceil GBPS] [--budget SECONDS] [--sim]"
        .into()
}

fn parse_args() -> std::result::Result<Opts, String> {
    let mut o = Opts {
        reps: 40,
        warmup: 5,
        norms: vec![Norm::Layer, Norm::Rms],
        dtypes: vec!["bf16".into(), "f32".into()],
        shapes: vec![],
        grids: true,
        ceil: 4272.0,
        budget_s: 50.0,
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
            "--no-grids" => o.grids = false,
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

/// Deterministic values in [-3, 3).
fn inputs<T: Element>(seed: u64, n: usize) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            T::from_f32((s >> 40) as f32 / (1u64 << 24) as f32 * 6.0 - 3.0)
        })
        .collect()
}

fn label(p: &Plan) -> String {
    let lanes = if p.lanes > 0 {
        format!(" l{}", p.lanes)
    } else {
        String::new()
    };
    format!(
        "{:<8} b{:<4}{lanes:<4} g{:<7}{}",
        format!("{:?}", p.path),
        p.cfg.block[0],
        p.cfg.grid[0],
        if p.keep_l2 { " L2" } else { "" }
    )
}

struct Timed {
    plan: Plan,
    ms: f64,
    maxdiff: Option<f64>,
    err: Option<String>,
}

struct Ctx {
    dev: Device,
    timer: Timer,
    opts: Opts,
    summary: Vec<Summary>,
    t0: Instant,
}

impl Ctx {
    fn gbps(&self, bytes: f64, ms: f64) -> (f64, f64) {
        let g = bytes / (ms * 1e-3) / 1e9;
        (g, 100.0 * g / self.opts.ceil)
    }
}

/// Extra multi-row plans: the same lane groups in smaller blocks.
fn rows_block_variants(plans: &[Plan], m: usize, ws: u32) -> Vec<Plan> {
    let mut v = Vec::new();
    for p in plans
        .iter()
        .filter(|p| matches!(p.path.aligned(), Path::Rows(_)))
    {
        for b in [64u32, 128] {
            if b < p.cfg.block[0] && b >= ws.max(p.lanes) {
                let rows = (b / p.lanes) as usize;
                let grid = m.div_ceil(rows).clamp(1, 1 << 20) as u32;
                v.push(Plan {
                    cfg: LaunchConfig::linear(grid, b),
                    ..*p
                });
            }
        }
    }
    v
}

/// Persistent-grid variants of `p`: `k` blocks per compute unit, fewer than `p`'s grid.
fn grid_variants(p: &Plan, cus: u32) -> Vec<Plan> {
    [1u32, 2, 4, 8, 16, 32]
        .iter()
        .map(|k| k * cus.max(1))
        .filter(|&g| g < p.cfg.grid[0])
        .map(|g| Plan {
            cfg: LaunchConfig::linear(g, p.cfg.block[0]),
            ..*p
        })
        .collect()
}

fn max_diff<T: Element>(a: &[T], b: &[T]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let (x, y) = (x.to_f32() as f64, y.to_f32() as f64);
            if x.is_nan() && y.is_nan() {
                0.0
            } else {
                (x - y).abs() / (1.0 + y.abs())
            }
        })
        .fold(0.0, f64::max)
}

fn run_shape<T: Element>(c: &mut Ctx, s: &Stream, dt: &str, (m, n): (usize, usize)) -> Result<()> {
    let x = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(1, m * n))?;
    let g = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(2, n))?;
    let b = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(3, n))?;
    let mut y = DeviceBuffer::<T>::zeroed(&c.dev, m * n)?;
    let (ws, cus) = (c.dev.wave_size(), c.dev.compute_units());
    let es = std::mem::size_of::<T>();
    let tol = if es == 2 { 2e-2 } else { 1e-4 };
    for norm in c.opts.norms.clone() {
        let name = match norm {
            Norm::Layer => "layernorm_fwd",
            Norm::Rms => "rmsnorm_fwd",
        };
        let what = format!("{name} {dt} {m}x{n}");
        if c.t0.elapsed().as_secs_f64() > c.opts.budget_s {
            println!(
                "== {what}: skipped, past the --budget of {} s",
                c.opts.budget_s
            );
            continue;
        }
        let wbytes = if norm == Norm::Layer {
            2 * n * es
        } else {
            n * es
        };
        let bytes = (2 * m * n * es + wbytes) as f64;
        let beta = (norm == Norm::Layer).then_some(&b);
        let default = plan_forward(norm, m, n, T::DTYPE, false, ws, cus);
        let mut plans = forward_plans(m, n, T::DTYPE, false, ws);
        plans.extend(rows_block_variants(&plans, m, ws));
        if !plans.contains(&default) {
            plans.insert(0, default);
        }
        let args = NormArgs::new(m, n);
        let time = |c: &mut Ctx, y: &mut DeviceBuffer<T>, plan: Plan| -> Timed {
            let mut run = || {
                let bufs = FwdBuffers {
                    x: &x,
                    residual: None,
                    gamma: &g,
                    beta,
                    out: FwdOut::Y(&mut *y),
                    mean: None,
                    rstd: None,
                };
                norm_fwd_with_plan(s, norm, bufs, args, plan)
            };
            match c.timer.median(s, c.opts.warmup, c.opts.reps, &mut run) {
                Ok(ms) => Timed {
                    plan,
                    ms,
                    maxdiff: None,
                    err: None,
                },
                Err(e) => Timed {
                    plan,
                    ms: f64::INFINITY,
                    maxdiff: None,
                    err: Some(e.to_string()),
                },
            }
        };
        // The default plan first: its output is the reference of the check.
        let mut rows: Vec<Timed> = Vec::new();
        let first = time(c, &mut y, default);
        let reference = if m * n <= CHECK_MAX && first.err.is_none() {
            Some(y.to_vec()?)
        } else {
            None
        };
        rows.push(first);
        let check = |y: &DeviceBuffer<T>, t: &mut Timed| -> Result<()> {
            if let (Some(r), None) = (&reference, &t.err) {
                t.maxdiff = Some(max_diff(&y.to_vec()?, r));
            }
            Ok(())
        };
        for &p in plans.iter().filter(|&&p| p != default) {
            let mut t = time(c, &mut y, p);
            check(&y, &mut t)?;
            rows.push(t);
        }
        // The dispatcher's plan and the three fastest again with the keep-in-L2 hint flipped,
        // and (unless --no-grids) the three fastest on persistent grids.
        let mut ranked: Vec<(Plan, f64)> = rows
            .iter()
            .filter(|t| t.err.is_none() && t.plan.path != Path::Generic)
            .map(|t| (t.plan, t.ms))
            .collect();
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
        let ranked: Vec<Plan> = ranked.into_iter().take(3).map(|(p, _)| p).collect();
        let mut extra: Vec<Plan> = std::iter::once(default)
            .chain(ranked.iter().copied())
            .map(|p| Plan {
                keep_l2: !p.keep_l2,
                ..p
            })
            .collect();
        if c.opts.grids {
            extra.extend(ranked.iter().flat_map(|p| grid_variants(p, cus)));
        }
        extra.dedup();
        for p in extra {
            if rows.iter().any(|t| t.plan == p) {
                continue;
            }
            let mut t = time(c, &mut y, p);
            check(&y, &mut t)?;
            rows.push(t);
        }
        let best = rows
            .iter()
            .filter(|t| t.err.is_none() && t.maxdiff.is_none_or(|d| d <= tol))
            .min_by(|a, b| a.ms.total_cmp(&b.ms))
            .map(|t| (t.plan, t.ms));
        println!(
            "== {what} ({:.1} MB; * dispatcher's plan, < fastest)",
            bytes / 1e6
        );
        println!(
            "   {:<32} {:>9} {:>8} {:>6} {:>9}",
            "plan", "ms", "GB/s", "%copy", "maxdiff"
        );
        for t in &rows {
            let mark = match (t.plan == default, best.is_some_and(|b| b.0 == t.plan)) {
                (true, true) => "*<",
                (true, false) => "* ",
                (false, true) => " <",
                _ => "  ",
            };
            match &t.err {
                Some(e) => println!("{mark} {:<32} failed: {e}", label(&t.plan)),
                None => {
                    let (gb, pct) = c.gbps(bytes, t.ms);
                    let diff = match t.maxdiff {
                        Some(d) if d > tol => format!("{d:.1e} BAD"),
                        Some(d) => format!("{d:.1e}"),
                        None => "-".into(),
                    };
                    println!(
                        "{mark} {:<32} {:>9.4} {:>8.0} {:>6.1} {:>9}",
                        label(&t.plan),
                        t.ms,
                        gb,
                        pct,
                        diff
                    );
                }
            }
        }
        let dflt = rows
            .iter()
            .find(|t| t.plan == default && t.err.is_none())
            .map(|t| (t.plan, t.ms));
        let labelled = |p: Option<(Plan, f64)>| p.map(|(p, ms)| (label(&p), ms));
        c.summary.push(Summary {
            what,
            default: labelled(dflt),
            best: labelled(best),
            bytes,
        });
    }
    Ok(())
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("fwd_sweep: {e}");
            std::process::exit(2);
        }
    };
    let Some(dev) = harness::device_or_skip("fwd_sweep", opts.sim) else {
        return;
    };
    if let Err(e) = sweep(dev, opts) {
        eprintln!("fwd_sweep: {e}");
        std::process::exit(1);
    }
}

fn sweep(dev: Device, opts: Opts) -> Result<()> {
    let o = &opts;
    harness::print_header("fwd_sweep", &dev, o.reps, o.warmup, o.ceil);
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
    harness::print_summary("fwd_sweep", "plan", &c.summary, c.opts.ceil, secs);
    Ok(())
}
