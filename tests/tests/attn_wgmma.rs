//! The sm_90 FlashAttention forward proof kernel (`flydsl_devtools::proof::attn_wgmma`) on
//! the sm90 Sim (memcheck and racecheck on) and on a CUDA GPU when present, against an f64
//! CPU reference written here: ragged lengths, GQA, causal with `Sq > Skv` and `Sq < Skv`
//! (fully masked rows must be zeros with LSE = -inf), both dtypes, D = 64, 128 and 256.
//!
//! Tolerances (`shared/facts/kernels.md`): max abs error < 1e-2 and every row's cosine
//! similarity > 0.99; LSE atol 8e-3 (bf16) / 4e-3 (f16). With `FLYDSL_REQUIRE_GPU` set, a
//! missing CUDA device is a failure.

use flydsl_devtools::proof::attn_wgmma::{
    self, block_m, block_n, lds_bytes, tensor_map_dims, threads,
};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{
    Backend, Device, DeviceBuffer, Element, LaunchConfig, Stream, Target, TensorMap, TmaSwizzle,
};
use flydsl_tests::proof;
use flydsl_testutil::rng::Rng;

/// One problem: batch, query and key lengths, query and kv heads, head dim, causal.
#[derive(Clone, Copy, Debug)]
struct Shape {
    b: usize,
    sq: usize,
    skv: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    causal: bool,
}

/// The f64 reference: (out [B, Sq, Hq, D], lse [B, Hq, Sq]); rows with no visible key give
/// zeros and -inf.
fn reference(sh: &Shape, q: &[f32], k: &[f32], v: &[f32], scale: f64) -> (Vec<f64>, Vec<f64>) {
    let Shape {
        b,
        sq,
        skv,
        hq,
        hkv,
        d,
        causal,
    } = *sh;
    let mut out = vec![0.0; b * sq * hq * d];
    let mut lse = vec![f64::NEG_INFINITY; b * hq * sq];
    let group = hq / hkv;
    for bi in 0..b {
        for h in 0..hq {
            let hk = h / group;
            for i in 0..sq {
                let qrow = &q[((bi * sq + i) * hq + h) * d..][..d];
                let visible: Vec<usize> = (0..skv)
                    .filter(|&j| !causal || (j as i64) <= i as i64 + skv as i64 - sq as i64)
                    .collect();
                if visible.is_empty() {
                    continue;
                }
                let logits: Vec<f64> = visible
                    .iter()
                    .map(|&j| {
                        let krow = &k[((bi * skv + j) * hkv + hk) * d..][..d];
                        scale * (0..d).map(|x| qrow[x] as f64 * krow[x] as f64).sum::<f64>()
                    })
                    .collect();
                let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let ws: Vec<f64> = logits.iter().map(|&s| (s - mx).exp()).collect();
                let sum: f64 = ws.iter().sum();
                lse[(bi * hq + h) * sq + i] = mx + sum.ln();
                let o = &mut out[((bi * sq + i) * hq + h) * d..][..d];
                for (&j, &w) in visible.iter().zip(&ws) {
                    let vrow = &v[((bi * skv + j) * hkv + hk) * d..][..d];
                    for x in 0..d {
                        o[x] += w / sum * vrow[x] as f64;
                    }
                }
            }
        }
    }
    (out, lse)
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

/// The dtypes with their launchers per (head dim, causal).
trait AttnElem: Element {
    const LSE_ATOL: f64;
    fn launcher(d: usize, causal: bool) -> Launch<Self>;
}

impl AttnElem for bf16 {
    const LSE_ATOL: f64 = 8e-3;
    fn launcher(d: usize, causal: bool) -> Launch<Self> {
        match (d, causal) {
            (64, false) => proof::attn_wgmma_bf16_d64_full,
            (64, true) => proof::attn_wgmma_bf16_d64_causal,
            (128, false) => proof::attn_wgmma_bf16_d128_full,
            (128, true) => proof::attn_wgmma_bf16_d128_causal,
            (256, false) => proof::attn_wgmma_bf16_d256_full,
            _ => proof::attn_wgmma_bf16_d256_causal,
        }
    }
}

impl AttnElem for f16 {
    const LSE_ATOL: f64 = 4e-3;
    fn launcher(d: usize, causal: bool) -> Launch<Self> {
        match (d, causal) {
            (64, false) => proof::attn_wgmma_f16_d64_full,
            (64, true) => proof::attn_wgmma_f16_d64_causal,
            (128, false) => proof::attn_wgmma_f16_d128_full,
            (128, true) => proof::attn_wgmma_f16_d128_causal,
            (256, false) => proof::attn_wgmma_f16_d256_full,
            _ => proof::attn_wgmma_f16_d256_causal,
        }
    }
}

/// Run `sh` on `dev` and check it against the reference.
fn case<T: AttnElem>(dev: &Device, sh: Shape, seed: u64) {
    let Shape {
        b,
        sq,
        skv,
        hq,
        hkv,
        d,
        causal,
    } = sh;
    let mut rng = Rng::new(seed);
    let mk = |rng: &mut Rng, n: usize| -> Vec<T> {
        rng.randn(n).iter().map(|&x| T::from_f32(x)).collect()
    };
    let q = mk(&mut rng, b * sq * hq * d);
    let k = mk(&mut rng, b * skv * hkv * d);
    let v = mk(&mut rng, b * skv * hkv * d);
    let f = |x: &[T]| x.iter().map(|e| e.to_f32()).collect::<Vec<f32>>();
    let scale = 1.0 / (d as f64).sqrt();
    let (want, want_lse) = reference(&sh, &f(&q), &f(&k), &f(&v), scale);

    let s = dev.stream().unwrap();
    let dq = DeviceBuffer::from_slice(dev, &q).unwrap();
    let dk = DeviceBuffer::from_slice(dev, &k).unwrap();
    let dv = DeviceBuffer::from_slice(dev, &v).unwrap();
    let nan = T::from_f32(f32::NAN);
    let mut dout = DeviceBuffer::from_slice(dev, &vec![nan; q.len()]).unwrap();
    let mut dlse = DeviceBuffer::from_slice(dev, &vec![f32::NAN; b * hq * sq]).unwrap();
    let (qd, qs, qb) = tensor_map_dims(b as u64, sq as u64, hq as u64, d as u64, block_m(d as u32));
    let (kd, ks, kb) = tensor_map_dims(
        b as u64,
        skv as u64,
        hkv as u64,
        d as u64,
        block_n(d as u32),
    );
    let qm = TensorMap::tiled(&dq, &qd, &qs, &qb, TmaSwizzle::B128).unwrap();
    let km = TensorMap::tiled(&dk, &kd, &ks, &kb, TmaSwizzle::B128).unwrap();
    let vm = TensorMap::tiled(&dv, &kd, &ks, &kb, TmaSwizzle::B128).unwrap();
    let cfg = LaunchConfig {
        grid: attn_wgmma::grid(b as u32, sq as u32, hq as u32, d as u32),
        block: [threads(d as u32), 1, 1],
        dynamic_lds_bytes: lds_bytes(d as u32),
    };
    let scale_log2 = (scale * std::f64::consts::LOG2_E) as f32;
    // SAFETY: the maps describe q, k and v exactly (TensorMap::tiled checks the extents
    // against the buffers); out holds B Sq Hq D elements and lse B Hq Sq; the kernel guards
    // rows past sq and TMA zero-fills past the ends.
    unsafe {
        T::launcher(d, causal)(
            &s,
            cfg,
            qm.buffer(),
            km.buffer(),
            vm.buffer(),
            &mut dout,
            &mut dlse,
            sq as i32,
            skv as i32,
            hq as i32,
            hkv as i32,
            scale_log2,
            1,
        )
    }
    .unwrap();
    let got: Vec<f32> = f(&dout.to_vec().unwrap());
    let got_lse = dlse.to_vec().unwrap();
    let what = format!("{} {} {sh:?}", dev.name(), std::any::type_name::<T>());
    for row in 0..b * sq * hq {
        let (g, w) = (&got[row * d..][..d], &want[row * d..][..d]);
        let mut dot = 0.0;
        let (mut ng, mut nw) = (0.0, 0.0);
        for x in 0..d {
            let gv = g[x] as f64;
            assert!(gv.is_finite(), "{what}: out row {row} col {x} is {gv}");
            let err = (gv - w[x]).abs();
            assert!(
                err < 1e-2,
                "{what}: out row {row} col {x}: {gv} vs {}",
                w[x]
            );
            dot += gv * w[x];
            ng += gv * gv;
            nw += w[x] * w[x];
        }
        if nw == 0.0 {
            // A fully masked row: exactly zero.
            assert_eq!(ng, 0.0, "{what}: masked row {row} is not zero");
        } else {
            let cos = dot / (ng.sqrt() * nw.sqrt());
            assert!(cos > 0.99, "{what}: row {row} cosine {cos}");
        }
    }
    for (i, (&g, &w)) in got_lse.iter().zip(&want_lse).enumerate() {
        let g = g as f64;
        if w == f64::NEG_INFINITY {
            assert_eq!(g, f64::NEG_INFINITY, "{what}: lse {i} of a masked row");
        } else {
            assert!((g - w).abs() < T::LSE_ATOL, "{what}: lse {i}: {g} vs {w}");
        }
    }
}

fn devices() -> Vec<Device> {
    let mut v = vec![Device::new_sim(Target::Sm90)];
    match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => v.extend(d),
        Ok(_) => flydsl_testutil::gpu::skip("no CUDA device: the GPU half of the attention tests"),
        Err(e) => flydsl_testutil::gpu::skip(&format!("CUDA unavailable: {e}")),
    }
    v
}

fn shape(b: usize, sq: usize, skv: usize, hq: usize, hkv: usize, d: usize, causal: bool) -> Shape {
    Shape {
        b,
        sq,
        skv,
        hq,
        hkv,
        d,
        causal,
    }
}

/// Ragged lengths on both sides, GQA, both dtypes and head dims, not causal.
#[test]
fn full_attention_matches_reference_at_ragged_shapes() {
    for dev in devices() {
        let mut seed = 10;
        for &(sq, skv) in &[(1, 17), (17, 1), (65, 129), (129, 64), (33, 300), (17, 650)] {
            for d in [64, 128] {
                seed += 1;
                case::<bf16>(&dev, shape(1, sq, skv, 2, 1, d, false), seed);
                case::<f16>(&dev, shape(2, sq, skv, 2, 2, d, false), seed + 100);
            }
        }
    }
}

/// Causal, bottom-right: Sq > Skv (the first Sq - Skv rows are fully masked) and Sq < Skv,
/// ragged tiles, GQA.
#[test]
fn causal_attention_matches_reference_including_fully_masked_rows() {
    for dev in devices() {
        let mut seed = 40;
        for &(sq, skv) in &[
            (17, 17),
            (129, 65),
            (65, 129),
            (64, 200),
            (1, 17),
            (140, 3),
            (40, 700),
            (250, 260),
        ] {
            for d in [64, 128] {
                seed += 1;
                case::<bf16>(&dev, shape(1, sq, skv, 4, 2, d, true), seed);
                case::<f16>(&dev, shape(1, sq, skv, 2, 1, d, true), seed + 100);
            }
        }
    }
}

/// D = 256 (64-key tiles, two stages, N = 256 register-A wgmma): ragged, GQA, both masks,
/// enough KV tiles to wrap the stages.
#[test]
fn head_dim_256_matches_reference() {
    for dev in devices() {
        let mut seed = 70;
        for &(sq, skv, causal) in &[(17, 200, false), (130, 65, true), (65, 129, true)] {
            seed += 1;
            case::<bf16>(&dev, shape(1, sq, skv, 2, 1, 256, causal), seed);
            case::<f16>(&dev, shape(1, sq, skv, 1, 1, 256, causal), seed + 100);
        }
    }
}

/// Larger lengths on the GPU only (several KV tiles, both pipeline stages wrapping).
#[test]
fn attention_matches_reference_on_gpu_at_longer_sequences() {
    for dev in devices()
        .into_iter()
        .filter(|d| d.backend() != Backend::Sim)
    {
        for causal in [false, true] {
            for d in [64, 128, 256] {
                case::<bf16>(&dev, shape(2, 1000, 1531, 8, 2, d, causal), 7);
                case::<f16>(&dev, shape(1, 2049, 777, 4, 4, d, causal), 8);
            }
        }
    }
}

/// Structure of the sm_90 code (PTX, when built with `--features sm90`): per head dim the
/// SS wgmma of `Q K^T` (N = block_n, K-major B) and the register-A wgmma of `P V` (N = D,
/// `tnspB` = 1), TMA loads and mbarrier waits, no local memory (spills), and dynamic LDS
/// within the 227 KiB a workgroup may have.
#[test]
fn sm90_code_has_both_wgmmas_tma_and_no_local_memory() {
    use flydsl_devtools::proof::attn_wgmma::block_n;
    let ks: [(&flydsl_rt::KernelVariants, &str, u32); 6] = [
        (&proof::ATTN_WGMMA_BF16_D64_FULL, "bf16", 64),
        (&proof::ATTN_WGMMA_F16_D64_CAUSAL, "f16", 64),
        (&proof::ATTN_WGMMA_BF16_D128_CAUSAL, "bf16", 128),
        (&proof::ATTN_WGMMA_F16_D128_FULL, "f16", 128),
        (&proof::ATTN_WGMMA_BF16_D256_FULL, "bf16", 256),
        (&proof::ATTN_WGMMA_F16_D256_CAUSAL, "f16", 256),
    ];
    for (k, dt, d) in ks {
        assert!(
            lds_bytes(d) <= 227 * 1024,
            "{}: {} B of LDS",
            k.name,
            lds_bytes(d)
        );
        let Some(code) = k.for_target(Target::Sm90).and_then(|v| v.code) else {
            println!(
                "skipped: {} has no sm90 code (build with --features sm90)",
                k.name
            );
            continue;
        };
        let ptx = std::str::from_utf8(code).unwrap();
        let norm: String = ptx.split_whitespace().collect::<Vec<_>>().join(" ");
        let ss = format!("m64n{}k16.f32.{dt}.{dt}", block_n(d));
        let rs = format!("m64n{d}k16.f32.{dt}.{dt}");
        let count = |pat: &str, tail: &str| {
            norm.match_indices(pat)
                .filter(|(i, _)| {
                    let rest = &norm[*i..];
                    rest[..rest.find(';').unwrap()].ends_with(tail)
                })
                .count()
        };
        // The k16 steps of each product are unrolled: D / 16 SS and block_n / 16 RS wgmmas.
        assert_eq!(
            count(&ss, "1, 1, 1, 0, 0"),
            (d / 16) as usize,
            "{}: SS wgmmas",
            k.name
        );
        assert_eq!(
            count(&rs, "1, 1, 1, 1"),
            (block_n(d) / 16) as usize,
            "{}: RS wgmmas",
            k.name
        );
        for want in [
            "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
            "mbarrier.try_wait.parity.shared::cta.b64",
            "mbarrier.arrive.shared::cta.b64",
            "ex2.approx",
        ] {
            assert!(norm.contains(want), "{}: no `{want}` in the PTX", k.name);
        }
        assert!(!ptx.contains(".local"), "{}: uses local memory", k.name);
    }
}
