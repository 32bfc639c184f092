//! The grid of one Hopper launch: how many tile workgroups it takes, checked against the
//! grid's `u32` x dimension and the kernels' i32 stage counter; and the buffer addresses
//! the Hopper kernels take.

use crate::table::Tile;
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, DeviceRepr, Result, Stream};

/// The workgroups of one Hopper launch: `tile`'s tiles of an `m` x `n` C, or the error that
/// they overflow the grid's x dimension.
pub(crate) fn tile_grid(call: &Call<'_>, tile: Tile, m: usize, n: usize) -> Result<u32> {
    let tiles = tile.tiles(m, n);
    u32::try_from(tiles).map_err(|_| {
        call.error(
            "m, n",
            format_args!("{m}, {n}"),
            format_args!(
                "{tiles} tiles of {} x {} exceed the grid's 2^32 - 1 workgroups",
                tile.c_rows(),
                tile.c_cols()
            ),
            "split the GEMM along M",
        )
    })
}

/// The persistent grid of one Hopper launch (`kernels/pipeline.rs`): `tiles` tiles (of
/// [`tile_grid`]) over `splits` K splits (grid y), each split taking `k_stages` stages per
/// tile. One workgroup per SM over all splits, or per tile where there are fewer tiles:
/// every config's LDS (`Tile::lds_bytes`, more than half of an SM's 228 KiB) keeps two
/// workgroups off one SM, so more would only queue. Each workgroup walks
/// `tiles / grid` tiles, rounded up; its count of stages over them must fit the kernels'
/// i32 counter, or this is the error.
///
/// ```text
/// persistent_grid(s, 1024 tiles, 1 split) on an H200 (132 SMs) = 132 workgroups of 7-8 tiles
/// ```
pub(crate) fn persistent_grid(
    call: &Call<'_>,
    stream: &Stream,
    tiles: u32,
    splits: u32,
    k_stages: usize,
) -> Result<u32> {
    let sms = stream.device().compute_units().max(1);
    let grid = tiles.min(sms.div_ceil(splits.max(1))).max(1);
    let walk = (tiles.div_ceil(grid) as usize).saturating_mul(k_stages);
    if walk >= (i32::MAX / 2) as usize {
        return Err(call.error(
            "m, n, k",
            format_args!("{tiles} tiles of {k_stages} K stages over {grid} workgroups"),
            "a workgroup's stages over its tiles must stay below 2^30 (the kernel's i32 \
             stage counter)",
            "split the GEMM along M or N",
        ));
    }
    Ok(grid)
}

/// Whether C is aligned to two of its elements, as the Hopper epilogue's column-pair
/// stores need. Buffers this crate allocates always are; a view of other memory
/// (`DeviceBuffer::from_raw_parts`) may not be, and the dispatchers send it to the portable
/// kernel (element stores).
pub(crate) fn c_pairs_aligned<C: DeviceRepr>(c: &DeviceBuffer<C>) -> bool {
    c.as_device_ptr()
        .is_multiple_of(2 * std::mem::size_of::<C>() as u64)
}

/// The error of a pinned Hopper launch whose C is not aligned to two elements.
pub(crate) fn check_c_pairs<C: DeviceRepr>(call: &Call<'_>, c: &DeviceBuffer<C>) -> Result<()> {
    if c_pairs_aligned(c) {
        return Ok(());
    }
    Err(call.error(
        "c",
        format_args!("address {:#x}", c.as_device_ptr()),
        "the wgmma kernel stores column pairs: C must be aligned to two elements",
        "offset the view of C by an even number of elements, or call the dispatcher \
         (fly_gemm::gemm / gemm_scaled), which takes the portable kernel for it",
    ))
}
