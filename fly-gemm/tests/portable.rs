//! The portable tile-layer GEMM on the Sim of every target it is built for (gfx942, gfx950,
//! gfx1201, gfx1250, and sm90 where it is the fallback of `gemm`), memcheck and racecheck on
//! (the Sim's default): every config of `PORTABLE_CONFIGS` pinned with `gemm_with`, plain and
//! preshuffled B, M in {1, 16, 33}, N a multiple of 16 but not of the tile, K not a multiple
//! of tile_k (and K % 8 != 0 for plain B), every epilogue; and `gemm`'s dispatch on sm90.
//!
//! C starts as NaN and must hold exactly `m * n` correct values: a store outside C is a
//! memcheck failure of the launch, a missed store leaves a NaN, a read past A or B is a
//! memcheck failure. Inputs are multiples of 1/2 in [-1, 1] and K <= 1032, so every partial
//! sum is exact in f32: without an activation C equals the rounded exact result bit for bit.

use fly_gemm::TileConfig;
use fly_gemm::{gemm, gemm_with, preshuffle_b, BLayout, Epilogue, GemmArgs, PORTABLE_CONFIGS};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Backend, Device, DeviceBuffer, Element, Target};
use flydsl_testutil::gemm::{gemm_ref, Act};
use flydsl_testutil::rng::Rng;

const TARGETS: [Target; 5] = [
    Target::Gfx942,
    Target::Gfx950,
    Target::Gfx1201,
    Target::Gfx1250,
    Target::Sm90,
];

fn halves<T: Element>(rng: &mut Rng, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| T::from_f32(((rng.next_u64() % 5) as f32 - 2.0) / 2.0))
        .collect()
}

fn act(e: Epilogue) -> Act {
    match e {
        Epilogue::None | Epilogue::Bias => Act::None,
        Epilogue::BiasRelu => Act::Relu,
        Epilogue::BiasSilu => Act::Silu,
        Epilogue::BiasGelu => Act::Gelu,
    }
}

/// One GEMM on `dev` through `gemm_with(cfg)` (or `gemm` when `cfg` is None), checked
/// element by element.
fn case<T: Element>(
    dev: &Device,
    (m, n, k): (usize, usize, usize),
    epi: Epilogue,
    b_layout: BLayout,
    cfg: Option<TileConfig>,
    seed: u64,
) {
    let mut rng = Rng::new(seed);
    let a = halves::<T>(&mut rng, m * k);
    let b = halves::<T>(&mut rng, n * k);
    let bias = halves::<T>(&mut rng, n);
    let f = |v: &[T]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let want = gemm_ref(
        &f(&a),
        &f(&b),
        epi.has_bias().then(|| f(&bias)).as_deref(),
        m,
        n,
        k,
        act(epi),
    );
    let b_dev = match b_layout {
        BLayout::Plain => b.clone(),
        BLayout::Preshuffled => preshuffle_b(&b, n, k).unwrap(),
    };
    let s = dev.stream().unwrap();
    let da = DeviceBuffer::from_slice(dev, &a).unwrap();
    let db = DeviceBuffer::from_slice(dev, &b_dev).unwrap();
    let dbias = DeviceBuffer::from_slice(dev, &bias).unwrap();
    let mut dc = DeviceBuffer::from_slice(dev, &vec![T::from_f32(f32::NAN); m * n]).unwrap();
    let args = GemmArgs {
        m,
        n,
        k,
        epilogue: epi,
        b_layout,
    };
    let bias_arg = epi.has_bias().then_some(&dbias);
    match cfg {
        Some(cfg) => gemm_with(&s, &da, &db, bias_arg, &mut dc, args, cfg),
        None => gemm(&s, &da, &db, bias_arg, &mut dc, args),
    }
    .unwrap_or_else(|e| panic!("{} {m}x{n}x{k} {cfg:?} {b_layout:?}: {e}", dev.name()));
    let c = dc.to_vec().unwrap();
    for i in 0..m {
        for j in 0..n {
            let (got, w) = (c[i * n + j].to_f32() as f64, want[i * n + j]);
            let ctx = || {
                format!(
                    "{} {:?} {m}x{n}x{k} {epi:?} {b_layout:?} {cfg:?}: C[{i}][{j}] = {got}, want {w}",
                    dev.name(),
                    T::DTYPE
                )
            };
            if act(epi) == Act::None {
                assert_eq!(
                    c[i * n + j].to_f32(),
                    T::from_f32(w as f32).to_f32(),
                    "{}",
                    ctx()
                );
            } else {
                assert!((got - w).abs() <= 1e-2 * w.abs() + 1e-3, "{}", ctx());
            }
        }
    }
}

fn sim(t: Target) -> Device {
    Device::new_sim(t)
}

/// Every config, plain B (K % 8 != 0: the scalar variant; K % 8 == 0 but not a multiple
/// of tile_k: the vector variant) and preshuffled B, M in {1, 16, 33}, N = 144 (a multiple
/// of 16, not of 128 or 256), on every target, both dtypes alternating.
#[test]
fn every_config_and_b_layout_at_ragged_shapes_on_every_target() {
    for t in TARGETS {
        let dev = sim(t);
        for (ci, cfg) in PORTABLE_CONFIGS.into_iter().enumerate() {
            for (mi, m) in [1usize, 16, 33].into_iter().enumerate() {
                let seed = (ci * 10 + mi) as u64;
                // Plain, k % 8 != 0 (rows not 16-byte aligned).
                case::<bf16>(
                    &dev,
                    (m, 144, 100),
                    Epilogue::None,
                    BLayout::Plain,
                    Some(cfg),
                    seed,
                );
                // Plain, 128-bit rows, K not a multiple of either tile_k.
                case::<f16>(
                    &dev,
                    (m, 144, 72),
                    Epilogue::Bias,
                    BLayout::Plain,
                    Some(cfg),
                    seed + 100,
                );
                // Preshuffled: K % 32 == 0, not a multiple of 128.
                let epi = if mi == 2 {
                    Epilogue::BiasRelu
                } else {
                    Epilogue::None
                };
                case::<bf16>(
                    &dev,
                    (m, 144, 160),
                    epi,
                    BLayout::Preshuffled,
                    Some(cfg),
                    seed + 200,
                );
            }
        }
    }
}

/// Every epilogue through the default dispatch on every target, both B layouts.
#[test]
fn every_epilogue_on_every_target() {
    for t in TARGETS {
        let dev = sim(t);
        for epi in Epilogue::ALL {
            let seed = 300 + epi.index() as u64;
            case::<bf16>(&dev, (20, 32, 64), epi, BLayout::Preshuffled, None, seed);
            case::<f16>(&dev, (3, 40, 24), epi, BLayout::Plain, None, seed + 10);
        }
    }
}

/// More than one tile along M and N, K over several steps of both configs.
#[test]
fn several_tiles_per_dimension() {
    for t in [Target::Gfx942, Target::Gfx1201, Target::Sm90] {
        let dev = sim(t);
        for cfg in PORTABLE_CONFIGS {
            case::<bf16>(
                &dev,
                (80, 272, 288),
                Epilogue::None,
                BLayout::Preshuffled,
                Some(cfg),
                400,
            );
        }
    }
}

/// On sm90, `gemm` takes the portable kernel for what wgmma refuses (k % 8 != 0, preshuffled
/// B) and agrees with wgmma where both run.
#[test]
fn sm90_falls_back_for_what_wgmma_refuses() {
    let dev = sim(Target::Sm90);
    case::<bf16>(
        &dev,
        (33, 48, 13),
        Epilogue::Bias,
        BLayout::Plain,
        None,
        500,
    );
    case::<f16>(&dev, (1, 16, 7), Epilogue::None, BLayout::Plain, None, 501);
    case::<bf16>(
        &dev,
        (17, 64, 96),
        Epilogue::BiasGelu,
        BLayout::Preshuffled,
        None,
        502,
    );
    // Both paths on the same inputs: wgmma (plain, k % 8 == 0) and the pinned portable one.
    case::<bf16>(
        &dev,
        (40, 48, 64),
        Epilogue::None,
        BLayout::Plain,
        None,
        503,
    );
    case::<bf16>(
        &dev,
        (40, 48, 64),
        Epilogue::None,
        BLayout::Plain,
        Some(PORTABLE_CONFIGS[1]),
        503,
    );
}

#[test]
fn a_pinned_config_outside_the_table_is_an_error() {
    let dev = sim(Target::Gfx950);
    let s = dev.stream().unwrap();
    let (m, n, k) = (4, 16, 32);
    let a = DeviceBuffer::<bf16>::zeroed(&dev, m * k).unwrap();
    let b = DeviceBuffer::<bf16>::zeroed(&dev, n * k).unwrap();
    let sentinel = vec![bf16::from_f32(7.0); m * n];
    let mut c = DeviceBuffer::from_slice(&dev, &sentinel).unwrap();
    let bad = TileConfig {
        tile_k: 48,
        ..PORTABLE_CONFIGS[0]
    };
    let args = GemmArgs {
        m,
        n,
        k,
        ..Default::default()
    };
    let e = gemm_with(&s, &a, &b, None, &mut c, args, bad)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("fly_gemm::gemm_with: `config`"), "{e}");
    // Preshuffled B of the wrong K, on an AMD target.
    let args = GemmArgs {
        k: 8,
        b_layout: BLayout::Preshuffled,
        ..args
    };
    let e = gemm_with(&s, &a, &b, None, &mut c, args, PORTABLE_CONFIGS[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`k` = 8") && e.contains("64"), "{e}");
    assert_eq!(c.to_vec().unwrap(), sentinel);
}

/// The sm90 portable paths on a real GPU (CUDA, when present; `FLYDSL_REQUIRE_GPU` makes a
/// missing GPU a failure): the `gemm` fallback (k % 8 != 0, preshuffled B) and every config
/// pinned, against the same reference as the Sim.
#[test]
fn cuda_sm90_fallback_and_every_config() {
    let devs = match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => return flydsl_testutil::gpu::skip("no CUDA device: the sm90 GPU half"),
        Err(e) => return flydsl_testutil::gpu::skip(&format!("CUDA unavailable: {e}")),
    };
    for dev in devs {
        case::<bf16>(
            &dev,
            (33, 48, 13),
            Epilogue::Bias,
            BLayout::Plain,
            None,
            600,
        );
        case::<f16>(&dev, (1, 16, 7), Epilogue::None, BLayout::Plain, None, 601);
        case::<bf16>(
            &dev,
            (17, 64, 96),
            Epilogue::BiasGelu,
            BLayout::Preshuffled,
            None,
            602,
        );
        case::<bf16>(
            &dev,
            (1000, 520, 1000),
            Epilogue::None,
            BLayout::Plain,
            None,
            603,
        );
        case::<bf16>(
            &dev,
            (1000, 512, 1024),
            Epilogue::BiasSilu,
            BLayout::Preshuffled,
            None,
            604,
        );
        for (ci, cfg) in PORTABLE_CONFIGS.into_iter().enumerate() {
            for m in [1usize, 16, 33] {
                let seed = 610 + (ci * 10) as u64 + m as u64;
                case::<bf16>(
                    &dev,
                    (m, 144, 100),
                    Epilogue::None,
                    BLayout::Plain,
                    Some(cfg),
                    seed,
                );
                case::<f16>(
                    &dev,
                    (m, 144, 72),
                    Epilogue::Bias,
                    BLayout::Plain,
                    Some(cfg),
                    seed,
                );
                case::<bf16>(
                    &dev,
                    (m, 144, 160),
                    Epilogue::BiasRelu,
                    BLayout::Preshuffled,
                    Some(cfg),
                    seed,
                );
            }
        }
    }
}
