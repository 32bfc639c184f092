//! `fly_gemm::gemm` on every device that has its kernel: the sm90 Sim always, a CUDA GPU when
//! present (`FLYDSL_REQUIRE_GPU` makes a missing GPU a failure), against the f64 reference of
//! `flydsl_testutil::gemm`.
//!
//! Exactness: inputs are multiples of 1/2 in [-1, 1] and K <= 1032, so every partial sum is
//! exact in f32 and, without an activation, C must equal the rounded exact result bit for
//! bit. The activations use approximate exp2/rcp: they are checked to a tolerance.

use fly_gemm::table::{split_k, BK};
use fly_gemm::table::{Tile, TILES};
use fly_gemm::{gemm, gemm_with_split, gemm_with_tile, BLayout, Epilogue, GemmArgs};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Backend, Device, DeviceBuffer, Element, Target};
use flydsl_testutil::gemm::{gemm_ref, Act};
use flydsl_testutil::rng::Rng;

mod odd_view;

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

fn case<T: Element>(dev: &Device, shape: (usize, usize, usize), epi: Epilogue, seed: u64) {
    case_with::<T>(dev, shape, epi, seed, None)
}

/// One call (through the dispatcher, or with a tile and K split count pinned) against the
/// reference.
fn case_with<T: Element>(
    dev: &Device,
    (m, n, k): (usize, usize, usize),
    epi: Epilogue,
    seed: u64,
    pin: Option<(Tile, usize)>,
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
    let s = dev.stream().unwrap();
    let da = DeviceBuffer::from_slice(dev, &a).unwrap();
    let db = DeviceBuffer::from_slice(dev, &b).unwrap();
    let dbias = DeviceBuffer::from_slice(dev, &bias).unwrap();
    let mut dc = DeviceBuffer::from_slice(dev, &vec![T::from_f32(f32::NAN); m * n]).unwrap();
    let args = GemmArgs {
        m,
        n,
        k,
        epilogue: epi,
        ..Default::default()
    };
    let bias_arg = epi.has_bias().then_some(&dbias);
    match pin {
        None => gemm(&s, &da, &db, bias_arg, &mut dc, args),
        Some((t, 1)) => gemm_with_tile(&s, &da, &db, bias_arg, &mut dc, args, t),
        Some((t, sp)) => gemm_with_split(&s, &da, &db, bias_arg, &mut dc, args, t, sp),
    }
    .unwrap();
    let c = dc.to_vec().unwrap();
    for i in 0..m {
        for j in 0..n {
            let (got, w) = (c[i * n + j].to_f32() as f64, want[i * n + j]);
            let ctx = || {
                format!(
                    "{} {:?} {m}x{n}x{k} {epi:?} {pin:?}: C[{i}][{j}] = {got}, want {w}",
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
                // Output rounding (2^-8 for bf16) plus the approximate exp2 / rcp.
                assert!((got - w).abs() <= 1e-2 * w.abs() + 1e-3, "{}", ctx());
            }
        }
    }
}

#[test]
fn exact_at_ragged_shapes_in_both_dtypes() {
    for dev in devices() {
        // (33, 75, 72): an odd N, so the epilogue stores element by element (pairs need
        // an even row stride); the others store column pairs.
        let shapes = [
            ((200, 300, 392), 1),
            ((1, 8, 8), 2),
            ((33, 16, 72), 3),
            ((33, 75, 72), 6),
        ];
        for (shape, seed) in shapes {
            case::<bf16>(&dev, shape, Epilogue::None, seed);
            case::<f16>(&dev, shape, Epilogue::Bias, seed + 10);
        }
        if dev.backend() != Backend::Sim {
            case::<bf16>(&dev, (1000, 520, 1032), Epilogue::None, 4);
            case::<bf16>(&dev, (4096, 4096, 1024), Epilogue::None, 5);
        }
    }
}

#[test]
fn every_tile_config_is_exact_at_ragged_shapes() {
    // M past one 64- and 128-row tile, N a multiple of 8 but of no tile's N, K past one
    // 64-element stage; M in {1, 16, 33} too.
    for dev in devices() {
        for (i, tile) in TILES.into_iter().enumerate() {
            let seed = 40 + 10 * i as u64;
            for (j, shape) in [(1, 80, 72), (130, 264, 200), (16, 40, 8), (33, 16, 136)]
                .into_iter()
                .enumerate()
            {
                let s = seed + j as u64;
                case_with::<bf16>(&dev, shape, Epilogue::None, s, Some((tile, 1)));
                case_with::<f16>(&dev, shape, Epilogue::BiasRelu, s + 5, Some((tile, 1)));
            }
            if dev.backend() != Backend::Sim {
                // 11 x 15 tiles: more than the H200's 132 SMs, so some walk two.
                let (rows, cols) = (tile.c_rows() as usize, tile.c_cols() as usize);
                let shape = (10 * rows + 3, 14 * cols + 8, 200);
                case_with::<bf16>(&dev, shape, Epilogue::Bias, seed + 9, Some((tile, 1)));
            }
        }
    }
}

#[test]
fn split_k_is_exact_for_every_tile_and_split_count() {
    // (shape, split counts): K of 8, 4 and 9 stages of 64 with a ragged last stage, split
    // evenly, unevenly (3 of 8: 3 + 3 + 2; 3 of 9) and into one-stage splits; M and N
    // ragged for every tile. The partial sums of halves are exact, so C is bit for bit.
    let cases = [
        ((1, 80, 456), &[2, 3, 8][..]),
        ((5, 75, 456), &[3][..]),
        ((33, 264, 200), &[2, 4][..]),
        ((130, 16, 520), &[3][..]),
    ];
    for dev in devices() {
        for (i, tile) in TILES.into_iter().enumerate() {
            for (j, &(shape, splits)) in cases.iter().enumerate() {
                for &sp in splits {
                    let s = 500 + 50 * i as u64 + 10 * j as u64 + sp as u64;
                    case_with::<bf16>(&dev, shape, Epilogue::Bias, s, Some((tile, sp)));
                    case_with::<f16>(&dev, shape, Epilogue::BiasGelu, s + 1, Some((tile, sp)));
                }
            }
        }
        // The dispatcher splits these (too few tiles to fill the device).
        for (shape, seed) in [((16, 64, 1024), 90), ((3, 200, 600), 91)] {
            let (m, n, k) = shape;
            assert!(
                split_k(Tile::pick(m, n), m, n, k, BK as usize) > 1,
                "{shape:?}"
            );
            case::<bf16>(&dev, shape, Epilogue::None, seed);
            case::<f16>(&dev, shape, Epilogue::BiasSilu, seed + 1);
        }
        if dev.backend() != Backend::Sim {
            // 8 tiles of 128 x 128 (1024 rows of B): 8 splits of 8 stages.
            case::<bf16>(&dev, (128, 1024, 4096), Epilogue::Bias, 92);
            case_with::<bf16>(
                &dev,
                (128, 1024, 4096),
                Epilogue::None,
                93,
                Some((TILES[1], 5)),
            );
        }
    }
}

#[test]
fn every_epilogue_matches_the_reference() {
    for dev in devices() {
        for epi in Epilogue::ALL {
            case::<bf16>(&dev, (70, 40, 24), epi, 20 + epi.index() as u64);
            case::<f16>(&dev, (70, 40, 24), epi, 30 + epi.index() as u64);
        }
    }
}

/// (what is wrong, args, a, b, bias, the argument the error must name).
type Case<'a> = (
    &'static str,
    GemmArgs,
    &'a DeviceBuffer<bf16>,
    &'a DeviceBuffer<bf16>,
    Option<&'a DeviceBuffer<bf16>>,
    &'static str,
);

#[test]
fn bad_arguments_are_errors_that_write_nothing() {
    let dev = Device::new_sim(Target::Sm90);
    let s = dev.stream().unwrap();
    let (m, n, k) = (4, 8, 16);
    let a = DeviceBuffer::<bf16>::zeroed(&dev, m * k).unwrap();
    let b = DeviceBuffer::<bf16>::zeroed(&dev, n * k).unwrap();
    let bias = DeviceBuffer::<bf16>::zeroed(&dev, n).unwrap();
    let short = DeviceBuffer::<bf16>::zeroed(&dev, 3).unwrap();
    let sentinel = vec![bf16::from_f32(7.0); m * n];
    let ok = GemmArgs {
        m,
        n,
        k,
        ..Default::default()
    };
    let other = Device::new_sim(Target::Sm90);
    let b_other = DeviceBuffer::<bf16>::zeroed(&other, n * k).unwrap();
    let cases: Vec<Case<'_>> = vec![
        (
            "preshuffled B with k * 2 bytes % 64 != 0",
            GemmArgs {
                n: 16,
                b_layout: BLayout::Preshuffled,
                ..ok
            },
            &a,
            &b,
            None,
            "`k`",
        ),
        (
            "preshuffled B with n % 16 != 0",
            GemmArgs {
                k: 32,
                b_layout: BLayout::Preshuffled,
                ..ok
            },
            &a,
            &b,
            None,
            "`n`",
        ),
        ("n = 0", GemmArgs { n: 0, ..ok }, &a, &b, None, "`n`"),
        ("short A", ok, &short, &b, None, "`a`"),
        ("short B", ok, &a, &short, None, "`b`"),
        (
            "missing bias",
            GemmArgs {
                epilogue: Epilogue::BiasRelu,
                ..ok
            },
            &a,
            &b,
            None,
            "`bias`",
        ),
        ("unexpected bias", ok, &a, &b, Some(&bias), "`bias`"),
        (
            "short bias",
            GemmArgs {
                epilogue: Epilogue::Bias,
                ..ok
            },
            &a,
            &b,
            Some(&short),
            "`bias`",
        ),
        ("B on another device", ok, &a, &b_other, None, "`b`"),
        (
            "m too large",
            GemmArgs {
                m: fly_gemm::MAX_DIM + 1,
                ..ok
            },
            &a,
            &b,
            None,
            "`m`",
        ),
    ];
    for (what, args, a, b, bias, arg) in cases {
        let mut c = DeviceBuffer::from_slice(&dev, &sentinel).unwrap();
        let e = gemm(&s, a, b, bias, &mut c, args)
            .expect_err(what)
            .to_string();
        assert!(
            e.starts_with("fly_gemm::gemm: ") && e.contains(arg),
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
    let e = gemm_with_tile(&s, &a, &b, None, &mut c, ok, bad)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("fly_gemm::gemm_with_tile: `tile`"), "{e}");
    assert_eq!(c.to_vec().unwrap(), sentinel);
    // What only the portable kernel takes, with a pinned wgmma tile.
    for (what, args) in [
        ("k % 8 != 0", GemmArgs { k: 12, ..ok }),
        (
            "preshuffled B",
            GemmArgs {
                n: 16,
                k: 32,
                b_layout: BLayout::Preshuffled,
                ..ok
            },
        ),
    ] {
        let (a, b) = (
            DeviceBuffer::<bf16>::zeroed(&dev, args.m * args.k).unwrap(),
            DeviceBuffer::<bf16>::zeroed(&dev, args.n * args.k).unwrap(),
        );
        let mut c2 = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; args.m * args.n]).unwrap();
        let e = gemm_with_tile(&s, &a, &b, None, &mut c2, args, TILES[0])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("fly_gemm::gemm_with_tile: `args."),
            "{what}: {e}"
        );
        assert!(
            c2.to_vec().unwrap().iter().all(|x| *x == bf16::ONE),
            "{what}: C written"
        );
    }
    // Pinned K split counts outside 1..=min(stages, MAX_SPLITS) (k = 16: one stage).
    for (splits, k) in [(0, 16), (2, 16), (fly_gemm::table::MAX_SPLITS + 1, 4096)] {
        let args = GemmArgs { k, ..ok };
        let a = DeviceBuffer::<bf16>::zeroed(&dev, m * k).unwrap();
        let b = DeviceBuffer::<bf16>::zeroed(&dev, n * k).unwrap();
        let mut c = DeviceBuffer::from_slice(&dev, &sentinel).unwrap();
        let e = gemm_with_split(&s, &a, &b, None, &mut c, args, TILES[2], splits)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("fly_gemm::gemm_with_split: `splits`") && e.contains("1..="),
            "{splits} splits of k = {k}: {e}"
        );
        assert_eq!(c.to_vec().unwrap(), sentinel);
    }
    // A dtype without a kernel (f32), on an AMD target.
    let amd = Device::new_sim(Target::Gfx942);
    let s2 = amd.stream().unwrap();
    let a2 = DeviceBuffer::<f32>::zeroed(&amd, m * k).unwrap();
    let b2 = DeviceBuffer::<f32>::zeroed(&amd, n * k).unwrap();
    let sentinel32 = vec![7.0f32; m * n];
    let mut c2 = DeviceBuffer::from_slice(&amd, &sentinel32).unwrap();
    let e = gemm(&s2, &a2, &b2, None, &mut c2, ok)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`T`") && e.contains("bf16"), "{e}");
    assert_eq!(c2.to_vec().unwrap(), sentinel32);
    // m = 0 is a no-op.
    let empty = DeviceBuffer::<bf16>::zeroed(&dev, 0).unwrap();
    let mut c0 = DeviceBuffer::<bf16>::zeroed(&dev, 0).unwrap();
    gemm(&s, &empty, &b, None, &mut c0, GemmArgs { m: 0, ..ok }).unwrap();
}

/// C a view one element into another buffer (2-byte aligned, not 4): the dispatcher takes
/// the portable kernel, which stores element by element, and gets C right; the pinned
/// Hopper launch, whose epilogue stores column pairs, refuses it naming `c` and writes
/// nothing. On every device (the Sim and, where present, the GPU).
#[test]
fn c_views_at_an_odd_element_offset() {
    for dev in devices() {
        let s = dev.stream().unwrap();
        let (m, n, k) = (3usize, 16usize, 16usize);
        let a = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; m * k]).unwrap();
        let b = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(0.5); n * k]).unwrap();
        let (owner, mut c) = odd_view::odd_view(&dev, &s, m * n);
        let args = GemmArgs {
            m,
            n,
            k,
            ..Default::default()
        };
        let e = gemm_with_tile(&s, &a, &b, None, &mut c, args, TILES[2]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("fly_gemm::gemm_with_tile: `c` = address "),
            "{msg}"
        );
        assert!(msg.contains("aligned to two elements"), "{msg}");
        s.synchronize().unwrap();
        odd_view::assert_untouched(&owner);
        gemm(&s, &a, &b, None, &mut c, args).unwrap();
        s.synchronize().unwrap();
        odd_view::assert_view_is(&owner, 8.0, dev.name());
    }
}
