//! Forward kernels of both norms (plain and int8-quant outputs) on the three paths.
//!
//! Parameters, in order (every forward kernel has all of them, so one launcher type serves a
//! family): `x`, `residual`, `residual_out`, `gamma`, `beta`, then `y` (plain) or `q`,
//! `yscale`, `xscale` (quant), then `mean`, `rstd`, and scalars `m`, `n`, `eps`, `lanes`.
//! Empty `residual`, `beta`, `xscale`, `mean`, `rstd` switch those features off; RMSNorm
//! ignores `beta` and `mean`; only the multi-row path reads `lanes`.

use crate::common::*;
use crate::config::{
    fast_max_block, fast_max_registers, Family, Kind, Path, GENERIC_THREADS, ROWS_BLOCK,
};
use flydsl_build::dsl::*;
use flydsl_build::ir::{Kernel, ScalarType, Target};

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
}

impl Params {
    fn declare(k: &mut KernelDef, fam: Family) -> Params {
        let dt = st(fam.dt);
        let wt = st(fam.wdt);
        let x = k.tensor("x", dt);
        let res = k.tensor("residual", dt);
        let res_out = k.tensor_mut("residual_out", dt);
        let gamma = k.tensor("gamma", wt);
        let beta = k.tensor("beta", wt);
        let (y, q) = if fam.kind == Kind::FwdQuant {
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
        }
    }
}

/// Build the forward kernel of `fam` on `path` for `target`.
pub fn build(fam: Family, path: Path, target: Target) -> Result<Kernel, BuildError> {
    let max_threads = match path {
        Path::Fast(t) => fast_max_block(fam.kind, fam.dt, t),
        Path::Rows(_) => ROWS_BLOCK,
        Path::Generic => GENERIC_THREADS,
    };
    let max_regs = match path {
        Path::Fast(t) => fast_max_registers(fam.kind, t),
        _ => None,
    };
    KernelBuilder::new(&fam.kernel_name(path), target, max_threads)
        .max_registers(max_regs)
        .build(|k| {
            let p = Params::declare(k, fam);
            let scratch = match path {
                Path::Rows(_) => None,
                _ => Some(k.lds("red", F32, scratch_len(4))),
            };
            let math = RowMath::new(fam.norm, p.n, p.eps);
            match (path, scratch) {
                (Path::Fast(t), Some(s)) => vectorised(&p, fam, &math, t, Shape::Block(s)),
                (Path::Rows(t), _) => vectorised(&p, fam, &math, t, Shape::Rows),
                (_, Some(s)) => generic(&p, fam, &math, s),
                _ => {}
            }
        })
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

/// The register-resident vectorised paths (fast and multi-row).
fn vectorised(p: &Params, fam: Family, math: &RowMath, tiles: u32, shape: Shape) {
    let dt = st(fam.dt);
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
    let (gr, br) = (p.gamma.rsrc(), p.beta.rsrc());
    let smooth = p.q.map(|(_, _, xs)| (xs.len().gt(0i64), xs.rsrc()));
    let xsv: Vec<Val> = match smooth {
        Some((_, r)) => idx.iter().map(|&i| rsrc_load(r, i, vec)).collect(),
        None => vec![],
    };
    let has_res = p.res.len().gt(0i64);
    let has_mean = p.mean.len().gt(0i64);
    let has_rstd = p.rstd.len().gt(0i64);
    let ws = wave_size() as i32;
    let nwaves = (bdim + (ws - 1)) / ws;

    let row_body = |cx: RowCtx, parity: Val| {
        let xr = p.x.offset(cx.base).rsrc_n(cx.nrow);
        let xs: Vec<Val> = idx.iter().map(|&i| xr.load_vec(i, vec, 16)).collect();
        let xin = if_else(
            has_res,
            || {
                let rr = p.res.offset(cx.base).rsrc_n(cx.nrow);
                let ror = p.res_out.offset(cx.base).rsrc_n(cx.nrow);
                let rs: Vec<Val> = idx.iter().map(|&i| rr.load_vec(i, vec, 16)).collect();
                xs.iter()
                    .zip(&rs)
                    .zip(&idx)
                    .map(|((&x, &r), &i)| {
                        let s = (x.cast(F32) + r.cast(F32)).cast(dt);
                        ror.store_aligned(i, s, 16, false);
                        s
                    })
                    .collect()
            },
            || xs.clone(),
        );
        let xf: Vec<Val> = xin.iter().map(|v| v.cast(F32)).collect();
        let mut part = math.zeros();
        for &v in &xf {
            part = math.add(&part, &math.partials(v));
        }
        let reduce = |vals: Vec<(Val, Red)>, round: i32| -> Vec<Val> {
            match shape {
                Shape::Block(s) => block_reduce2(&vals, s, parity * 2 + round, nwaves),
                Shape::Rows => vals
                    .iter()
                    .map(|&(v, r)| group_reduce(v, r, Some(p.lanes)))
                    .collect(),
            }
        };
        let sums = reduce(part.iter().map(|&v| (v, Red::Sum)).collect(), 0);
        // 2-byte inputs stay packed across the reduction (half the registers of f32), and
        // are widened again afterwards (see `opaque`).
        let xf: Vec<Val> = if fam.dt.bytes() == 2 {
            xin.iter().map(|&v| opaque(v, p.n).cast(F32)).collect()
        } else {
            xf
        };
        // The weights are read per row after the reduction (L1 hits after the first rows of
        // an SM), so that they are not live across its barrier.
        let g: Vec<Val> = idx.iter().map(|&i| rsrc_load(gr, i, vec)).collect();
        let b: Vec<Val> = match fam.norm {
            crate::config::Norm::Layer => idx.iter().map(|&i| rsrc_load(br, i, vec)).collect(),
            crate::config::Norm::Rms => vec![],
        };
        let (mean, rstd) = math.stats(&sums);
        let write_stats = cx.first & cx.valid;
        if fam.norm == crate::config::Norm::Layer {
            if_(write_stats & has_mean, || p.mean.store(cx.row, mean));
        }
        if_(write_stats & has_rstd, || p.rstd.store(cx.row, rstd));
        let ys: Vec<Val> = (0..tiles as usize)
            .map(|t| {
                let xh = math.xhat(xf[t], mean, rstd);
                let bt = b.get(t).map(|v| v.cast(F32)).unwrap_or(xh);
                math.y(xh, g[t].cast(F32), bt)
            })
            .collect();
        match (p.y, p.q) {
            (Some(y), _) => {
                let yr = y.offset(cx.base).rsrc_n(cx.nrow);
                for (&i, &v) in idx.iter().zip(&ys) {
                    yr.store_aligned(i, v.cast(dt), 16, false);
                }
            }
            (None, Some((q, yscale, _))) => {
                let (sm, _) = smooth.expect("quant kernels have xscale");
                let ys: Vec<Val> = ys
                    .iter()
                    .zip(&xsv)
                    .map(|(&y, &s)| select(sm, y * s, y))
                    .collect();
                let mut amax = c_f32(0.0);
                for (&y, &ok) in ys.iter().zip(&inrange) {
                    amax = amax.max(select(ok, hmax(y.abs()), c_f32(0.0)));
                }
                let amax = reduce(vec![(amax, Red::Max)], 1)[0];
                let (scale, inv) = quant_scale(amax);
                if_(write_stats, || yscale.store(cx.row, scale));
                let qr = q.offset(cx.base).rsrc_n(cx.nrow);
                for (&i, &y) in idx.iter().zip(&ys) {
                    qr.store_aligned(i, quantize(y, inv), vec, false);
                }
            }
            _ => {}
        }
    };

    match shape {
        Shape::Block(_) => {
            for_range(block_id_x(), p.m, grid_dim_x(), &[c_i32(0)], |row, c| {
                let base = row.cast(I64) * n64;
                let cx = RowCtx {
                    row,
                    valid: row.lt(p.m),
                    base,
                    nrow: n64,
                    first: tid.eq(0),
                };
                row_body(cx, c[0]);
                vec![c[0] ^ 1]
            });
        }
        Shape::Rows => {
            let rpb = bdim / p.lanes;
            let group = tid / p.lanes;
            let nblocks = (p.m + rpb - 1) / rpb;
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
                row_body(cx, c_i32(0));
            });
        }
    }
}

/// The generic path: any `n`, scalar accesses in run-time loops.
fn generic(p: &Params, fam: Family, math: &RowMath, scratch: Lds) {
    let dt = st(fam.dt);
    let bt = GENERIC_THREADS as i32;
    let tid = thread_id_x();
    let n64 = p.n.cast(I64);
    let (gr, br) = (p.gamma.rsrc(), p.beta.rsrc());
    let has_res = p.res.len().gt(0i64);
    let has_mean = p.mean.len().gt(0i64);
    let has_rstd = p.rstd.len().gt(0i64);
    let nwaves = c_i32(bt / wave_size() as i32);
    for_range(block_id_x(), p.m, grid_dim_x(), &[c_i32(0)], |row, c| {
        let parity = c[0];
        let base = row.cast(I64) * n64;
        let (xt, rt, rot) = (p.x.offset(base), p.res.offset(base), p.res_out.offset(base));
        // Pass 1: (fused add and) partial sums.
        let zeros = math.zeros();
        let part = for_range(tid, p.n, c_i32(bt), &zeros, |i, acc| {
            let xv = xt.load(i);
            let xin = if_else(
                has_res,
                || {
                    let s = (xv.cast(F32) + rt.load(i).cast(F32)).cast(dt);
                    rot.store(i, s);
                    vec![s]
                },
                || vec![xv],
            )[0];
            math.add(acc, &math.partials(xin.cast(F32)))
        });
        let sums = block_reduce2(
            &part.iter().map(|&v| (v, Red::Sum)).collect::<Vec<_>>(),
            scratch,
            parity * 2,
            nwaves,
        );
        let (mean, rstd) = math.stats(&sums);
        let first = tid.eq(0);
        if fam.norm == crate::config::Norm::Layer {
            if_(first & has_mean, || p.mean.store(row, mean));
        }
        if_(first & has_rstd, || p.rstd.store(row, rstd));
        // The normalisation input of element i (re-read from residual_out when adding).
        let input = |i: Val| {
            if_else(
                has_res,
                || vec![rot.load(i).cast(F32)],
                || vec![xt.load(i).cast(F32)],
            )[0]
        };
        let yof = |i: Val| {
            let xh = math.xhat(input(i), mean, rstd);
            let b = match fam.norm {
                crate::config::Norm::Layer => br.load(i).cast(F32),
                crate::config::Norm::Rms => xh,
            };
            math.y(xh, gr.load(i).cast(F32), b)
        };
        match (p.y, p.q) {
            (Some(y), _) => {
                let yt = y.offset(base);
                for_range_(tid, p.n, c_i32(bt), |i| yt.store(i, yof(i).cast(dt)));
            }
            (None, Some((q, yscale, xscale))) => {
                let smooth = xscale.len().gt(0i64);
                let xsr = xscale.rsrc();
                let ysof = |i: Val| {
                    let y = yof(i);
                    select(smooth, y * xsr.load(i), y)
                };
                let amax = for_range(tid, p.n, c_i32(bt), &[c_f32(0.0)], |i, acc| {
                    vec![acc[0].max(ysof(i).abs())]
                });
                let amax =
                    block_reduce2(&[(amax[0], Red::Max)], scratch, parity * 2 + 1, nwaves)[0];
                let (scale, inv) = quant_scale(amax);
                if_(first, || yscale.store(row, scale));
                let qt = q.offset(base);
                for_range_(tid, p.n, c_i32(bt), |i| qt.store(i, quantize(ysof(i), inv)));
            }
            _ => {}
        }
        vec![parity ^ 1]
    });
}
