//! GEMM verification: `fly_gemm::gemm` (bf16 / f16, any epilogue, preshuffled or plain B)
//! and `fly_gemm::gemm_scaled` (fp8 in the device's format or int8, per-row scales from
//! `quantize_rows`, bf16 out) against the f64 CPU references of `flydsl_testutil::gemm`.

use crate::elem::{inputs, Dtype};
use crate::verify_outcome::{Outcome, R};
use fly_gemm::{BLayout, Epilogue, GemmArgs, QuantElement};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{DeviceBuffer, Element, Stream, Target, F8E4M3FN, F8E4M3FNUZ};
use flydsl_testutil::compare::{widen, Storage};
use flydsl_testutil::gemm::{gemm_ref, gemm_scaled_ref, Act};

fn e(x: flydsl_rt::Error) -> String {
    x.to_string()
}

/// Parse `--epilogue`: none, bias, bias-relu, bias-silu, bias-gelu (or relu / silu / gelu).
pub fn parse_epilogue(s: &str) -> R<Epilogue> {
    Ok(match s {
        "none" => Epilogue::None,
        "bias" => Epilogue::Bias,
        "bias-relu" | "bias_relu" | "relu" => Epilogue::BiasRelu,
        "bias-silu" | "bias_silu" | "silu" => Epilogue::BiasSilu,
        "bias-gelu" | "bias_gelu" | "gelu" => Epilogue::BiasGelu,
        _ => {
            return Err(format!(
                "unknown --epilogue `{s}`: expected none, bias, bias-relu, bias-silu or bias-gelu"
            ))
        }
    })
}

fn act(e: Epilogue) -> Act {
    match e {
        Epilogue::None | Epilogue::Bias => Act::None,
        Epilogue::BiasRelu => Act::Relu,
        Epilogue::BiasSilu => Act::Silu,
        Epilogue::BiasGelu => Act::Gelu,
    }
}

fn case<T: Element + Storage>(
    s: &Stream,
    (m, n, k): (usize, usize, usize),
    epi: Epilogue,
    b_layout: BLayout,
) -> R<Outcome> {
    let dev = s.device();
    let a: Vec<T> = inputs(31, m * k);
    let b: Vec<T> = inputs(32, n * k);
    let bias: Vec<T> = inputs(33, n);
    let want = gemm_ref(
        &widen(&a).iter().map(|&x| x as f32).collect::<Vec<_>>(),
        &widen(&b).iter().map(|&x| x as f32).collect::<Vec<_>>(),
        epi.has_bias()
            .then(|| widen(&bias).iter().map(|&x| x as f32).collect::<Vec<_>>())
            .as_deref(),
        m,
        n,
        k,
        act(epi),
    );
    let b_dev = match b_layout {
        BLayout::Plain => b,
        BLayout::Preshuffled => fly_gemm::preshuffle_b(&b, n, k).map_err(e)?,
    };
    let da = DeviceBuffer::from_slice(dev, &a).map_err(e)?;
    let db = DeviceBuffer::from_slice(dev, &b_dev).map_err(e)?;
    let dbias = DeviceBuffer::from_slice(dev, &bias).map_err(e)?;
    let mut dc = DeviceBuffer::from_slice(dev, &vec![<T as Storage>::from_f32(f32::NAN); m * n])
        .map_err(e)?;
    let args = GemmArgs {
        m,
        n,
        k,
        epilogue: epi,
        b_layout,
    };
    fly_gemm::gemm(s, &da, &db, epi.has_bias().then_some(&dbias), &mut dc, args).map_err(e)?;
    compare(&widen(&dc.to_vec().map_err(e)?), &want, n)
}

/// Compare C with the reference: output rounding (2^-8 relative for bf16), accumulation order
/// and the approximate exp2 / rcp of the activations.
fn compare(got: &[f64], want: &[f64], n: usize) -> R<Outcome> {
    let peak = want
        .iter()
        .fold(0f64, |a, &v| a.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    // Output rounding (2^-8 relative for bf16), accumulation order and the approximate
    // exp2 / rcp of the activations.
    let (rtol, atol) = (1e-2, 1e-3 * peak);
    let (mut max_abs, mut worst) = (0f64, None);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let d = (g - w).abs();
        if d.is_nan() || d > max_abs {
            max_abs = if d.is_nan() { f64::INFINITY } else { d };
        }
        if (d.is_nan() || d > rtol * w.abs() + atol) && worst.is_none() {
            worst = Some(format!(
                "C[{}][{}] = {g}, want {w}",
                i / n.max(1),
                i % n.max(1)
            ));
        }
    }
    Ok(Outcome {
        max_abs,
        max_rel: max_abs / peak,
        tolerance: format!("|got - want| <= {rtol:e} |want| + {atol:.3e}"),
        pass: worst.map_or(Ok(()), Err),
    })
}

/// One 8-bit GEMM: inputs quantized per row to `Q`, bf16 output.
fn scaled_case<Q: QuantElement + Default>(
    s: &Stream,
    (m, n, k): (usize, usize, usize),
    epi: Epilogue,
    b_layout: BLayout,
) -> R<Outcome> {
    let dev = s.device();
    let x: Vec<f32> = inputs::<f32>(41, m * k);
    let w: Vec<f32> = inputs::<f32>(42, n * k);
    let bias: Vec<bf16> = inputs(43, n);
    let (a, sa) = fly_gemm::quantize_rows::<Q>(&x, m, k).map_err(e)?;
    let (b, sb) = fly_gemm::quantize_rows::<Q>(&w, n, k).map_err(e)?;
    let deq = |v: &[Q]| v.iter().map(|q| q.dequantize()).collect::<Vec<f32>>();
    let biasf: Vec<f32> = bias.iter().map(|v| v.to_f32()).collect();
    let want = gemm_scaled_ref(
        &deq(&a),
        &deq(&b),
        &sa,
        &sb,
        epi.has_bias().then_some(&biasf[..]),
        m,
        n,
        k,
        act(epi),
    );
    let b_dev = match b_layout {
        BLayout::Plain => b,
        BLayout::Preshuffled => fly_gemm::preshuffle_b(&b, n, k).map_err(e)?,
    };
    let up = |v: &[Q]| DeviceBuffer::from_slice(dev, v).map_err(e);
    let (da, db) = (up(&a)?, up(&b_dev)?);
    let dsa = DeviceBuffer::from_slice(dev, &sa).map_err(e)?;
    let dsb = DeviceBuffer::from_slice(dev, &sb).map_err(e)?;
    let dbias = DeviceBuffer::from_slice(dev, &bias).map_err(e)?;
    let mut dc = DeviceBuffer::from_slice(dev, &vec![bf16::NAN; m * n]).map_err(e)?;
    let args = GemmArgs {
        m,
        n,
        k,
        epilogue: epi,
        b_layout,
    };
    let bias_arg = epi.has_bias().then_some(&dbias);
    fly_gemm::gemm_scaled(s, &da, &db, &dsa, &dsb, bias_arg, &mut dc, args).map_err(e)?;
    compare(&widen(&dc.to_vec().map_err(e)?), &want, n)
}

/// Run one 8-bit GEMM of `shape` (`[m, n, k]`): `dtype` fp8 (e4m3fnuz on gfx942, e4m3fn
/// elsewhere) or int8.
pub fn run_scaled(
    s: &Stream,
    dtype: &str,
    shape: &[usize],
    epi: Epilogue,
    plain_b: bool,
) -> R<Outcome> {
    let [m, n, k] = shape else {
        return Err("gemm takes --shape MxNxK".into());
    };
    let layout = if plain_b {
        BLayout::Plain
    } else {
        BLayout::Preshuffled
    };
    let shape = (*m, *n, *k);
    match (dtype, s.device().target()) {
        ("fp8", Target::Gfx942) => scaled_case::<F8E4M3FNUZ>(s, shape, epi, layout),
        ("fp8", _) => scaled_case::<F8E4M3FN>(s, shape, epi, layout),
        ("int8", _) => scaled_case::<i8>(s, shape, epi, layout),
        _ => Err(format!(
            "gemm takes --dtype fp8, int8, bf16 or f16, not {dtype}"
        )),
    }
}

/// Run one GEMM of `shape` (`[m, n, k]`).
pub fn run(s: &Stream, dt: Dtype, shape: &[usize], epi: Epilogue, plain_b: bool) -> R<Outcome> {
    let [m, n, k] = shape else {
        return Err("gemm takes --shape MxNxK".into());
    };
    let layout = if plain_b {
        BLayout::Plain
    } else {
        BLayout::Preshuffled
    };
    match dt {
        Dtype::BF16 => case::<bf16>(s, (*m, *n, *k), epi, layout),
        Dtype::F16 => case::<f16>(s, (*m, *n, *k), epi, layout),
        _ => Err(format!("gemm takes --dtype bf16 or f16, not {}", dt.name())),
    }
}
