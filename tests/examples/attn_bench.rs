//! Times fly-attn's FlashAttention forward through its public API
//! (`fly_attn::flash_attn_fwd_with`) with both sm90 kernels, the portable tile-layer one
//! (`AttnKernel::Portable`, `mma.sync`) and the Hopper one (`AttnKernel::Hopper`, wgmma +
//! TMA), on a CUDA GPU at the attention issue's shapes: bf16 and f16, D 64 and 128, (B, S)
//! in (16, 1024), (8, 4096), (2, 16384) with H = 16, and GQA 64 / 8 heads at (8, 4096);
//! causal and not; Sq = Skv = S; no LSE; `num_kv_splits: None` (one split at these
//! shapes). CUDA events, a 256 MiB L2 flush before each rep, median; a timed rep is one
//! public call (validation, tensor maps from the per-process cache, the launch). TFLOP/s
//! count the unmasked region only (`4 D` flops per visible (query, key) pair). Inputs are
//! the deterministic values of [`value`], which `bench/peers_attn.py` generates identically
//! for torch SDPA (flash and cuDNN backends), so all time the same data. A few rows per
//! shape and kernel are checked against an f64 reference (a wrong kernel's rows are left
//! out and the bench fails at the end, after timing the rest). Prints a table and writes
//! JSON rows (`impl` "fly-attn portable" / "fly-attn hopper") to `$OUT/attn_ours.json`.
//!
//! Last, decode-like calls (`DECODE`: one query row, long Skv, GQA; bf16 through
//! `AttnKernel::Auto`, which takes the split-KV decode kernel there with its automatic
//! split count; a line per shape names the family and splits Auto took), reported as GB/s
//! of K and V read (`ATTN_DECODE=0` skips them; compare with the copy ceiling
//! `bench/peers.py` measures). `ATTN_DECODE_KERNELS=auto,decode,portable` also times the
//! pinned kernels (default `auto`), and `ATTN_DECODE_SPLITS=n` pins the split count, so
//! the H200 can settle the decode rule and its split count; `ATTN_DECODE_SQ=n` gives the
//! decode shapes `n` query rows (no mask) to place the rule's row bound.
//!
//! `cargo run --release -p flydsl-tests --features sm90 --example attn_bench`
//! (`ATTN_BENCH_QUICK=1` runs only the second shape; `ATTN_BENCH_KERNEL=portable|hopper`
//! only one kernel.)

use fly_attn::{flash_attn_fwd_with, AttnArgs, AttnKernel};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::timing::Timer;
use flydsl_rt::{Backend, Device, DeviceBuffer, Element, Stream};

/// (B, S, Hq, Hkv).
const SHAPES: [(usize, usize, usize, usize); 4] = [
    (16, 1024, 16, 16),
    (8, 4096, 16, 16),
    (2, 16384, 16, 16),
    (8, 4096, 64, 8),
];

/// The kernels timed, with their JSON `impl` names.
const KERNELS: [(AttnKernel, &str); 2] = [
    (AttnKernel::Portable, "fly-attn portable"),
    (AttnKernel::Hopper, "fly-attn hopper"),
];

/// Element `i` of input `seed`: a hash of the index mapped to [-1, 1) (rounded to the
/// dtype by the caller). `bench/peers_attn.py` computes the same values.
fn value(seed: u64, i: u64) -> f32 {
    let h =
        (i.wrapping_add(seed.wrapping_mul(0x9E37_79B9))).wrapping_mul(2_654_435_761) % (1 << 32);
    (h as f64 / 4_294_967_296.0 * 2.0 - 1.0) as f32
}

trait AttnElem: Element {
    const NAME: &'static str;
}

impl AttnElem for bf16 {
    const NAME: &'static str = "bf16";
}

impl AttnElem for f16 {
    const NAME: &'static str = "f16";
}

/// Visible (query, key) pairs of one head: all, or the bottom-right causal triangle.
fn pairs(sq: usize, skv: usize, causal: bool) -> f64 {
    if !causal {
        return (sq * skv) as f64;
    }
    (0..sq)
        .map(|i| (i as i64 + skv as i64 - sq as i64 + 1).clamp(0, skv as i64) as f64)
        .sum()
}

/// The f64 reference of one output row: query `qrow` (D values) against the first `nvis`
/// keys of one kv head, whose row `j` starts at element `kv(j)` of `k` and `v`.
fn reference_row<T: Element>(
    qrow: &[T],
    k: &[T],
    v: &[T],
    nvis: usize,
    kv: impl Fn(usize) -> usize,
) -> Vec<f64> {
    let d = qrow.len();
    let scale = 1.0 / (d as f64).sqrt();
    let logits: Vec<f64> = (0..nvis)
        .map(|j| {
            let kr = &k[kv(j)..][..d];
            scale
                * (0..d)
                    .map(|x| qrow[x].to_f32() as f64 * kr[x].to_f32() as f64)
                    .sum::<f64>()
        })
        .collect();
    let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = logits.iter().map(|&l| (l - mx).exp()).collect();
    let sum: f64 = w.iter().sum();
    (0..d)
        .map(|x| {
            (0..nvis)
                .map(|j| w[j] * v[kv(j) + x].to_f32() as f64)
                .sum::<f64>()
                / sum
        })
        .collect()
}

/// The largest error of 8 output rows against an f64 reference.
fn spot_check<T: Element>(
    q: &[T],
    k: &[T],
    v: &[T],
    out: &[T],
    (b, sl, hq, hkv): (usize, usize, usize, usize),
    d: usize,
    causal: bool,
) -> f64 {
    let mut worst = 0.0f64;
    for t in 0..8usize {
        let (bi, h, i) = (t % b, (t * 5) % hq, (t * 7919 + sl / 3) % sl);
        let hk = h / (hq / hkv);
        let row = ((bi * sl + i) * hq + h) * d;
        let nvis = if causal { i + 1 } else { sl };
        let want = reference_row(&q[row..][..d], k, v, nvis, |j| {
            ((bi * sl + j) * hkv + hk) * d
        });
        for (x, w) in want.iter().enumerate() {
            worst = worst.max((out[row + x].to_f32() as f64 - w).abs());
        }
    }
    worst
}

#[allow(clippy::too_many_arguments)]
fn one<T: AttnElem>(
    dev: &Device,
    s: &Stream,
    timer: &mut Timer,
    shape: (usize, usize, usize, usize),
    d: usize,
    causal: bool,
    kernels: &[(AttnKernel, &str)],
    rows: &mut Vec<String>,
    wrong: &mut Vec<String>,
) -> Result<(), String> {
    let (b, sl, hq, hkv) = shape;
    let e = |x: flydsl_rt::Error| x.to_string();
    let nq = b * sl * hq * d;
    let nk = b * sl * hkv * d;
    let q: Vec<T> = (0..nq as u64).map(|i| T::from_f32(value(1, i))).collect();
    let k: Vec<T> = (0..nk as u64).map(|i| T::from_f32(value(2, i))).collect();
    let v: Vec<T> = (0..nk as u64).map(|i| T::from_f32(value(3, i))).collect();
    let dq = DeviceBuffer::from_slice(dev, &q).map_err(e)?;
    let dk = DeviceBuffer::from_slice(dev, &k).map_err(e)?;
    let dv = DeviceBuffer::from_slice(dev, &v).map_err(e)?;
    let args = AttnArgs {
        heads_kv: hkv,
        causal,
        ..AttnArgs::new(b, sl, hq, d)
    };
    let flops = 4.0 * d as f64 * pairs(sl, sl, causal) * (b * hq) as f64;
    let mut ms_of = Vec::new();
    for &(kernel, name) in kernels {
        let mut dout = DeviceBuffer::<T>::zeroed(dev, nq).map_err(e)?;
        let mut run = || flash_attn_fwd_with(s, &dq, &dk, &dv, &mut dout, None, &args, kernel);
        let ms = timer.median(s, 3, 20, &mut run).map_err(e)?;
        let out = dout.to_vec().map_err(e)?;
        let worst = spot_check(&q, &k, &v, &out, shape, d, causal);
        let tflops = flops / (ms * 1e-3) / 1e12;
        let ok = worst < 1e-2;
        println!(
            "{name:<17} {:>4} B={b:>2} S={sl:>5} H={hq:>2}/{hkv:>2} D={d:>3} {:>6} {ms:>9.4} ms \
             {tflops:>7.1} TFLOP/s  spot-check max|err| = {worst:.2e} {}",
            T::NAME,
            if causal { "causal" } else { "full" },
            if ok { "ok" } else { "WRONG" }
        );
        if !ok {
            // Keep timing the rest (the other kernel's numbers stay useful); main fails at
            // the end.
            wrong.push(format!(
                "{name} {} B={b} S={sl} H={hq}/{hkv} D={d} causal={causal}",
                T::NAME
            ));
            continue;
        }
        rows.push(format!(
            "{{\"op\": \"attention\", \"impl\": \"{name}\", \"dtype\": \"{}\", \
             \"shape\": [{b}, {sl}, {hq}, {hkv}, {d}], \"causal\": {causal}, \"median_ms\": {ms}, \
             \"tflops\": {tflops}}}",
            T::NAME
        ));
        ms_of.push(ms);
    }
    if let [p, h] = ms_of[..] {
        println!("{:>17} hopper / portable speed: {:.2}x", "", p / h);
    }
    Ok(())
}

/// Decode-like shapes: (B, Skv, Hq, Hkv, D) with one query row per sequence.
const DECODE: [(usize, usize, usize, usize, usize); 4] = [
    (1, 32768, 32, 8, 128),
    (8, 8192, 32, 8, 128),
    (16, 4096, 16, 16, 128),
    (4, 65536, 64, 8, 64),
];

/// One decode call (`flash_attn_fwd`, the automatic split count) per shape: its K/V read
/// in GB/s (the bytes that bound it) and every output row against an f64 reference.
fn decode<T: AttnElem>(
    dev: &Device,
    s: &Stream,
    timer: &mut Timer,
    rows: &mut Vec<String>,
    wrong: &mut Vec<String>,
) -> Result<(), String> {
    let e = |x: flydsl_rt::Error| x.to_string();
    let sq = decode_seqlen_q();
    for (b, skv, hq, hkv, d) in DECODE {
        let (nq, nk) = (b * sq * hq * d, b * skv * hkv * d);
        let q: Vec<T> = (0..nq as u64).map(|i| T::from_f32(value(1, i))).collect();
        let k: Vec<T> = (0..nk as u64).map(|i| T::from_f32(value(2, i))).collect();
        let v: Vec<T> = (0..nk as u64).map(|i| T::from_f32(value(3, i))).collect();
        let dq = DeviceBuffer::from_slice(dev, &q).map_err(e)?;
        let dk = DeviceBuffer::from_slice(dev, &k).map_err(e)?;
        let dv = DeviceBuffer::from_slice(dev, &v).map_err(e)?;
        let args = AttnArgs {
            seqlen_q: sq,
            seqlen_kv: skv,
            heads_kv: hkv,
            ..AttnArgs::new(b, skv, hq, d)
        };
        let args = AttnArgs {
            num_kv_splits: decode_splits(),
            ..args
        };
        let (fam, splits) = fly_attn::dense_family::<T>(s, &args, AttnKernel::Auto).map_err(e)?;
        println!(
            "fly-attn decode   {:>4} B={b:>2} Sq={sq} Skv={skv:>5} H={hq:>2}/{hkv:>2} D={d:>3}: Auto \
             takes {fam:?} with {splits} key split(s)",
            T::NAME
        );
        for (kernel, label) in decode_kernels()? {
            let mut dout = DeviceBuffer::<T>::zeroed(dev, nq).map_err(e)?;
            let mut run = || flash_attn_fwd_with(s, &dq, &dk, &dv, &mut dout, None, &args, kernel);
            let ms = timer.median(s, 3, 20, &mut run).map_err(e)?;
            let out = dout.to_vec().map_err(e)?;
            // Every (batch, query, head) row against f64 (no mask: every key visible).
            let mut worst = 0.0f64;
            for bi in 0..b {
                for i in 0..sq {
                    for h in 0..hq {
                        let hk = h / (hq / hkv);
                        let row = ((bi * sq + i) * hq + h) * d;
                        let want = reference_row(&q[row..][..d], &k, &v, skv, |j| {
                            (bi * skv + j) * hkv * d + hk * d
                        });
                        for (x, w) in want.iter().enumerate() {
                            worst = worst.max((out[row + x].to_f32() as f64 - w).abs());
                        }
                    }
                }
            }
            let gbs = (2 * nk * std::mem::size_of::<T>()) as f64 / (ms * 1e-3) / 1e9;
            let ok = worst < 1e-2;
            println!(
                "fly-attn {label:<8} {:>4} B={b:>2} Sq={sq} Skv={skv:>5} H={hq:>2}/{hkv:>2} D={d:>3} \
             {ms:>9.4} ms {gbs:>7.0} GB/s of K+V  max|err| = {worst:.2e} {}",
                T::NAME,
                if ok { "ok" } else { "WRONG" }
            );
            if !ok {
                wrong.push(format!(
                    "decode {label} {} B={b} Skv={skv} H={hq}/{hkv} D={d}",
                    T::NAME
                ));
                continue;
            }
            rows.push(format!(
            "{{\"op\": \"attention_decode\", \"impl\": \"fly-attn {label}\", \"dtype\": \"{}\", \
             \"shape\": [{b}, {sq}, {skv}, {hq}, {hkv}, {d}], \"median_ms\": {ms}, \"kv_gbs\": {gbs}}}",
            T::NAME
        ));
        }
    }
    Ok(())
}

/// The kernels the decode section times (`ATTN_DECODE_KERNELS`, a comma list of `auto`,
/// `decode`, `portable`; default `auto`), with their labels.
fn decode_kernels() -> Result<Vec<(AttnKernel, &'static str)>, String> {
    let list = std::env::var("ATTN_DECODE_KERNELS").unwrap_or_else(|_| "auto".into());
    list.split(',')
        .map(|k| match k.trim() {
            "auto" => Ok((AttnKernel::Auto, "auto")),
            "decode" => Ok((AttnKernel::Decode, "decode")),
            "portable" => Ok((AttnKernel::Portable, "portable")),
            other => Err(format!(
                "ATTN_DECODE_KERNELS: `{other}`: expected auto, decode or portable"
            )),
        })
        .collect()
}

/// Query rows per sequence of the decode section (`ATTN_DECODE_SQ`, default 1; no mask),
/// to place `dispatch::DECODE_AUTO_ROWS` (rows per kv head = Sq * Hq / Hkv).
fn decode_seqlen_q() -> usize {
    std::env::var("ATTN_DECODE_SQ")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(1)
}

/// The pinned split count of the decode section (`ATTN_DECODE_SPLITS`), else automatic.
fn decode_splits() -> Option<usize> {
    std::env::var("ATTN_DECODE_SPLITS")
        .ok()
        .and_then(|v| v.parse().ok())
}

fn main() -> Result<(), String> {
    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    let quick = std::env::var("ATTN_BENCH_QUICK").is_ok_and(|v| v == "1");
    let only = std::env::var("ATTN_BENCH_KERNEL").ok();
    let kernels: Vec<(AttnKernel, &str)> = KERNELS
        .into_iter()
        .filter(|(_, n)| only.as_deref().is_none_or(|o| n.ends_with(o)))
        .collect();
    if kernels.is_empty() {
        return Err(format!(
            "ATTN_BENCH_KERNEL={only:?}: expected portable or hopper"
        ));
    }
    let dev = match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => d.into_iter().next().expect("non-empty"),
        Ok(_) => return Err("no CUDA device".into()),
        Err(e) => return Err(format!("CUDA unavailable: {e}")),
    };
    let s = dev.stream().map_err(|e| e.to_string())?;
    let mut timer = Timer::new(&dev, 256 << 20).map_err(|e| e.to_string())?;
    let (mut rows, mut wrong) = (Vec::new(), Vec::new());
    let shapes: &[_] = if quick { &SHAPES[1..2] } else { &SHAPES };
    for &shape in shapes {
        for d in [64, 128] {
            for causal in [false, true] {
                let (r, w) = (&mut rows, &mut wrong);
                one::<bf16>(&dev, &s, &mut timer, shape, d, causal, &kernels, r, w)?;
                one::<f16>(&dev, &s, &mut timer, shape, d, causal, &kernels, r, w)?;
            }
        }
    }
    if std::env::var("ATTN_DECODE").as_deref() != Ok("0") {
        decode::<bf16>(&dev, &s, &mut timer, &mut rows, &mut wrong)?;
    }
    let path = format!("{out}/attn_ours.json");
    std::fs::write(&path, format!("[\n{}\n]\n", rows.join(",\n")))
        .map_err(|e| format!("{path}: {e}"))?;
    if !wrong.is_empty() {
        return Err(format!(
            "wrong results (not in the JSON): {}",
            wrong.join("; ")
        ));
    }
    Ok(())
}
