//! The portable kernel's 8-bit form (`fly_gemm::gemm_scaled` on the AMD targets, and on sm90
//! for what the wgmma kernel refuses) on the Sim of every target, memcheck, racecheck and
//! initcheck on: each target's fp8 format (e4m3fnuz on gfx942, e4m3fn elsewhere) and int8,
//! bf16 and f16 output, every config of `PORTABLE_CONFIGS8` pinned with
//! `gemm_scaled_with_config`, plain and preshuffled B, M in {1, 16, 33}, N a multiple of 16
//! but not of the tile, K not a multiple of tile_k (and K % 16 != 0 for plain B: the scalar
//! variant), every epilogue; the case and its tolerance are `common/mod.rs`.

mod common;

use common::{case_with, Pin};
use fly_gemm::{BLayout, Epilogue, QuantElement, PORTABLE_CONFIGS8};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, Target, F8E4M3FN, F8E4M3FNUZ};

const TARGETS: [Target; 5] = [
    Target::Gfx942,
    Target::Gfx950,
    Target::Gfx1201,
    Target::Gfx1250,
    Target::Sm90,
];

/// Cases of one target with its fp8 type `Q8`, both input types alternating.
fn on_target<Q8: QuantElement + Default + Clone>(t: Target) {
    let dev = Device::new_sim(t);
    for (ci, cfg) in PORTABLE_CONFIGS8.into_iter().enumerate() {
        let pin = Pin::Config(cfg);
        for (mi, m) in [1usize, 16, 33].into_iter().enumerate() {
            let seed = (ci * 10 + mi) as u64;
            let plain = BLayout::Plain;
            // Plain, k % 16 != 0 (rows not 16-byte aligned: the scalar variant).
            case_with::<i8, bf16>(&dev, (m, 48, 37), Epilogue::None, plain, pin, seed);
            // Plain, 128-bit rows, K not a multiple of either tile_k.
            let epi = if mi == 1 {
                Epilogue::BiasGelu
            } else {
                Epilogue::Bias
            };
            case_with::<Q8, f16>(&dev, (m, 144, 80), epi, plain, pin, seed + 100);
            // Preshuffled: K % 64 == 0, not a multiple of 256.
            let pre = BLayout::Preshuffled;
            case_with::<Q8, bf16>(&dev, (m, 48, 192), Epilogue::None, pre, pin, seed + 200);
            if mi == 2 {
                let epi = Epilogue::BiasRelu;
                case_with::<i8, f16>(&dev, (m, 144, 64), epi, pre, pin, seed + 300);
            }
        }
    }
    // The dispatcher: every epilogue, several tiles along M and N, K over several steps.
    for epi in Epilogue::ALL {
        let seed = 400 + epi.index() as u64;
        let (plain, d) = (BLayout::Plain, Pin::Dispatch);
        case_with::<Q8, bf16>(&dev, (20, 32, 64), epi, plain, d, seed);
    }
    let pre = BLayout::Preshuffled;
    case_with::<i8, bf16>(
        &dev,
        (70, 272, 320),
        Epilogue::None,
        pre,
        Pin::Dispatch,
        500,
    );
}

#[test]
fn gfx942_e4m3fnuz_and_int8() {
    on_target::<F8E4M3FNUZ>(Target::Gfx942);
}

#[test]
fn gfx950_e4m3fn_and_int8() {
    on_target::<F8E4M3FN>(Target::Gfx950);
}

#[test]
fn gfx1201_e4m3fn_and_int8() {
    on_target::<F8E4M3FN>(Target::Gfx1201);
}

#[test]
fn gfx1250_e4m3fn_and_int8() {
    on_target::<F8E4M3FN>(Target::Gfx1250);
}

/// On sm90 `gemm_scaled` takes the portable kernel for what wgmma refuses (k % 16 != 0,
/// preshuffled B), and the pinned portable configs run there too.
#[test]
fn sm90_portable_configs_and_fallback() {
    on_target::<F8E4M3FN>(Target::Sm90);
    let dev = Device::new_sim(Target::Sm90);
    let (plain, d) = (BLayout::Plain, Pin::Dispatch);
    case_with::<F8E4M3FN, bf16>(&dev, (33, 48, 40), Epilogue::Bias, plain, d, 600);
    case_with::<i8, f16>(&dev, (17, 160, 7), Epilogue::None, plain, d, 601);
    let pre = BLayout::Preshuffled;
    case_with::<F8E4M3FN, bf16>(&dev, (5, 64, 128), Epilogue::BiasSilu, pre, d, 602);
}

/// Every target's kernels exist for every config, input type and B read (the build declares
/// what the dispatcher looks up).
#[test]
fn every_target_reads_its_fp8_format() {
    for t in TARGETS {
        let fp8 = if t == Target::Gfx942 {
            fly_gemm::Quant::Fp8Fnuz
        } else {
            fly_gemm::Quant::Fp8
        };
        assert!(fp8.on(t) && fly_gemm::Quant::Int8.on(t), "{t}");
        let other = if fp8 == fly_gemm::Quant::Fp8 {
            fly_gemm::Quant::Fp8Fnuz
        } else {
            fly_gemm::Quant::Fp8
        };
        assert!(!other.on(t), "{t}");
    }
}
