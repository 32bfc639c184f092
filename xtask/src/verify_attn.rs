//! `cargo xtask verify attention --batch B --seqlen-q SQ --seqlen-kv SKV --heads HQ
//! --kv-heads HKV --head-dim D [--causal] [--splits N] [--varlen L1,L2,...] [--lse]
//! [--kernel auto|portable|hopper] --dtype bf16|f16|fp8`: one fly-attn call
//! (`flash_attn_fwd_with` / `flash_attn_varlen_fwd_with` on the chosen kernel family,
//! default `auto`) against the f64 reference of `flydsl_testutil::attn` (max abs error,
//! every row's cosine, LSE atol). With `--varlen` the lengths are the per-sequence
//! lengths, used for q and kv (`--batch` and the seqlens are then ignored). `--kernel
//! hopper` where that kernel does not apply (not sm90, varlen, a head dim other than 64,
//! 128, 256, split-K) is fly-attn's error. `--dtype fp8` quantizes the random inputs to
//! e4m3fn per tensor (descale = amax / 448), calls `flash_attn_fp8_fwd_with` /
//! `flash_attn_varlen_fp8_fwd_with` (bf16 out) and compares with the reference on the
//! dequantized inputs at the fp8 tolerances (`--kernel hopper` is fly-attn's error).

use crate::elem::Dtype;
use crate::verify_outcome::{Outcome, R};
use fly_attn::{
    flash_attn_fp8_fwd_with, flash_attn_fwd_with, flash_attn_varlen_fp8_fwd_with,
    flash_attn_varlen_fwd_with, AttnArgs, AttnKernel, CuSeqlens, Fp8Descales, VarlenArgs,
};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::sim::fp8::{e4m3fn_to_f32, f32_to_e4m3fn};
use flydsl_rt::{DeviceBuffer, Element, Stream, F8E4M3FN};
use flydsl_testutil::attn::{
    attn_ref, check_out, lse_atol, lse_err, out_tolerance, AttnRef, AttnShape,
};
use flydsl_testutil::compare::{cast_vec, widen, Storage};
use flydsl_testutil::rng::Rng;

/// The attention options of `verify`.
#[derive(clap::Args, Debug, Clone)]
pub struct AttnOpts {
    /// Sequences (dense).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Queries per sequence (dense).
    #[arg(long, default_value_t = 128)]
    seqlen_q: usize,
    /// Keys per sequence (dense).
    #[arg(long, default_value_t = 128)]
    seqlen_kv: usize,
    /// Query heads.
    #[arg(long, default_value_t = 1)]
    heads: usize,
    /// Key/value heads (defaults to --heads).
    #[arg(long)]
    kv_heads: Option<usize>,
    /// Head dimension (a multiple of 32 up to 256).
    #[arg(long, default_value_t = 64)]
    head_dim: usize,
    /// Bottom-right aligned causal mask.
    #[arg(long)]
    causal: bool,
    /// Key splits (default: automatic).
    #[arg(long)]
    splits: Option<usize>,
    /// Packed varlen: per-sequence lengths, used for q and kv (e.g. `17,0,65`).
    #[arg(long)]
    varlen: Option<String>,
    /// Also compare the LSE.
    #[arg(long)]
    lse: bool,
    /// The kernel family: the dispatcher's choice, or one pinned.
    #[arg(long, value_enum, default_value_t = Kernel::Auto)]
    kernel: Kernel,
}

/// `--kernel`: fly-attn's `AttnKernel`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// `AttnKernel::Auto` (what `flash_attn_fwd` runs).
    Auto,
    /// `AttnKernel::Portable`: the tile-layer kernel, every target.
    Portable,
    /// `AttnKernel::Hopper`: the sm90 wgmma + TMA kernel (dense, D 64/128/256, one split).
    Hopper,
}

impl From<Kernel> for AttnKernel {
    fn from(k: Kernel) -> AttnKernel {
        match k {
            Kernel::Auto => AttnKernel::Auto,
            Kernel::Portable => AttnKernel::Portable,
            Kernel::Hopper => AttnKernel::Hopper,
        }
    }
}

fn e(x: flydsl_rt::Error) -> String {
    x.to_string()
}

/// The problem `o` describes.
fn shape_of(o: &AttnOpts) -> R<AttnShape> {
    let hkv = o.kv_heads.unwrap_or(o.heads);
    Ok(match &o.varlen {
        Some(l) => {
            let lens: Vec<usize> = l
                .split(',')
                .map(|x| x.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("--varlen `{l}`: expected comma-separated lengths"))?;
            AttnShape::varlen(&lens, &lens, o.heads, hkv, o.head_dim, o.causal)
        }
        None => AttnShape::dense(
            o.batch,
            o.seqlen_q,
            o.seqlen_kv,
            o.heads,
            hkv,
            o.head_dim,
            o.causal,
        ),
    })
}

/// The dense and varlen arguments of `o` for `shape`.
fn args_of(o: &AttnOpts, shape: &AttnShape) -> (AttnArgs, VarlenArgs) {
    let hkv = o.kv_heads.unwrap_or(o.heads);
    (
        AttnArgs {
            batch: o.batch,
            seqlen_q: o.seqlen_q,
            seqlen_kv: o.seqlen_kv,
            heads_q: o.heads,
            heads_kv: hkv,
            head_dim: o.head_dim,
            causal: o.causal,
            softmax_scale: None,
            num_kv_splits: o.splits,
        },
        VarlenArgs {
            max_seqlen_q: shape.seqlen_q,
            max_seqlen_kv: shape.seqlen_kv,
            heads_q: o.heads,
            heads_kv: hkv,
            head_dim: o.head_dim,
            causal: o.causal,
            softmax_scale: None,
            num_kv_splits: o.splits,
        },
    )
}

fn case<T: Element + Storage>(s: &Stream, o: &AttnOpts, dtname: &str) -> R<Outcome> {
    let dev = s.device();
    let shape = shape_of(o)?;
    let (a, va) = args_of(o, &shape);
    let mut r = Rng::new(31);
    let mut g = |n: usize| -> Vec<T> { cast_vec(&r.randn(n)) };
    let (q, k, v) = (g(shape.q_len()), g(shape.kv_len()), g(shape.kv_len()));
    let up = |x: &[T]| DeviceBuffer::from_slice(dev, x).map_err(e);
    let (qd, kd, vd) = (up(&q)?, up(&k)?, up(&v)?);
    let mut out = DeviceBuffer::<T>::zeroed(dev, shape.q_len()).map_err(e)?;
    let mut lse = DeviceBuffer::<f32>::zeroed(dev, shape.lse_len()).map_err(e)?;
    let lse_arg = if o.lse { Some(&mut lse) } else { None };
    match &shape.cu_seqlens {
        None => {
            flash_attn_fwd_with(s, &qd, &kd, &vd, &mut out, lse_arg, &a, o.kernel.into())
                .map_err(e)?;
        }
        Some((cq, ck)) => {
            flash_attn_varlen_fwd_with(
                s,
                &qd,
                &kd,
                &vd,
                &mut out,
                lse_arg,
                CuSeqlens::Host(cq),
                CuSeqlens::Host(ck),
                &va,
                o.kernel.into(),
            )
            .map_err(e)?;
        }
    }
    let want = attn_ref(&shape, &widen(&q), &widen(&k), &widen(&v));
    let got = widen(&out.to_vec().map_err(e)?);
    let lse = lse.to_vec().map_err(e)?;
    Ok(compare(o, &want, &got, &lse, dtname))
}

/// `--dtype fp8`: randn inputs quantized to e4m3fn per tensor (descale = amax / 448).
fn case_fp8(s: &Stream, o: &AttnOpts) -> R<Outcome> {
    let dev = s.device();
    let shape = shape_of(o)?;
    let (a, va) = args_of(o, &shape);
    let mut r = Rng::new(31);
    let mut g = |n: usize| -> (Vec<F8E4M3FN>, f32, Vec<f64>) {
        let x = r.randn(n);
        let amax = x.iter().fold(0f32, |m, &y| m.max(y.abs()));
        let d = if amax > 0.0 { amax / 448.0 } else { 1.0 };
        let codes: Vec<F8E4M3FN> = x.iter().map(|&y| F8E4M3FN(f32_to_e4m3fn(y / d))).collect();
        let real = codes
            .iter()
            .map(|c| f64::from(e4m3fn_to_f32(c.0)) * f64::from(d))
            .collect();
        (codes, d, real)
    };
    let (q, k, v) = (g(shape.q_len()), g(shape.kv_len()), g(shape.kv_len()));
    let up = |x: &[F8E4M3FN]| DeviceBuffer::from_slice(dev, x).map_err(e);
    let (qd, kd, vd) = (up(&q.0)?, up(&k.0)?, up(&v.0)?);
    let sc = |d: f32| DeviceBuffer::from_slice(dev, &[d]).map_err(e);
    let (dq, dk, dv) = (sc(q.1)?, sc(k.1)?, sc(v.1)?);
    let d = Fp8Descales {
        q: &dq,
        k: &dk,
        v: &dv,
    };
    let mut out = DeviceBuffer::<bf16>::zeroed(dev, shape.q_len()).map_err(e)?;
    let mut lse = DeviceBuffer::<f32>::zeroed(dev, shape.lse_len()).map_err(e)?;
    let lse_arg = if o.lse { Some(&mut lse) } else { None };
    let kernel = o.kernel.into();
    match &shape.cu_seqlens {
        None => flash_attn_fp8_fwd_with(s, &qd, &kd, &vd, d, &mut out, lse_arg, &a, kernel),
        Some((cq, ck)) => flash_attn_varlen_fp8_fwd_with(
            s,
            &qd,
            &kd,
            &vd,
            d,
            &mut out,
            lse_arg,
            CuSeqlens::Host(cq),
            CuSeqlens::Host(ck),
            &va,
            kernel,
        ),
    }
    .map_err(e)?;
    let want = attn_ref(&shape, &q.2, &k.2, &v.2);
    let got = widen(&out.to_vec().map_err(e)?);
    let lse = lse.to_vec().map_err(e)?;
    Ok(compare(o, &want, &got, &lse, "fp8"))
}

/// The outcome of `got` (and the LSE with `--lse`) against the reference, with the
/// tolerances of `dtname`.
fn compare(o: &AttnOpts, want: &AttnRef, got: &[f64], lse: &[f32], dtname: &str) -> Outcome {
    let (atol, min_cos) = out_tolerance(dtname);
    let rep = check_out(got, &want.out, o.head_dim);
    let peak = want
        .out
        .iter()
        .fold(0f64, |a, &b| a.max(b.abs()))
        .max(f64::MIN_POSITIVE);
    let mut pass = if rep.pass_with(atol, min_cos) {
        Ok(())
    } else {
        Err(format!(
            "max abs {:.3e} at {}, min row cosine {:.5} at row {}, {} non-finite",
            rep.max_abs, rep.max_at, rep.min_cos, rep.min_row, rep.non_finite
        ))
    };
    let mut tol = format!("max abs < {atol}, row cosine > {min_cos}");
    if o.lse {
        let gl: Vec<f64> = lse.iter().map(|&x| f64::from(x)).collect();
        let (le, at) = lse_err(&gl, &want.lse);
        tol.push_str(&format!(
            ", LSE atol {} (LSE err {le:.3e})",
            lse_atol(dtname)
        ));
        if le > lse_atol(dtname) && pass.is_ok() {
            pass = Err(format!("LSE error {le:.3e} at {at}"));
        }
    }
    Outcome {
        max_abs: rep.max_abs,
        max_rel: rep.max_abs / peak,
        tolerance: tol,
        pass,
    }
}

/// Run the attention check with `dtype` (`bf16`, `f16`, or `fp8`: e4m3fn inputs).
pub fn run(s: &Stream, dtype: &str, dt: Option<Dtype>, o: &AttnOpts) -> R<Outcome> {
    match (dtype, dt) {
        ("fp8", _) => case_fp8(s, o),
        (_, Some(Dtype::BF16)) => case::<bf16>(s, o, "bf16"),
        (_, Some(Dtype::F16)) => case::<f16>(s, o, "f16"),
        _ => Err(format!(
            "attention --dtype {dtype}: expected bf16, f16 or fp8"
        )),
    }
}
