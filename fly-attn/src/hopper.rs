//! The Hopper family's launch: TMA tensor maps over q, k and v, the grid and LDS of
//! [`HopperTile`], one launch of `kernels/wgmma.rs` (no workspace, no combine).

use crate::kernels::HopperFn;
use crate::table::{hopper_map_dims, HopperTile};
use flydsl_rt::{
    DeviceBuffer, Element, LaunchConfig, Launcher, Result, Stream, TensorMap, TmaSwizzle,
};

/// One dense call, validated (`dispatch::hopper_mismatch` accepted it).
pub(crate) struct Shape {
    pub batch: usize,
    pub seqlen_q: usize,
    pub seqlen_kv: usize,
    pub heads_q: usize,
    pub heads_kv: usize,
    /// The head dim's tiling.
    pub tile: HopperTile,
    pub scale: f32,
}

/// Launch `launcher` (the Hopper kernel of `s`'s head dim and mask for `T`) on `s`
/// (`batch, seqlen_q >= 1`).
///
/// # Safety
/// `out` holds `batch * seqlen_q * heads_q * head_dim` elements and the LSE (if any)
/// `batch * heads_q * seqlen_q`. (q, k and v are read through tensor maps whose extents
/// `TensorMap::tiled` checks against the buffers.)
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch<T: Element>(
    stream: &Stream,
    launcher: &Launcher<usize, HopperFn<T>>,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    lse: Option<&mut DeviceBuffer<f32>>,
    s: &Shape,
) -> Result<()> {
    let dev = stream.device();
    let tile = s.tile;
    let u = |x: usize| x as u64;
    let (qd, qs, qb) = hopper_map_dims(
        u(s.batch),
        u(s.seqlen_q),
        u(s.heads_q),
        u64::from(tile.head_dim()),
        tile.block_m(),
    );
    let (kd, ks, kb) = hopper_map_dims(
        u(s.batch),
        u(s.seqlen_kv),
        u(s.heads_kv),
        u64::from(tile.head_dim()),
        tile.block_n(),
    );
    let q_map = TensorMap::tiled(q, &qd, &qs, &qb, TmaSwizzle::B128)?;
    let k_map = TensorMap::tiled(k, &kd, &ks, &kb, TmaSwizzle::B128)?;
    let v_map = TensorMap::tiled(v, &kd, &ks, &kb, TmaSwizzle::B128)?;
    // batch, heads_q <= 65535 and seqlen_q < 2^31 (dispatch::hopper_mismatch).
    let grid = tile.grid(s.batch as u32, s.seqlen_q as u32, s.heads_q as u32);
    let cfg = LaunchConfig {
        grid,
        ..LaunchConfig::linear(1, tile.threads())
    }
    .with_dynamic_lds(tile.lds_bytes());
    let mut dummy_lse = DeviceBuffer::<f32>::zeroed(dev, 1)?;
    let write_lse = lse.is_some();
    let lse = match lse {
        Some(l) => l,
        None => &mut dummy_lse,
    };
    let i = |x: usize| x as i32;
    // SAFETY: the maps describe q, k and v exactly (TensorMap::tiled checks the extents
    // against the buffers; TMA zero-fills past them); out and the LSE hold their shapes'
    // elements (the caller's contract) and the kernel stores only rows < seqlen_q of heads
    // < heads_q; without an LSE the kernel never writes the dummy.
    unsafe {
        (launcher.launch)(
            stream,
            cfg,
            q_map.buffer(),
            k_map.buffer(),
            v_map.buffer(),
            out,
            lse,
            i(s.seqlen_q),
            i(s.seqlen_kv),
            i(s.heads_q),
            i(s.heads_kv),
            s.scale * std::f32::consts::LOG2_E,
            i32::from(write_lse),
        )
    }?;
    // The maps' device buffers are freed when they drop, after the stream's work that uses
    // them (device memory is stream-ordered).
    Ok(())
}
