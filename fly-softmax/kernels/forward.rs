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

/// Register-resident row: one read of x, one write of y. Elements past `n` (the tail of the
/// compile-time tile) read zero through the buffer resource and are masked to -inf for the max.
fn resident_body(p: &Params, dt: ScalarType, s: Shape, cfg: &Config) {
    let Params {
        x,
        y,
        m,
        n,
        nblocks,
        keep_l2,
        smax,
        ssum,
    } = *p;
    let lane = lane_in_row(s.group, s.threads);
    for_each_row(m, nblocks, cfg, |row, valid| {
        let xr = row_rsrc(&x, row, n, valid);
        let yr = row_rsrc(&y, row, n, valid);
        let idx: Vec<Val> = (0..s.tiles).map(|j| tile_index(lane, j, &s)).collect();
        let neg_inf = f32_const(s.width, f64::NEG_INFINITY);
        let raw = load_row(xr, &idx, s.width, s.align(), keep_l2);
        let xs: Vec<Val> = idx
            .iter()
            .zip(raw)
            .map(|(&i, v)| select(i.lt(n), v.cast(ScalarType::F32), neg_inf))
            .collect();
        let mut mv = xs[0];
        for &v in &xs[1..] {
            mv = mv.max(v);
        }
        let mx = row_reduce(hfold(mv, |a, b| a.max(b)), s.group, smax, |a, b| a.max(b));
        let mxv = bcast(mx, &s);
        let es: Vec<Val> = xs.iter().map(|&v| ((v - mxv) * LOG2E).exp2()).collect();
        let mut sv = es[0];
        for &e in &es[1..] {
            sv = sv + e;
        }
        let sum = row_reduce(hfold(sv, |a, b| a + b), s.group, ssum, |a, b| a + b);
        let inv = bcast(sum.rcp(), &s);
        for (&i, &e) in idx.iter().zip(&es) {
            store_from_f32(&yr, i, e * inv, dt, &s);
        }
    });
}

/// Rows of any length: pass 1 streams x once keeping a running (max, rescaled sum) per
/// thread, the block combines them, pass 2 streams x again and writes y. The column loops
/// step `i += threads * width` (at most 8192) while `i < n`: below 2^31 for the API's
/// `n <= validate::MAX_N = i32::MAX - 65536`.
fn looped_body(p: &Params, dt: ScalarType, s: Shape, cfg: &Config) {
    let Params {
        x,
        y,
        m,
        n,
        nblocks,
        keep_l2,
        smax,
        ssum,
    } = *p;
    let tid = thread_id_x();
    let start = tid * s.width as i32;
    let step = c_i32((s.threads * s.width) as i32);
    for_each_row(m, nblocks, cfg, |row, valid| {
        let xr = row_rsrc(&x, row, n, valid);
        let yr = row_rsrc(&y, row, n, valid);
        let init = [c_f32(f32::NEG_INFINITY), c_f32(0.0)];
        let acc = for_range(start, n, step, &init, |i, c| {
            let v = load_row(xr, &[i], s.width, s.align(), keep_l2)[0].cast(ScalarType::F32);
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
        let inv = bcast(sum.rcp(), &s);
        let mxv = bcast(mx, &s);
        for_range_(start, n, step, |i| {
            let v = load_f32(&xr, i, &s);
            store_from_f32(&yr, i, ((v - mxv) * LOG2E).exp2() * inv, dt, &s);
        });
    });
}
