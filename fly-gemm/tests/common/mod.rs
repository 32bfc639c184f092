//! The 8-bit GEMM's test case shared by `gemm_scaled.rs` (the sm90 wgmma kernel, and CUDA)
//! and `portable8.rs` (the portable kernel on every target's Sim): one call against
//! `flydsl_testutil::gemm::gemm_scaled_ref` on the exact 8-bit values, C starting as NaN so
//! a missed store shows.
//!
//! Tolerance: the kernel sums in f32 (int8: exactly in s32), scales in f32 and rounds once
//! to the output: the output's rounding (2^-8 bf16, 2^-11 f16, relative) plus f32 rounding
//! of the sum and the scaling (2^-20 of the sum of |terms|; 2^-8 for fp8 on sm90, whose
//! tensor cores keep fewer bits: see `case_data`); the activations' approximate
//! exp2 / rcp add 1e-2 relative as in the 16-bit tests.

#![allow(dead_code)]

use fly_gemm::table::Tile;
use fly_gemm::Quant;
use fly_gemm::{
    gemm_scaled, gemm_scaled_with, gemm_scaled_with_config, gemm_scaled_with_split, preshuffle_b,
    quantize_rows, BLayout, Epilogue, GemmArgs, QuantElement, TileConfig,
};
use flydsl_rt::{Device, DeviceBuffer, Element, Target};
use flydsl_testutil::gemm::{gemm_ref, gemm_scaled_ref, Act};
use flydsl_testutil::rng::Rng;

/// Which entry point a case calls.
#[derive(Clone, Copy, Debug)]
pub enum Pin {
    /// `gemm_scaled` (the dispatcher).
    Dispatch,
    /// `gemm_scaled_with(tile)` (the wgmma kernel).
    Tile(Tile),
    /// `gemm_scaled_with_config(config)` (the portable kernel).
    Config(TileConfig),
    /// `gemm_scaled_with_split(tile, splits)` (the wgmma kernel, K split).
    Split(Tile, usize),
}

pub fn act(e: Epilogue) -> Act {
    match e {
        Epilogue::None | Epilogue::Bias => Act::None,
        Epilogue::BiasRelu => Act::Relu,
        Epilogue::BiasSilu => Act::Silu,
        Epilogue::BiasGelu => Act::Gelu,
    }
}

/// Uniform values in [-r, r).
pub fn uniform(rng: &mut Rng, n: usize, r: f32) -> Vec<f32> {
    (0..n)
        .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * r)
        .collect()
}

/// One call through the dispatcher with plain B.
pub fn case<Q: QuantElement + Default + Clone, T: Element>(
    dev: &Device,
    shape: (usize, usize, usize),
    epi: Epilogue,
    seed: u64,
) {
    case_with::<Q, T>(dev, shape, epi, BLayout::Plain, Pin::Dispatch, seed)
}

/// One call (through the entry point `pin` says, with B laid out as `b_layout`) against
/// the reference.
pub fn case_with<Q: QuantElement + Default + Clone, T: Element>(
    dev: &Device,
    shape: (usize, usize, usize),
    epi: Epilogue,
    b_layout: BLayout,
    pin: Pin,
    seed: u64,
) {
    case_data::<Q, T>(dev, shape, epi, b_layout, pin, seed, false)
}

/// [`case_with`] with inputs that are all positive when `positive`: every product adds to
/// the sum, so a sum kept in too few bits over a long K loses the small products and
/// shows (the fp8 promotion of the sm90 kernel).
pub fn case_data<Q: QuantElement + Default + Clone, T: Element>(
    dev: &Device,
    (m, n, k): (usize, usize, usize),
    epi: Epilogue,
    b_layout: BLayout,
    pin: Pin,
    seed: u64,
    positive: bool,
) {
    let mut rng = Rng::new(seed);
    let sign = |v: f32| if positive { v.abs() + 0.05 } else { v };
    // Rows of different magnitudes, so the scales differ per row and column.
    let x: Vec<f32> = uniform(&mut rng, m * k, 1.0)
        .iter()
        .enumerate()
        .map(|(i, &v)| sign(v) * (1 + (i / k) % 7) as f32)
        .collect();
    let w: Vec<f32> = uniform(&mut rng, n * k, 0.5)
        .iter()
        .enumerate()
        .map(|(i, &v)| sign(v) * (1 + (i / k) % 5) as f32)
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
    let b_dev = match b_layout {
        BLayout::Plain => b.clone(),
        BLayout::Preshuffled => preshuffle_b(&b, n, k).unwrap(),
    };
    let db = DeviceBuffer::from_slice(dev, &b_dev).unwrap();
    let dsa = DeviceBuffer::from_slice(dev, &sa).unwrap();
    let dsb = DeviceBuffer::from_slice(dev, &sb).unwrap();
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
    let (sa_, sb_) = (&dsa, &dsb);
    match pin {
        Pin::Dispatch => gemm_scaled(&s, &da, &db, sa_, sb_, bias_arg, &mut dc, args),
        Pin::Tile(t) => gemm_scaled_with(&s, &da, &db, sa_, sb_, bias_arg, &mut dc, args, t),
        Pin::Config(c) => {
            gemm_scaled_with_config(&s, &da, &db, sa_, sb_, bias_arg, &mut dc, args, c)
        }
        Pin::Split(t, sp) => {
            gemm_scaled_with_split(&s, &da, &db, sa_, sb_, bias_arg, &mut dc, args, t, sp)
        }
    }
    .unwrap_or_else(|e| panic!("{} {m}x{n}x{k} {b_layout:?} {pin:?}: {e}", dev.name()));
    let c = dc.to_vec().unwrap();
    // The output's rounding: at most 2^-8 (bf16) / 2^-11 (f16) of the value.
    let eps = if T::DTYPE == flydsl_rt::DType::BF16 {
        2f64.powi(-8)
    } else {
        2f64.powi(-11)
    };
    // fp8 on sm90 keeps fewer bits of its sums (`HOPPER_FP8_SUM_ERR`); everything else
    // sums in f32.
    let hopper_fp8 = Q::QUANT == Quant::Fp8 && dev.target() == Target::Sm90;
    let acc_err = if hopper_fp8 {
        flydsl_testutil::gemm::HOPPER_FP8_SUM_ERR
    } else {
        2f64.powi(-20)
    };
    for i in 0..m {
        for j in 0..n {
            let (got, wv) = (c[i * n + j].to_f32() as f64, want[i * n + j]);
            let sum_err = mag[i * n + j] * sa[i] as f64 * sb[j] as f64 * acc_err;
            let mut tol = eps * wv.abs() + sum_err + 1e-30;
            if act(epi) != Act::None {
                tol += 1e-2 * wv.abs() + 1e-3;
            }
            assert!(
                (got - wv).abs() <= tol,
                "{} {:?} -> {:?} {m}x{n}x{k} {epi:?} {b_layout:?} {pin:?}: C[{i}][{j}] = {got}, \
                 want {wv} (tol {tol})",
                dev.name(),
                Q::QUANT,
                T::DTYPE
            );
        }
    }
}
