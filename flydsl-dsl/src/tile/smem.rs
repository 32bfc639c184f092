//! LDS tensors with swizzled layouts and pipeline stages.

use super::TileError;
use crate::index::Idx;
use crate::layout::{ComposedLayout, Coord, IndexExpr, Layout, Swizzle};
use crate::mem::Lds;
use crate::val::Val;
use flydsl_ir::ScalarType;

fn log2_exact(func: &'static str, arg: &'static str, v: i64) -> Result<u32, TileError> {
    if v > 0 && v & (v - 1) == 0 {
        Ok(v.trailing_zeros())
    } else {
        Err(super::invalid(func, arg, v, "must be a power of two"))
    }
}

/// A `rows x cols` row-major LDS tile of `elem` with the XOR-16 swizzle: the 16-byte chunk
/// `j` of row `r` is stored at chunk `j ^ (r % chunks)`, `chunks = min(cols * size / 16, 8)`
/// (FlyDSL's GEMM swizzle, [`swizzle_xor16`](crate::layout::swizzle_xor16), as a
/// [`Swizzle`] on element offsets). Column vectors of up to 16 bytes stay contiguous.
///
/// ```
/// use flydsl_dsl::tile::smem_xor16;
/// use flydsl_dsl::ir::ScalarType::BF16;
/// let l = smem_xor16(64, 32, BF16)?; // 64-byte rows: 4 chunks
/// assert_eq!(l.to_string(), "Sw<2,3,2> o (64,32):(32,1)");
/// // row 1, column 0 (chunk 0) lands in chunk 1
/// assert_eq!(l.crd2idx(&flydsl_dsl::layout::Coord::from(flydsl_dsl::tup![1, 0]))?, 32 + 8);
/// # Ok::<(), flydsl_dsl::tile::TileError>(())
/// ```
pub fn smem_xor16(rows: i64, cols: i64, elem: ScalarType) -> Result<ComposedLayout, TileError> {
    let f = "smem_xor16";
    let m = log2_exact(f, "16 / element size", 16 / elem.size_bytes() as i64)?;
    let c = log2_exact(f, "cols", cols)?;
    if c < m {
        return Err(super::invalid(
            f,
            "cols",
            cols,
            "a row must hold at least 16 bytes",
        ));
    }
    let bits = (c - m).min(3);
    let sw = Swizzle::new(bits, m, (c - m) as i32)?;
    Ok(ComposedLayout::new(sw, Layout::row_major((rows, cols))?))
}

/// A `rows x cols` row-major LDS tile with the 128-byte swizzle of TMA and wgmma
/// (`CU_TENSOR_MAP_SWIZZLE_128B`, CuTe's `Swizzle<3,4,3>` on byte addresses): rows of
/// exactly 128 bytes; chunk `j` of row `r` at chunk `j ^ (r % 8)`. Needs the tile at a
/// 1024-byte aligned LDS address for the hardware to agree.
///
/// ```
/// use flydsl_dsl::tile::smem_sw128;
/// use flydsl_dsl::ir::ScalarType::BF16;
/// let l = smem_sw128(8, 64, BF16)?;
/// assert_eq!(l.to_string(), "Sw<3,3,3> o (8,64):(64,1)");
/// assert!(smem_sw128(8, 32, BF16).is_err());
/// # Ok::<(), flydsl_dsl::tile::TileError>(())
/// ```
pub fn smem_sw128(rows: i64, cols: i64, elem: ScalarType) -> Result<ComposedLayout, TileError> {
    let size = elem.size_bytes() as i64;
    if cols * size != 128 {
        return Err(super::invalid(
            "smem_sw128",
            "cols * element size",
            cols * size,
            "the 128-byte swizzle needs rows of exactly 128 bytes",
        ));
    }
    let m = 4 - log2_exact("smem_sw128", "element size", size)?;
    Ok(ComposedLayout::new(
        Swizzle::new(3, m, 3)?,
        Layout::row_major((rows, cols))?,
    ))
}

/// A `rows x cols` row-major LDS tile with no swizzle (the identity swizzle): the layout
/// direct-to-LDS loads ([`ThrCopy::copy_direct`](super::ThrCopy::copy_direct)) write, each
/// wave's lanes consecutively.
///
/// ```
/// use flydsl_dsl::tile::smem_row_major;
/// let l = smem_row_major(4, 64)?;
/// assert_eq!(l.crd2idx(&flydsl_dsl::layout::Coord::from(flydsl_dsl::tup![1, 3]))?, 64 + 3);
/// # Ok::<(), flydsl_dsl::tile::TileError>(())
/// ```
pub fn smem_row_major(rows: i64, cols: i64) -> Result<ComposedLayout, TileError> {
    Ok(ComposedLayout::new(
        Swizzle::identity(),
        Layout::row_major((rows, cols))?,
    ))
}

/// An LDS tensor: an LDS array holding `stages` copies of a swizzled `rows x cols` tile
/// layout, one per pipeline stage ([`STensor::stage`]).
#[derive(Clone, Debug)]
pub struct STensor {
    lds: Lds,
    layout: ComposedLayout,
    stage_elems: i64,
    stages: u32,
}

/// One stage of an [`STensor`]: the tile at a (run-time) element offset.
#[derive(Clone, Debug)]
pub struct SView<'a> {
    t: &'a STensor,
    base: Val,
}

impl STensor {
    /// `stages` tiles of `layout` in `lds` (which must hold `stages` times the layout's
    /// cosize, rounded up to the swizzle's period).
    ///
    /// ```
    /// use flydsl_dsl::*;
    /// use flydsl_dsl::tile::{smem_xor16, STensor};
    /// use flydsl_dsl::ir::{ScalarType::BF16, Target};
    /// KernelBuilder::new("k", Target::Gfx950, 64).build(|k| {
    ///     let lay = smem_xor16(16, 32, BF16).unwrap();
    ///     let s = STensor::new(k.lds("a", BF16, STensor::elems(&lay, 2) as u32), lay, 2).unwrap();
    ///     let v = s.stage(c_i32(1));
    ///     v.store(1.into(), 8.into(), splat(cnst(flydsl_dsl::ir::Type::s(BF16), flydsl_dsl::ir::Const::Float(1.0)), 8));
    /// }).unwrap();
    /// ```
    pub fn new(lds: Lds, layout: ComposedLayout, stages: u32) -> Result<STensor, TileError> {
        let need = STensor::elems(&layout, stages);
        if stages == 0 || (lds.len() as i64) < need {
            return Err(super::invalid(
                "STensor::new",
                "lds.len()",
                lds.len(),
                format!("{stages} stage(s) of {layout} need {need} elements (and stages >= 1)"),
            ));
        }
        Ok(STensor {
            lds,
            stage_elems: need / stages as i64,
            layout,
            stages,
        })
    }
    /// Elements an LDS array needs for `stages` stages of `layout`.
    pub fn elems(layout: &ComposedLayout, stages: u32) -> i64 {
        let p = layout.swizzle().period();
        (layout.layout().cosize() + p - 1) / p * p * stages as i64
    }
    /// The number of stages.
    pub fn stages(&self) -> u32 {
        self.stages
    }
    /// The layout of one stage.
    pub fn layout(&self) -> &ComposedLayout {
        &self.layout
    }
    /// Stage `s` (`s < stages`, run-time i32).
    pub fn stage(&self, s: Val) -> SView<'_> {
        SView {
            t: self,
            base: s * self.stage_elems as i32,
        }
    }
}

impl SView<'_> {
    /// The element offset of `(r, c)` from the LDS array's start (for `n`-element vectors).
    pub(crate) fn offset_of(&self, r: Idx, c: Idx, n: u32) -> Val {
        self.offset(r, c, n)
    }
    /// The element offset of `(r, c)` inside one stage, for static coordinates.
    pub(crate) fn lit_offset(&self, r: i64, c: i64) -> Result<i64, TileError> {
        let crd = Coord::Tuple(vec![Coord::Int(Idx::Lit(r)), Coord::Int(Idx::Lit(c))]);
        match self.t.layout.crd2idx(&crd)? {
            Idx::Lit(v) => Ok(v),
            _ => Ok(-1),
        }
    }
    /// The stage's layout, printed (for errors).
    pub(crate) fn layout_string(&self) -> String {
        self.t.layout.to_string()
    }
    /// The LDS array.
    pub(crate) fn lds(&self) -> &crate::mem::Lds {
        &self.t.lds
    }
    fn offset(&self, r: Idx, c: Idx, n: u32) -> Val {
        // Vectors must not straddle a swizzled chunk.
        if n > 1
            && n as i64 > 1 << self.t.layout.swizzle().base()
            && self.t.layout.swizzle().bits() > 0
        {
            super::fail(super::invalid(
                "SView::load/store",
                "vector elements",
                n,
                format!(
                    "wider than the swizzle's contiguous chunk of {}",
                    self.t.layout
                ),
            ));
        }
        let crd = Coord::Tuple(vec![Coord::Int(r), Coord::Int(c)]);
        let off = self.t.layout.crd2idx(&crd).unwrap_or_else(|e| {
            super::fail(e.into());
            Idx::Lit(0)
        });
        off.add(&Idx::Dyn(self.base)).val()
    }
    /// `n` elements at `(r, c ..)`.
    pub fn load(&self, r: Idx, c: Idx, n: u32) -> Val {
        self.t.lds.load_vec(
            self.offset(r, c, n),
            n,
            super::global::align(self.elem(), n),
        )
    }
    /// The LDS pointer to the `n`-element vector at `(r, c ..)` (for async copies).
    pub(crate) fn ptr(&self, r: Idx, c: Idx, n: u32) -> Val {
        self.t.lds.ptr_at(self.offset(r, c, n))
    }
    /// Store `v` at `(r, c ..)`.
    pub fn store(&self, r: Idx, c: Idx, v: Val) {
        let off = self.offset(r, c, v.lanes());
        self.t
            .lds
            .store_aligned(off, v, super::global::align(v.elem(), v.lanes()));
    }
    pub(crate) fn elem(&self) -> ScalarType {
        self.t.lds.elem()
    }
}
