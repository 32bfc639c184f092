//! Forward softmax kernels: `y[r, :] = exp2((x - max) * log2 e) / sum(...)` per row, all
//! arithmetic in f32, output in the input dtype.
//!
//! Parameters (the generated launcher takes them in this order): `x` (read), `y` (written),
//! `m` rows, `n` columns, `nblocks` (the launched grid; blocks stride over row blocks),
//! `keep_l2` (non-zero: read x with the keep-in-L2 hint on NVIDIA, the first pass only in the
//! looped kernel, whose second pass reads x again).

use crate::common::*;
use crate::table::{kernel_name, Config, DType};
use flydsl_dsl::ir::{Kernel, ScalarType, Target};
use flydsl_dsl::*;

/// Build the forward kernel of `cfg` for `dtype` on `target`.
pub fn build(target: Target, dtype: DType, cfg: &Config) -> Result<Kernel, BuildError> {
    let dt = dtype.scalar();
    let s = Shape::of(cfg, dtype);
    KernelBuilder::new(&kernel_name(cfg, dtype), target, cfg.threads)
        .waves_per_eu(wpe(cfg))
        .build(|k| {
            let p = Params::declare(k, dt, cfg, target.wave_size());
            if resident(cfg) {
                resident_body(&p, dt, s, cfg)
            } else {
                looped_body(&p, dt, s, cfg)
            }
        })
}

/// The kernel's parameters (in the launcher's order) and its reduction scratch.
#[derive(Clone, Copy)]
struct Params {
    x: Tensor,
    y: Tensor,
    m: Val,
    n: Val,
    nblocks: Val,
    keep_l2: Val,
    smax: Option<Scratch>,
    ssum: Option<Scratch>,
}

impl Params {
    fn declare(k: &mut KernelDef, dt: ScalarType, cfg: &Config, ws: u32) -> Params {
        let x = k.tensor("x", dt);
        let y = k.tensor_mut("y", dt);
        let m = k.scalar("m", ScalarType::I32);
        let n = k.scalar("n", ScalarType::I32);
        let nblocks = k.scalar("nblocks", ScalarType::I32);
        let keep_l2 = k.scalar("keep_l2", ScalarType::I32).ne(0);
        let smax = scratch(k, "red_max", cfg, ws);
        let ssum = scratch(k, "red_sum", cfg, ws);
        Params {
            x,
            y,
            m,
            n,
            nblocks,
            keep_l2,
            smax,
            ssum,
        }
    }
}

/// The row views of `x` and `y` for `row` (see [`RowView`]).
fn views(p: &Params, s: &Shape, cfg: &Config, row: Val, valid: Option<Val>) -> [RowView; 2] {
    let sp = Split::of(cfg, s, row, p.n);
    [
        RowView::of(&p.x, row, p.n, valid, sp),
        RowView::of(&p.y, row, p.n, valid, sp),
    ]
}

/// Register-resident row: one read of x, one write of y. Elements past the body's length (the
/// tail of the compile-time tile) read zero through the buffer resource and are masked to
/// -inf for the max; a ragged row's head and tail are one more scalar each per lane.
fn resident_body(p: &Params, dt: ScalarType, s: Shape, cfg: &Config) {
    let Params {
        m,
        nblocks,
        keep_l2,
        smax,
        ssum,
        ..
    } = *p;
    let lane = lane_in_row(s.group, s.threads);
    for_each_row(m, nblocks, cfg, |row, valid| {
        let [xr, yr] = views(p, &s, cfg, row, valid);
        let idx: Vec<Val> = (0..s.tiles).map(|j| tile_index(lane, j, &s)).collect();
        let neg_inf = f32_const(s.width, f64::NEG_INFINITY);
        let raw = load_row(xr.body, &idx, s.width, s.align(), keep_l2);
        let xs: Vec<Val> = idx
            .iter()
            .zip(raw)
            .map(|(&i, v)| select(i.lt(xr.len), v.cast(ScalarType::F32), neg_inf))
            .collect();
        let edges = xr
            .edges
            .map(|e| e.load(lane, Some(keep_l2), f64::NEG_INFINITY));
        let mut mv = xs[0];
        for &v in &xs[1..] {
            mv = mv.max(v);
        }
        let mut part = hfold(mv, |a, b| a.max(b));
        for &v in edges.iter().flatten() {
            part = part.max(v);
        }
        let mx = row_reduce(part, s.group, smax, |a, b| a.max(b));
        let mxv = bcast(mx, &s);
        let es: Vec<Val> = xs.iter().map(|&v| ((v - mxv) * LOG2E).exp2()).collect();
        let ee = edges.map(|e| e.map(|v| ((v - mx) * LOG2E).exp2()));
        let mut sv = es[0];
        for &e in &es[1..] {
            sv = sv + e;
        }
        let mut part = hfold(sv, |a, b| a + b);
        for &e in ee.iter().flatten() {
            part = part + e;
        }
        let sum = row_reduce(part, s.group, ssum, |a, b| a + b);
        let rcp = sum.rcp();
        let inv = bcast(rcp, &s);
        for (&i, &e) in idx.iter().zip(&es) {
            store_from_f32(&yr.body, i, e * inv, dt, &s);
        }
        if let (Some(edges), Some(ee)) = (yr.edges, ee) {
            edges.store(lane, ee.map(|e| e * rcp), dt);
        }
    });
}

/// Rows of any length: pass 1 streams x once keeping a running (max, rescaled sum) per
/// thread (a ragged row's head and tail seed it), the block combines them, pass 2 streams x
/// again and writes y. The column loops step `i += threads * width` (at most 8192) while
/// `i < len <= n`: below 2^31 for the API's `n <= validate::MAX_N = i32::MAX - 65536`.
fn looped_body(p: &Params, dt: ScalarType, s: Shape, cfg: &Config) {
    let Params {
        m,
        nblocks,
        keep_l2,
        smax,
        ssum,
        ..
    } = *p;
    let tid = thread_id_x();
    let start = tid * s.width as i32;
    let step = c_i32((s.threads * s.width) as i32);
    for_each_row(m, nblocks, cfg, |row, valid| {
        let [xr, yr] = views(p, &s, cfg, row, valid);
        let edges = xr
            .edges
            .map(|e| e.load(tid, Some(keep_l2), f64::NEG_INFINITY));
        let init = match edges {
            None => [c_f32(f32::NEG_INFINITY), c_f32(0.0)],
            Some([h, t]) => {
                let m0 = h.max(t);
                let safe = select(m0.eq(f64::NEG_INFINITY), c_f32(0.0), m0);
                let e = |v: Val| ((v - safe) * LOG2E).exp2();
                [m0, e(h) + e(t)]
            }
        };
        let acc = for_range(start, xr.len, step, &init, |i, c| {
            let v = load_row(xr.body, &[i], s.width, s.align(), keep_l2)[0].cast(ScalarType::F32);
            let m_new = c[0].max(hfold(v, |a, b| a.max(b)));
            let safe = select(m_new.eq(f64::NEG_INFINITY), c_f32(0.0), m_new);
            let es = ((v - bcast(safe, &s)) * LOG2E).exp2();
            let scaled = c[1] * ((c[0] - safe) * LOG2E).exp2();
            vec![m_new, scaled + hfold(es, |a, b| a + b)]
        });
        let mx = row_reduce(acc[0], s.group, smax, |a, b| a.max(b));
        let safe = select(mx.eq(f64::NEG_INFINITY), c_f32(0.0), mx);
        let part = acc[1] * ((acc[0] - safe) * LOG2E).exp2();
        let sum = row_reduce(part, s.group, ssum, |a, b| a + b);
        let rcp = sum.rcp();
        let inv = bcast(rcp, &s);
        let mxv = bcast(mx, &s);
        if let (Some(out), Some(e)) = (yr.edges, edges) {
            out.store(tid, e.map(|v| ((v - mx) * LOG2E).exp2() * rcp), dt);
        }
        for_range_(start, xr.len, step, |i| {
            let v = load_f32(&xr.body, i, &s);
            store_from_f32(&yr.body, i, ((v - mxv) * LOG2E).exp2() * inv, dt, &s);
        });
    });
}
