//! Copy atoms, tiled copies and `copy`.

use super::global::GTile;
use super::smem::SView;
use super::tv::{add, Tv};
use super::{Frag, TileError};
use crate::index::Idx;
use crate::layout::Layout;
use crate::val::Val;
use flydsl_ir::{ScalarType, Target};

/// How one thread moves one vector.
///
/// The register-staged atoms (`Vec*`, `Buffer128`), sm_90 `cp.async` (`CpAsync`) and the
/// AMD direct-to-LDS loads (`DirectToLds`, `DirectToLds32`) are per-thread atoms of a
/// [`TiledCopy`]. `Tma` and `Tdm` move a whole tile from one instruction: they are issued
/// through [`TmaCopy`](super::TmaCopy) and [`TdmCopy`](super::TdmCopy), not a
/// [`TiledCopy`] (whose constructor refuses them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CopyAtom {
    /// 128-bit vector load/store through a pointer (buffer resource on AMD global memory).
    Vec128,
    /// 64-bit vector.
    Vec64,
    /// 32-bit vector.
    Vec32,
    /// One element.
    Scalar,
    /// AMD 128-bit buffer load/store (the AMD spelling of [`CopyAtom::Vec128`] on global
    /// memory; global tiles on AMD always go through their buffer resource).
    Buffer128,
    /// gfx950 `buffer_load_dwordx4 ... lds`: 16 bytes per lane, global to LDS without
    /// registers ([`ThrCopy::copy_direct`]).
    DirectToLds,
    /// gfx942 / gfx950 `buffer_load_dword ... lds`: 4 bytes per lane
    /// ([`ThrCopy::copy_direct`]).
    DirectToLds32,
    /// sm_90 `cp.async` of 16 bytes per access, global to LDS without registers; ragged
    /// edges are zero-filled by the copy itself (see [`ThrCopy::copy_async`]).
    CpAsync,
    /// TMA tile load (sm_90a): one thread loads the whole box ([`TmaCopy`](super::TmaCopy)).
    Tma,
    /// gfx1250 Tensor Data Mover: one wave loads the whole tile ([`TdmCopy`](super::TdmCopy)).
    Tdm,
}

impl CopyAtom {
    /// Bits one thread moves per access (0 for `Tma` and `Tdm`, which move whole tiles).
    pub fn bits(self, elem: ScalarType) -> u32 {
        match self {
            CopyAtom::Vec128 | CopyAtom::Buffer128 | CopyAtom::CpAsync | CopyAtom::DirectToLds => {
                128
            }
            CopyAtom::Vec64 => 64,
            CopyAtom::Vec32 | CopyAtom::DirectToLds32 => 32,
            CopyAtom::Scalar => 8 * elem.size_bytes(),
            _ => 0,
        }
    }
    /// Whether [`copy`] can issue this atom on `target` today.
    ///
    /// ```
    /// use flydsl_dsl::tile::CopyAtom;
    /// use flydsl_dsl::ir::Target;
    /// assert!(CopyAtom::Vec128.available(Target::Sm90));
    /// assert!(!CopyAtom::Buffer128.available(Target::Sm90));
    /// assert!(CopyAtom::Tma.available(Target::Sm90));
    /// assert!(CopyAtom::CpAsync.available(Target::Sm90));
    /// assert!(!CopyAtom::CpAsync.available(Target::Gfx950));
    /// assert!(CopyAtom::DirectToLds.available(Target::Gfx950));
    /// assert!(!CopyAtom::DirectToLds.available(Target::Gfx942));
    /// assert!(CopyAtom::DirectToLds32.available(Target::Gfx942));
    /// assert!(CopyAtom::Tdm.available(Target::Gfx1250));
    /// ```
    pub fn available(self, target: Target) -> bool {
        match self {
            CopyAtom::Vec128 | CopyAtom::Vec64 | CopyAtom::Vec32 | CopyAtom::Scalar => true,
            CopyAtom::Buffer128 => target.is_amd(),
            CopyAtom::CpAsync | CopyAtom::Tma => target == Target::Sm90,
            CopyAtom::DirectToLds => target == Target::Gfx950,
            CopyAtom::DirectToLds32 => matches!(target, Target::Gfx942 | Target::Gfx950),
            CopyAtom::Tdm => target == Target::Gfx1250,
        }
    }
    /// The widest register-staged global copy of `target`.
    pub fn best_global(target: Target) -> CopyAtom {
        if target.is_amd() {
            CopyAtom::Buffer128
        } else {
            CopyAtom::Vec128
        }
    }
    fn elems(self, elem: ScalarType) -> u32 {
        (self.bits(elem) / (8 * elem.size_bytes())).max(1)
    }
}

/// A copy of a whole `rows x cols` row-major tile by a group of threads: a copy atom and a
/// thread-value layout ([`Tv`]) in which each thread's values come in runs of one atom's
/// width along a row.
#[derive(Clone, Debug)]
pub struct TiledCopy {
    atom: CopyAtom,
    vec: u32,
    tv: Tv,
}

/// The part of a [`TiledCopy`] one thread does (from [`TiledCopy::partition`]): the tile
/// coordinates of each of its accesses.
#[derive(Clone, Debug)]
pub struct ThrCopy {
    atom: CopyAtom,
    vec: u32,
    coords: Vec<(Idx, Idx)>,
    tv: Tv,
}

impl TiledCopy {
    /// `threads` threads copy a `rows x cols` tile of `elem` with `atom`: threads are laid
    /// along the row (`cols / width` of them, `width` the atom's elements), the rest along
    /// the columns, and the tile is covered by repeating that block; built as the
    /// thread-value layout `thr = (tc, tr) : (width * rows, 1)`, `val = (width, cols /
    /// (width * tc), rows / tr) : (rows, width * tc * rows, tr)` on the column-major tile.
    ///
    /// ```
    /// use flydsl_dsl::tile::{CopyAtom, TiledCopy};
    /// use flydsl_dsl::ir::ScalarType::BF16;
    /// let c = TiledCopy::new(CopyAtom::Vec128, BF16, 128, (64, 32))?;
    /// assert_eq!(c.tv().vals(), 16); // 2 accesses of 8 elements per thread
    /// assert_eq!(c.tv().thr_coord_lit(5), (1, 8));
    /// # Ok::<(), flydsl_dsl::tile::TileError>(())
    /// ```
    pub fn new(
        atom: CopyAtom,
        elem: ScalarType,
        threads: u32,
        (rows, cols): (i64, i64),
    ) -> Result<TiledCopy, TileError> {
        let f = "TiledCopy::new";
        let w = atom.elems(elem) as i64;
        if atom.bits(elem) == 0 {
            return Err(super::invalid(
                f,
                "atom",
                format!("{atom:?}"),
                "moves a whole tile from one instruction, not a vector per thread: use \
                 TmaCopy (Tma) or TdmCopy (Tdm)",
            ));
        }
        if cols % w != 0 {
            return Err(super::invalid(
                f,
                "cols",
                cols,
                format!("must be a multiple of the atom's {w} elements"),
            ));
        }
        let t = threads as i64;
        let tc = (cols / w).min(t);
        let tr = t / tc;
        if t % tc != 0 || (cols / w) % tc != 0 || rows % tr != 0 {
            return Err(super::invalid(
                f,
                "threads",
                threads,
                format!(
                    "must split into {tc} threads along a row times a divisor of the {rows} \
                     rows (tile {rows} x {cols}, {w} elements per access)"
                ),
            ));
        }
        let thr = Layout::new((tc, tr), (w * rows, 1))?;
        let val = Layout::new((w, cols / (w * tc), rows / tr), (rows, w * tc * rows, tr))?;
        Ok(TiledCopy {
            atom,
            vec: w as u32,
            tv: Tv::new(thr, val, (rows, cols))?,
        })
    }
    /// The thread-value layout.
    pub fn tv(&self) -> &Tv {
        &self.tv
    }
    /// Thread `thread`'s accesses (CuTe's `get_slice(thread)` + `partition_S/D`).
    pub fn partition(&self, thread: Val) -> ThrCopy {
        let (r0, c0) = self.tv.thr_coord(thread);
        let coords = (0..self.tv.vals())
            .step_by(self.vec as usize)
            .map(|v| {
                let (r, c) = self.tv.val_coord(v);
                (add(r0, r), add(c0, c))
            })
            .collect();
        ThrCopy {
            atom: self.atom,
            vec: self.vec,
            coords,
            tv: self.tv.clone(),
        }
    }
}

impl ThrCopy {
    /// Load this thread's vectors of a global tile into registers (out-of-range ones read 0).
    pub fn load(&self, src: &GTile) -> Frag {
        let vals: Vec<Val> = self
            .coords
            .iter()
            .map(|&(r, c)| src.load(r, c, self.vec))
            .collect();
        frag(vals)
    }
    /// Load this thread's vectors of an LDS tile.
    pub fn load_smem(&self, src: &SView) -> Frag {
        let vals = self
            .coords
            .iter()
            .map(|&(r, c)| src.load(r, c, self.vec))
            .collect();
        frag(vals)
    }
    /// Store registers (from [`ThrCopy::load`]) into an LDS tile.
    pub fn store(&self, f: &Frag, dst: &SView) {
        for (&(r, c), &v) in self.coords.iter().zip(f.vals()) {
            dst.store(r, c, v);
        }
    }
    /// Store registers into a global tile (out-of-range vectors are dropped).
    pub fn store_global(&self, f: &Frag, dst: &GTile) {
        for (&(r, c), &v) in self.coords.iter().zip(f.vals()) {
            dst.store(r, c, v);
        }
    }
    /// Issue this thread's accesses as sm_90 `cp.async` copies from a global tile into an
    /// LDS tile: vectors outside the matrix are zero-filled without reading (`src_bytes` 0),
    /// a vector straddling the last column reads only its in-range part. The copies join the
    /// thread's open commit group: close it with [`crate::nv::cp_async_commit`], and read
    /// `dst` only after [`crate::nv::cp_async_wait`] and a barrier. A build error on other
    /// targets.
    ///
    /// ```
    /// use flydsl_dsl::*;
    /// use flydsl_dsl::tile::*;
    /// use flydsl_dsl::ir::{ScalarType::{BF16, I32}, Target};
    /// KernelBuilder::new("k", Target::Sm90, 64).build(|k| {
    ///     let a = k.tensor("a", BF16);
    ///     let (m, n) = (k.scalar("m", I32), k.scalar("n", I32));
    ///     let lay = smem_xor16(16, 32, BF16).unwrap();
    ///     let s = STensor::new(k.lds("s", BF16, STensor::elems(&lay, 1) as u32), lay, 1).unwrap();
    ///     let g = GTensor::new(a, m, n).local_tile((16, 32), (block_id_x(), c_i32(0)));
    ///     let tc = TiledCopy::new(CopyAtom::CpAsync, BF16, 64, (16, 32)).unwrap();
    ///     tc.partition(thread_id_x()).copy_async(&g, &s.stage(c_i32(0)));
    ///     nv::cp_async_commit();
    ///     nv::cp_async_wait(0);
    ///     barrier();
    /// }).unwrap();
    /// ```
    pub fn copy_async(&self, src: &GTile, dst: &SView) {
        let es = dst.elem().size_bytes();
        for &(r, c) in &self.coords {
            let Some((p, i, sb)) = src.async_src(r, c, self.vec) else {
                super::fail(super::invalid(
                    "ThrCopy::copy_async",
                    "src",
                    "a buffer-resource tile",
                    "cp.async needs an sm_90 (pointer) tile",
                ));
                return;
            };
            crate::nv::cp_async(dst.ptr(r, c, self.vec), p, Some(i), self.vec * es, sb);
        }
    }
    /// Issue this thread's accesses as AMD direct-to-LDS buffer loads
    /// ([`CopyAtom::DirectToLds`]: 16 bytes per lane on gfx950; [`CopyAtom::DirectToLds32`]:
    /// 4 bytes on gfx942 and gfx950) from a global tile into an LDS tile: no registers, and
    /// ragged edges read zeros (the index moves past the tile's buffer resource).
    ///
    /// The hardware writes lane `l`'s bytes at `M0 + l * bytes`, so every wave's accesses
    /// must be consecutive in LDS in lane order: true for an unswizzled row-major
    /// [`STensor`](super::STensor) whose rows this copy covers whole (the check runs at build
    /// time over every wave and access and fails the build, naming the first offender,
    /// otherwise). The copies land asynchronously: read `dst` only after
    /// [`wait_vmcnt`](crate::wait_vmcnt) (its own lanes' data) and a barrier (everyone's);
    /// [`barrier`](crate::barrier) and [`lds_barrier`](crate::lds_barrier) wait for the
    /// wave's pending loads themselves.
    ///
    /// ```
    /// use flydsl_dsl::*;
    /// use flydsl_dsl::layout::Layout;
    /// use flydsl_dsl::tile::*;
    /// use flydsl_dsl::ir::{ScalarType::{BF16, I32}, Target};
    /// KernelBuilder::new("k", Target::Gfx950, 64).build(|k| {
    ///     let a = k.tensor("a", BF16);
    ///     let (m, n) = (k.scalar("m", I32), k.scalar("n", I32));
    ///     let lay = smem_row_major(32, 64).unwrap();
    ///     let s = STensor::new(k.lds("s", BF16, STensor::elems(&lay, 1) as u32), lay, 1).unwrap();
    ///     let g = GTensor::new(a, m, n).local_tile((32, 64), (block_id_x(), c_i32(0)));
    ///     let tc = TiledCopy::new(CopyAtom::DirectToLds, BF16, 64, (32, 64)).unwrap();
    ///     tc.partition(thread_id_x()).copy_direct(&g, &s.stage(c_i32(0)));
    ///     barrier();
    /// }).unwrap();
    /// ```
    pub fn copy_direct(&self, src: &GTile, dst: &SView) {
        const F: &str = "ThrCopy::copy_direct";
        let target = crate::context::target();
        if !matches!(self.atom, CopyAtom::DirectToLds | CopyAtom::DirectToLds32)
            || !self.atom.available(target)
        {
            super::fail(super::invalid(
                F,
                "atom",
                format!("{:?} on {target}", self.atom),
                "use CopyAtom::DirectToLds (gfx950) or DirectToLds32 (gfx942, gfx950)",
            ));
            return;
        }
        if let Err(e) = self.check_direct(dst, target.wave_size() as i64) {
            super::fail(e);
            return;
        }
        let es = dst.elem().size_bytes();
        let lane = crate::val::lane_id();
        for &(r, c) in &self.coords {
            let Some((rs, i)) = src.direct_src(r, c) else {
                super::fail(super::invalid(
                    F,
                    "src",
                    "a pointer tile",
                    "needs an AMD tile",
                ));
                return;
            };
            // The wave's base: this lane's element offset less `lane * vec` (the check made
            // it the same for every lane of the wave).
            let base = dst.offset_of(r, c, self.vec) - lane * self.vec as i32;
            crate::amd::buffer_load_to_lds(&rs, i, dst.lds(), base, self.vec * es);
        }
    }
    /// Every wave's lanes write consecutive `vec`-element slots of `dst` for every access.
    fn check_direct(&self, dst: &SView, wave: i64) -> Result<(), TileError> {
        let threads = self.tv.thr().size();
        let v = self.vec as i64;
        for a in (0..self.tv.vals()).step_by(self.vec as usize) {
            let (vr, vc) = self.tv.val_coord(a);
            for t0 in (0..threads).step_by(wave as usize) {
                let at = |t: i64| {
                    let (r, c) = self.tv.thr_coord_lit(t);
                    dst.lit_offset(r + vr, c + vc)
                };
                let base = at(t0)?;
                for l in 1..wave.min(threads - t0) {
                    let got = at(t0 + l)?;
                    if got != base + l * v {
                        return Err(super::invalid(
                            "ThrCopy::copy_direct",
                            "dst",
                            dst.layout_string(),
                            format!(
                                "thread {} writes LDS element {got}, not {} (lane {l} of its \
                                 wave must follow lane 0 at {base} by {l} x {v}): a \
                                 direct-to-LDS load writes each wave's lanes consecutively; \
                                 use an unswizzled row-major STensor (smem_row_major) whose \
                                 rows the copy covers whole",
                                t0 + l,
                                base + l * v
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
    /// The copy atom.
    pub fn atom(&self) -> CopyAtom {
        self.atom
    }
}

fn frag(vals: Vec<Val>) -> Frag {
    let n = vals.len() as i64;
    Frag::new(vals, Layout::col_major(n).expect("n >= 1 accesses"))
}

/// Copy this thread's part of a global tile into an LDS tile (CuTe's `copy(atom, src, dst)`
/// on the partitions). The register-staged atoms go through registers; a pipelined kernel
/// calls [`ThrCopy::load`] early and [`ThrCopy::store`] later instead. [`CopyAtom::CpAsync`]
/// only issues the copies ([`ThrCopy::copy_async`]: commit and wait before reading `dst`),
/// and so do the direct-to-LDS atoms ([`ThrCopy::copy_direct`]: wait before reading).
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::tile::*;
/// use flydsl_dsl::ir::{ScalarType::{BF16, I32}, Target};
/// KernelBuilder::new("k", Target::Gfx942, 64).build(|k| {
///     let a = k.tensor("a", BF16);
///     let (m, n) = (k.scalar("m", I32), k.scalar("n", I32));
///     let lay = smem_xor16(16, 32, BF16).unwrap();
///     let s = STensor::new(k.lds("s", BF16, STensor::elems(&lay, 1) as u32), lay, 1).unwrap();
///     let g = GTensor::new(a, m, n).local_tile((16, 32), (block_id_x(), c_i32(0)));
///     let tc = TiledCopy::new(CopyAtom::Buffer128, BF16, 64, (16, 32)).unwrap();
///     copy(&tc.partition(thread_id_x()), &g, &s.stage(c_i32(0)));
/// }).unwrap();
/// ```
pub fn copy(thr: &ThrCopy, src: &GTile, dst: &SView) {
    if !thr.atom.available(crate::context::target()) {
        super::fail(super::invalid(
            "copy",
            "atom",
            format!("{:?}", thr.atom),
            format!("not available on {} yet", crate::context::target()),
        ));
        return;
    }
    if thr.atom == CopyAtom::CpAsync {
        thr.copy_async(src, dst);
    } else if matches!(thr.atom, CopyAtom::DirectToLds | CopyAtom::DirectToLds32) {
        thr.copy_direct(src, dst);
    } else {
        thr.store(&thr.load(src), dst);
    }
}
