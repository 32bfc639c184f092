//! Helpers shared by the integration tests: random inputs, one call of the dense or varlen
//! API on a device, and the comparison with `flydsl_testutil::attn`.

#![allow(dead_code)]

use fly_attn::{
    flash_attn_fwd_with, flash_attn_varlen_fwd_with, AttnArgs, AttnKernel, CuSeqlens, VarlenArgs,
};
use flydsl_rt::{Device, DeviceBuffer, Element, Result};
use flydsl_testutil::attn::{assert_lse, assert_out, attn_ref, AttnShape};
use flydsl_testutil::compare::{cast_vec, widen, Storage};
use flydsl_testutil::rng::Rng;

/// A dtype usable both by the kernels and by the reference helpers.
pub trait Dt: Element + Storage {}
impl<T: Element + Storage> Dt for T {}

/// The kernel's results in f64.
pub struct Got {
    pub out: Vec<f64>,
    pub lse: Vec<f64>,
}

/// Random q, k, v (`randn * scale`) rounded to `T`.
/// The dense call's arguments of shape `s` with `splits`.
pub fn dense_args(s: &AttnShape, splits: Option<usize>) -> AttnArgs {
    AttnArgs {
        batch: s.batch,
        seqlen_q: s.seqlen_q,
        seqlen_kv: s.seqlen_kv,
        heads_q: s.heads_q,
        heads_kv: s.heads_kv,
        head_dim: s.head_dim,
        causal: s.causal,
        softmax_scale: s.scale.map(|x| x as f32),
        num_kv_splits: splits,
    }
}

/// The varlen call's arguments of shape `s` (its lengths the maxima) with `splits`.
pub fn varlen_args(s: &AttnShape, splits: Option<usize>) -> VarlenArgs {
    VarlenArgs {
        max_seqlen_q: s.seqlen_q,
        max_seqlen_kv: s.seqlen_kv,
        heads_q: s.heads_q,
        heads_kv: s.heads_kv,
        head_dim: s.head_dim,
        causal: s.causal,
        softmax_scale: s.scale.map(|x| x as f32),
        num_kv_splits: splits,
    }
}

pub fn inputs<T: Dt>(s: &AttnShape, seed: u64, scale: f32) -> (Vec<T>, Vec<T>, Vec<T>) {
    let mut r = Rng::new(seed);
    let mut g = |n: usize| -> Vec<T> {
        cast_vec(
            &r.randn(n)
                .into_iter()
                .map(|x| x * scale)
                .collect::<Vec<_>>(),
        )
    };
    (g(s.q_len()), g(s.kv_len()), g(s.kv_len()))
}

/// Run `s` on `dev` with `splits` (None: automatic) and return out and LSE.
pub fn run<T: Dt>(
    dev: &Device,
    s: &AttnShape,
    q: &[T],
    k: &[T],
    v: &[T],
    splits: Option<usize>,
) -> Result<Got> {
    run_with(dev, s, q, k, v, splits, AttnKernel::Auto, true)
}

/// [`run`] on `kernel`, with or without the LSE (`Got::lse` is then empty). out and the
/// LSE start as NaN: every element the call must write is checked to be written.
#[allow(clippy::too_many_arguments)]
pub fn run_with<T: Dt>(
    dev: &Device,
    s: &AttnShape,
    q: &[T],
    k: &[T],
    v: &[T],
    splits: Option<usize>,
    kernel: AttnKernel,
    with_lse: bool,
) -> Result<Got> {
    let st = dev.stream()?;
    let (qd, kd, vd) = (
        DeviceBuffer::from_slice(dev, q)?,
        DeviceBuffer::from_slice(dev, k)?,
        DeviceBuffer::from_slice(dev, v)?,
    );
    let mut out =
        DeviceBuffer::from_slice(dev, &vec![<T as Element>::from_f32(f32::NAN); s.q_len()])?;
    let mut lse_buf = DeviceBuffer::from_slice(dev, &vec![f32::NAN; s.lse_len()])?;
    let lse = with_lse.then_some(&mut lse_buf);
    match &s.cu_seqlens {
        None => {
            let a = dense_args(s, splits);
            flash_attn_fwd_with(&st, &qd, &kd, &vd, &mut out, lse, &a, kernel)?;
        }
        Some((cq, ck)) => {
            let a = varlen_args(s, splits);
            // q offsets from the host, kv offsets from a device buffer: both paths run.
            let ckd = DeviceBuffer::from_slice(dev, ck)?;
            flash_attn_varlen_fwd_with(
                &st,
                &qd,
                &kd,
                &vd,
                &mut out,
                lse,
                CuSeqlens::Host(cq),
                CuSeqlens::Device(&ckd),
                &a,
                kernel,
            )?;
        }
    }
    let lse = if with_lse {
        lse_buf.to_vec()?.into_iter().map(f64::from).collect()
    } else {
        assert!(
            lse_buf.to_vec()?.iter().all(|x| x.is_nan()),
            "the LSE buffer was written although none was passed"
        );
        Vec::new()
    };
    Ok(Got {
        out: widen(&out.to_vec()?),
        lse,
    })
}

/// Run and compare with the f64 reference (kernels.md tolerances); returns the results.
pub fn check<T: Dt>(dev: &Device, s: &AttnShape, splits: Option<usize>, seed: u64) -> Got {
    check_with::<T>(dev, s, splits, seed, AttnKernel::Auto)
}

/// [`check`] on `kernel`.
pub fn check_with<T: Dt>(
    dev: &Device,
    s: &AttnShape,
    splits: Option<usize>,
    seed: u64,
    kernel: AttnKernel,
) -> Got {
    let (q, k, v) = inputs::<T>(s, seed, 1.0);
    let got = run_with(dev, s, &q, &k, &v, splits, kernel, true)
        .unwrap_or_else(|e| panic!("{:?} on {} ({kernel:?}): {e}", s, dev.target()));
    let want = attn_ref(s, &widen(&q), &widen(&k), &widen(&v));
    let what = format!(
        "{} {} {:?} splits {splits:?} {kernel:?}",
        dev.target(),
        T::DTYPE,
        s
    );
    assert_out(&what, &got.out, &want.out, s.head_dim);
    assert_lse(&what, T::DTYPE.name(), &got.lse, &want.lse);
    got
}

/// The sm_90 CUDA device, or `None` after reporting why it cannot be used (no CUDA backend or
/// device, or a build without the sm90 code objects) through `flydsl_testutil::gpu::skip`,
/// which fails where `FLYDSL_REQUIRE_GPU` is set.
pub fn cuda_sm90_device() -> Option<Device> {
    use flydsl_rt::{Backend, Target};
    use flydsl_testutil::gpu;
    let dev = match Device::enumerate(Backend::Cuda) {
        Ok(list) => list.into_iter().find(|d| d.target() == Target::Sm90),
        Err(e) => {
            gpu::skip(&format!("no CUDA device ({e})"));
            return None;
        }
    };
    let Some(dev) = dev else {
        gpu::skip("no sm90 CUDA device");
        return None;
    };
    let built = fly_attn::kernel_variants()
        .iter()
        .all(|(_, k)| k.built_targets().any(|t| t == Target::Sm90));
    if !built {
        gpu::skip("this build has no sm90 code objects (build with --features sm90)");
        return None;
    }
    Some(dev)
}
