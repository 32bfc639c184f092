//! The grid of one Hopper launch: how many tile workgroups it takes, checked against the
//! grid's `u32` x dimension.

use crate::table::Tile;
use flydsl_rt::validate::Call;
use flydsl_rt::Result;

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
