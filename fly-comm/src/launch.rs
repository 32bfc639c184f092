//! Packing and launching one all-reduce kernel: every rank's areas as raw peer pointers
//! (`KernelArgs::raw_tensor`), this rank's outputs as buffers, the scalars in the order of
//! `kernels/allreduce.rs`. Nothing here allocates device memory or waits on the host (on
//! the Sim, whose launches run at once, the status words are read right after).

use crate::config::{Kind, Spec, SIGNAL_WORDS};
use crate::error::{CommError, Result};
use crate::rank::CustomAllReduce;
use flydsl_rt::{Backend, DeviceBuffer, Element, KernelArgs, LaunchConfig, Stream};

/// The fused kernel's extra operands.
pub(crate) struct Fused<'a, T: Element> {
    pub residual: &'a DeviceBuffer<T>,
    pub weight: &'a DeviceBuffer<T>,
    pub residual_out: &'a mut DeviceBuffer<T>,
    pub m: usize,
    pub cols: usize,
    pub eps: f32,
}

/// The descriptor every rank of one call must agree on (checked in the start barrier).
pub(crate) fn descriptor(kind: Kind, dt: flydsl_rt::DType, n: usize) -> i32 {
    let k = match kind {
        Kind::OneStage => 1u32,
        Kind::TwoStage => 2,
        Kind::FusedRmsNorm => 3,
    };
    let d = match dt {
        flydsl_rt::DType::F32 => 1u32,
        flydsl_rt::DType::F16 => 2,
        flydsl_rt::DType::BF16 => 3,
    };
    let mut h = (n as u64 as u32).wrapping_mul(0x9E37_79B1) ^ (n as u64 >> 32) as u32;
    h ^= (k << 28) ^ (d << 24);
    h.wrapping_mul(0x85EB_CA6B) as i32
}

/// Launch `kind` over `n` elements into `out` on `stream` (checked by the caller).
pub(crate) fn launch<T: Element>(
    r: &CustomAllReduce,
    stream: &Stream,
    kind: Kind,
    n: usize,
    out: &mut DeviceBuffer<T>,
    fused: Option<Fused<'_, T>>,
) -> Result<()> {
    let spec = Spec {
        kind,
        world: r.world as u32,
        dt: T::DTYPE,
    };
    let k = crate::kernels::variants(spec).ok_or(CommError::UnsupportedTarget {
        target: r.device.target(),
    })?;
    let ws = r.world;
    let per_rank = if kind == Kind::TwoStage { 3 } else { 2 };
    let tensors = ws * per_rank + 1 + if fused.is_some() { 3 } else { 0 };
    let base = 16 * tensors;
    let mut a = KernelArgs::new(base + if fused.is_some() { 32 } else { 24 });
    let elems = (r.layout.max_bytes / u64::from(T::DTYPE.bytes())) as i64;
    let mut off = 0;
    let mut push = |a: &mut KernelArgs, ptr: u64, len: i64| {
        a.raw_tensor(off, ptr, len);
        off += 16;
    };
    for &b in &r.bases {
        push(&mut a, b, i64::from(SIGNAL_WORDS));
    }
    for &b in &r.bases {
        push(&mut a, b + r.layout.staging, elems);
    }
    if kind == Kind::TwoStage {
        for &b in &r.bases {
            push(&mut a, b + r.layout.scratch, elems);
        }
    }
    a.tensor(off, out);
    let packs = (n / T::DTYPE.vec() as usize) as u64;
    let mut grid = crate::select::grid(packs, r.cfg.max_blocks);
    if let Some(f) = &fused {
        a.tensor(off + 16, f.residual);
        a.tensor(off + 32, f.weight);
        a.tensor(off + 48, &*f.residual_out);
        a.scalar(base + 20, f.m as i32);
        a.scalar(base + 24, f.cols as i32);
        a.scalar(base + 28, f.eps);
        grid = (f.m as u32).clamp(1, r.cfg.max_blocks);
    }
    a.scalar(base, r.timeout_ticks);
    a.scalar(base + 8, r.rank as i32);
    a.scalar(base + 12, n as i32);
    a.scalar(base + 16, descriptor(kind, T::DTYPE, n));
    let cfg = LaunchConfig::linear(grid, kind.threads());
    // SAFETY: the kernel reads `n` elements of every rank's staging area and writes `n` of
    // `out` (and of the fused operands, `m * cols == n`), all checked by the callers against
    // the registered size and the buffers' lengths; the peer areas are live shared memory
    // that this group mapped (peer access or IPC) and keeps until it is dropped.
    unsafe { stream.launch(k, cfg, &a) }?;
    if stream.device().backend() == Backend::Sim {
        r.check(stream)?;
    }
    Ok(())
}
