//! `fly_gemm::gemm_scaled` (fp8 e4m3fn / int8 inputs with per-row and per-column scales,
//! bf16 / f16 output, every epilogue) on every device that has its kernel: the sm90 Sim
//! always (memcheck, racecheck and initcheck on: a store outside C is an error there), a
//! CUDA GPU when present (`FLYDSL_REQUIRE_GPU` makes a missing GPU a failure), against
//! `flydsl_testutil::gemm::gemm_scaled_ref` on the exact 8-bit values.
//!
//! Tolerance: the kernel sums in f32 (int8: exactly in s32), scales in f32 and rounds once
//! to the output: the output's rounding (2^-8 bf16, 2^-11 f16, relative) plus f32 rounding
//! of the sum and the scaling (2^-20 of the sum of |terms|); the activations' approximate exp2 / rcp add 1e-2
//! relative as in the 16-bit tests.

use fly_gemm::table::{Tile, TILES};
use fly_gemm::{gemm_scaled, gemm_scaled_with, quantize_rows, Epilogue, GemmArgs, QuantElement};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Backend, Device, DeviceBuffer, Element, Target, F8E4M3FN};
use flydsl_testutil::gemm::{gemm_ref, gemm_scaled_ref, Act};
use flydsl_testutil::rng::Rng;

fn devices() -> Vec<Device> {
    let mut v = vec![Device::new_sim(Target::Sm90)];
    match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => v.extend(d),
        Ok(_) => flydsl_testutil::gpu::skip("no CUDA device: the GPU half of these tests"),
        Err(e) => flydsl_testutil::gpu::skip(&format!("CUDA unavailable: {e}")),
    }
    v
}

fn act(e: Epilogue) -> Act {
    match e {
        Epilogue::None | Epilogue::Bias => Act::None,
        Epilogue::BiasRelu => Act::Relu,
        Epilogue::BiasSilu => Act::Silu,
        Epilogue::BiasGelu => Act::Gelu,
    }
}

/// Uniform values in [-r, r).
fn uniform(rng: &mut Rng, n: usize, r: f32) -> Vec<f32> {
    (0..n)
        .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * r)
        .collect()
}

fn case<Q: QuantElement + Default + Clone, T: Element>(
    dev: &Device,
    shape: (usize, usize, usize),
    epi: Epilogue,
    seed: u64,
) {
    case_with::<Q, T>(dev, shape, epi, seed, None)
}

/// One call (through the dispatcher, or with `tile` pinned) against the reference.
fn case_with<Q: QuantElement + Default + Clone, T: Element>(
    dev: &Device,
    (m, n, k): (usize, usize, usize),
    epi: Epilogue,
    seed: u64,
    tile: Option<Tile>,
) {
    let mut rng = Rng::new(seed);
    // Rows of different magnitudes, so the scales differ per row and column.
    let x: Vec<f32> = uniform(&mut rng, m * k, 1.0)
        .iter()
        .enumerate()
        .map(|(i, v)| v * (1 + (i / k) % 7) as f32)
        .collect();
    let w: Vec<f32> = uniform(&mut rng, n * k, 0.5)
        .iter()
        .enumerate()
        .map(|(i, v)| v * (1 + (i / k) % 5) as f32)
        .collect();
    let (a, sa) = quantize_rows::<Q>(&x, m, k).unwrap();
    let (b, sb) = quantize_rows::<Q>(&w, n, k).unwrap();
    let bias: Vec<T> = uniform(&mut rng, n, 4.0)
        .iter()
        .map(|&v| T::from_f32(v))
        .collect();
    let deq = |v: &[Q]| v.iter().map(|q| q.dequantize()).collect::<Vec<f32>>();
    let (af, bf) = (deq(&a), deq(&b));
    let biasf: Vec<f32> = bias.iter().map(|v| v.to_f32()).collect();
    let want = gemm_scaled_ref(
        &af,
        &bf,
        &sa,
        &sb,
        epi.has_bias().then_some(&biasf[..]),
        m,
        n,
        k,
        act(epi),
    );
    let abs: Vec<f32> = af.iter().map(|v| v.abs()).collect();
    let babs: Vec<f32> = bf.iter().map(|v| v.abs()).collect();
    let mag = gemm_ref(&abs, &babs, None, m, n, k, Act::None);
    let s = dev.stream().unwrap();
    let da = DeviceBuffer::from_slice(dev, &a).unwrap();
    let db = DeviceBuffer::from_slice(dev, &b).unwrap();
    let dsa = DeviceBuffer::from_slice(dev, &sa).unwrap();
    let dsb = DeviceBuffer::from_slice(dev, &sb).unwrap();
    let dbias = DeviceBuffer::from_slice(dev, &bias).unwrap();
    let mut dc = DeviceBuffer::from_slice(dev, &vec![T::from_f32(f32::NAN); m * n]).unwrap();
    let args = GemmArgs {
        m,
        n,
        k,
        epilogue: epi,
    };
    let bias_arg = epi.has_bias().then_some(&dbias);
    match tile {
        None => gemm_scaled(&s, &da, &db, &dsa, &dsb, bias_arg, &mut dc, args),
        Some(t) => gemm_scaled_with(&s, &da, &db, &dsa, &dsb, bias_arg, &mut dc, args, t),
    }
    .unwrap();
    let c = dc.to_vec().unwrap();
    // The output's rounding: at most 2^-8 (bf16) / 2^-11 (f16) of the value.
    let eps = if T::DTYPE == flydsl_rt::DType::BF16 {
        2f64.powi(-8)
    } else {
        2f64.powi(-11)
    };
    for i in 0..m {
        for j in 0..n {
            let (got, wv) = (c[i * n + j].to_f32() as f64, want[i * n + j]);
            let sum_err = mag[i * n + j] * sa[i] as f64 * sb[j] as f64 * 2f64.powi(-20);
            let mut tol = eps * wv.abs() + sum_err + 1e-30;
            if act(epi) != Act::None {
                tol += 1e-2 * wv.abs() + 1e-3;
            }
            assert!(
                (got - wv).abs() <= tol,
                "{} {:?} -> {:?} {m}x{n}x{k} {epi:?} {tile:?}: C[{i}][{j}] = {got}, want {wv} \
                 (tol {tol})",
                dev.name(),
                Q::QUANT,
                T::DTYPE
            );
        }
    }
}

#[test]
fn ragged_shapes_in_both_input_and_output_types() {
    // M in {1, 16, 33}; N a multiple of 16 but not of the 256-wide tile; K a multiple of 16
    // but not of the 128-wide stage (and one K spanning several stages).
    let shapes = [(1, 48, 144), (16, 272, 400), (33, 16, 16), (33, 304, 1040)];
    for dev in devices() {
        for (i, &shape) in shapes.iter().enumerate() {
            let seed = 100 + i as u64;
            case::<F8E4M3FN, bf16>(&dev, shape, Epilogue::None, seed);
            case::<i8, bf16>(&dev, shape, Epilogue::Bias, seed + 10);
            case::<F8E4M3FN, f16>(&dev, shape, Epilogue::Bias, seed + 20);
            case::<i8, f16>(&dev, shape, Epilogue::None, seed + 30);
        }
        if dev.backend() != Backend::Sim {
            case::<F8E4M3FN, bf16>(&dev, (1000, 520, 1040), Epilogue::None, 4);
            case::<i8, bf16>(&dev, (1000, 520, 1040), Epilogue::None, 5);
            // Several 128 x 256 tiles in both directions (the CPU reference bounds the size).
            case::<F8E4M3FN, bf16>(&dev, (1536, 2048, 1024), Epilogue::None, 6);
            case::<i8, f16>(&dev, (1536, 2048, 1024), Epilogue::Bias, 7);
        }
    }
}

#[test]
fn every_tile_config_is_correct_at_ragged_shapes() {
    // Shapes ragged for every config: M past one 64- and 128-row tile, N a multiple of 16
    // but of no tile's N, K past one 128-byte stage.
    for dev in devices() {
        for (i, tile) in TILES.into_iter().enumerate() {
            let seed = 300 + 10 * i as u64;
            for (j, shape) in [(1, 80, 48), (130, 272, 400), (65, 16, 144)]
                .into_iter()
                .enumerate()
            {
                let s = seed + j as u64;
                case_with::<F8E4M3FN, bf16>(&dev, shape, Epilogue::BiasSilu, s, Some(tile));
                case_with::<i8, f16>(&dev, shape, Epilogue::Bias, s + 5, Some(tile));
            }
        }
    }
}

#[test]
fn every_epilogue_matches_the_reference() {
    for dev in devices() {
        for epi in Epilogue::ALL {
            let seed = 200 + epi.index() as u64;
            case::<F8E4M3FN, bf16>(&dev, (70, 48, 176), epi, seed);
            case::<F8E4M3FN, f16>(&dev, (70, 48, 176), epi, seed + 10);
            case::<i8, bf16>(&dev, (70, 48, 176), epi, seed + 20);
            case::<i8, f16>(&dev, (70, 48, 176), epi, seed + 30);
        }
    }
}

/// (what is wrong, args, a, b, scale_a, scale_b, bias, the argument the error must name).
type Case<'a> = (
    &'static str,
    GemmArgs,
    &'a DeviceBuffer<F8E4M3FN>,
    &'a DeviceBuffer<F8E4M3FN>,
    &'a DeviceBuffer<f32>,
    &'a DeviceBuffer<f32>,
    Option<&'a DeviceBuffer<bf16>>,
    &'static str,
);

#[test]
fn bad_arguments_are_errors_that_write_nothing() {
    let dev = Device::new_sim(Target::Sm90);
    let s = dev.stream().unwrap();
    let (m, n, k) = (4, 16, 32);
    let a = DeviceBuffer::<F8E4M3FN>::zeroed(&dev, m * k).unwrap();
    let b = DeviceBuffer::<F8E4M3FN>::zeroed(&dev, n * k).unwrap();
    let sa = DeviceBuffer::from_slice(&dev, &vec![1.0f32; m]).unwrap();
    let sb = DeviceBuffer::from_slice(&dev, &vec![1.0f32; n]).unwrap();
    let bias = DeviceBuffer::<bf16>::zeroed(&dev, n).unwrap();
    let short8 = DeviceBuffer::<F8E4M3FN>::zeroed(&dev, 3).unwrap();
    let short32 = DeviceBuffer::from_slice(&dev, &[1.0f32; 3]).unwrap();
    let short_bias = DeviceBuffer::<bf16>::zeroed(&dev, 3).unwrap();
    let other = Device::new_sim(Target::Sm90);
    let b_other = DeviceBuffer::<F8E4M3FN>::zeroed(&other, n * k).unwrap();
    let sentinel = vec![bf16::from_f32(7.0); m * n];
    let ok = GemmArgs {
        m,
        n,
        k,
        epilogue: Epilogue::None,
    };
    let bias_epi = GemmArgs {
        epilogue: Epilogue::BiasGelu,
        ..ok
    };
    let cases: Vec<Case<'_>> = vec![
        (
            "k not a multiple of 16",
            GemmArgs { k: 24, ..ok },
            &a,
            &b,
            &sa,
            &sb,
            None,
            "`k` = 24",
        ),
        (
            "n = 0",
            GemmArgs { n: 0, ..ok },
            &a,
            &b,
            &sa,
            &sb,
            None,
            "`n`",
        ),
        (
            "k = 0",
            GemmArgs { k: 0, ..ok },
            &a,
            &b,
            &sa,
            &sb,
            None,
            "`k`",
        ),
        ("short A", ok, &short8, &b, &sa, &sb, None, "`a`"),
        ("short B", ok, &a, &short8, &sa, &sb, None, "`b`"),
        (
            "short scale_a",
            ok,
            &a,
            &b,
            &short32,
            &sb,
            None,
            "`scale_a`",
        ),
        (
            "short scale_b",
            ok,
            &a,
            &b,
            &sa,
            &short32,
            None,
            "`scale_b`",
        ),
        ("scale_a of n", ok, &a, &b, &sb, &sb, None, "`scale_a`"),
        ("missing bias", bias_epi, &a, &b, &sa, &sb, None, "`bias`"),
        (
            "unexpected bias",
            ok,
            &a,
            &b,
            &sa,
            &sb,
            Some(&bias),
            "`bias`",
        ),
        (
            "short bias",
            bias_epi,
            &a,
            &b,
            &sa,
            &sb,
            Some(&short_bias),
            "`bias`",
        ),
        (
            "B on another device",
            ok,
            &a,
            &b_other,
            &sa,
            &sb,
            None,
            "`b`",
        ),
        (
            "m too large",
            GemmArgs {
                m: fly_gemm::MAX_DIM + 1,
                ..ok
            },
            &a,
            &b,
            &sa,
            &sb,
            None,
            "`m`",
        ),
    ];
    for (what, args, a, b, sa, sb, bias, arg) in cases {
        let mut c = DeviceBuffer::from_slice(&dev, &sentinel).unwrap();
        let e = gemm_scaled(&s, a, b, sa, sb, bias, &mut c, args)
            .expect_err(what)
            .to_string();
        assert!(
            e.starts_with("fly_gemm::gemm_scaled: ") && e.contains(arg),
            "{what}: {e}"
        );
        assert_eq!(c.to_vec().unwrap(), sentinel, "{what}: C was written");
    }
    // A pinned tile config that was not built.
    let mut c = DeviceBuffer::from_slice(&dev, &sentinel).unwrap();
    let bad = Tile { bm: 64, bn: 256 };
    let e = gemm_scaled_with(&s, &a, &b, &sa, &sb, None, &mut c, ok, bad)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("fly_gemm::gemm_scaled_with: `tile`") && e.contains("TILES"),
        "{e}"
    );
    assert_eq!(c.to_vec().unwrap(), sentinel);
    // C too small (and too large).
    for len in [m * n - 1, m * n + 1] {
        let mut c = DeviceBuffer::<bf16>::zeroed(&dev, len).unwrap();
        let e = gemm_scaled(&s, &a, &b, &sa, &sb, None, &mut c, ok)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`c`") && e.contains("m * n"), "{e}");
    }
    // Every target without the 8-bit kernels: a clear error naming sm90, nothing written.
    for t in [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
    ] {
        let amd = Device::new_sim(t);
        let s2 = amd.stream().unwrap();
        let a2 = DeviceBuffer::<i8>::zeroed(&amd, m * k).unwrap();
        let b2 = DeviceBuffer::<i8>::zeroed(&amd, n * k).unwrap();
        let sa2 = DeviceBuffer::from_slice(&amd, &vec![1.0f32; m]).unwrap();
        let sb2 = DeviceBuffer::from_slice(&amd, &vec![1.0f32; n]).unwrap();
        let mut c2 = DeviceBuffer::from_slice(&amd, &sentinel).unwrap();
        let e = gemm_scaled(&s2, &a2, &b2, &sa2, &sb2, None, &mut c2, ok)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`stream`") && e.contains(&t.to_string()) && e.contains("sm90"),
            "{t}: {e}"
        );
        assert_eq!(c2.to_vec().unwrap(), sentinel);
    }
    // m = 0 is a no-op.
    let empty = DeviceBuffer::<F8E4M3FN>::zeroed(&dev, 0).unwrap();
    let sa0 = DeviceBuffer::<f32>::zeroed(&dev, 0).unwrap();
    let mut c0 = DeviceBuffer::<bf16>::zeroed(&dev, 0).unwrap();
    gemm_scaled(
        &s,
        &empty,
        &b,
        &sa0,
        &sb,
        None,
        &mut c0,
        GemmArgs { m: 0, ..ok },
    )
    .unwrap();
}
