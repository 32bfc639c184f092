//! Backward kernels of both norms: `dx` per row, and the per-column weight gradients
//! accumulated over the rows a block visits (a persistent grid), then either written as the
//! block's f32 partial row (`mode == 0`, deterministic two-stage; a column-sum kernel
//! finishes) or added with f32 atomics into one f32 row (`mode == 1`).
//!
//! The fast path holds a thread's columns' partials in registers across all its rows; up to
//! 16 elements a thread it also holds the row across the row reduction, past that it reads
//! the row again after it (from L2), so that only the partials stay live ([`fast_rows`]).
//! Rows that are not a multiple of the vector width (unaligned row starts) run the fast
//! path's ragged kernels: the same register layout, element-wise loads and stores
//! ([`Access`]). The generic path takes any row.
//!
//! Parameters, in order: `x`, `gamma`, `dy`, `mean`, `rstd`, `dresidual`, `dx`,
//! `dgamma_part`, `dbeta_part`, scalars `m`, `n`, `mode`. An empty `dresidual` means no
//! fused-add gradient; RMSNorm ignores `mean` and `dbeta_part`. In two-stage mode every
//! block writes (the generic path: clears, then accumulates into) its whole partial rows, so
//! they need no initialisation; atomic mode adds into row 0, which the caller zeroes.
//!
//! Numerics: the forward's `mean` and `rstd` come in, so `xhat = (x - mean) * rstd` is a
//! plain difference (nothing cancels however large |mean| / std) and no sum of squares is
//! formed: rows of any finite magnitude work given their statistics (`|x - mean|` must be
//! below f32's maximum, as in any f32 backward). The row sums `sum(xhat * dy * gamma)` and
//! `sum(dy * gamma)` overflow only for gradients near f32's maximum.
//!
//! i32 bounds (kernels/config.rs): row loops step `row += grid` (grid <= MAX_GRID) while
//! `row < m <= MAX_ROWS`, the generic path's column loops `i += 256` while
//! `i < n <= MAX_COLS`; fast-path indices stay below the block's row capacity.

use crate::common::*;
use crate::config::{
    bwd_fast_resident, bwd_kernel_name, bwd_stream_groups, fast_max_block, Family, Norm, Path,
    GENERIC_THREADS,
};
use flydsl_dsl::ir::{Const, Kernel, ScalarType, Target, Type};
use flydsl_dsl::*;

use ScalarType::{F32, I32, I64};

struct Params {
    x: Tensor,
    gamma: Tensor,
    dy: Tensor,
    mean: Tensor,
    rstd: Tensor,
    dres: Tensor,
    dx: Tensor,
    dg: Tensor,
    db: Tensor,
    m: Val,
    n: Val,
    mode: Val,
}

impl Params {
    fn declare(k: &mut KernelDef, fam: Family) -> Params {
        let dt = fam.dt.scalar();
        Params {
            x: k.tensor("x", dt),
            gamma: k.tensor("gamma", fam.wdt.scalar()),
            dy: k.tensor("dy", dt),
            mean: k.tensor("mean", F32),
            rstd: k.tensor("rstd", F32),
            dres: k.tensor("dresidual", dt),
            dx: k.tensor_mut("dx", dt),
            dg: k.tensor_mut("dgamma_part", F32),
            db: k.tensor_mut("dbeta_part", F32),
            m: k.scalar("m", I32),
            n: k.scalar("n", I32),
            mode: k.scalar("mode", I32),
        }
    }
}

/// Build the backward kernel of `fam` on `path` for `target`; `ragged`: the fast path's
/// variant for rows that are not a multiple of the vector width ([`Access`]), a kernel of
/// its own so that its element-wise loads do not raise the aligned kernel's registers.
pub fn build(fam: Family, path: Path, ragged: bool, target: Target) -> Result<Kernel, BuildError> {
    let max_threads = match path {
        Path::Fast(t) => fast_max_block(fam.kind, fam.dt, t),
        _ => GENERIC_THREADS,
    };
    let name = bwd_kernel_name(fam, path, ragged);
    KernelBuilder::new(&name, target, max_threads).build(|k| {
        let p = Params::declare(k, fam);
        let scratch = k.lds("red", F32, scratch_len(2));
        match path {
            Path::Fast(t) => {
                let a = Access {
                    vec: fam.dt.vec(),
                    aligned: !ragged,
                };
                fast_rows(&p, fam, t, scratch, a)
            }
            _ => generic(&p, fam, scratch),
        }
    })
}

/// The row statistics (mean, rstd) of `row`, read from the forward's outputs.
fn row_stats(p: &Params, fam: Family, row: Val) -> (Val, Val) {
    let mean = match fam.norm {
        Norm::Layer => p.mean.load(row),
        Norm::Rms => c_f32(0.0),
    };
    (mean, p.rstd.load(row))
}

/// `dx = (wdy - (xhat * c1 + c2)) * rstd` (c2 = 0 for RMSNorm).
fn dx_of(fam: Family, wdy: Val, xhat: Val, c: &[Val], rstd: Val) -> Val {
    let l = wdy.lanes();
    let mut t = xhat * splat(c[0], l);
    if fam.norm == Norm::Layer {
        t = t + splat(c[1], l);
    }
    (wdy - t) * splat(rstd, l)
}

/// How the fast path reaches memory: 128-bit vectors when rows are a multiple of the vector
/// width (every row then starts 16-byte aligned), else one element at a time into the same
/// register layout (a ragged `n`: row `r` starts at element `r * n`, unaligned). Loads past
/// the row's end read 0, stores there are dropped; so a thread's last, partly valid vector is
/// masked element by element.
#[derive(Clone, Copy)]
struct Access {
    vec: u32,
    aligned: bool,
}

impl Access {
    /// The `vec` elements of `r` at element `i` (a vector).
    fn load(self, r: Rsrc, i: Val) -> Val {
        if self.aligned {
            load_vec(r, i, self.vec)
        } else {
            let e: Vec<Val> = (0..self.vec).map(|e| r.load(i + e as i32)).collect();
            vec_of(&e)
        }
    }
    /// Store the `vec` elements of `v` at element `i` of `r`.
    fn store(self, r: Rsrc, i: Val, v: Val) {
        if self.aligned {
            store_vec(r, i, v);
        } else {
            for e in 0..self.vec {
                r.store(i + e as i32, v.at(e));
            }
        }
    }
}

/// The fast path's row loop and the hand-over of the block's column sums. A thread owns the
/// same `tiles` vectors of columns in every row, so its weight-gradient partials stay in
/// registers across all the rows of the block. Row-resident tile counts
/// ([`bwd_fast_resident`]) keep the row's `xhat`, `dy * gamma` and `dy` in registers across
/// the row reduction; the longer ones read the row (and gamma) a second time after it, from
/// the L2 the first pass just filled, so that only the partials stay live across it; each
/// pass reads its tiles in [`bwd_stream_groups`] groups (a group's loads wait for a run-time
/// zero from the previous group's results, so the compilers cannot hoist every load of the
/// row above the first use), and each tile's stores wait for the previous tile's new
/// partials (so that their adds are not sunk to the end of the row). Without these orders
/// the kernels spill: the partials already take 64 registers for LayerNorm's 32 columns a
/// thread.
fn fast_rows(p: &Params, fam: Family, tiles: u32, scratch: Lds, acc_mode: Access) {
    let dt = fam.dt.scalar();
    let vec = fam.dt.vec();
    let resident = bwd_fast_resident(fam.dt, tiles, acc_mode.aligned);
    let chunk = if resident {
        tiles as usize
    } else {
        tiles.div_ceil(bwd_stream_groups(acc_mode.aligned)) as usize
    };
    let math = RowMath::new(fam.norm, p.n, c_f32(0.0));
    let tid = thread_id_x();
    let bdim = block_dim_x();
    let n64 = p.n.cast(I64);
    let ws = wave_size() as i32;
    let nwaves = (bdim + (ws - 1)) / ws;
    let idx: Vec<Val> = (0..tiles)
        .map(|t| (bdim * t as i32 + tid) * vec as i32)
        .collect();
    let gr = p.gamma.rsrc_n(n64);
    let g_res: Vec<Val> = if resident {
        idx.iter().map(|&i| acc_mode.load(gr, i)).collect()
    } else {
        Vec::new()
    };
    // A run-time 0 the compilers cannot prove 0 (`n >= 0`), and'ed with a value to order
    // later loads after it.
    let zero_after = |v: Val| (p.n >> 31i32) & v.at(0).bitcast(Type::s(I32));
    let has_dres = p.dres.len().gt(0i64);
    let nres = select(has_dres, n64, c_i64(0));
    let zero = cnst(Type::vec(F32, vec), Const::Float(0.0));
    let layer = fam.norm == Norm::Layer;
    let nacc = if layer {
        2 * tiles as usize
    } else {
        tiles as usize
    };
    let mut init = vec![c_i32(0)];
    init.extend(std::iter::repeat_n(zero, nacc));
    let fin = for_range(block_id_x(), p.m, grid_dim_x(), &init, |row, c| {
        let parity = c[0];
        let base = row.cast(I64) * n64;
        let xr = p.x.offset(base).rsrc_n(n64);
        let dyr = p.dy.offset(base).rsrc_n(n64);
        let (mean, rstd) = row_stats(p, fam, row);
        // (xhat, dy * gamma, dy) in f32 of tile `t`, read at column `idx[t] + z`, gamma from
        // `g_res` (row-resident) or memory.
        let terms = |t: usize, z: Val| -> (Val, Val, Val) {
            let i = idx[t] + z;
            let x = acc_mode.load(xr, i);
            let dy = acc_mode.load(dyr, i);
            let g = if resident {
                g_res[t]
            } else {
                acc_mode.load(gr, i)
            };
            let d = dy.cast(F32);
            let h = math.xhat(x.cast(F32), mean, rstd);
            (h, d * g.cast(F32), d)
        };
        let mut first = Vec::new();
        let mut c1 = c_f32(0.0);
        let mut c2 = c_f32(0.0);
        let mut z = c_i32(0);
        for t0 in (0..tiles as usize).step_by(chunk) {
            let mut last = c1;
            for t in t0..(t0 + chunk).min(tiles as usize) {
                let (h, w, d) = terms(t, z);
                let hw = hsum(h * w);
                c1 = c1 + hw;
                last = hw;
                if layer {
                    c2 = c2 + hsum(w);
                }
                if resident {
                    first.push((h, w, d));
                }
            }
            z = zero_after(last);
        }
        let mut vals = vec![(c1, Op::Sum)];
        if layer {
            vals.push((c2, Op::Sum));
        }
        let cs: Vec<Val> = block_reduce_n(&vals, red_region(scratch, parity), nwaves)
            .iter()
            .map(|&v| v * math.inv_n)
            .collect();
        let dxr = p.dx.offset(base).rsrc_n(n64);
        let drr = p.dres.offset(base).rsrc_n(nres);
        let mut next = vec![parity ^ 1];
        let mut accb = Vec::new();
        // Row-streaming kernels: the second reads wait for the reduction's result, then each
        // group's for the previous group's; every tile's stores (and dresidual reads) wait for
        // the previous tile's new partials, so that the compilers cannot sink the partials'
        // adds to the end of the row (which keeps every tile's `dy * xhat` live until then
        // and spills). The row-resident kernels fit without (and the chain would cost them
        // registers: 64 -> 77 for 2-byte LayerNorm with 1 tile).
        let mut z = if resident {
            c_i32(0)
        } else {
            zero_after(cs[0])
        };
        for t0 in (0..tiles as usize).step_by(chunk) {
            let zl = z;
            for t in t0..(t0 + chunk).min(tiles as usize) {
                let (h, w, d) = if resident { first[t] } else { terms(t, zl) };
                let i = idx[t] + z;
                let dr = acc_mode.load(drr, i).cast(F32);
                let dx = dx_of(fam, w, h, &cs, rstd) + dr;
                acc_mode.store(dxr, i, dx.cast(dt));
                let ng = c[1 + t] + d * h;
                next.push(ng);
                let mut used = ng;
                if layer {
                    let nb = c[1 + tiles as usize + t] + d;
                    used = used + nb;
                    accb.push(nb);
                }
                if !resident {
                    z = zero_after(hsum(used));
                }
            }
        }
        next.extend(accb);
        next
    });
    // Hand the block's column sums over: a partial row, or f32 atomics.
    let bid = block_id_x();
    let outs: Vec<(Tensor, &[Val])> = if layer {
        vec![
            (p.dg, &fin[1..1 + tiles as usize]),
            (p.db, &fin[1 + tiles as usize..]),
        ]
    } else {
        vec![(p.dg, &fin[1..])]
    };
    if_else(
        p.mode.eq(0),
        || {
            for (t, acc) in &outs {
                let r = t.offset(bid.cast(I64) * n64).rsrc_n(n64);
                for (&i, &v) in idx.iter().zip(acc.iter()) {
                    acc_mode.store(r, i, v);
                }
            }
            vec![]
        },
        || {
            for (t, acc) in &outs {
                for (&i, &v) in idx.iter().zip(acc.iter()) {
                    if acc_mode.aligned {
                        // A vector is inside the row or past its end.
                        if_(i.lt(p.n), || {
                            for e in 0..vec {
                                t.atomic_add(i + e as i32, v.at(e));
                            }
                        });
                    } else {
                        for e in 0..vec {
                            let ie = i + e as i32;
                            if_(ie.lt(p.n), || {
                                t.atomic_add(ie, v.at(e));
                            });
                        }
                    }
                }
            }
            vec![]
        },
    );
}

fn generic(p: &Params, fam: Family, scratch: Lds) {
    let dt = fam.dt.scalar();
    let bt = GENERIC_THREADS as i32;
    let math = RowMath::new(fam.norm, p.n, c_f32(0.0));
    let tid = thread_id_x();
    let n64 = p.n.cast(I64);
    let gr = p.gamma.rsrc();
    let has_dres = p.dres.len().gt(0i64);
    let nres = select(has_dres, n64, c_i64(0));
    let nwaves = c_i32(bt / wave_size() as i32);
    let layer = fam.norm == Norm::Layer;
    let bid = block_id_x();
    let atomic = p.mode.ne(0);
    let own = bid.cast(I64) * n64;
    // Two-stage: this block's partial rows start at zero (each thread clears exactly the
    // columns it accumulates below, so no barrier is needed).
    if_(p.mode.eq(0), || {
        let mut parts = vec![p.dg];
        if layer {
            parts.push(p.db);
        }
        for_range_(tid, p.n, c_i32(bt), |i| {
            for t in &parts {
                t.store(own + i.cast(I64), c_f32(0.0));
            }
        });
    });
    for_range(bid, p.m, grid_dim_x(), &[c_i32(0)], |row, c| {
        let parity = c[0];
        let base = row.cast(I64) * n64;
        let (xt, dyt, dxt) = (p.x.offset(base), p.dy.offset(base), p.dx.offset(base));
        let drr = p.dres.offset(base).rsrc_n(nres);
        let (mean, rstd) = row_stats(p, fam, row);
        // (xhat, dy, dy * gamma) of element i.
        let terms = |i: Val| {
            let d = dyt.load(i).cast(F32);
            let h = math.xhat(xt.load(i).cast(F32), mean, rstd);
            (h, d, d * gr.load(i).cast(F32))
        };
        let part = for_range(tid, p.n, c_i32(bt), &[c_f32(0.0), c_f32(0.0)], |i, acc| {
            let (h, _, w) = terms(i);
            vec![acc[0] + h * w, acc[1] + w]
        });
        let mut vals = vec![(part[0], Op::Sum)];
        if layer {
            vals.push((part[1], Op::Sum));
        }
        let cs: Vec<Val> = block_reduce_n(&vals, red_region(scratch, parity), nwaves)
            .iter()
            .map(|&v| v * math.inv_n)
            .collect();
        for_range_(tid, p.n, c_i32(bt), |i| {
            let (h, d, w) = terms(i);
            let dx = dx_of(fam, w, h, &cs, rstd) + drr.load(i).cast(F32);
            dxt.store(i, dx.cast(dt));
            let mut outs = vec![(p.dg, d * h)];
            if layer {
                outs.push((p.db, d));
            }
            for (t, v) in outs {
                if_else(
                    atomic,
                    || {
                        t.atomic_add(i, v);
                        vec![]
                    },
                    || {
                        let at = own + i.cast(I64);
                        t.store(at, t.load(at) + v);
                        vec![]
                    },
                );
            }
        });
        vec![parity ^ 1]
    });
}
