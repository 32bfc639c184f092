//! `fly_gemm::gemm_scaled` (fp8 e4m3fn / int8 inputs with per-row and per-column scales,
//! bf16 / f16 output, every epilogue) on every device that has its kernel: the sm90 Sim
//! always (memcheck, racecheck and initcheck on: a store outside C is an error there), a
//! CUDA GPU when present (`FLYDSL_REQUIRE_GPU` makes a missing GPU a failure), against
//! `flydsl_testutil::gemm::gemm_scaled_ref` on the exact 8-bit values (the case and its
//! tolerance: `common/mod.rs`). The portable 8-bit kernel (the AMD targets, and sm90's
//! fallback) is `portable8.rs`.

mod common;
mod odd_view;

use common::{case, case_data, case_with, Pin};
use fly_gemm::table::{Tile, TILES};
use fly_gemm::{
    gemm_scaled, gemm_scaled_with, gemm_scaled_with_split, BLayout, Epilogue, GemmArgs,
};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Backend, Device, DeviceBuffer, Target, F8E4M3FN, F8E4M3FNUZ};

/// The sm90 Sim reporting 3 SMs, so that the persistent kernels' workgroups walk several
/// tiles each wherever a shape has more than 3, then the CUDA GPUs.
fn devices() -> Vec<Device> {
    let mut v = vec![Device::new_sim_with_compute_units(Target::Sm90, 3)];
    match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => v.extend(d),
        Ok(_) => flydsl_testutil::gpu::skip("no CUDA device: the GPU half of these tests"),
        Err(e) => flydsl_testutil::gpu::skip(&format!("CUDA unavailable: {e}")),
    }
    v
}

#[test]
fn ragged_shapes_in_both_input_and_output_types() {
    // M in {1, 16, 33}; N a multiple of 16 but not of the 256-wide tile; K a multiple of 16
    // but not of the 128-wide stage (and one K spanning several stages); one odd N (the
    // epilogue's element-by-element stores).
    let shapes = [
        (1, 48, 144),
        (16, 272, 400),
        (33, 16, 16),
        (33, 304, 1040),
        (17, 37, 144),
    ];
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
fn split_k_is_correct_for_every_tile_and_split_count() {
    // K of 4 and 9 stages of 128 with a ragged last stage (an odd count per split too: the
    // fp8 promotion's tail), split evenly, unevenly and into one-stage splits.
    let cases = [((1, 80, 400), &[2, 4][..]), ((65, 272, 1040), &[3, 4][..])];
    for dev in devices() {
        for (i, tile) in TILES.into_iter().enumerate() {
            for (j, &(shape, splits)) in cases.iter().enumerate() {
                for &sp in splits {
                    let s = 700 + 50 * i as u64 + 10 * j as u64 + sp as u64;
                    let (plain, pin) = (BLayout::Plain, Pin::Split(tile, sp));
                    case_with::<F8E4M3FN, bf16>(&dev, shape, Epilogue::Bias, plain, pin, s);
                    case_with::<i8, f16>(&dev, shape, Epilogue::BiasGelu, plain, pin, s + 1);
                }
            }
        }
        // The dispatcher splits this one (one small-M tile, 8 stages).
        let (m, n, k) = (16, 48, 1024);
        let tile = Tile::pick_scaled(fly_gemm::Quant::Fp8, m, n);
        assert!(fly_gemm::table::split_k(tile, m, n, k, fly_gemm::table::BK8 as usize) > 1);
        case::<F8E4M3FN, bf16>(&dev, (m, n, k), Epilogue::None, 790);
        case::<i8, bf16>(&dev, (m, n, k), Epilogue::BiasRelu, 791);
        if dev.backend() != Backend::Sim {
            case::<F8E4M3FN, bf16>(&dev, (128, 1024, 4096), Epilogue::Bias, 792);
            case::<i8, f16>(&dev, (128, 1024, 4096), Epilogue::None, 793);
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
                let (plain, pin) = (BLayout::Plain, Pin::Tile(tile));
                case_with::<F8E4M3FN, bf16>(&dev, shape, Epilogue::BiasSilu, plain, pin, s);
                case_with::<i8, f16>(&dev, shape, Epilogue::Bias, plain, pin, s + 5);
            }
            if dev.backend() != Backend::Sim {
                // 11 x 15 tiles: more than the H200's 132 SMs, so some walk two.
                let (rows, cols) = (tile.c_rows() as usize, tile.c_cols() as usize);
                let shape = (10 * rows + 3, 14 * cols + 16, 400);
                let (plain, pin) = (BLayout::Plain, Pin::Tile(tile));
                case_with::<F8E4M3FN, bf16>(&dev, shape, Epilogue::Bias, plain, pin, seed + 9);
                case_with::<i8, bf16>(&dev, shape, Epilogue::None, plain, pin, seed + 8);
            }
        }
    }
}

#[test]
fn a_long_k_of_positive_fp8_products_keeps_its_small_terms() {
    // Every product adds: a sum kept in the fp8 wgmma's 13 mantissa bits over all of K
    // (no promotion into f32 per stage) is off by percents here, on the H200 and on the
    // Sim (which truncates each fp8 wgmma's sum as the hardware does).
    for dev in devices() {
        for (i, tile) in TILES.into_iter().enumerate() {
            let (plain, pin) = (BLayout::Plain, Pin::Tile(tile));
            let shape = (64, 64, 16384);
            case_data::<F8E4M3FN, bf16>(
                &dev,
                shape,
                Epilogue::None,
                plain,
                pin,
                700 + i as u64,
                true,
            );
        }
        case_data::<i8, bf16>(
            &dev,
            (64, 64, 16384),
            Epilogue::None,
            BLayout::Plain,
            Pin::Dispatch,
            710,
            true,
        );
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
        ..Default::default()
    };
    let bias_epi = GemmArgs {
        epilogue: Epilogue::BiasGelu,
        ..ok
    };
    let cases: Vec<Case<'_>> = vec![
        (
            "preshuffled B with k % 64 != 0",
            GemmArgs {
                k: 48,
                b_layout: BLayout::Preshuffled,
                ..ok
            },
            &a,
            &b,
            &sa,
            &sb,
            None,
            "`k` = 48",
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
    let bad = Tile {
        bm: 64,
        bn: 256,
        swap_ab: false,
    };
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
    // The fp8 format the target does not read (e4m3fn on gfx942, e4m3fnuz elsewhere): a
    // clear error naming the type and the one to use, nothing written.
    let fnuz_a = DeviceBuffer::<F8E4M3FNUZ>::zeroed(&dev, m * k).unwrap();
    let fnuz_b = DeviceBuffer::<F8E4M3FNUZ>::zeroed(&dev, n * k).unwrap();
    let mut c = DeviceBuffer::from_slice(&dev, &sentinel).unwrap();
    let e = gemm_scaled(&s, &fnuz_a, &fnuz_b, &sa, &sb, None, &mut c, ok)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`Q`") && e.contains("e4m3fnuz") && e.contains("F8E4M3FN"),
        "{e}"
    );
    assert_eq!(c.to_vec().unwrap(), sentinel);
    let amd = Device::new_sim(Target::Gfx942);
    let s2 = amd.stream().unwrap();
    let a2 = DeviceBuffer::<F8E4M3FN>::zeroed(&amd, m * k).unwrap();
    let b2 = DeviceBuffer::<F8E4M3FN>::zeroed(&amd, n * k).unwrap();
    let sa2 = DeviceBuffer::from_slice(&amd, &vec![1.0f32; m]).unwrap();
    let sb2 = DeviceBuffer::from_slice(&amd, &vec![1.0f32; n]).unwrap();
    let mut c2 = DeviceBuffer::from_slice(&amd, &sentinel).unwrap();
    let e = gemm_scaled(&s2, &a2, &b2, &sa2, &sb2, None, &mut c2, ok)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`Q`") && e.contains("gfx942") && e.contains("F8E4M3FNUZ"),
        "{e}"
    );
    assert_eq!(c2.to_vec().unwrap(), sentinel);
    // The wgmma kernel pinned where it does not run: another target, preshuffled B,
    // k % 16 != 0.
    let mut c2 = DeviceBuffer::from_slice(&amd, &sentinel).unwrap();
    let (ai, bi) = (
        DeviceBuffer::<i8>::zeroed(&amd, m * k).unwrap(),
        DeviceBuffer::<i8>::zeroed(&amd, n * k).unwrap(),
    );
    let e = gemm_scaled_with(&s2, &ai, &bi, &sa2, &sb2, None, &mut c2, ok, TILES[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`stream`") && e.contains("gfx942"), "{e}");
    assert_eq!(c2.to_vec().unwrap(), sentinel);
    let odd_k = GemmArgs { k: 24, ..ok };
    let a24 = DeviceBuffer::<F8E4M3FN>::zeroed(&dev, m * 24).unwrap();
    let b24 = DeviceBuffer::<F8E4M3FN>::zeroed(&dev, n * 24).unwrap();
    let mut c = DeviceBuffer::from_slice(&dev, &sentinel).unwrap();
    let e = gemm_scaled_with(&s, &a24, &b24, &sa, &sb, None, &mut c, odd_k, TILES[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`args.k` = 24"), "{e}");
    let pre = GemmArgs {
        b_layout: BLayout::Preshuffled,
        k: 64,
        ..ok
    };
    let a64 = DeviceBuffer::<F8E4M3FN>::zeroed(&dev, m * 64).unwrap();
    let b64 = DeviceBuffer::<F8E4M3FN>::zeroed(&dev, n * 64).unwrap();
    let e = gemm_scaled_with(&s, &a64, &b64, &sa, &sb, None, &mut c, pre, TILES[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`args.b_layout`"), "{e}");
    assert_eq!(c.to_vec().unwrap(), sentinel);
    // Pinned K split counts outside 1..=stages (k = 64: one stage of 128).
    let k64 = GemmArgs { k: 64, ..ok };
    for splits in [0, 2] {
        let e = gemm_scaled_with_split(
            &s, &a64, &b64, &sa, &sb, None, &mut c, k64, TILES[1], splits,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("fly_gemm::gemm_scaled_with_split: `splits`"),
            "{splits}: {e}"
        );
        assert_eq!(c.to_vec().unwrap(), sentinel);
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

/// C a view one element into another buffer: `gemm_scaled` takes the portable kernel and
/// gets it right; the pinned Hopper launch refuses it naming `c` and writes nothing.
#[test]
fn c_views_at_an_odd_element_offset() {
    for dev in devices() {
        let s = dev.stream().unwrap();
        let (m, n, k) = (3usize, 16usize, 32usize);
        let a = DeviceBuffer::from_slice(&dev, &vec![1i8; m * k]).unwrap();
        let b = DeviceBuffer::from_slice(&dev, &vec![2i8; n * k]).unwrap();
        let sa = DeviceBuffer::from_slice(&dev, &vec![0.5f32; m]).unwrap();
        let sb = DeviceBuffer::from_slice(&dev, &vec![0.25f32; n]).unwrap();
        let (owner, mut c) = odd_view::odd_view(&dev, &s, m * n);
        let args = GemmArgs {
            m,
            n,
            k,
            ..Default::default()
        };
        let e = gemm_scaled_with(&s, &a, &b, &sa, &sb, None, &mut c, args, TILES[2]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("fly_gemm::gemm_scaled_with: `c` = address "),
            "{msg}"
        );
        s.synchronize().unwrap();
        odd_view::assert_untouched(&owner);
        gemm_scaled(&s, &a, &b, &sa, &sb, None, &mut c, args).unwrap();
        s.synchronize().unwrap();
        // 32 products of 1 * 2, times 0.5 * 0.25.
        odd_view::assert_view_is(&owner, 8.0, dev.name());
    }
}
