//! The gfx1250 Tensor Data Mover tile copy: one wave loads a whole row-major tile into LDS.

use super::smem::{smem_row_major, SView};
use super::TileError;
use crate::layout::ComposedLayout;
use crate::mem::Tensor;
use crate::val::{c_i32, vec_of, Val};
use flydsl_ir::ScalarType::{self, I32, I64};

/// A TDM tile copy ([`CopyAtom::Tdm`](super::CopyAtom::Tdm), gfx1250): one wave issues a
/// `tensor_load_to_lds` of a whole `rows x cols` tile of a row-major global matrix into an
/// unswizzled row-major LDS tile ([`TdmCopy::layout`]); elements outside the matrix land as
/// zeros, so ragged edges need no guard.
///
/// The descriptor's constant part comes from the host, like a TMA tensor map: the 12 words
/// of `flydsl_ir::AmdOp::tdm_template(address, element bytes, (rows, cols), ld, (tile rows,
/// tile cols))` in a device buffer of `i32`, passed as a tensor parameter. [`TdmCopy::issue`]
/// completes it in the kernel (predicate, LDS address, the tile's start, its shape) and
/// issues the load (field layout and Sim semantics: `flydsl_ir::TdmDesc`).
///
/// Issue from one wave only (every lane of it, uniform arguments): each wave that runs
/// [`TdmCopy::issue`] loads the tile. The data lands when that wave's
/// [`wait_tensorcnt`](crate::wait_tensorcnt) retires the load; other waves read it after a
/// following barrier.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::tile::*;
/// use flydsl_dsl::ir::{ScalarType::{BF16, I32}, Target};
/// KernelBuilder::new("k", Target::Gfx1250, 64).build(|k| {
///     let desc = k.tensor("a_desc", I32);
///     let tdm = TdmCopy::new(BF16, (32, 64)).unwrap();
///     let s = STensor::new(k.lds("s", BF16, 32 * 64), tdm.layout(), 1).unwrap();
///     if_((thread_id_x() / 32).eq(0), || {
///         tdm.issue(desc, &s.stage(c_i32(0)), (block_id_x() * 32, c_i32(0)));
///         wait_tensorcnt(0);
///     });
///     barrier();
/// }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TdmCopy {
    rows: i64,
    cols: i64,
    elem: ScalarType,
    layout: ComposedLayout,
}

impl TdmCopy {
    /// A TDM copy of `rows x cols` tiles of `elem` (1, 2, 4 or 8 bytes; each extent in
    /// `1..=65535`, the descriptor's 16-bit tile fields).
    ///
    /// ```
    /// use flydsl_dsl::tile::TdmCopy;
    /// use flydsl_dsl::ir::ScalarType::{BF16, I1};
    /// assert!(TdmCopy::new(BF16, (32, 64)).is_ok());
    /// assert!(TdmCopy::new(BF16, (0, 64)).unwrap_err().to_string().contains("TdmCopy::new"));
    /// ```
    pub fn new(elem: ScalarType, (rows, cols): (i64, i64)) -> Result<TdmCopy, TileError> {
        const F: &str = "TdmCopy::new";
        for (arg, v) in [("rows", rows), ("cols", cols)] {
            if !(1..=65535).contains(&v) {
                return Err(super::invalid(F, arg, v, "a TDM tile extent is 1..=65535"));
            }
        }
        if !matches!(elem.size_bytes(), 1 | 2 | 4 | 8) || elem == ScalarType::I1 {
            return Err(super::invalid(
                F,
                "elem",
                elem,
                "the TDM moves 1-, 2-, 4- or 8-byte elements",
            ));
        }
        Ok(TdmCopy {
            rows,
            cols,
            elem,
            layout: smem_row_major(rows, cols)?,
        })
    }
    /// The LDS layout the tile lands in (row-major, no swizzle).
    pub fn layout(&self) -> ComposedLayout {
        self.layout.clone()
    }
    /// Complete the host template in `desc` (12 `i32`) for the tile whose first element is
    /// `(row0, col0)` (i32, non-negative) and issue the load into `dst` (which must have
    /// [`TdmCopy::layout`]; a build error otherwise).
    pub fn issue(&self, desc: Tensor, dst: &SView, (row0, col0): (Val, Val)) {
        if dst.layout_string() != self.layout.to_string() {
            super::fail(super::invalid(
                "TdmCopy::issue",
                "dst",
                dst.layout_string(),
                format!(
                    "the tile lands as {}: make the STensor with TdmCopy::layout()",
                    self.layout
                ),
            ));
            return;
        }
        let w: Vec<Val> = (0..12).map(|i| desc.load(i)).collect();
        let u64_of = |x: Val| x.cast(I64) & 0xffff_ffffi64;
        let es = self.elem.size_bytes() as i64;
        // Global address and row stride (elements), as the template holds them.
        let addr = u64_of(w[2]) | ((u64_of(w[3]) & 0x01ff_ffffi64) << 32i64);
        let stride = u64_of(w[9]) | ((u64_of(w[10]) & 0xffffi64) << 32i64);
        let (r0, c0) = (row0.cast(I64), col0.cast(I64));
        let addr = addr + (r0 * stride + c0) * es;
        // Tensor dims from the tile's start (zero when it starts past the end).
        let dim0 = (u64_of(w[5]).lshr(16i64)) | ((u64_of(w[6]) & 0xffffi64) << 16i64);
        let dim1 = (u64_of(w[6]).lshr(16i64)) | ((u64_of(w[7]) & 0xffffi64) << 16i64);
        let dim0 = (dim0 - c0).max(0i64);
        let dim1 = (dim1 - r0).max(0i64);
        let lo16 = |x: Val| (x & 0xffffi64).cast(I32);
        let hi16 = |x: Val| (x.lshr(16i64) & 0xffffi64).cast(I32);
        let lds =
            crate::nv::lds_addr(dst.ptr(crate::index::Idx::Lit(0), crate::index::Idx::Lit(0), 1));
        let g0 = [
            c_i32(1),
            lds,
            addr.cast(I32),
            ((addr.lshr(32i64) & 0x01ff_ffffi64) | (2i64 << 30)).cast(I32),
        ];
        let size = es.trailing_zeros() as i32;
        let g1 = [
            (w[4] & !(3i32 << 16)) | (size << 16),
            lo16(dim0) << 16,
            hi16(dim0) | (lo16(dim1) << 16),
            hi16(dim1) | c_i32((self.cols as i32) << 16),
            c_i32(self.rows as i32),
            w[9],
            w[10],
            w[11],
        ];
        crate::amd::tensor_load_to_lds(&[vec_of(&g0), vec_of(&g1)]);
    }
}
