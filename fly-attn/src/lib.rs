//! fly-attn: FlashAttention forward for 16-bit inputs (bf16, f16) and OCP fp8 e4m3fn
//! inputs with per-tensor descales (bf16 out), with f32 softmax and accumulation, on
//! gfx942, gfx950, gfx1201, gfx1250 and sm90 (and their Sims).
//!
//! - Dense BSHD ([`flash_attn_fwd`]): q `[batch, seqlen_q, heads_q, head_dim]`, k and v
//!   `[batch, seqlen_kv, heads_kv, head_dim]`, out like q; LSE f32 `[batch, heads_q,
//!   seqlen_q]`.
//! - Packed varlen ([`flash_attn_varlen_fwd`]): q `[total_q, heads_q, head_dim]`, k and v
//!   `[total_kv, heads_kv, head_dim]` with i32 cumulative offsets (host slices or device
//!   buffers, [`CuSeqlens`]); LSE f32 `[heads_q, total_q]`. Zero-length sequences allowed.
//! - MHA, GQA and MQA (`heads_q % heads_kv == 0`: query head `h` reads kv head
//!   `h / (heads_q / heads_kv)`); any sequence lengths, `seqlen_q != seqlen_kv` both ways.
//! - Causal masking is bottom-right aligned: key `j` is visible to query `i` iff
//!   `j <= i + seqlen_kv - seqlen_q`. A query that sees no key (causal with `seqlen_q >
//!   seqlen_kv`, or an empty key sequence) gives zeros and LSE `-inf`; the running max
//!   never subtracts `-inf` from `-inf`, so no NaN.
//! - Softmax scale defaults to `1 / sqrt(head_dim)`; head dims: every multiple of 32 up to
//!   256 (portable tiles 64, 128 and 256: smaller dims run the next tile with zero-padded
//!   columns, [`table::head_tile`]; the Hopper kernel takes 64, 128 and 256 exactly).
//! - Split-K over the keys ([`AttnArgs::num_kv_splits`], automatic when the batch x heads
//!   x query tiles cannot fill the device: [`dispatch::auto_splits`]): partial results go
//!   to an f32 workspace and a combine kernel merges them by their LSEs.
//! - `*_unchecked` entry points skip the buffer-length (and device offset) checks;
//!   [`flash_attn_array`] takes `ndarray` views of any layout.
//! - fp8 ([`flash_attn_fp8_fwd`], [`flash_attn_varlen_fp8_fwd`] and their `_with` forms):
//!   pre-quantized e4m3fn q, k, v ([`flydsl_rt::F8E4M3FN`]) with per-tensor f32 descales
//!   on the device ([`Fp8Descales`]; real value = fp8 * descale): logits scaled by
//!   `softmax_scale * q_descale * k_descale`, `P V` with V dequantized, f32 accumulation,
//!   bf16 out; every layout, mask, GQA/MQA, LSE and split-K as above. The portable kernel
//!   converts q, k, v exactly to bf16 as it stages them into LDS, so its MMAs run at the
//!   bf16 rate (native fp8 MMAs are future work); the Hopper kernel is 16-bit only.
//!
//! Three kernel families ([`dispatch::family`] picks one, [`AttnKernel`] pins one,
//! [`dense_family`] names the choice):
//!
//! - the portable kernel (`kernels/fwd.rs`), one tile-layer description with the target's
//!   native 16-bit matrix atom, on every target, layout and split count;
//! - the split-KV decode kernel (`kernels/decode.rs`), one description for every target
//!   (wave64 and wave32), bf16/f16, dense and varlen: one workgroup per (row group, kv
//!   head, sequence, key split) takes the query heads of its kv head together (so K and V
//!   are read once per kv head), streams K and V with 128-bit loads, several keys per wave
//!   in flight, row dot products reduced by lane shuffles, online softmax and O in f32
//!   registers, and merges its waves through LDS; splits go through the workspace and the
//!   combine kernel ([`dispatch::decode_auto_splits`] picks their number);
//! - the Hopper kernel (`kernels/wgmma.rs`): TMA-fed multi-stage K/V mbarrier pipeline, SS
//!   wgmma for `Q K^T`, online softmax in registers, register-A wgmma for `P V`; sm90 only,
//!   dense BSHD, head dim 64, 128 or 256, one key split ([`dispatch::hopper_mismatch`]).
//!
//! [`flash_attn_fwd`] runs `AttnKernel::Auto`, which picks by the rule of
//! [`dispatch::family`] (the one place that says when the decode and the Hopper kernels
//! are the default: the decode kernel for one query per sequence or at most
//! [`dispatch::DECODE_AUTO_ROWS`] query rows per kv head);
//! [`flash_attn_fwd_with`] and [`flash_attn_varlen_fwd_with`] pin a family. All families
//! have the semantics above; fp8 inputs always run the portable kernel.
//!
//! ```
//! use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target};
//! use fly_attn::{flash_attn_fwd, AttnArgs};
//! let dev = Device::sim(Target::Sm90);
//! let s = dev.stream()?;
//! let mut a = AttnArgs::new(1, 2, 1, 32);
//! a.causal = true;
//! let q = DeviceBuffer::from_slice(&dev, &vec![bf16::ZERO; 2 * 32])?;
//! let v: Vec<bf16> = (0..2 * 32).map(|i| bf16::from_f32((i / 32) as f32)).collect();
//! let v = DeviceBuffer::from_slice(&dev, &v)?;
//! let mut out = DeviceBuffer::<bf16>::zeroed(&dev, 2 * 32)?;
//! let mut lse = DeviceBuffer::<f32>::zeroed(&dev, 2)?;
//! flash_attn_fwd(&s, &q, &q, &v, &mut out, Some(&mut lse), &a)?;
//! let out = out.to_vec()?;
//! assert_eq!((out[0].to_f32(), out[32].to_f32()), (0.0, 0.5)); // row 0 sees key 0 only
//! assert!((lse.to_vec()?[1] - 2f32.ln()).abs() < 1e-5);
//! # Ok::<(), flydsl_rt::Error>(())
//! ```

mod api;
mod array;
pub mod dispatch;
mod hopper;
mod kernels;
pub mod table;

pub use api::{
    dense_family, flash_attn_fp8_fwd, flash_attn_fp8_fwd_with, flash_attn_fwd,
    flash_attn_fwd_unchecked, flash_attn_fwd_with, flash_attn_varlen_fp8_fwd,
    flash_attn_varlen_fp8_fwd_with, flash_attn_varlen_fwd, flash_attn_varlen_fwd_unchecked,
    flash_attn_varlen_fwd_with, AttnArgs, CuSeqlens, Fp8Descales, VarlenArgs, MAX_ROWS,
};
pub use array::{flash_attn_array, AttnOptions};
pub use dispatch::AttnKernel;
/// The workspace's dtype enum (the build script shares `table.rs` through it).
pub use flydsl_rt::DType;
/// The target enum (`table.rs` names it from the crate root).
pub use flydsl_rt::Target;

/// Every kernel of this crate with its name (for structural tests and inspection): the
/// portable forward kernels (bf16, f16 x 3 head tiles), the combine kernels and the fp8
/// forward kernels (e4m3fn inputs, bf16 out, x 3 head tiles:
/// [`table::fwd_fp8_name`]), which exist on every target, then the Hopper kernels
/// ([`hopper_variants`], sm90 only), then the decode kernels ([`decode_variants`], every
/// target).
///
/// ```
/// assert_eq!(fly_attn::kernel_variants().len(), 8 + 3 + 12 + 18);
/// ```
pub fn kernel_variants() -> Vec<(&'static str, &'static flydsl_rt::KernelVariants)> {
    use flydsl_rt::half::{bf16, f16};
    let g = &kernels::generated::FORWARD;
    let c = &kernels::generated::COMBINE;
    g.get::<bf16>()
        .iter()
        .map(|l| l.kernel)
        .chain(g.get::<f16>().iter().map(|l| l.kernel))
        .chain(c.get::<bf16>().iter().map(|l| l.kernel))
        .chain(c.get::<f16>().iter().map(|l| l.kernel))
        .chain(
            kernels::generated::FORWARD_FP8
                .get::<bf16>()
                .iter()
                .map(|l| l.kernel),
        )
        .map(|k| (k.name, k))
        .chain(hopper_variants())
        .chain(decode_variants())
        .collect()
}

/// The split-KV decode kernels with their names (`attn_decode_{bf16,f16}_d{64,128,256}_r{1,4,8}`,
/// [`table::decode_name`]): every target.
///
/// ```
/// let v = fly_attn::decode_variants();
/// assert_eq!(v.len(), 2 * 3 * 3);
/// assert!(v.iter().all(|(n, _)| n.starts_with("attn_decode_")));
/// ```
pub fn decode_variants() -> Vec<(&'static str, &'static flydsl_rt::KernelVariants)> {
    use flydsl_rt::half::{bf16, f16};
    let t = &kernels::generated::DECODE;
    t.get::<bf16>()
        .iter()
        .map(|l| l.kernel)
        .chain(t.get::<f16>().iter().map(|l| l.kernel))
        .map(|k| (k.name, k))
        .collect()
}

/// The Hopper kernels with their names (`attn_wgmma_{bf16,f16}_d{64,128,256}_{full,causal}`,
/// [`table::hopper_name`]): sm90 only (IR always embedded, PTX with `--features sm90`).
///
/// ```
/// let v = fly_attn::hopper_variants();
/// assert_eq!(v.len(), 12);
/// assert!(v.iter().all(|(_, k)| k.for_target(fly_attn::Target::Sm90).is_some()));
/// assert!(v.iter().all(|(_, k)| k.for_target(fly_attn::Target::Gfx942).is_none()));
/// ```
pub fn hopper_variants() -> Vec<(&'static str, &'static flydsl_rt::KernelVariants)> {
    use flydsl_rt::half::{bf16, f16};
    let h = &kernels::generated::HOPPER;
    h.get::<bf16>()
        .iter()
        .map(|l| l.kernel)
        .chain(h.get::<f16>().iter().map(|l| l.kernel))
        .map(|k| (k.name, k))
        .collect()
}
