//! `cargo xtask verify <family> --shape MxN[xK] --dtype bf16 --backend sim|cuda|hip
//! [--target gfx942]`: run one kernel on one shape against the CPU reference; print max
//! abs / rel error, the tolerance and PASS/FAIL (the exit code follows).
//! `cargo xtask verify attention --batch B --seqlen-q SQ ... [--kernel auto|portable|hopper]
//! --dtype bf16|f16|fp8` checks one fly-attn call (`verify_attn`; no `--shape`; fp8:
//! e4m3fn inputs quantized per tensor, bf16 out).

use crate::devsel::{pick, DeviceArgs};
use crate::elem::{inputs, parse_dtype, parse_shape, Dtype};
use crate::verify_outcome::{Outcome, R};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{DeviceBuffer, Stream};
use flydsl_testutil::compare::{max_abs_err, widen, Storage};
use std::process::ExitCode;

/// Arguments of `verify`.
#[derive(clap::Args)]
pub struct Args {
    /// Family: softmax, softmax-bwd, rmsnorm, layernorm, gemm, attention.
    family: String,
    /// Shape `MxN` (`MxNxK` for gemm; attention takes its own options instead).
    #[arg(long)]
    shape: Option<String>,
    /// Element type: f32, f16, bf16 (gemm also fp8, int8: 8-bit inputs quantized per row,
    /// bf16 out; fp8 is the device's format, e4m3fnuz on gfx942 and e4m3fn elsewhere;
    /// attention also fp8: e4m3fn inputs quantized per tensor, bf16 out, on every target).
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// gemm: the fused epilogue (none, bias, bias-relu, bias-silu, bias-gelu).
    #[arg(long, default_value = "none")]
    epilogue: String,
    /// gemm: pass B plain row-major instead of preshuffled.
    #[arg(long)]
    plain_b: bool,
    #[command(flatten)]
    dev: DeviceArgs,
    #[command(flatten)]
    attn: crate::verify_attn::AttnOpts,
}

fn e(x: flydsl_rt::Error) -> String {
    x.to_string()
}

fn errors(got: &[f64], want: &[f64]) -> (f64, f64) {
    let w = max_abs_err(got, want);
    let peak = want
        .iter()
        .fold(0f64, |a, &b| a.max(b.abs()))
        .max(f64::MIN_POSITIVE);
    (w.abs_err, w.abs_err / peak)
}

fn softmax<T: fly_softmax::Element + Storage>(
    s: &Stream,
    dt: Dtype,
    m: usize,
    n: usize,
    bwd: bool,
) -> R<Outcome> {
    let dev = s.device();
    let x: Vec<T> = inputs(11, m * n);
    let t = flydsl_testutil::softmax::tolerance(dt.name());
    let args = fly_softmax::SoftmaxArgs { m, n };
    if !bwd {
        let dx = DeviceBuffer::from_slice(dev, &x).map_err(e)?;
        let mut dy = DeviceBuffer::<T>::zeroed(dev, m * n).map_err(e)?;
        fly_softmax::softmax(s, &dx, &mut dy, args).map_err(e)?;
        let got = widen(&dy.to_vec().map_err(e)?);
        let want = flydsl_testutil::softmax::forward(&widen(&x), m, n);
        let (a, r) = errors(&got, &want);
        let pass = flydsl_testutil::softmax::check_forward("softmax", &got, &want, m, n, &t);
        Ok(Outcome {
            max_abs: a,
            max_rel: r,
            tolerance: format!("{t:?}"),
            pass,
        })
    } else {
        let y0 = flydsl_testutil::softmax::forward(&widen(&x), m, n);
        let y: Vec<T> = y0
            .iter()
            .map(|&v| <T as Storage>::from_f32(v as f32))
            .collect();
        let g: Vec<T> = inputs(12, m * n);
        let (dy_, dg) = (
            DeviceBuffer::from_slice(dev, &y).map_err(e)?,
            DeviceBuffer::from_slice(dev, &g).map_err(e)?,
        );
        let mut dx = DeviceBuffer::<T>::zeroed(dev, m * n).map_err(e)?;
        fly_softmax::softmax_backward(s, &dy_, &dg, &mut dx, args).map_err(e)?;
        let got = widen(&dx.to_vec().map_err(e)?);
        let want = flydsl_testutil::softmax::backward(&widen(&y), &widen(&g), m, n);
        let (a, r) = errors(&got, &want);
        let pass = flydsl_testutil::softmax::check_backward("softmax_bwd", &got, &want, &t);
        Ok(Outcome {
            max_abs: a,
            max_rel: r,
            tolerance: format!("{t:?}"),
            pass,
        })
    }
}

fn dispatch(a: &Args, s: &Stream, dt: Dtype, shape: &[usize]) -> R<Outcome> {
    let family = a.family.as_str();
    if family == "gemm" {
        let epi = crate::verify_gemm::parse_epilogue(&a.epilogue)?;
        return crate::verify_gemm::run(s, dt, shape, epi, a.plain_b);
    }
    let (m, n) = (shape[0], shape[1]);
    if family != "mma" && shape.len() != 2 {
        return Err(format!("{family} takes --shape MxN"));
    }
    match (family, dt) {
        ("softmax" | "softmax-bwd", Dtype::F32) => softmax::<f32>(s, dt, m, n, family != "softmax"),
        ("softmax" | "softmax-bwd", Dtype::F16) => softmax::<f16>(s, dt, m, n, family != "softmax"),
        ("softmax" | "softmax-bwd", Dtype::BF16) => {
            softmax::<bf16>(s, dt, m, n, family != "softmax")
        }
        ("rmsnorm" | "layernorm", _) => crate::verify_norm::run(family, s, dt, m, n),
        _ => Err(format!(
            "unknown family `{family}`: expected softmax, softmax-bwd, rmsnorm, layernorm, gemm or attention"
        )),
    }
}

pub fn run(a: Args) -> R<ExitCode> {
    let (o, shape_desc, dtname) = if a.family == "attention" {
        let dt = parse_dtype(&a.dtype).ok();
        let dev = pick(&a.dev)?;
        let s = dev.stream().map_err(e)?;
        let o = crate::verify_attn::run(&s, &a.dtype, dt, &a.attn)?;
        (
            o,
            format!("{:?} on {}", a.attn, dev.name()),
            a.dtype.clone(),
        )
    } else if a.family == "gemm" && matches!(a.dtype.as_str(), "fp8" | "int8") {
        let sh = a
            .shape
            .clone()
            .ok_or("--shape MxNxK is required for gemm")?;
        let shape = parse_shape(&sh)?;
        let epi = crate::verify_gemm::parse_epilogue(&a.epilogue)?;
        let dev = pick(&a.dev)?;
        let s = dev.stream().map_err(e)?;
        let o = crate::verify_gemm::run_scaled(&s, &a.dtype, &shape, epi, a.plain_b)?;
        (o, format!("{sh} on {}", dev.name()), a.dtype.clone())
    } else {
        let sh = a
            .shape
            .clone()
            .ok_or("--shape MxN is required for this family")?;
        let shape = parse_shape(&sh)?;
        let dt = parse_dtype(&a.dtype)?;
        let dev = pick(&a.dev)?;
        let s = dev.stream().map_err(e)?;
        let o = dispatch(&a, &s, dt, &shape)?;
        (o, format!("{sh} on {}", dev.name()), dt.name().to_string())
    };
    println!(
        "{} {} {}: max abs err {:.3e}, max rel err {:.3e}, tolerance {}",
        a.family, dtname, shape_desc, o.max_abs, o.max_rel, o.tolerance
    );
    match o.pass {
        Ok(()) => {
            println!("PASS");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            println!("FAIL: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}
