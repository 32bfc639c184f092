//! Forward kernels of both norms (plain and int8-quant outputs) on every path: fast and
//! multi-row, aligned and ragged (`ragged.rs`), and generic.
//!
//! Parameters, in order (every forward kernel has all of them, so one launcher type serves a
//! family): `x`, `residual`, `residual_out`, `gamma`, `beta`, then `y` (plain) or `q`,
//! `yscale`, `xscale` (quant), then `mean`, `rstd`, and scalars `m`, `n`, `eps`, `lanes`,
//! `keep_l2`. Empty `residual`, `beta`, `xscale`, `mean`, `rstd` switch those features off;
//! RMSNorm ignores `beta` and `mean`; only the multi-row path reads `lanes`; a non-zero
//! `keep_l2` makes the vectorised paths read `x` and `residual` with the keep-in-L2 hint
//! (NVIDIA; see [`Rsrc::load_vec_keep_l2`]).
//!
//! Numerics (see [`RowMath`]): LayerNorm's variance from sums shifted by the row's first
//! element (vectorised paths) or Chan-merged shifted sums (generic path); rows whose sums
//! overflow recomputed from the row scaled by a power of two; quant rows with a NaN or an
//! infinity give yscale +inf and q 0.

use crate::common::*;
use crate::config::{
    fast_max_block, fwd_max_registers, fwd_weight_chunk, quant_recomputes, DType, Family, Kind,
    Norm, Path, GENERIC_THREADS, ROWS_BLOCK,
};
use crate::ragged::Ragged;
use flydsl_dsl::ir::{Kernel, ScalarType, Target, Type};
use flydsl_dsl::*;

use ScalarType::{F32, I32, I64};

/// The kernel's parameters.
struct Params {
    x: Tensor,
    res: Tensor,
    res_out: Tensor,
    gamma: Tensor,
    beta: Tensor,
    y: Option<Tensor>,
    q: Option<(Tensor, Tensor, Tensor)>,
    mean: Tensor,
    rstd: Tensor,
    m: Val,
    n: Val,
    eps: Val,
    lanes: Val,
    keep_l2: Val,
}

impl Params {
    fn declare(k: &mut KernelDef, fam: Family) -> Params {
        let dt = fam.dt.scalar();
        let wt = fam.wdt.scalar();
        let x = k.tensor("x", dt);
        let res = k.tensor("residual", dt);
        let res_out = k.tensor_mut("residual_out", dt);
        let gamma = k.tensor("gamma", wt);
        let beta = k.tensor("beta", wt);
        let (y, q) = if fam.kind == Kind::ForwardQuant {
            let q = k.tensor_mut("q", ScalarType::I8);
            let ys = k.tensor_mut("yscale", F32);
            let xs = k.tensor("xscale", F32);
            (None, Some((q, ys, xs)))
        } else {
            (Some(k.tensor_mut("y", dt)), None)
        };
        let mean = k.tensor_mut("mean", F32);
        let rstd = k.tensor_mut("rstd", F32);
        let m = k.scalar("m", I32);
        let n = k.scalar("n", I32);
        let eps = k.scalar("eps", F32);
        let lanes = k.scalar("lanes", I32);
        let keep_l2 = k.scalar("keep_l2", I32);
        Params {
            x,
            res,
            res_out,
            gamma,
            beta,
            y,
            q,
            mean,
            rstd,
            m,
            n,
            eps,
            lanes,
            keep_l2,
        }
    }
}

/// Build the forward kernel of `fam` on `path` for `target`.
pub fn build(fam: Family, path: Path, target: Target) -> Result<Kernel, BuildError> {
    let max_threads = match path.aligned() {
        Path::Fast(t) => fast_max_block(fam.kind, fam.dt, t),
        Path::Rows(_) => ROWS_BLOCK,
        _ => GENERIC_THREADS,
    };
    // The caps are ptxas counts measured on sm_90; AMD code objects are left uncapped.
    let max_regs = fwd_max_registers(fam, path).filter(|_| !target.is_amd());
    KernelBuilder::new(&fam.kernel_name(path), target, max_threads)
        .max_registers(max_regs)
        .build(|k| {
            let p = Params::declare(k, fam);
            let scratch = match path.aligned() {
                Path::Rows(_) => None,
                Path::Fast(_) => Some(k.lds("red", F32, scratch_len(2))),
                _ => Some(k.lds("red", F32, scratch_len(4))),
            };
            let math = RowMath::new(fam.norm, p.n, p.eps);
            match (path.aligned(), scratch) {
                (Path::Fast(_), Some(s)) => {
                    vectorised(&p, fam, &math, path, Shape::Block(s), target)
                }
                (Path::Rows(_), _) => vectorised(&p, fam, &math, path, Shape::Rows, target),
                (_, Some(s)) => generic(&p, fam, &math, s),
                _ => {}
            }
        })
}

/// LDS regions: a block reduction's region may be written again once the next reduction's
/// barrier has passed (see [`block_reduce_n`]), so consecutive reductions alternate between
/// two regions. The fast path's round `j` of a row uses region `parity ^ (j & 1)` and the
/// next row starts at `parity ^ (rounds & 1)` ([`fast_rounds`]); the generic path's units
/// are in [`generic_rows`].
///
/// The block reductions of a row on the fast path: the statistics (one for both norms),
/// the quant amax.
fn fast_rounds(fam: Family) -> i32 {
    1 + i32::from(fam.kind == Kind::ForwardQuant)
}

/// How the vectorised paths map threads to rows.
#[derive(Clone, Copy)]
enum Shape {
    /// One row per block, reductions across the block through this LDS scratch.
    Block(Lds),
    /// Groups of `lanes` lanes per row, reductions by shuffles.
    Rows,
}

/// Per-row context of a vectorised path: the row, its validity and the lane mapping.
struct RowCtx {
    row: Val,
    valid: Val,
    base: Val,
    nrow: Val,
    first: Val,
}

/// A tensor's accesses on the vectorised paths, at element indices of a view: through a
/// buffer resource over its first `n` elements (out-of-range loads read 0, stores are
/// dropped), or, where the caller knows every index in range, as plain pointer accesses
/// ([`Plain`]). On sm_90 a resource access is a 64-bit compare, a branch and (loads)
/// zeroing moves around the access, several instructions a vector in a kernel that is
/// close to issue-bound (`bench/fly-norm-registers.md`); AMD's buffer instructions check
/// for free.
#[derive(Clone, Copy)]
struct Access {
    view: Tensor,
    rsrc: Rsrc,
    plain: Plain,
}

/// Which of an [`Access`]'s accesses are plain.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plain {
    /// None: all checked.
    No,
    /// The loads (the multi-row path's rows past `m` read row `m - 1` and drop their
    /// stores).
    Loads,
    /// Loads and stores.
    All,
}

impl Access {
    /// `t` from element `base` on, `n` (i64) elements long; `plain` as above.
    fn new(t: Tensor, base: Val, n: Val, plain: Plain) -> Access {
        let view = t.offset(base);
        Access {
            view,
            rsrc: view.rsrc_n(n),
            plain,
        }
    }
    /// `lanes` elements at `i` in 128-bit pieces, each aligned to its size
    /// ([`load_vec`]), with the keep-in-L2 hint when `hint` (checked then).
    fn load(&self, i: Val, lanes: u32, hint: bool) -> Val {
        let piece = (16 / self.view.elem().size_bytes()).min(lanes);
        let al = piece * self.view.elem().size_bytes();
        match (self.plain, hint) {
            (_, true) => self.rsrc.load_vec_keep_l2(i, lanes, al),
            (Plain::No, false) => load_vec(self.rsrc, i, lanes),
            (_, false) => {
                let parts: Vec<Val> = (0..lanes / piece)
                    .flat_map(|k| {
                        let at = if k == 0 { i } else { i + (k * piece) as i32 };
                        self.view.load_vec(at, piece, al).elems()
                    })
                    .collect();
                vec_of(&parts)
            }
        }
    }
    /// Store `v` (at most 128 bits, aligned to `align` bytes) at `i`.
    fn store(&self, i: Val, v: Val, align: u32) {
        if self.plain == Plain::All {
            self.view.store_aligned(i, v, align, false)
        } else {
            self.rsrc.store_aligned(i, v, align, false)
        }
    }
}

/// The register-resident vectorised paths (fast and multi-row, aligned and ragged: `path`).
/// A ragged path's rows take their slots from [`Ragged`]: 128-bit accesses for the slots
/// wholly in the row, element accesses masked to the row for the others, LayerNorm's
/// elements outside the row filled with its shift (so their deviations are 0) and the
/// weights outside it read as 0 (so their outputs are 0, which the quant amax ignores).
fn vectorised(p: &Params, fam: Family, math: &RowMath, path: Path, shape: Shape, target: Target) {
    let (tiles, ragged) = match path {
        Path::Fast(t) | Path::Rows(t) => (t, false),
        Path::FastRagged(t) | Path::RowsRagged(t) => (t, true),
        Path::Generic => unreachable!("the generic path is not vectorised"),
    };
    let dt = fam.dt.scalar();
    // Fewer instructions per element on sm_90, where the bf16 LayerNorm forward spends about
    // 70% of the issue slots a copy-rate row allows: bf16 widened by integer ops ([`widen`]),
    // and the sums (of squares) accumulated lane-wise, by fused multiply-adds
    // ([`RowMath::first_partial`]). AMD keeps the plain forms: with them LLVM allocates
    // fewer VGPRs there (gfx950 bf16 LayerNorm, 4 tiles: 69 against 84, 7 waves per SIMD
    // against 5).
    let lean = !target.is_amd();
    let wide = move |v: Val| if lean { widen(v) } else { v.cast(F32) };
    let vec = fam.dt.vec();
    let tid = thread_id_x();
    let bdim = block_dim_x();
    let n64 = p.n.cast(I64);
    // Lane `j` of a stride-`stride` team owns vectors j, j + stride, ... of its row.
    let (j, stride) = match shape {
        Shape::Block(_) => (tid, bdim),
        Shape::Rows => (tid & (p.lanes - 1), p.lanes),
    };
    let idx: Vec<Val> = (0..tiles)
        .map(|t| (stride * t as i32 + j) * vec as i32)
        .collect();
    let inrange: Vec<Val> = idx.iter().map(|&i| i.lt(p.n)).collect();
    // The weights' accesses (whole tensors), checked and plain.
    let weights = [Plain::No, Plain::All].map(|plain| {
        let w = |t: Tensor| Access::new(t, c_i32(0), t.len(), plain);
        (w(p.gamma), w(p.beta))
    });
    let smooth = p.q.map(|(_, _, xs)| (xs.len().gt(0i64), xs.rsrc()));
    // Column-aligned, once per thread, where they fit the registers (a ragged row reads its
    // own, [`Ragged::weights`], and the recomputing quant kernels theirs chunk by chunk).
    let hoist_xs = !ragged && !quant_recomputes(tiles);
    let xsv: Vec<Val> = match smooth {
        Some((_, r)) if hoist_xs => idx.iter().map(|&i| load_vec(r, i, vec)).collect(),
        _ => vec![],
    };
    let has_res = p.res.len().gt(0i64);
    let has_mean = p.mean.len().gt(0i64);
    let has_rstd = p.rstd.len().gt(0i64);
    let ws = wave_size() as i32;
    let nwaves = (bdim + (ws - 1)) / ws;

    // The row's vectors of `r`, with the keep-in-L2 hint when `keep_l2` is set.
    let keep_l2 = p.keep_l2.ne(0);
    let row_loads = |r: Access| -> Vec<Val> {
        keep_l2_if(keep_l2, |hint| {
            idx.iter().map(|&i| r.load(i, vec, hint)).collect()
        })
    };

    // `plain`: every tile of every lane lies inside the row (rows of at least
    // `stride * tiles * vec` elements on NVIDIA, a uniform branch around the row loop), so
    // that the row's accesses need no bounds checks ([`Access`]); the multi-row path's
    // stores stay checked (its rows past `m` drop theirs).
    // On a ragged path `plain` only concerns the weights: its slot accesses are in range by
    // construction ([`Ragged`]).
    let row_body = |cx: RowCtx, parity: Val, plain: Plain| {
        let rg = ragged.then(|| Ragged::new(cx.base, &idx, vec, p.n, cx.nrow.cast(I32)));
        let access = |t: Tensor| match &rg {
            None => Access::new(t, cx.base, cx.nrow, plain),
            Some(rg) => Access::new(t, rg.abase, cx.nrow + rg.p.cast(I64), Plain::All),
        };
        // The row's vectors of `t` (a ragged row's partial slots element by element, zeros
        // outside the row).
        let loads_of = |t: Tensor| -> Vec<Val> {
            match &rg {
                None => row_loads(access(t)),
                Some(rg) => keep_l2_if(keep_l2, |hint| {
                    let (a, row) = (access(t), t.offset(cx.base));
                    (0..tiles as usize)
                        .map(|k| {
                            if_else(
                                rg.full[k],
                                || vec![a.load(idx[k], vec, hint)],
                                || vec![rg.gather_row(row, k)],
                            )[0]
                        })
                        .collect()
                }),
            }
        };
        // Store tile `k`'s vector `v` through `a`, the access of `t` (`align` bytes; a
        // ragged row's partial slots element by element).
        let store_of = |a: Access, t: Tensor, k: usize, v: Val, align: u32| match &rg {
            None => a.store(idx[k], v, align),
            Some(rg) => rg.store(&|v| a.store(idx[k], v, align), t.offset(cx.base), k, v),
        };
        let xs = loads_of(p.x);
        let xin = if_else(
            has_res,
            || {
                let ror = access(p.res_out);
                let rs = loads_of(p.res);
                xs.iter()
                    .zip(&rs)
                    .enumerate()
                    .map(|(k, (&x, &r))| {
                        let s = (wide(x) + wide(r)).cast(dt);
                        store_of(ror, p.res_out, k, s, 16);
                        s
                    })
                    .collect()
            },
            || xs.clone(),
        );
        // LayerNorm's shift: the row's first element as the kernel sees it (after the fused
        // add); the multi-row path's rows past `m` (zeros) take shift 0.
        let shift_of = || {
            let x0 = p.x.offset(cx.base).load(c_i32(0));
            let shift = if_else(
                has_res,
                || {
                    let r0 = p.res.offset(cx.base).load(c_i32(0));
                    vec![wide((wide(x0) + wide(r0)).cast(dt))]
                },
                || vec![wide(x0)],
            )[0];
            match shape {
                Shape::Block(_) => shift,
                Shape::Rows => select(cx.valid, shift, c_f32(0.0)),
            }
        };
        // A ragged row's elements outside it: LayerNorm's shift (deviation 0), else 0; every
        // slot then counts as in range.
        let early_shift = (ragged && fam.norm == Norm::Layer).then(shift_of);
        let refill = |xin: Vec<Val>| -> Vec<Val> {
            match (&rg, early_shift) {
                (Some(rg), Some(s)) => xin
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| rg.fill(k, v, s))
                    .collect(),
                _ => xin,
            }
        };
        let xin = refill(xin);
        let inrange: Vec<Val> = match &rg {
            None => inrange.clone(),
            Some(_) => inrange.iter().map(|_| c_i32(1).ne(0)).collect(),
        };
        let xf: Vec<Val> = xin.iter().map(|&v| wide(v)).collect();
        let reduce = |vals: Vec<(Val, Op)>, round: i32| -> Vec<Val> {
            match shape {
                Shape::Block(s) => {
                    let region = if round & 1 == 0 { parity } else { parity ^ 1 };
                    block_reduce_n(&vals, red_region(s, region), nwaves)
                }
                Shape::Rows => vals
                    .iter()
                    .map(|&(v, r)| lanes_reduce(v, r, Some(p.lanes)))
                    .collect(),
            }
        };
        // 2-byte inputs stay packed across the reduction (half the registers of f32), and
        // are widened again after it (see `opaque`; the last copy is taken after the
        // reduction).
        let packed = fam.dt.bytes() == 2;
        let rewiden = |xin: &[Val], zero: Val| -> Vec<Val> {
            xin.iter().map(|&v| wide(opaque(v, zero))).collect()
        };
        // (mean, rstd, overflowed, the shift of LayerNorm's sums, the i32 zero that orders
        // the last widening after the reduction). One reduction per row for both norms.
        let (mean, rstd, over, shift, zero) = match fam.norm {
            Norm::Rms => {
                let ss = reduce(vec![(math.first_partial(&xf, lean), Op::Sum)], 0)[0];
                let rstd = math.rms_rstd(ss);
                let over = math.overflowed(c_f32(0.0), ss);
                (c_f32(0.0), rstd, over, c_f32(0.0), p.n >> 31)
            }
            Norm::Layer => {
                // Shifted sums: the deviations from the row's first element (`shift_of`),
                // `(sum(d), sum(d^2))`, one reduction (`RowMath::shifted_stats`; accurate
                // whatever `|mean| / std`).
                let shift = early_shift.unwrap_or_else(shift_of);
                let (sd, sq) = math.dev_partials(&xf, &inrange, shift, lean);
                let t = reduce(vec![(sd, Op::Sum), (sq, Op::Sum)], 0);
                let over = math.overflowed(shift, t[1]);
                let (mean, rstd) = math.shifted_stats(shift, t[0], t[1]);
                // A zero the compilers cannot equate with the first copy's `n >> 31`, and
                // uniform (AMD keeps it in an SGPR; a VGPR zero from the reduction made LLVM
                // compute every copied word up front: +23 VGPRs, bf16 4 tiles on gfx950).
                let zero = (p.n & p.m) >> 31;
                (mean, rstd, over, shift, zero)
            }
        };
        // Rows whose sums overflowed ([`RowMath::rescaled`]).
        let (mean, rstd, xin) = match shape {
            // One row per block on NVIDIA: `over` is uniform over the block, so the fallback
            // works on the registers the row already lives in, with block reductions in
            // rounds 1 and 2 and a barrier after them. Each pass widens the packed row again
            // through its own opaque zero (`m` and `n` are non-negative), so that LLVM neither
            // keeps a widened copy across the first reduction nor shares one with the
            // common case (hoisting it above the branch). AMD keeps the memory fallback
            // below: there the register one costs up to 20 VGPRs (gfx950 bf16 t4: 73 -> 93).
            Shape::Block(_) if lean => {
                let r = if_else(
                    over,
                    || {
                        let pass = std::cell::Cell::new(0);
                        let regs = |init: &[Val], f: Step| -> Vec<Val> {
                            pass.set(pass.get() + 1);
                            let opaque_zero = if pass.get() == 1 {
                                (p.m | p.n) >> 31
                            } else {
                                (p.m ^ p.n) >> 31
                            };
                            // Tile by tile: one widened tile live at a time.
                            (0..xin.len()).fold(init.to_vec(), |acc, t| {
                                let x = if packed {
                                    wide(opaque(xin[t], opaque_zero))
                                } else {
                                    xf[t]
                                };
                                f(&acc, x, select(inrange[t], c_f32(1.0), c_f32(0.0)))
                            })
                        };
                        let round = std::cell::Cell::new(0);
                        let block = |v: &[(Val, Op)]| {
                            round.set(round.get() + 1);
                            reduce(v.to_vec(), round.get())
                        };
                        let share = Share {
                            fold: &regs,
                            reduce: &block,
                        };
                        let (m, s) = math.rescaled(&share, shift, (mean, rstd));
                        // A row with a NaN or an infinity stops after round 1: the barrier
                        // frees both regions for the reductions that follow.
                        barrier();
                        vec![m, s]
                    },
                    || vec![mean, rstd],
                );
                (r[0], r[1], xin)
            }
            // Groups of lanes per row (and AMD's fast path): the branch may diverge between
            // the rows of a wave, so each lane takes the statistics from its own pass over
            // the whole row in memory (no cross-lane operation), rows of at most
            // `MAX_BLOCK * tiles * vec` elements. 4-byte plain loads: registers are
            // allocated for the whole kernel, so this rarely taken loop keeps to a few
            // (16-byte loads cost the light multi-row kernels up to 25 VGPRs), and a pointer
            // takes half the SGPRs of a buffer resource. The multi-row path's rows past `m`
            // read zeros (checked loads) or row `m - 1` (plain loads, which may take this
            // branch too), and store nothing. The branch
            // returns the statistics and the row's vectors: the rare branch reads them again
            // (residual_out, which this lane stored, when adding), so that the registers
            // holding them are not live across its loops.
            _ => {
                // (Element loads on a ragged path: its rows start anywhere.)
                let fb = if ragged { 1 } else { 4 / fam.dt.bytes() };
                let fa = fb * fam.dt.bytes();
                let row_fold = |init: &[Val], f: Step| -> Vec<Val> {
                    let xt = p.x.offset(cx.base);
                    for_range(c_i32(0), p.n, c_i32(fb as i32), init, |i, acc| {
                        let x = xt.load_vec(i, fb, fa);
                        let v = if_else(
                            has_res,
                            || {
                                let rt = p.res.offset(cx.base);
                                vec![(wide(x) + wide(rt.load_vec(i, fb, fa))).cast(dt)]
                            },
                            || vec![x],
                        )[0];
                        f(acc, wide(v), c_f32(1.0))
                    })
                };
                let own = |v: &[(Val, Op)]| v.iter().map(|&(x, _)| x).collect::<Vec<_>>();
                let share = Share {
                    fold: &row_fold,
                    reduce: &own,
                };
                let tiles_n = xin.len();
                let r = if_else(
                    over,
                    || {
                        let (m, s) = math.rescaled(&share, shift, (mean, rstd));
                        let again = match &rg {
                            None => if_else(
                                has_res,
                                || {
                                    let ror = p.res_out.offset(cx.base).rsrc_n(cx.nrow);
                                    idx.iter().map(|&i| ror.load_vec(i, vec, 16)).collect()
                                },
                                || {
                                    let xr = p.x.offset(cx.base).rsrc_n(cx.nrow);
                                    idx.iter().map(|&i| xr.load_vec(i, vec, 16)).collect()
                                },
                            ),
                            Some(_) => {
                                refill(if_else(has_res, || loads_of(p.res_out), || loads_of(p.x)))
                            }
                        };
                        [vec![m, s], again].concat()
                    },
                    || [vec![mean, rstd], xin.clone()].concat(),
                );
                (r[0], r[1], r[2..2 + tiles_n].to_vec())
            }
        };
        let xf: Vec<Val> = if packed {
            rewiden(&xin, zero)
        } else {
            xin.iter().map(|&v| wide(v)).collect()
        };
        // The weights are read per row after the reductions (L1 hits after the first rows of
        // an SM), so that they are not live across their barriers: the gammas, then the betas
        // (LayerNorm) of tiles `ts`, each index plus `off` when given.
        let (gr, br) = weights[usize::from(plain != Plain::No)];
        let load_w = |ts: std::ops::Range<usize>, off: Option<Val>| {
            let layer = fam.norm == Norm::Layer;
            if let Some(rg) = &rg {
                let (gl, bl) = (
                    |i: Val, l: u32| gr.load(i, l, false),
                    |i: Val, l: u32| br.load(i, l, false),
                );
                let mut loads: Vec<&dyn Fn(Val, u32) -> Val> = vec![&gl];
                if layer {
                    loads.push(&bl);
                }
                let ts: Vec<usize> = ts.collect();
                let w = rg.weights(&ts, &loads, off);
                return (0..ts.len())
                    .map(|i| (w[0][i], layer.then(|| w[1][i])))
                    .collect::<Vec<_>>();
            }
            let at = |t: usize| off.map_or(idx[t], |o| idx[t] + o);
            let g: Vec<Val> = ts.clone().map(|t| gr.load(at(t), vec, false)).collect();
            let b: Vec<Option<Val>> = ts
                .map(|t| layer.then(|| br.load(at(t), vec, false)))
                .collect();
            g.into_iter().zip(b).collect::<Vec<_>>()
        };
        // The weights are read `chunk` tiles at a time (see `fwd_weight_chunk`), the first
        // chunk right away.
        let chunk = fwd_weight_chunk(fam, path).min(tiles) as usize;
        let w = load_w(0..chunk, None);
        // `xhat = (x - mean) * rstd`, or with 2-byte inputs on the lean targets one fused
        // multiply-add an element, as accurate (`RowMath::xhat_fma`).
        let sig = if fam.dt == DType::BF16 { 8 } else { 11 };
        let fused = (lean && fam.norm == Norm::Layer && packed)
            .then(|| math.xhat_fma(shift, mean, rstd, sig));
        let xhat = |x: Val| match fused {
            Some((r, nb)) => {
                let l = x.lanes();
                x.fma(splat(r, l), splat(nb, l))
            }
            None => math.xhat(x, mean, rstd),
        };
        // `y` of tile `t` in f32 from its weights and its widened input `x`.
        let y_of = |x: Val, (g, b): (Val, Option<Val>)| {
            let xh = xhat(x);
            let bt = b.map(wide).unwrap_or(xh);
            math.y(xh, wide(g), bt)
        };
        let write_stats = cx.first & cx.valid;
        if fam.norm == Norm::Layer {
            if_(write_stats & has_mean, || p.mean.store(cx.row, mean));
        }
        if_(write_stats & has_rstd, || p.rstd.store(cx.row, rstd));
        // One pass over the row's outputs, chunk by chunk, from the widened inputs `xs` and
        // the first chunk's weights `w`: `f(tiles, ys)` for each chunk's `y` (smooth-scaled
        // for quant). Each chunk after the first adds a run-time zero taken from the previous
        // chunk's output to its weight indices, so its loads issue only after that chunk's
        // weights have arrived.
        type Wts = Vec<(Val, Option<Val>)>;
        let pass = |xs: &[Val], mut w: Wts, f: &mut dyn FnMut(std::ops::Range<usize>, &[Val])| {
            for c0 in (0..tiles as usize).step_by(chunk) {
                let ts = c0..(c0 + chunk).min(tiles as usize);
                let ys: Vec<Val> = ts
                    .clone()
                    .zip(std::mem::take(&mut w))
                    .map(|(t, w)| y_of(xs[t], w))
                    .collect();
                let ys = match smooth {
                    Some((sm, xsr)) => {
                        // A ragged row's xscale realigned for it, chunk by chunk.
                        let scales: Vec<Val> = match &rg {
                            None if hoist_xs => xsv[ts.clone()].to_vec(),
                            None => ts.clone().map(|t| load_vec(xsr, idx[t], vec)).collect(),
                            Some(rg) => {
                                let xl = |i: Val, l: u32| load_vec(xsr, i, l);
                                let tl: Vec<usize> = ts.clone().collect();
                                rg.weights(&tl, &[&xl], None).remove(0)
                            }
                        };
                        ys.iter()
                            .zip(&scales)
                            .map(|(&y, &s)| select(sm, y * s, y))
                            .collect()
                    }
                    None => ys,
                };
                f(ts, &ys);
                let next = c0 + chunk;
                if next < tiles as usize {
                    let v = ys[ys.len() - 1];
                    let off = v.bitcast(Type::vec(I32, v.lanes())).at(0) & (p.n >> 31);
                    w = load_w(next..(next + chunk).min(tiles as usize), Some(off));
                }
            }
        };
        match (p.y, p.q) {
            (Some(y), _) => {
                let mut yr = None;
                pass(&xf, w, &mut |ts, ys| {
                    let yr = *yr.get_or_insert_with(|| access(y));
                    for (t, &v) in ts.zip(ys) {
                        store_of(yr, y, t, v.cast(dt), 16);
                    }
                });
            }
            (None, Some((q, yscale, _))) => {
                // The row's amax over the lane's `y` (and the non-finite detector).
                let mut amax = c_f32(0.0);
                let mut nf = c_f32(0.0);
                let mut kept: Vec<Val> = Vec::new();
                let recompute = quant_recomputes(tiles);
                pass(&xf, w, &mut |ts, ys| {
                    for (t, &y) in ts.zip(ys) {
                        amax = amax.max(select(inrange[t], hmax(y.abs()), c_f32(0.0)));
                    }
                    nf = nonfinite_acc(nf, ys);
                    if !recompute {
                        kept.extend_from_slice(ys);
                    }
                });
                let amax = amax_or_inf(amax, nf);
                // The row's last round (`fast_rounds`).
                let amax = reduce(vec![(amax, Op::Max)], fast_rounds(fam) - 1)[0];
                let (scale, inv) = quant_scale(amax);
                if_(write_stats, || yscale.store(cx.row, scale));
                let qr = access(q);
                let mut quantise = |ts: std::ops::Range<usize>, ys: &[Val]| {
                    for (t, &y) in ts.zip(ys) {
                        store_of(qr, q, t, quantize(y, inv), vec);
                    }
                };
                if recompute {
                    // A zero that depends on the reduction, so that the second pass's
                    // widening (and the `y` from it) stays after it rather than shared
                    // with the first pass.
                    let zero2 = amax.bitcast(Type::s(I32)) & (p.n >> 31);
                    let xs2 = rewiden(&xin, zero2);
                    pass(&xs2, load_w(0..chunk, Some(zero2)), &mut quantise);
                } else {
                    quantise(0..tiles as usize, &kept);
                }
            }
            _ => {}
        }
    };

    // i32 bounds (kernels/config.rs): the row loops step `row += grid` (grid <= MAX_GRID)
    // while `row < m` and the multi-row path's `(m + rpb - 1) / rpb` and `rb * rpb + group`
    // stay below `m + 256`: all below 2^31 for `m <= MAX_ROWS`. Element indices within a
    // row are below `MAX_BLOCK * tiles * vec` (the path's row capacity).
    // gamma is `n` long (the launcher checks), and so is LayerNorm's beta when given;
    // without one the checked loop reads it as zeros.
    let beta_ok = match fam.norm {
        Norm::Layer => p.beta.len().gt(0i64),
        Norm::Rms => c_i32(1).ne(0),
    };
    match shape {
        Shape::Block(_) => {
            let rows = |plain: Plain| {
                for_range(block_id_x(), p.m, grid_dim_x(), &[c_i32(0)], |row, c| {
                    let base = row.cast(I64) * n64;
                    let cx = RowCtx {
                        row,
                        valid: row.lt(p.m),
                        base,
                        nrow: n64,
                        first: tid.eq(0),
                    };
                    row_body(cx, c[0], plain);
                    vec![if fast_rounds(fam) & 1 == 1 {
                        c[0] ^ 1
                    } else {
                        c[0]
                    }]
                });
                vec![]
            };
            // Rows that every lane's tiles lie in: lane `j`'s last tile ends at element
            // `(bdim * (tiles - 1) + j + 1) * vec <= bdim * tiles * vec` (at most
            // `MAX_BLOCK * 8 * 8`: no i32 overflow), `beta_ok` as above. AMD's buffer
            // accesses check for free: one loop.
            // A ragged row's slots are in range by construction: only the weights (beta)
            // decide.
            if lean {
                let covered = match ragged {
                    false => (bdim * (tiles * vec) as i32).le(p.n),
                    true => c_i32(1).ne(0),
                };
                let full = covered & beta_ok;
                if_else(full, || rows(Plain::All), || rows(Plain::No));
            } else {
                rows(Plain::No);
            }
        }
        Shape::Rows => {
            let rpb = bdim / p.lanes;
            let group = tid / p.lanes;
            let nblocks = (p.m + rpb - 1) / rpb;
            let rows = |plain: Plain| {
                for_range_(block_id_x(), nblocks, grid_dim_x(), |rb| {
                    let row = rb * rpb + group;
                    let valid = row.lt(p.m);
                    let rowc = row.min(p.m - 1);
                    let base = rowc.cast(I64) * n64;
                    let nrow = select(valid, n64, c_i64(0));
                    let cx = RowCtx {
                        row,
                        valid,
                        base,
                        nrow,
                        first: j.eq(0),
                    };
                    row_body(cx, c_i32(0), plain);
                });
                vec![]
            };
            // As the fast path's, with `lanes` lanes a row; rows past `m` read row `m - 1`
            // (`rowc`), in range.
            if lean {
                let covered = match ragged {
                    false => (p.lanes * (tiles * vec) as i32).le(p.n),
                    true => c_i32(1).ne(0),
                };
                let full = covered & beta_ok;
                if_else(full, || rows(Plain::Loads), || rows(Plain::No));
            } else {
                rows(Plain::No);
            }
        }
    }
}

/// The generic path: any `n`, in run-time loops over the row. Rows of a multiple of the
/// 128-bit vector width take 128-bit accesses (a uniform run-time branch), the others scalar
/// (what it gains: `bench/fly-norm-registers.md`).
fn generic(p: &Params, fam: Family, math: &RowMath, scratch: Lds) {
    let w = fam.dt.vec();
    let vector_rows = (p.n & (w as i32 - 1)).eq(0);
    if_else(
        vector_rows,
        || {
            generic_rows(p, fam, math, scratch, w);
            vec![]
        },
        || {
            generic_rows(p, fam, math, scratch, 1);
            vec![]
        },
    );
}

/// [`generic`] with `w` elements an access (`n % w == 0`). i32 bounds: the column loops
/// step `i += 256 * w` (at most 2048) while `i < n`, and the AMD byte offsets of the weight
/// resources are `i * 4` at most: below 2^31 for `n <= MAX_COLS`; the row loop as the
/// vectorised paths' (`m <= MAX_ROWS`).
fn generic_rows(p: &Params, fam: Family, math: &RowMath, scratch: Lds, w: u32) {
    let dt = fam.dt.scalar();
    let bt = GENERIC_THREADS as i32;
    let tid = thread_id_x();
    let (start, step) = (tid * w as i32, c_i32(bt * w as i32));
    // Rows start at multiples of `w` elements (`n % w == 0`): `w`-element accesses of the
    // activations are aligned to their size.
    let al = (w * fam.dt.bytes()).min(16);
    let n64 = p.n.cast(I64);
    let (gr, br) = (p.gamma.rsrc(), p.beta.rsrc());
    let has_res = p.res.len().gt(0i64);
    let has_mean = p.mean.len().gt(0i64);
    let has_rstd = p.rstd.len().gt(0i64);
    let nwaves = c_i32((GENERIC_THREADS / wave_size()) as i32);
    for_range(block_id_x(), p.m, grid_dim_x(), &[c_i32(0)], |row, c| {
        let parity = c[0];
        let base = row.cast(I64) * n64;
        let (xt, rt, rot) = (p.x.offset(base), p.res.offset(base), p.res_out.offset(base));
        // LDS units (block_reduce_n regions; Chan's merge takes two): the row's moments in
        // units 2p and 2p + 1 (p = parity), the fallback's reductions alternately in 2q and
        // 2q + 1 (q = 1 - p; it ends with a barrier), the quant amax in 2q. Consecutive
        // reductions never share a unit: the next row keeps p after a quant row (its last
        // reduction used 2q) and flips it after a plain one.
        let (p2, q2) = (parity * 2, (parity ^ 1) * 2);
        let region = |k: i32| if k < 2 { p2 + k } else { q2 + (k - 2) };
        // Pass 1's input of element i: x, or (stored to residual_out) x + residual.
        let pass1 = |i: Val| {
            let xv = xt.load_vec(i, w, al);
            if_else(
                has_res,
                || {
                    let s = (xv.cast(F32) + rt.load_vec(i, w, al).cast(F32)).cast(dt);
                    rot.store_aligned(i, s, al, false);
                    vec![s]
                },
                || vec![xv],
            )[0]
            .cast(F32)
        };
        let zero = c_f32(0.0);
        // Pass 1: (fused add and) the row's statistics, and whether they overflowed.
        // (mean, rstd, overflowed, the shift of the fallback's LayerNorm sums).
        let (mean, rstd, over, shift) = match fam.norm {
            Norm::Rms => {
                let ss = for_range(start, p.n, step, &[zero], |i, acc| {
                    let x = pass1(i);
                    vec![acc[0] + hsum(x * x)]
                })[0];
                let ss =
                    block_reduce_n(&[(ss, Op::Sum)], red_region(scratch, region(0)), nwaves)[0];
                let over = math.overflowed(zero, ss);
                (zero, math.rms_rstd(ss), over, zero)
            }
            Norm::Layer => {
                // Each thread sums its elements shifted by its first one (`k`, read again;
                // any value near the row's works), so its sums cancel nothing when
                // |mean| >> std; the threads' (count, mean, M2) merge by Chan's formulas,
                // with the means taken relative to the row's first element (`k0`), so that they
                // are of the order of the spread and their roundings do not blur the
                // differences the merge squares.
                // The element as pass 1 sees it (after the fused add: a residual with a
                // large mean moves the row's mean with it).
                let seen = |i: Val| {
                    if_else(
                        has_res,
                        || vec![(xt.load(i).cast(F32) + rt.load(i).cast(F32)).cast(dt)],
                        || vec![xt.load(i)],
                    )[0]
                    .cast(F32)
                };
                let k0 = seen(c_i32(0));
                let k = seen(start.min(p.n - 1));
                let kv = splat(k, w);
                let acc = for_range(start, p.n, step, &[zero, zero, zero], |i, acc| {
                    let d = pass1(i) - kv;
                    vec![acc[0] + w as f32, acc[1] + hsum(d), acc[2] + hsum(d * d)]
                });
                let (cnt, s, q) = (acc[0], acc[1], acc[2]);
                let r = c_f32(1.0) / cnt.max(1.0f32);
                let own_mean = select(cnt.gt(0.0f32), (k - k0) + s * r, zero);
                let m2 = (q - s * (s * r)).max(0.0f32);
                let [_, mean, m2] =
                    chan_block_reduce([cnt, own_mean, m2], scratch, region(0), GENERIC_THREADS);
                let mean = k0 + mean;
                let var = m2 * math.inv_n;
                // Overflow and NaN look alike after the merge: both take the fallback,
                // which gives up after its first pass on a NaN.
                let finite = mean.abs().lt(f32::INFINITY) & m2.lt(f32::INFINITY);
                (mean, (var + math.eps).rsqrt(), !finite, k0)
            }
        };
        // The overflow fallback over the same elements (the thread's own residual_out
        // stores when adding), reductions alternating between two regions, then a barrier
        // so that the next reduction may use either.
        let fold = |init: &[Val], f: Step| -> Vec<Val> {
            for_range(start, p.n, step, init, |i, acc| {
                let v = if_else(
                    has_res,
                    || vec![rot.load_vec(i, w, al)],
                    || vec![xt.load_vec(i, w, al)],
                )[0];
                f(acc, v.cast(F32), c_f32(1.0))
            })
        };
        let round = std::cell::Cell::new(0);
        let reduce = |v: &[(Val, Op)]| {
            round.set(round.get() + 1);
            block_reduce_n(
                v,
                red_region(scratch, region(2 + (round.get() & 1))),
                nwaves,
            )
        };
        let share = Share {
            fold: &fold,
            reduce: &reduce,
        };
        let r = if_else(
            over,
            || {
                let (m, s) = math.rescaled(&share, shift, (mean, rstd));
                barrier();
                vec![m, s]
            },
            || vec![mean, rstd],
        );
        let (mean, rstd) = (r[0], r[1]);
        let first = tid.eq(0);
        if fam.norm == Norm::Layer {
            if_(first & has_mean, || p.mean.store(row, mean));
        }
        if_(first & has_rstd, || p.rstd.store(row, rstd));
        // The normalisation input of element i (re-read from residual_out when adding).
        let input = |i: Val| {
            if_else(
                has_res,
                || vec![rot.load_vec(i, w, al).cast(F32)],
                || vec![xt.load_vec(i, w, al).cast(F32)],
            )[0]
        };
        let yof = |i: Val| {
            let xh = math.xhat(input(i), mean, rstd);
            let b = match fam.norm {
                Norm::Layer => load_vec(br, i, w).cast(F32),
                Norm::Rms => xh,
            };
            math.y(xh, load_vec(gr, i, w).cast(F32), b)
        };
        match (p.y, p.q) {
            (Some(y), _) => {
                let yt = y.offset(base);
                for_range_(start, p.n, step, |i| {
                    yt.store_aligned(i, yof(i).cast(dt), al, false)
                });
            }
            (None, Some((q, yscale, xscale))) => {
                let smooth = xscale.len().gt(0i64);
                let xsr = xscale.rsrc();
                let ysof = |i: Val| {
                    let y = yof(i);
                    select(smooth, y * load_vec(xsr, i, w), y)
                };
                let acc = for_range(start, p.n, step, &[c_f32(0.0), c_f32(0.0)], |i, acc| {
                    let y = ysof(i);
                    vec![acc[0].max(hmax(y.abs())), nonfinite_acc(acc[1], &[y])]
                });
                let amax = amax_or_inf(acc[0], acc[1]);
                let amax =
                    block_reduce_n(&[(amax, Op::Max)], red_region(scratch, region(2)), nwaves)[0];
                let (scale, inv) = quant_scale(amax);
                if_(first, || yscale.store(row, scale));
                let qt = q.offset(base);
                for_range_(start, p.n, step, |i| {
                    qt.store_aligned(i, quantize(ysof(i), inv), w, false)
                });
            }
            _ => {}
        }
        match fam.kind {
            Kind::ForwardQuant => vec![parity],
            _ => vec![parity ^ 1],
        }
    });
}
