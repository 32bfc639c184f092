//! The grid of one Hopper launch: how many tile workgroups it takes, checked against the
//! grid's `u32` x dimension; and the buffer addresses the Hopper kernels take.

use crate::table::Tile;
use flydsl_rt::validate::Call;
use flydsl_rt::{DeviceBuffer, DeviceRepr, Result};

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
                tile.bm, tile.bn
            ),
            "split the GEMM along M",
        )
    })
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
