//! The whole-tile copy atoms: a TMA box load (sm_90a) into a 128-byte-swizzled LDS tile.

use super::smem::{smem_sw128, SView};
use super::TileError;
use crate::layout::ComposedLayout;
use crate::val::{c_i32, Val};
use flydsl_ir::ScalarType;

/// A TMA tile copy ([`CopyAtom::Tma`](super::CopyAtom::Tma), sm_90a): one thread loads a
/// whole `rows x cols` box of a row-major global matrix into an LDS tile laid out as
/// [`smem_sw128`]`(rows, cols, elem)` (rows of exactly 128 bytes), and the box's bytes
/// complete a phase of an mbarrier.
///
/// Host side (the tensor map the kernel receives as a tensor parameter), for an `m x k`
/// row-major matrix `a` with row stride `ld` elements (`ld * size` a multiple of 16 bytes):
/// `flydsl_rt::TensorMap::tiled(&a, &[k, m], &[ld], &[cols, rows], TmaSwizzle::B128)`
/// (extents innermost first). Elements outside `m x k` land as zeros, so ragged edges need
/// no guard. The LDS tile must be 1024-byte aligned (`k.lds_aligned(.., 1024)`, stages a
/// multiple of 8 rows apart), as the swizzle is on absolute LDS addresses.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::tile::*;
/// use flydsl_dsl::ir::{ScalarType::{BF16, I8, I64}, Target};
/// KernelBuilder::new("k", Target::Sm90, 128).build(|k| {
///     let map = k.tensor("a_map", I8);
///     let bar = k.lds("bar", I64, 1);
///     let tma = TmaCopy::new(BF16, (64, 64)).unwrap();
///     let s = STensor::new(k.lds_aligned("s", BF16, 64 * 64, 1024), tma.layout(), 1).unwrap();
///     if_(thread_id_x().eq(0), || {
///         nv::mbar_init(bar.ptr(), 1);
///         nv::fence_proxy_async();
///     });
///     barrier();
///     if_(thread_id_x().eq(0), || {
///         tma.issue(map.ptr(), &s.stage(c_i32(0)), bar.ptr(), (block_id_x() * 64, c_i32(0)));
///     });
///     nv::mbar_wait(bar.ptr(), c_i32(0));
/// }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TmaCopy {
    rows: i64,
    cols: i64,
    elem: ScalarType,
    layout: ComposedLayout,
}

impl TmaCopy {
    /// A TMA copy of `rows x cols` boxes of `elem`: `cols * size` must be 128 bytes (the
    /// 128-byte swizzle's row) and `rows` in `1..=256` (the TMA box limit).
    ///
    /// ```
    /// use flydsl_dsl::tile::TmaCopy;
    /// use flydsl_dsl::ir::ScalarType::{BF16, F32};
    /// assert_eq!(TmaCopy::new(BF16, (64, 64)).unwrap().bytes(), 8192);
    /// assert!(TmaCopy::new(F32, (64, 64)).unwrap_err().to_string().contains("TmaCopy::new"));
    /// ```
    pub fn new(elem: ScalarType, (rows, cols): (i64, i64)) -> Result<TmaCopy, TileError> {
        if !(1..=256).contains(&rows) {
            return Err(super::invalid(
                "TmaCopy::new",
                "rows",
                rows,
                "a TMA box has 1 to 256 rows",
            ));
        }
        let layout = smem_sw128(rows, cols, elem).map_err(|_| {
            super::invalid(
                "TmaCopy::new",
                "cols",
                cols,
                format!(
                    "the 128-byte swizzle needs rows of 128 bytes: {} {elem} elements",
                    128 / elem.size_bytes().max(1)
                ),
            )
        })?;
        Ok(TmaCopy {
            rows,
            cols,
            elem,
            layout,
        })
    }
    /// The LDS layout the box lands in ([`smem_sw128`]).
    pub fn layout(&self) -> ComposedLayout {
        self.layout.clone()
    }
    /// Bytes per box (what the mbarrier phase expects).
    pub fn bytes(&self) -> u32 {
        (self.rows * self.cols) as u32 * self.elem.size_bytes()
    }
    /// From one thread: `mbarrier.arrive.expect_tx` of [`TmaCopy::bytes`] on `bar`, then the
    /// TMA load of the box whose first element is `(row0, col0)` (i32, may be negative or
    /// past the end: zeros) of the map at `tmap` into `dst`. Other threads read `dst` after
    /// waiting on `bar`'s phase ([`nv::mbar_wait`](crate::nv::mbar_wait)). `dst` must have
    /// this copy's [`TmaCopy::layout`] (a build error otherwise).
    pub fn issue(&self, tmap: Val, dst: &SView, bar: Val, (row0, col0): (Val, Val)) {
        if dst.layout_string() != self.layout.to_string() {
            super::fail(super::invalid(
                "TmaCopy::issue",
                "dst",
                dst.layout_string(),
                format!(
                    "the box lands as {}: make the STensor with TmaCopy::layout()",
                    self.layout
                ),
            ));
            return;
        }
        crate::nv::mbar_arrive_expect_tx(bar, c_i32(self.bytes() as i32));
        let p = dst.ptr(crate::index::Idx::Lit(0), crate::index::Idx::Lit(0), 1);
        crate::nv::tma_load(tmap, p, bar, &[col0, row0]);
    }
}
