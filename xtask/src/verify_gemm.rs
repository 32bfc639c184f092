//! GEMM verification: `fly_gemm::gemm` (bf16 / f16, any epilogue, preshuffled or plain B)
//! against the f64 CPU reference of `flydsl_testutil::gemm`.

use crate::elem::{inputs, Dtype};
use crate::verify_outcome::{Outcome, R};
use fly_gemm::{BLayout, Epilogue, GemmArgs};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{DeviceBuffer, Element, Stream};
use flydsl_testutil::compare::{widen, Storage};
use flydsl_testutil::gemm::{gemm_ref, Act};

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
    let got = widen(&dc.to_vec().map_err(e)?);
    let peak = want
        .iter()
        .fold(0f64, |a, &v| a.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    // Output rounding (2^-8 relative for bf16), accumulation order and the approximate
    // exp2 / rcp of the activations.
    let (rtol, atol) = (1e-2, 1e-3 * peak);
    let (mut max_abs, mut worst) = (0f64, None);
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
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
