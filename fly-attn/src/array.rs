//! `ndarray` conveniences: copy in, compute on the stream's device, copy out.

use crate::api::AttnArgs;
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, Element, Result, Stream};
use ndarray::{Array3, Array4, ArrayView4};

/// Options of [`flash_attn_array`] (the shape comes from the arrays).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttnOptions {
    /// Bottom-right aligned causal mask.
    pub causal: bool,
    /// Softmax scale; `None` is `1 / sqrt(head_dim)`.
    pub softmax_scale: Option<f32>,
    /// Key splits; `None` picks one.
    pub num_kv_splits: Option<usize>,
}

/// Dense attention of BSHD arrays (any memory layout; non-contiguous views are copied on
/// the host): q `[batch, seqlen_q, heads_q, head_dim]`, k and v `[batch, seqlen_kv,
/// heads_kv, head_dim]`; returns out (like q) and the LSE `[batch, heads_q, seqlen_q]`.
/// Errors as [`crate::flash_attn_fwd`], plus k and v of different shapes or batch / head
/// dims that disagree with q.
///
/// ```
/// use flydsl_rt::{half::bf16, Device, Target};
/// use fly_attn::{flash_attn_array, AttnOptions};
/// let s = Device::sim(Target::Gfx950).stream()?;
/// let q = ndarray::Array4::from_elem((1, 2, 1, 32), bf16::ZERO);
/// let (out, lse) = flash_attn_array(&s, q.view(), q.view(), q.view(), AttnOptions::default())?;
/// assert_eq!(out.dim(), (1, 2, 1, 32));
/// assert!((lse[[0, 0, 0]] - 2f32.ln()).abs() < 1e-5);
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn flash_attn_array<T: Element>(
    stream: &Stream,
    q: ArrayView4<'_, T>,
    k: ArrayView4<'_, T>,
    v: ArrayView4<'_, T>,
    opts: AttnOptions,
) -> Result<(Array4<T>, Array3<f32>)> {
    let call = Call::new("fly_attn::flash_attn_array");
    let (b, sq, hq, d) = q.dim();
    let (kb, skv, hkv, kd) = k.dim();
    if k.dim() != v.dim() {
        return Err(call.error(
            "v",
            format_args!("an array of shape {:?}", v.dim()),
            format_args!("`k` has shape {:?}; k and v must have one shape", k.dim()),
            "pass k and v of one shape",
        ));
    }
    if kb != b || kd != d {
        return Err(call.error(
            "k",
            format_args!("an array of shape {:?}", k.dim()),
            format_args!("q has batch {b} and head_dim {d}; k must match them"),
            "pass k and v as [batch, seqlen_kv, heads_kv, head_dim] with q's batch and head_dim",
        ));
    }
    let dev = stream.device();
    let (qd, kdv, vd) = (
        DeviceBuffer::from_array(dev, q)?,
        DeviceBuffer::from_array(dev, k)?,
        DeviceBuffer::from_array(dev, v)?,
    );
    let mut out = DeviceBuffer::<T>::zeroed(dev, q.len())?;
    let mut lse = DeviceBuffer::<f32>::zeroed(dev, b * hq * sq)?;
    let args = AttnArgs {
        batch: b,
        seqlen_q: sq,
        seqlen_kv: skv,
        heads_q: hq,
        heads_kv: hkv,
        head_dim: d,
        causal: opts.causal,
        softmax_scale: opts.softmax_scale,
        num_kv_splits: opts.num_kv_splits,
    };
    crate::api::flash_attn_fwd_as(
        call,
        stream,
        &qd,
        &kdv,
        &vd,
        &mut out,
        Some(&mut lse),
        &args,
        crate::AttnKernel::Auto,
    )?;
    Ok((out.to_array((b, sq, hq, d))?, lse.to_array((b, hq, sq))?))
}
