//! Matrix atoms as thread-value layouts, and tiled MMAs over them.

use super::global::GTile;
use super::ldsm::{self, LdsmPlan};
use super::smem::SView;
use super::tv::{add, Tv};
use super::{Frag, TileError};
use crate::atoms::host;
use crate::index::Idx;
use crate::layout::Layout;
use crate::val::{c_i32, select, vec_of, Val};
use flydsl_ir::{MmaAtom, Target, Type};

/// One matrix atom's lane layouts as [`Tv`]s: A over its `M x K` tile, B over `N x K`
/// (B is read as the rows of Bᵀ, the layout a row-major `N x K` operand has) and C over
/// `M x N`; thread = lane, value = fragment element. Fitted with [`Layout::fit`] from the
/// tables in [`atoms::host`](crate::atoms::host) and checked at every (lane, element).
///
/// ```
/// use flydsl_dsl::tile::AtomTv;
/// use flydsl_dsl::ir::{MmaAtom, Target};
/// let t = AtomTv::new(MmaAtom::MmaM16N8K16Bf16, Target::Sm90)?;
/// assert_eq!(t.a().thr().to_string(), "(4,8):(32,1)");
/// # Ok::<(), flydsl_dsl::tile::TileError>(())
/// ```
#[derive(Clone, Debug)]
pub struct AtomTv {
    atom: MmaAtom,
    target: Target,
    a: Tv,
    b: Tv,
    c: Tv,
}

type Map = fn(MmaAtom, u32, u32) -> (u32, u32);

impl AtomTv {
    /// The layouts of `atom` on `target` (which must support it).
    pub fn new(atom: MmaAtom, target: Target) -> Result<AtomTv, TileError> {
        if !atom.supported_on(target) {
            return Err(super::invalid(
                "AtomTv::new",
                "atom",
                format!("{atom:?}"),
                format!("not available on {target}; use MmaAtom::native_16bit({target}, ..)"),
            ));
        }
        let (m, n, k) = atom.shape();
        let (m, n, k) = (m as i64, n as i64, k as i64);
        let w = target.wave_size() as i64;
        let (na, nb, nc) = atom.frag_lanes(target.wave_size());
        let b_nk: Map = |atom, l, e| {
            let (k, j) = host::b(atom, l, e);
            (j, k)
        };
        let fit = |f: Map, rows: i64, cols: i64, nv: u32| -> Result<Tv, TileError> {
            let idx = |l: i64, e: i64| {
                let (r, c) = f(atom, l as u32, e as u32);
                r as i64 + rows * c as i64
            };
            let thr = Layout::fit(w, |l| idx(l, 0))?;
            let val = Layout::fit(nv as i64, |e| idx(0, e))?;
            for l in 0..w {
                for e in 0..nv as i64 {
                    if thr.call(&l)? + val.call(&e)? != idx(l, e) {
                        return Err(super::invalid(
                            "AtomTv::new",
                            "atom",
                            format!("{atom:?}"),
                            format!("lane {l} element {e}: the lane table is not lane + element"),
                        ));
                    }
                }
            }
            Tv::new(thr, val, (rows, cols))
        };
        Ok(AtomTv {
            atom,
            target,
            a: fit(host::a, m, k, na)?,
            b: fit(b_nk, n, k, nb)?,
            c: fit(host::c, m, n, nc)?,
        })
    }
    /// The atom.
    pub fn atom(&self) -> MmaAtom {
        self.atom
    }
    /// The target.
    pub fn target(&self) -> Target {
        self.target
    }
    /// A over `M x K`.
    pub fn a(&self) -> &Tv {
        &self.a
    }
    /// B over `N x K`.
    pub fn b(&self) -> &Tv {
        &self.b
    }
    /// C over `M x N`.
    pub fn c(&self) -> &Tv {
        &self.c
    }
}

/// A tiled MMA: `warps.0 x warps.1` waves, each computing `reps.0 x reps.1` atoms, so a
/// block computes a `(warps.0 * reps.0 * M) x (warps.1 * reps.1 * N)` tile of C per K step
/// of the atom. Wave `w` takes the C block `(w % warps.0, w / warps.0)`.
///
/// ```
/// use flydsl_dsl::tile::TiledMma;
/// use flydsl_dsl::ir::{MmaAtom, Target};
/// let t = TiledMma::new(MmaAtom::native_16bit(Target::Sm90, true), Target::Sm90, (2, 2), (4, 8))?;
/// assert_eq!((t.tile_m(), t.tile_n(), t.atom_k(), t.threads()), (128, 128, 16, 128));
/// # Ok::<(), flydsl_dsl::tile::TileError>(())
/// ```
#[derive(Clone, Debug)]
pub struct TiledMma {
    atom: AtomTv,
    warps: (u32, u32),
    reps: (u32, u32),
    ldmatrix: bool,
}

/// One thread's view of a [`TiledMma`] (from [`TiledMma::thr_slice`]).
#[derive(Clone, Debug)]
pub struct ThrMma<'a> {
    mma: &'a TiledMma,
    a0: (Idx, Idx),
    b0: (Idx, Idx),
    c0: (Idx, Idx),
    /// Per operand (A, B): the `ldmatrix` plan and this lane's row address in the block
    /// tile, when the operand is loaded with `ldmatrix`.
    ldsm: [Option<(LdsmPlan, (Idx, Idx))>; 2],
}

impl TiledMma {
    /// A tiled MMA of `atom` on `target`.
    pub fn new(
        atom: MmaAtom,
        target: Target,
        warps: (u32, u32),
        reps: (u32, u32),
    ) -> Result<TiledMma, TileError> {
        if warps.0 * warps.1 == 0 || reps.0 * reps.1 == 0 {
            return Err(super::invalid(
                "TiledMma::new",
                "warps, reps",
                format!("{warps:?}, {reps:?}"),
                "every count must be >= 1",
            ));
        }
        Ok(TiledMma {
            atom: AtomTv::new(atom, target)?,
            warps,
            reps,
            ldmatrix: true,
        })
    }
    /// Whether A and B fragments are read with `ldmatrix` where the atom's layouts allow it
    /// (sm_90 16-bit atoms; see [`TiledMma::uses_ldmatrix`]); on by default, `false` reads
    /// them with vector LDS loads.
    ///
    /// ```
    /// use flydsl_dsl::tile::TiledMma;
    /// use flydsl_dsl::ir::{MmaAtom, Target};
    /// let t = TiledMma::new(MmaAtom::native_16bit(Target::Sm90, true), Target::Sm90, (2, 2), (4, 8))?;
    /// assert!(t.uses_ldmatrix());
    /// assert!(!t.with_ldmatrix(false).uses_ldmatrix());
    /// let g = TiledMma::new(MmaAtom::native_16bit(Target::Gfx942, true), Target::Gfx942, (2, 2), (2, 2))?;
    /// assert!(!g.uses_ldmatrix());
    /// # Ok::<(), flydsl_dsl::tile::TileError>(())
    /// ```
    pub fn with_ldmatrix(mut self, on: bool) -> TiledMma {
        self.ldmatrix = on;
        self
    }
    /// Whether both operands are read with `ldmatrix`.
    pub fn uses_ldmatrix(&self) -> bool {
        self.ldmatrix && self.plans().iter().all(Option::is_some)
    }
    fn plans(&self) -> [Option<LdsmPlan>; 2] {
        let (ta, tb, _) = self.atom.atom.operand_types(self.atom.target);
        let t = self.atom.target;
        [
            ldsm::plan(&self.atom.a, ta, t).filter(|_| self.ldmatrix),
            ldsm::plan(&self.atom.b, tb, t).filter(|_| self.ldmatrix),
        ]
    }
    /// The atom's layouts.
    pub fn atom(&self) -> &AtomTv {
        &self.atom
    }
    /// Rows of C per block.
    pub fn tile_m(&self) -> i64 {
        (self.warps.0 * self.reps.0 * self.atom.atom.shape().0) as i64
    }
    /// Columns of C per block.
    pub fn tile_n(&self) -> i64 {
        (self.warps.1 * self.reps.1 * self.atom.atom.shape().1) as i64
    }
    /// K of one atom.
    pub fn atom_k(&self) -> i64 {
        self.atom.atom.shape().2 as i64
    }
    /// Threads per block.
    pub fn threads(&self) -> u32 {
        self.warps.0 * self.warps.1 * self.atom.target.wave_size()
    }
    /// A zero accumulator: `reps.0 x reps.1` C fragments.
    pub fn zero_acc(&self) -> Frag {
        let (_, _, c) = self.atom.atom.operand_types(self.atom.target);
        Frag::zeros(c, self.acc_layout())
    }
    fn acc_layout(&self) -> Layout {
        Layout::col_major((self.reps.0 as i64, self.reps.1 as i64)).expect("reps >= 1")
    }
    /// Atom K steps that one 16-byte run per lane feeds (the reference's "K32 packs"), for
    /// operands of `elem_bytes`-byte elements: when every lane holds one run of `run`
    /// consecutive K of A and of B (starting at a multiple of `run`) and `run` elements are
    /// less than 16 bytes, `p = 16 / (run * elem_bytes)` consecutive atoms can read their
    /// operands from one 16-byte run per lane, provided A and B permute K the same way:
    /// atom `j` of a pack takes, at atom column `g * run + e`, the pack's physical column
    /// `g * run * p + j * run + e` (a bijection of the pack's `p * K` columns, so the sum
    /// over the pack is the plain product). [`ThrMma::partition_a_packed`] and
    /// [`ThrMma::partition_b_packed`] read that way; 1 when the atom's layouts do not allow
    /// it (or fragments come from `ldmatrix`).
    ///
    /// ```
    /// use flydsl_dsl::tile::TiledMma;
    /// use flydsl_dsl::ir::{MmaAtom, Target};
    /// // gfx942 MFMA 16x16x16 bf16: 4 consecutive K per lane, so two atoms per 16 bytes.
    /// let t = TiledMma::new(MmaAtom::native_16bit(Target::Gfx942, true), Target::Gfx942, (1, 4), (1, 2))?;
    /// assert_eq!(t.k_pack(2), 2);
    /// // gfx950 MFMA 16x16x32 bf16: already 8 (16 bytes) per lane.
    /// let t = TiledMma::new(MmaAtom::native_16bit(Target::Gfx950, true), Target::Gfx950, (1, 4), (1, 2))?;
    /// assert_eq!(t.k_pack(2), 1);
    /// # Ok::<(), flydsl_dsl::tile::TileError>(())
    /// ```
    pub fn k_pack(&self, elem_bytes: u32) -> u32 {
        if self.plans().iter().any(Option::is_some) || elem_bytes == 0 || elem_bytes > 16 {
            return 1;
        }
        let kpack = 16 / elem_bytes as i64;
        let single_run = |tv: &Tv| {
            let run = tv.vals();
            let lanes = self.atom.target.wave_size() as i64;
            let ok = run < kpack
                && kpack % run == 0
                && (0..run).all(|v| tv.val_coord(v) == (0, v))
                && (0..lanes).all(|l| tv.thr_coord_lit(l).1 % run == 0);
            ok.then_some(run)
        };
        match (single_run(&self.atom.a), single_run(&self.atom.b)) {
            (Some(ra), Some(rb)) if ra == rb => (kpack / ra) as u32,
            _ => 1,
        }
    }
    /// Thread `thread`'s slice: where its fragments sit in the block tile.
    pub fn thr_slice(&self, thread: Val) -> ThrMma<'_> {
        let ws = self.atom.target.wave_size() as i32;
        let lane = thread % ws;
        let wave = thread / ws;
        let (wm, wn) = (wave % self.warps.0 as i32, wave / self.warps.0 as i32);
        let (m, n, _) = self.atom.atom.shape();
        let row_m = wm * (self.reps.0 * m) as i32;
        let row_n = wn * (self.reps.1 * n) as i32;
        let a = self.atom.a.thr_coord(lane);
        let b = self.atom.b.thr_coord(lane);
        let c = self.atom.c.thr_coord(lane);
        let [pa, pb] = self.plans();
        let at = |p: Option<LdsmPlan>, row0: Val| {
            p.map(|p| {
                let rc = ldsm_lane_coord(&p, lane, row0);
                (p, rc)
            })
        };
        ThrMma {
            mma: self,
            a0: (plus(a.0, row_m), a.1),
            b0: (plus(b.0, row_n), b.1),
            c0: (plus(c.0, row_m), plus(c.1, row_n)),
            ldsm: [at(pa, row_m), at(pb, row_n)],
        }
    }
}

/// The tile coordinate whose row `lane` addresses in an `ldmatrix` of plan `p`: row
/// `lane % 8` of matrix `(lane / 8) % count` (lanes past the matrices repeat them), offset
/// by `row0` rows.
fn ldsm_lane_coord(p: &LdsmPlan, lane: Val, row0: Val) -> (Idx, Idx) {
    let i = (lane / 8) % p.count as i32;
    let (mut r, mut c) = (c_i32(p.bases[0].0 as i32), c_i32(p.bases[0].1 as i32));
    for (k, &(br, bc)) in p.bases.iter().enumerate().skip(1) {
        let here = i.eq(k as i32);
        r = select(here, c_i32(br as i32), r);
        c = select(here, c_i32(bc as i32), c);
    }
    (Idx::Dyn(row0 + r + lane % 8), Idx::Dyn(c))
}

fn plus(a: Idx, b: Val) -> Idx {
    Idx::Dyn(a.val() + b)
}

impl ThrMma<'_> {
    /// This thread's A fragments for K step `k0` (static, a multiple of the atom's K) of an
    /// LDS tile of A (`tile_m x BK`): one per M repetition, read in runs of consecutive K.
    pub fn partition_a(&self, src: &SView, k0: i64) -> Vec<Val> {
        let m = self.mma.atom.atom.shape().0 as i64;
        (0..self.mma.reps.0 as i64)
            .map(|i| match &self.ldsm[0] {
                Some((p, rc)) => ldsm_operand(p, *rc, src, i * m, k0, self.ty().0),
                None => operand(&self.mma.atom.a, src, self.a0, i * m, k0, self.ty().0),
            })
            .collect()
    }
    /// This thread's B fragments for K step `k0` of an LDS tile of Bᵀ (`tile_n x BK`).
    pub fn partition_b(&self, src: &SView, k0: i64) -> Vec<Val> {
        let n = self.mma.atom.atom.shape().1 as i64;
        (0..self.mma.reps.1 as i64)
            .map(|j| match &self.ldsm[1] {
                Some((p, rc)) => ldsm_operand(p, *rc, src, j * n, k0, self.ty().1),
                None => operand(&self.mma.atom.b, src, self.b0, j * n, k0, self.ty().1),
            })
            .collect()
    }
    /// This thread's A fragments for the K pack at `k0` (static, a multiple of `p` atom K
    /// steps, `p` = [`TiledMma::k_pack`]): per M repetition, the `p` atoms' fragments, all
    /// from one 16-byte LDS read (K permuted as `k_pack` says; B must be read the same way).
    pub fn partition_a_packed(&self, src: &SView, k0: i64, elem_bytes: u32) -> Vec<Vec<Val>> {
        let m = self.mma.atom.atom.shape().0 as i64;
        let p = self.mma.k_pack(elem_bytes) as i64;
        (0..self.mma.reps.0 as i64)
            .map(|i| packed(&self.mma.atom.a, src, self.a0, i * m, k0, p))
            .collect()
    }
    /// This thread's B fragments for the K pack at `k0` of an LDS tile of Bᵀ: per N
    /// repetition, the `p` atoms' fragments (see [`ThrMma::partition_a_packed`]).
    pub fn partition_b_packed(&self, src: &SView, k0: i64, elem_bytes: u32) -> Vec<Vec<Val>> {
        let n = self.mma.atom.atom.shape().1 as i64;
        let p = self.mma.k_pack(elem_bytes) as i64;
        (0..self.mma.reps.1 as i64)
            .map(|j| packed(&self.mma.atom.b, src, self.b0, j * n, k0, p))
            .collect()
    }
    /// Where this thread's packed B run of N repetition `j` and the pack at `k0` sits in
    /// the block tile of Bᵀ: (row, first column) of its `p * run` consecutive elements.
    pub fn packed_b_coord(&self, j: u32, k0: i64, elem_bytes: u32) -> (Idx, Idx) {
        let n = self.mma.atom.atom.shape().1 as i64;
        let p = self.mma.k_pack(elem_bytes) as i32;
        (
            add(self.b0.0, j as i64 * n),
            Idx::Dyn(self.b0.1.val() * p + k0 as i32),
        )
    }
    /// The tile coordinates (row, col) of element `v` of C fragment `(i, j)`.
    pub fn partition_c(&self, i: u32, j: u32, v: u32) -> (Idx, Idx) {
        let (m, n, _) = self.mma.atom.atom.shape();
        let (r, c) = self.mma.atom.c.val_coord(v as i64);
        (
            add(self.c0.0, (i * m) as i64 + r),
            add(self.c0.1, (j * n) as i64 + c),
        )
    }
    /// `acc + a * b` over all repetitions (CuTe's `gemm(mma, a, b, acc)`). A block-scaled
    /// atom (gfx950 `MfmaScale16x16x128Fp8`) runs with unit E8M0 scales (127 = 2^0): the
    /// plain product.
    pub fn gemm(&self, acc: &Frag, a: &[Val], b: &[Val]) -> Frag {
        let (rm, rn) = self.mma.reps;
        let atom = self.mma.atom.atom;
        let mut out = Vec::with_capacity((rm * rn) as usize);
        for j in 0..rn as i64 {
            for i in 0..rm as i64 {
                let c = acc.at(&[i, j]);
                let (a, b) = (a[i as usize], b[j as usize]);
                out.push(if atom.is_scaled() {
                    crate::wave::mma_scaled(atom, a, b, c, c_i32(127), c_i32(127))
                } else {
                    crate::wave::mma(atom, a, b, c)
                });
            }
        }
        acc.with_vals(out)
    }
    /// Store the accumulators into a global tile (guarded; element type converted).
    pub fn store_c(&self, acc: &Frag, dst: &GTile, elem: flydsl_ir::ScalarType) {
        let (_, _, nc) = self
            .mma
            .atom
            .atom
            .frag_lanes(self.mma.atom.target.wave_size());
        for j in 0..self.mma.reps.1 {
            for i in 0..self.mma.reps.0 {
                let f = acc.at(&[i as i64, j as i64]);
                for v in 0..nc {
                    let (r, c) = self.partition_c(i, j, v);
                    dst.store(r, c, f.at(v).cast(elem));
                }
            }
        }
    }
    fn ty(&self) -> (Type, Type) {
        let (a, b, _) = self.mma.atom.atom.operand_types(self.mma.atom.target);
        (a, b)
    }
}

/// One operand fragment with one `ldmatrix`: this lane addresses tile row `rc.0 + off`,
/// columns `rc.1 + k0 ..` (8 of them); the `i32` registers are reinterpreted as `ty`.
fn ldsm_operand(p: &LdsmPlan, rc: (Idx, Idx), src: &SView, off: i64, k0: i64, ty: Type) -> Val {
    let ptr = src.ptr(add(rc.0, off), add(rc.1, k0), 8);
    let f = crate::nv::ldmatrix(ptr, p.count, false);
    debug_assert_eq!(f.ty(), p.frag_type());
    f.bitcast(ty)
}

/// The `p` fragments of one K pack: this lane's `p * run` consecutive elements at row
/// `t0.0 + off`, column `k0 + t0.1 * p`, split into `p` runs (atom `j` takes run `j`).
fn packed(tv: &Tv, src: &SView, t0: (Idx, Idx), off: i64, k0: i64, p: i64) -> Vec<Val> {
    let run = tv.vals();
    let col = Idx::Dyn(t0.1.val() * p as i32 + k0 as i32);
    let x = src.load(add(t0.0, off), col, (run * p) as u32);
    split_runs(x, p as u32)
}

/// `x` split into `p` equal consecutive runs.
pub fn split_runs(x: Val, p: u32) -> Vec<Val> {
    if p == 1 {
        return vec![x];
    }
    let e = x.elems();
    let run = e.len() / p as usize;
    e.chunks(run).map(vec_of).collect()
}

/// One operand fragment: the atom's values at rows `r0 + off`, columns `k0 ..`, in runs.
fn operand(tv: &Tv, src: &SView, t0: (Idx, Idx), off: i64, k0: i64, ty: Type) -> Val {
    let run = tv.col_run(16 / ty.elem().map_or(1, |e| e.size_bytes()) as i64);
    let mut elems = Vec::with_capacity(tv.vals() as usize);
    for v in (0..tv.vals()).step_by(run as usize) {
        let (r, c) = tv.val_coord(v);
        let x = src.load(add(t0.0, off + r), add(t0.1, k0 + c), run as u32);
        elems.extend(x.elems());
    }
    vec_of(&elems)
}
