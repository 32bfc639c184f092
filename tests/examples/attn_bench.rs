//! Times the sm_90 FlashAttention forward proof kernel (`flydsl_devtools::proof::attn_wgmma`)
//! on a CUDA GPU at the attention issue's shapes: bf16 and f16, D 64 and 128, (B, S) in
//! (16, 1024), (8, 4096), (2, 16384) with H = 16, and GQA 64 / 8 heads at (8, 4096); causal
//! and not; Sq = Skv = S. CUDA events, a 256 MiB L2 flush before each rep, median. TFLOP/s
//! count the unmasked region only (`4 D` flops per visible (query, key) pair). Inputs are
//! the deterministic values of [`value`], which `bench/peers_attn.py` generates identically
//! for torch SDPA (flash and cuDNN backends), so both time the same data. A few rows per
//! shape are checked against an f64 reference. Prints a table and writes JSON rows to
//! `$OUT/attn_ours.json`.
//!
//! `cargo run --release -p flydsl-tests --features sm90 --example attn_bench`
//! (`ATTN_BENCH_QUICK=1` runs only the first shape of each kind.)

use flydsl_devtools::proof::attn_wgmma::{
    self, block_m, block_n, lds_bytes, tensor_map_dims, threads,
};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::timing::Timer;
use flydsl_rt::{
    Backend, Device, DeviceBuffer, Element, LaunchConfig, Stream, TensorMap, TmaSwizzle,
};
use flydsl_tests::proof;

/// (B, S, Hq, Hkv).
const SHAPES: [(usize, usize, usize, usize); 4] = [
    (16, 1024, 16, 16),
    (8, 4096, 16, 16),
    (2, 16384, 16, 16),
    (8, 4096, 64, 8),
];

/// Element `i` of input `seed`: a hash of the index mapped to [-1, 1) (rounded to the
/// dtype by the caller). `bench/peers_attn.py` computes the same values.
fn value(seed: u64, i: u64) -> f32 {
    let h =
        (i.wrapping_add(seed.wrapping_mul(0x9E37_79B9))).wrapping_mul(2_654_435_761) % (1 << 32);
    (h as f64 / 4_294_967_296.0 * 2.0 - 1.0) as f32
}

type Launch<T> = unsafe fn(
    &Stream,
    LaunchConfig,
    &DeviceBuffer<i8>,
    &DeviceBuffer<i8>,
    &DeviceBuffer<i8>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    i32,
    i32,
    i32,
    i32,
    f32,
    i32,
) -> flydsl_rt::Result<()>;

trait AttnElem: Element {
    const NAME: &'static str;
    fn launcher(d: usize, causal: bool) -> Launch<Self>;
}

impl AttnElem for bf16 {
    const NAME: &'static str = "bf16";
    fn launcher(d: usize, causal: bool) -> Launch<Self> {
        match (d, causal) {
            (64, false) => proof::attn_wgmma_bf16_d64_full,
            (64, true) => proof::attn_wgmma_bf16_d64_causal,
            (128, false) => proof::attn_wgmma_bf16_d128_full,
            _ => proof::attn_wgmma_bf16_d128_causal,
        }
    }
}

impl AttnElem for f16 {
    const NAME: &'static str = "f16";
    fn launcher(d: usize, causal: bool) -> Launch<Self> {
        match (d, causal) {
            (64, false) => proof::attn_wgmma_f16_d64_full,
            (64, true) => proof::attn_wgmma_f16_d64_causal,
            (128, false) => proof::attn_wgmma_f16_d128_full,
            _ => proof::attn_wgmma_f16_d128_causal,
        }
    }
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

#[allow(clippy::too_many_arguments)]
fn one<T: AttnElem>(
    dev: &Device,
    s: &Stream,
    timer: &mut Timer,
    (b, sl, hq, hkv): (usize, usize, usize, usize),
    d: usize,
    causal: bool,
    rows: &mut Vec<String>,
) -> Result<(), String> {
    let e = |x: flydsl_rt::Error| x.to_string();
    let nq = b * sl * hq * d;
    let nk = b * sl * hkv * d;
    let q: Vec<T> = (0..nq as u64).map(|i| T::from_f32(value(1, i))).collect();
    let k: Vec<T> = (0..nk as u64).map(|i| T::from_f32(value(2, i))).collect();
    let v: Vec<T> = (0..nk as u64).map(|i| T::from_f32(value(3, i))).collect();
    let dq = DeviceBuffer::from_slice(dev, &q).map_err(e)?;
    let dk = DeviceBuffer::from_slice(dev, &k).map_err(e)?;
    let dv = DeviceBuffer::from_slice(dev, &v).map_err(e)?;
    let mut dout = DeviceBuffer::<T>::zeroed(dev, nq).map_err(e)?;
    let mut dlse = DeviceBuffer::<f32>::zeroed(dev, b * hq * sl).map_err(e)?;
    let (qd, qs, qb) = tensor_map_dims(b as u64, sl as u64, hq as u64, d as u64, block_m(d as u32));
    let (kd, ks, kb) =
        tensor_map_dims(b as u64, sl as u64, hkv as u64, d as u64, block_n(d as u32));
    let qm = TensorMap::tiled(&dq, &qd, &qs, &qb, TmaSwizzle::B128).map_err(e)?;
    let km = TensorMap::tiled(&dk, &kd, &ks, &kb, TmaSwizzle::B128).map_err(e)?;
    let vm = TensorMap::tiled(&dv, &kd, &ks, &kb, TmaSwizzle::B128).map_err(e)?;
    let cfg = LaunchConfig {
        grid: attn_wgmma::grid(b as u32, sl as u32, hq as u32, d as u32),
        block: [threads(d as u32), 1, 1],
        dynamic_lds_bytes: lds_bytes(d as u32),
    };
    let scale = 1.0 / (d as f64).sqrt();
    let scale_log2 = (scale * std::f64::consts::LOG2_E) as f32;
    let launch = T::launcher(d, causal);
    let mut run = || {
        // SAFETY: the maps describe q, k and v exactly (TensorMap::tiled checks them against
        // the buffers); out holds B S Hq D elements and lse B Hq S; the kernel guards rows
        // past S and TMA zero-fills past the ends.
        unsafe {
            launch(
                s,
                cfg,
                qm.buffer(),
                km.buffer(),
                vm.buffer(),
                &mut dout,
                &mut dlse,
                sl as i32,
                sl as i32,
                hq as i32,
                hkv as i32,
                scale_log2,
                0,
            )
        }
    };
    let ms = timer.median(s, 3, 20, &mut run).map_err(e)?;
    // Spot check 8 rows against f64.
    let out = dout.to_vec().map_err(e)?;
    let mut worst = 0.0f64;
    for t in 0..8usize {
        let (bi, h, i) = (t % b, (t * 5) % hq, (t * 7919 + sl / 3) % sl);
        let hk = h / (hq / hkv);
        let qrow = &q[((bi * sl + i) * hq + h) * d..][..d];
        let nvis = if causal { i + 1 } else { sl };
        let logits: Vec<f64> = (0..nvis)
            .map(|j| {
                let kr = &k[((bi * sl + j) * hkv + hk) * d..][..d];
                scale
                    * (0..d)
                        .map(|x| qrow[x].to_f32() as f64 * kr[x].to_f32() as f64)
                        .sum::<f64>()
            })
            .collect();
        let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = logits.iter().map(|&l| (l - mx).exp()).collect();
        let sum: f64 = w.iter().sum();
        for x in 0..d {
            let want: f64 = (0..nvis)
                .map(|j| w[j] * v[((bi * sl + j) * hkv + hk) * d + x].to_f32() as f64)
                .sum::<f64>()
                / sum;
            let got = out[((bi * sl + i) * hq + h) * d + x].to_f32() as f64;
            worst = worst.max((got - want).abs());
        }
    }
    let flops = 4.0 * d as f64 * pairs(sl, sl, causal) * (b * hq) as f64;
    let tflops = flops / (ms * 1e-3) / 1e12;
    let ok = worst < 1e-2;
    println!(
        "attn_wgmma {:>4} B={b:>2} S={sl:>5} H={hq:>2}/{hkv:>2} D={d:>3} {:>6} {ms:>9.4} ms \
         {tflops:>7.1} TFLOP/s  spot-check max|err| = {worst:.2e} {}",
        T::NAME,
        if causal { "causal" } else { "full" },
        if ok { "ok" } else { "WRONG" }
    );
    if !ok {
        return Err(format!("B={b} S={sl} D={d} causal={causal}: wrong results"));
    }
    rows.push(format!(
        "{{\"op\": \"attention\", \"impl\": \"flydsl attn_wgmma\", \"dtype\": \"{}\", \
         \"shape\": [{b}, {sl}, {hq}, {hkv}, {d}], \"causal\": {causal}, \"median_ms\": {ms}, \
         \"tflops\": {tflops}}}",
        T::NAME
    ));
    Ok(())
}

fn main() -> Result<(), String> {
    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    let quick = std::env::var("ATTN_BENCH_QUICK").is_ok_and(|v| v == "1");
    let dev = match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => d.into_iter().next().expect("non-empty"),
        Ok(_) => return Err("no CUDA device".into()),
        Err(e) => return Err(format!("CUDA unavailable: {e}")),
    };
    let s = dev.stream().map_err(|e| e.to_string())?;
    let mut timer = Timer::new(&dev, 256 << 20).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let shapes: &[_] = if quick { &SHAPES[1..2] } else { &SHAPES };
    for &shape in shapes {
        for d in [64, 128] {
            for causal in [false, true] {
                one::<bf16>(&dev, &s, &mut timer, shape, d, causal, &mut rows)?;
                one::<f16>(&dev, &s, &mut timer, shape, d, causal, &mut rows)?;
            }
        }
    }
    let path = format!("{out}/attn_ours.json");
    std::fs::write(&path, format!("[\n{}\n]\n", rows.join(",\n")))
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(())
}
