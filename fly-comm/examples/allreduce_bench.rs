//! All-reduce bench for the GPU machine: correctness, then latency of fly-comm's one-stage
//! and two-stage kernels and of NCCL (through fly-comm's vendor path), eager and
//! graph-captured, from 4 KiB to 256 MiB (bf16), plus the fused all-reduce + RMSNorm
//! against all-reduce then `fly_norm::rms_norm_add`. Prints a table and the measured
//! one-/two-stage crossover; writes `$OUT/allreduce_bench.json` (or `--out PATH`).
//!
//! ```text
//! FLYDSL_TARGETS=sm90 cargo run --release -p fly-comm --features sm90 --example allreduce_bench -- [--max-mib 256] [--iters 50] [--ws N]
//! ```
//!
//! With one visible GPU it emulates `--ws` (default 2) ranks on it, each with its own
//! memory and stream: a correctness check of the CUDA kernels, not an NVLink measurement
//! (no NCCL there: it needs one device per rank).

// Rank loops index several per-rank vectors (ranks, streams, inputs, outputs) at once.
#![allow(clippy::needless_range_loop)]

use fly_comm::{Algorithm, Config, CustomAllReduce, VendorAllReduce};
use flydsl_rt::half::bf16;
use flydsl_rt::{Backend, Device, DeviceBuffer, Event, Graph, Stream};
use serde_json::json;

struct Opts {
    max_bytes: u64,
    iters: usize,
    ws: Option<usize>,
    out: Option<String>,
}

fn opts() -> Opts {
    let mut o = Opts {
        max_bytes: 256 << 20,
        iters: 50,
        ws: None,
        out: None,
    };
    let a: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < a.len() {
        let v = a.get(i + 1).cloned().unwrap_or_default();
        match a[i].as_str() {
            "--max-mib" => o.max_bytes = v.parse::<u64>().expect("--max-mib N") << 20,
            "--iters" => o.iters = v.parse().expect("--iters N"),
            "--ws" => o.ws = Some(v.parse().expect("--ws N")),
            "--out" => o.out = Some(v),
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    o
}

/// Time `iters` rounds of `round()` (which enqueues one call on every rank's stream):
/// microseconds per round, the slowest rank's.
fn time(streams: &[Stream], iters: usize, mut round: impl FnMut()) -> f64 {
    round(); // warm-up
    for s in streams {
        s.synchronize().unwrap();
    }
    let starts: Vec<Event> = streams.iter().map(|s| s.record_event().unwrap()).collect();
    for _ in 0..iters {
        round();
    }
    let ends: Vec<Event> = streams.iter().map(|s| s.record_event().unwrap()).collect();
    let mut worst = 0f64;
    for (a, b) in starts.iter().zip(&ends) {
        b.synchronize().unwrap();
        worst = worst.max(f64::from(Event::elapsed_ms(a, b).unwrap()) * 1e3 / iters as f64);
    }
    worst
}

/// Capture `per_graph` calls per rank into one graph per rank; time replays.
fn time_graph(streams: &[Stream], iters: usize, mut call: impl FnMut(usize)) -> f64 {
    let per_graph = 10usize;
    let graphs: Vec<Graph> = (0..streams.len())
        .map(|r| {
            streams[r].begin_capture().unwrap();
            for _ in 0..per_graph {
                call(r);
            }
            streams[r].end_capture().unwrap()
        })
        .collect();
    let replays = iters.div_ceil(per_graph).max(1);
    time(streams, replays, || {
        for (g, s) in graphs.iter().zip(streams) {
            g.launch(s).unwrap();
        }
    }) / per_graph as f64
}

fn main() {
    let o = opts();
    let all = Device::enumerate(Backend::Cuda).unwrap_or_default();
    if all.is_empty() {
        eprintln!("allreduce_bench: no CUDA device; nothing to measure");
        std::process::exit(2);
    }
    let emulated = all.len() == 1;
    let ws = o.ws.unwrap_or(if emulated { 2 } else { all.len().min(8) });
    let devs: Vec<Device> = (0..ws)
        .map(|r| all[if emulated { 0 } else { r }].clone())
        .collect();
    println!(
        "allreduce_bench: {ws} ranks on {} ({}), bf16, sizes 4 KiB..{} MiB",
        devs[0].label(),
        if emulated {
            "emulated on one GPU"
        } else {
            "one GPU per rank"
        },
        o.max_bytes >> 20
    );
    let cfg = Config {
        max_bytes: o.max_bytes,
        ..Config::default()
    };
    let ranks = CustomAllReduce::new_group(&devs, &cfg).expect("custom all-reduce group");
    let streams: Vec<Stream> = devs.iter().map(|d| d.stream().unwrap()).collect();
    let vendor = if emulated || !VendorAllReduce::available(&devs[0]) {
        println!(
            "NCCL: not used ({})",
            if emulated {
                "one GPU"
            } else {
                "libnccl does not load; set FLY_COMM_NCCL_LIB"
            }
        );
        None
    } else {
        Some(VendorAllReduce::init_all(&devs).expect("ncclCommInitAll"))
    };
    let mut rows = Vec::new();
    let mut failures = 0;
    println!(
        "{:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}  check",
        "bytes",
        "1st us",
        "2st us",
        "1st grph",
        "2st grph",
        "nccl us",
        "nccl grph",
        "best/nc",
        "grph/nc"
    );
    let mut bytes = 4096u64;
    while bytes <= o.max_bytes {
        let n = (bytes / 2) as usize;
        let inputs: Vec<Vec<bf16>> = (0..ws)
            .map(|r| {
                (0..n)
                    .map(|i| bf16::from_f32(((i * 7 + r * 13) % 17) as f32 * 0.125 - 1.0))
                    .collect()
            })
            .collect();
        let xs: Vec<_> = (0..ws)
            .map(|r| DeviceBuffer::from_slice(&devs[r], &inputs[r]).unwrap())
            .collect();
        let mut ys: Vec<_> = devs
            .iter()
            .map(|d| DeviceBuffer::<bf16>::zeroed(d, n).unwrap())
            .collect();
        // Correctness of both algorithms (the inputs' sums are exact in bf16).
        let mut ok = true;
        for algo in [Algorithm::OneStage, Algorithm::TwoStage] {
            for r in 0..ws {
                ranks[r]
                    .all_reduce_with(&streams[r], &xs[r], &mut ys[r], algo)
                    .unwrap();
            }
            for r in 0..ws {
                ranks[r].check(&streams[r]).unwrap();
                let got = ys[r].to_vec().unwrap();
                let step = (n / 65536).max(1);
                for i in (0..n).step_by(step) {
                    let want: f32 = inputs.iter().map(|v| v[i].to_f32()).sum();
                    if (got[i].to_f32() - want).abs() > 1e-2 {
                        ok = false;
                    }
                }
            }
        }
        failures += usize::from(!ok);
        let mut t = std::collections::BTreeMap::new();
        for (name, algo) in [
            ("one_stage", Algorithm::OneStage),
            ("two_stage", Algorithm::TwoStage),
        ] {
            let e = time(&streams, o.iters, || {
                for r in 0..ws {
                    ranks[r]
                        .all_reduce_with(&streams[r], &xs[r], &mut ys[r], algo)
                        .unwrap();
                }
            });
            let g = time_graph(&streams, o.iters, |r| {
                ranks[r]
                    .all_reduce_with(&streams[r], &xs[r], &mut ys[r], algo)
                    .unwrap();
            });
            t.insert(name, (e, g));
        }
        let nccl = vendor.as_ref().map(|v| {
            let e = time(&streams, o.iters, || {
                VendorAllReduce::group(&devs[0], || {
                    for r in 0..ws {
                        v[r].all_reduce(&streams[r], &xs[r], &mut ys[r])?;
                    }
                    Ok(())
                })
                .unwrap();
            });
            (e, f64::NAN)
        });
        let (e1, g1) = t["one_stage"];
        let (e2, g2) = t["two_stage"];
        let best = e1.min(e2);
        let bestg = g1.min(g2);
        let ne = nccl.map_or(f64::NAN, |x| x.0);
        println!(
            "{bytes:>10} {e1:>9.2} {e2:>9.2} {g1:>9.2} {g2:>9.2} {ne:>9.2} {:>9} {:>7.2} {:>7.2}  {}",
            "-",
            ne / best,
            ne / bestg,
            if ok { "ok" } else { "WRONG" }
        );
        rows.push(json!({
            "bytes": bytes, "ok": ok,
            "one_stage_us": e1, "two_stage_us": e2,
            "one_stage_graph_us": g1, "two_stage_graph_us": g2,
            "nccl_us": nccl.map(|x| x.0),
        }));
        bytes *= 2;
    }
    // The crossover: the smallest size from which two-stage is faster at every larger size.
    let mut crossover = None;
    for (i, row) in rows.iter().enumerate() {
        let faster = |r: &serde_json::Value| {
            r["two_stage_graph_us"].as_f64() < r["one_stage_graph_us"].as_f64()
        };
        if rows[i..].iter().all(faster) {
            crossover = row["bytes"].as_u64();
            break;
        }
    }
    println!(
        "measured one-/two-stage crossover (graph): {} (set FLY_COMM_TWO_STAGE_MIN_BYTES or TWO_STAGE_MIN_BYTES[{}])",
        crossover.map_or("never".into(), |b| format!("{b} bytes")),
        match ws { 2 => 0, 4 => 1, _ => 2 }
    );
    let fused = fused_bench(&ranks, &devs, &streams, o.iters);
    let report = json!({
        "device": devs[0].label().to_string(), "world_size": ws, "emulated_on_one_gpu": emulated,
        "dtype": "bf16", "rows": rows, "two_stage_crossover_bytes": crossover, "fused_rmsnorm": fused,
    });
    let path = o.out.unwrap_or_else(|| {
        format!(
            "{}/allreduce_bench.json",
            std::env::var("OUT").unwrap_or_else(|_| ".".into())
        )
    });
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap()).expect("write JSON");
    println!("wrote {path}");
    if failures > 0 {
        eprintln!("allreduce_bench: {failures} size(s) gave wrong results");
        std::process::exit(1);
    }
}

/// Fused all-reduce + RMSNorm against all-reduce then `fly_norm::rms_norm_add`, [m, 8192].
fn fused_bench(
    ranks: &[CustomAllReduce],
    devs: &[Device],
    streams: &[Stream],
    iters: usize,
) -> serde_json::Value {
    let n = 8192usize;
    let mut out = Vec::new();
    println!(
        "{:>6} {:>12} {:>14} {:>8}",
        "m", "fused us", "ar+norm us", "speedup"
    );
    for m in [1usize, 16, 128, 1024] {
        if (m * n * 2) as u64 > ranks[0].max_bytes() {
            continue;
        }
        let ws = ranks.len();
        let mk = |d: &Device, v: f32| {
            DeviceBuffer::from_slice(d, &vec![bf16::from_f32(v); m * n]).unwrap()
        };
        let xs: Vec<_> = devs.iter().map(|d| mk(d, 0.5)).collect();
        let res: Vec<_> = devs.iter().map(|d| mk(d, 0.25)).collect();
        let w: Vec<_> = devs
            .iter()
            .map(|d| DeviceBuffer::from_slice(d, &vec![bf16::ONE; n]).unwrap())
            .collect();
        let mut ys: Vec<_> = devs.iter().map(|d| mk(d, 0.0)).collect();
        let mut ros: Vec<_> = devs.iter().map(|d| mk(d, 0.0)).collect();
        let mut tmp: Vec<_> = devs.iter().map(|d| mk(d, 0.0)).collect();
        let fused = time(streams, iters, || {
            for r in 0..ws {
                ranks[r]
                    .fused_all_reduce_rms_norm(
                        &streams[r],
                        &xs[r],
                        &res[r],
                        &w[r],
                        &mut ys[r],
                        &mut ros[r],
                        (m, n),
                        1e-6,
                    )
                    .unwrap();
            }
        });
        let split = time(streams, iters, || {
            for r in 0..ws {
                ranks[r]
                    .all_reduce(&streams[r], &xs[r], &mut tmp[r])
                    .unwrap();
            }
            for r in 0..ws {
                let args = fly_norm::RmsNormArgs { m, n, eps: 1e-6 };
                fly_norm::rms_norm_add(
                    &streams[r],
                    &tmp[r],
                    &res[r],
                    &w[r],
                    &mut ys[r],
                    &mut ros[r],
                    args,
                )
                .unwrap();
            }
        });
        println!("{m:>6} {fused:>12.2} {split:>14.2} {:>8.2}", split / fused);
        out.push(
            json!({"m": m, "n": n, "fused_us": fused, "all_reduce_then_rms_norm_add_us": split}),
        );
    }
    json!(out)
}
