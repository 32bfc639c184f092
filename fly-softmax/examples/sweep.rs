//! Candidate sweep: on the best device, times every candidate configuration the dispatcher
//! and the tuner consider for each shape ([`fly_softmax::plan::candidates_for`]: the class's
//! configurations, the masked scalar alternatives of a ragged row, split rows for few long
//! rows), forward and backward, through [`Dispatch::Variant`]. Marks the default (`*`, the
//! first candidate) and the fastest (`<`), and compares each output with the default's
//! ([`fly_softmax::select::agree`], `BAD` when it differs). Exits 0 with a reason printed on
//! the Sim (unless `--sim`, a smoke test of the harness with meaningless times).
//!
//! ```sh
//! cargo run --release -p fly-softmax --features sm90 --example sweep
//! cargo run --release -p fly-softmax --features sm90 --example sweep -- \
//!     --kind fwd --dtype bf16 --shape 132x150001 --shape 65536x128 --reps 50
//! ```
//!
//! Timing as `cargo xtask bench`: events around each call, a 256 MiB L2 flush before every
//! timed call, median of `--reps` (default 20) after `--warmup` (3). Bytes: forward x read +
//! y written, backward y and dy read + dx written (each once: the ideal traffic). `%copy` is
//! against `--ceil` GB/s (default 4272, the H200's measured copy ceiling).

use fly_softmax::plan::candidates_for;
use fly_softmax::select::agree;
use fly_softmax::table::Kind;
use fly_softmax::{softmax_backward_with, softmax_with, Dispatch, Element, SoftmaxArgs};
use flydsl_rt::timing::Timer;
use flydsl_rt::{Backend, Device, DeviceBuffer, Result, Stream};
use half::{bf16, f16};

/// The shapes of the issue: odd rows, few long rows (around 2 rows per H200 SM, vocabulary
/// sizes), many very short rows.
const SHAPES: [(usize, usize); 10] = [
    (16384, 1021),
    (4096, 4095),
    (2048, 32767),
    (1, 150_001),
    (132, 32768),
    (264, 151_936),
    (64, 65536),
    (132, 152_064),
    (262_144, 128),
    (524_288, 64),
];

struct Opts {
    kinds: Vec<Kind>,
    dtypes: Vec<String>,
    shapes: Vec<(usize, usize)>,
    reps: usize,
    warmup: usize,
    ceil: f64,
    sim: bool,
}

fn usage() -> String {
    "usage: sweep [--kind fwd|bwd] [--dtype bf16|f16|f32]... [--shape MxN]... [--reps N] \
     [--warmup N] [--ceil GBPS] [--sim]"
        .into()
}

fn parse() -> std::result::Result<Opts, String> {
    let mut o = Opts {
        kinds: Vec::new(),
        dtypes: Vec::new(),
        shapes: Vec::new(),
        reps: 20,
        warmup: 3,
        ceil: 4272.0,
        sim: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .ok_or_else(|| format!("{a} needs a value; {}", usage()))
        };
        match a.as_str() {
            "--kind" => o.kinds.push(match val()?.as_str() {
                "fwd" => Kind::Forward,
                "bwd" => Kind::Backward,
                k => return Err(format!("--kind {k}: expected fwd or bwd")),
            }),
            "--dtype" => o.dtypes.push(val()?),
            "--shape" => {
                let s = val()?;
                let (m, n) = s
                    .split_once('x')
                    .and_then(|(m, n)| Some((m.parse().ok()?, n.parse().ok()?)))
                    .ok_or_else(|| format!("--shape {s}: expected MxN, e.g. 132x150001"))?;
                o.shapes.push((m, n));
            }
            "--reps" => o.reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--warmup" => o.warmup = val()?.parse().map_err(|e| format!("--warmup: {e}"))?,
            "--ceil" => o.ceil = val()?.parse().map_err(|e| format!("--ceil: {e}"))?,
            "--sim" => o.sim = true,
            _ => return Err(format!("unknown argument {a}; {}", usage())),
        }
    }
    if o.kinds.is_empty() {
        o.kinds = vec![Kind::Forward, Kind::Backward];
    }
    if o.dtypes.is_empty() {
        o.dtypes = vec!["bf16".into(), "f32".into()];
    }
    if o.shapes.is_empty() {
        o.shapes = SHAPES.to_vec();
    }
    Ok(o)
}

/// Inputs for one shape: x (forward) or y and dy (backward), and the output buffer.
struct Bufs<T: Element> {
    a: DeviceBuffer<T>,
    b: DeviceBuffer<T>,
    out: DeviceBuffer<T>,
}

fn sweep<T: Element>(
    o: &Opts,
    s: &Stream,
    t: &mut Timer,
    kind: Kind,
    m: usize,
    n: usize,
) -> Result<()> {
    let dev = s.device();
    let len = m * n;
    let host: Vec<T> = (0..len)
        .map(|i| T::from_f32(((i * 7919) % 1000) as f32 / 250.0 - 2.0))
        .collect();
    let y0: Vec<T> = (0..len)
        .map(|i| T::from_f32(1.0 / (1 + i % n) as f32))
        .collect();
    let mut bufs = Bufs {
        a: DeviceBuffer::from_slice(dev, if kind == Kind::Forward { &host } else { &y0 })?,
        b: DeviceBuffer::from_slice(dev, &host)?,
        out: DeviceBuffer::<T>::zeroed(dev, len)?,
    };
    let args = SoftmaxArgs { m, n };
    let run = |b: &mut Bufs<T>, name: &str| match kind {
        Kind::Forward => softmax_with(s, &b.a, &mut b.out, args, Dispatch::Variant(name)),
        Kind::Backward => {
            softmax_backward_with(s, &b.a, &b.b, &mut b.out, args, Dispatch::Variant(name))
        }
    };
    let units = if kind == Kind::Forward { 2 } else { 3 };
    let bytes = (units * len * std::mem::size_of::<T>()) as f64;
    let cands = candidates_for::<T>(kind, dev, m, n);
    let mut rows = Vec::new();
    let mut reference: Option<Vec<T>> = None;
    for v in &cands {
        let name = v.name::<T>();
        let ms = t.median(s, o.warmup, o.reps, &mut || run(&mut bufs, &name))?;
        let out = bufs.out.to_vec()?;
        let ok = match &reference {
            None => {
                reference = Some(out);
                Ok(())
            }
            Some(r) => agree(kind, &out, r),
        };
        rows.push((name, ms, ok));
    }
    let best = rows.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    let word = if kind == Kind::Forward { "fwd" } else { "bwd" };
    println!("{word} {} {m}x{n}:", T::DTYPE.name());
    for (i, (name, ms, ok)) in rows.iter().enumerate() {
        let gbps = bytes / (ms * 1e6);
        println!(
            "  {}{} {name:<48} {:>9.4} ms {:>8.1} GB/s {:>5.1}% copy {:>5.2}x default{}",
            if i == 0 { '*' } else { ' ' },
            if *ms == best { '<' } else { ' ' },
            ms,
            gbps,
            100.0 * gbps / o.ceil,
            rows[0].1 / ms,
            match ok {
                Ok(()) => String::new(),
                Err(e) => format!("  BAD: {e}"),
            }
        );
    }
    Ok(())
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let dev = match Device::best() {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no device ({e})");
            return;
        }
    };
    if dev.backend() == Backend::Sim && !o.sim {
        println!("skipped: no GPU (the Sim's times mean nothing; --sim runs it anyway)");
        return;
    }
    let r = (|| -> Result<()> {
        let s = dev.stream()?;
        let mut t = Timer::new(&dev, 256 << 20)?;
        println!(
            "{}: median of {} after {} warm-up, L2 flushed; %copy of {} GB/s",
            dev.name(),
            o.reps,
            o.warmup,
            o.ceil
        );
        for &kind in &o.kinds {
            for d in &o.dtypes {
                for &(m, n) in &o.shapes {
                    match d.as_str() {
                        "bf16" => sweep::<bf16>(&o, &s, &mut t, kind, m, n)?,
                        "f16" => sweep::<f16>(&o, &s, &mut t, kind, m, n)?,
                        "f32" => sweep::<f32>(&o, &s, &mut t, kind, m, n)?,
                        other => println!("skipped dtype {other}: expected bf16, f16 or f32"),
                    }
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = r {
        eprintln!("sweep failed: {e}");
        std::process::exit(1);
    }
}
