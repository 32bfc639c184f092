//! Split-row kernels ([`crate::table::Path::Split`]): when there are too few rows to fill
//! the device, each row is cut into `chunks` chunks of `clen` elements of its aligned body
//! (a multiple of the loop's step, [`SPLIT_UNROLL`] block strides: each thread keeps that
//! many 128-bit loads in flight; so every chunk starts on the 16-byte grid; the row's
//! unaligned head goes with chunk 0 and its tail with the last chunk) and a launch of
//! `m * chunks` blocks works on all of them at once, in two kernels:
//! - *stats*: per (row, chunk), the chunk's partial statistics into an f32 workspace:
//!   `(max, sum of exp2((x - max) * log2 e))` forward, `sum(y * dy)` backward;
//! - *finish*: per (row, chunk), the row's statistics folded from its chunks' partials in chunk
//!   order (deterministic), then the chunk's output, reading the inputs again; it walks the
//!   pairs in reverse, so its first blocks read what the stats kernel read last (the
//!   likeliest to still be in L2; the stats kernel's keep-in-L2 hint helps on NVIDIA).
//!
//! Two kernels rather than one where the blocks of a row exchange partials through flags:
//! the flag design reads x once but needs every block of a row resident at once, which
//! neither CUDA nor HIP guarantee for an ordinary launch, and the Sim runs workgroups that
//! wait on flags one after another (a block waiting for a later block of its own launch would
//! never finish); the two-kernel design is correct on every backend. Its traffic is that of
//! the looped kernels (x read twice), which it replaces for few long rows.
//!
//! Parameters (the generated launchers take them in this order):
//! - forward stats: `x`, `ws` (written, `2 * m * chunks` f32), `m`, `n`, `chunks`, `clen`,
//!   `nblocks`, `keep_l2`;
//! - forward finish: `x`, `ws` (read), `y` (written), `m`, `n`, `chunks`, `clen`, `nblocks`;
//! - backward stats: `y`, `dy`, `ws` (written, `m * chunks` f32), `m`, `n`, `chunks`, `clen`,
//!   `nblocks`;
//! - backward finish: `y`, `dy`, `ws` (read), `dx` (written), `m`, `n`, `chunks`, `clen`,
//!   `nblocks`.
//!
//! i32 bounds (the planner, `src/split.rs`, guarantees them): `m * chunks <= max(m,
//! plan::MAX_GRID)`, so the (row, chunk) counter, stepping by the grid, stays below 2^31;
//! `chunks * clen < n + clen`; workspace offsets are i64.

use crate::common::*;
use crate::table::{finish_name, kernel_name, Config, DType, Kind, SPLIT_UNROLL};
use flydsl_dsl::ir::{Kernel, ScalarType, Target};
use flydsl_dsl::*;

/// Build the stats kernel of split configuration `cfg` for `dtype` on `target`.
pub fn build_stats(target: Target, dtype: DType, cfg: &Config) -> Result<Kernel, BuildError> {
    let dt = dtype.scalar();
    let s = Shape::of(cfg, dtype);
    KernelBuilder::new(&kernel_name(cfg, dtype), target, cfg.threads).build(|k| {
        let ws_size = target.wave_size();
        match cfg.kind {
            Kind::Forward => {
                let x = k.tensor("x", dt);
                let ws = k.tensor_mut("ws", ScalarType::F32);
                let g = Grid::declare(k);
                let keep_l2 = k.scalar("keep_l2", ScalarType::I32).ne(0);
                let smax = scratch(k, "red_max", cfg, ws_size);
                let ssum = scratch(k, "red_sum", cfg, ws_size);
                g.for_each_chunk(cfg, &s, false, |c| {
                    let xr = RowView::of(&x, c.row, g.n, None, Some(c.split));
                    let [h, t] = c.edges(&xr, Some(keep_l2), f64::NEG_INFINITY);
                    let m0 = h.max(t);
                    let e = |v: Val, safe: Val| ((v - safe) * LOG2E).exp2();
                    let safe0 = finite_or_zero(m0);
                    let init = [m0, e(h, safe0) + e(t, safe0)];
                    let neg_inf = f32_const(s.width, f64::NEG_INFINITY);
                    let acc = for_range(c.start, c.end, c.step, &init, |i, a| {
                        let idx = c.tiles(i);
                        let raw = load_row(xr.body, &idx, s.width, s.align(), keep_l2);
                        // Tiles past the body read 0: -inf for the max.
                        let vs: Vec<Val> = idx
                            .iter()
                            .zip(raw)
                            .map(|(&j, v)| select(j.lt(xr.len), v.cast(ScalarType::F32), neg_inf))
                            .collect();
                        let mv = vs[1..].iter().fold(vs[0], |m, &v| m.max(v));
                        let m_new = a[0].max(hfold(mv, |a, b| a.max(b)));
                        let safe = bcast(finite_or_zero(m_new), &s);
                        let exp = |v: Val| ((v - safe) * LOG2E).exp2();
                        let es = vs[1..].iter().fold(exp(vs[0]), |t, &v| t + exp(v));
                        let scaled = a[1] * e(a[0], finite_or_zero(m_new));
                        vec![m_new, scaled + hfold(es, |a, b| a + b)]
                    });
                    let mx = row_reduce(acc[0], s.group, smax, |a, b| a.max(b));
                    let part = acc[1] * e(acc[0], finite_or_zero(mx));
                    let sum = row_reduce(part, s.group, ssum, |a, b| a + b);
                    let slot = c.pair.cast(ScalarType::I64) * 2;
                    if_(thread_id_x().eq(0), || {
                        ws.store(slot, mx);
                        ws.store(slot + 1, sum);
                    });
                });
            }
            Kind::Backward => {
                let y = k.tensor("y", dt);
                let dy = k.tensor("dy", dt);
                let ws = k.tensor_mut("ws", ScalarType::F32);
                let g = Grid::declare(k);
                let sdot = scratch(k, "red_dot", cfg, ws_size);
                g.for_each_chunk(cfg, &s, false, |c| {
                    let yr = RowView::of(&y, c.row, g.n, None, Some(c.split));
                    let dyr = RowView::of(&dy, c.row, g.n, None, Some(c.split));
                    let [yh, yt] = c.edges(&yr, None, 0.0);
                    let [dh, dt] = c.edges(&dyr, None, 0.0);
                    let zero = f32_const(s.width, 0.0);
                    let acc = for_range(c.start, c.end, c.step, &[zero], |i, a| {
                        // Tiles past the body read 0 and add nothing.
                        let idx = c.tiles(i);
                        let ys: Vec<Val> = idx.iter().map(|&j| load_f32(&yr.body, j, &s)).collect();
                        let ds: Vec<Val> =
                            idx.iter().map(|&j| load_f32(&dyr.body, j, &s)).collect();
                        vec![ys.iter().zip(&ds).fold(a[0], |t, (&y, &d)| y.fma(d, t))]
                    });
                    let part = hfold(acc[0], |a, b| a + b) + yh.fma(dh, yt * dt);
                    let dot = row_reduce(part, s.group, sdot, |a, b| a + b);
                    let slot = c.pair.cast(ScalarType::I64);
                    if_(thread_id_x().eq(0), || ws.store(slot, dot));
                });
            }
        }
    })
}

/// Build the finish kernel of split configuration `cfg` for `dtype` on `target`.
pub fn build_finish(target: Target, dtype: DType, cfg: &Config) -> Result<Kernel, BuildError> {
    let dt = dtype.scalar();
    let s = Shape::of(cfg, dtype);
    KernelBuilder::new(&finish_name(cfg, dtype), target, cfg.threads).build(|k| match cfg.kind {
        Kind::Forward => {
            let x = k.tensor("x", dt);
            let ws = k.tensor("ws", ScalarType::F32);
            let y = k.tensor_mut("y", dt);
            let g = Grid::declare(k);
            g.for_each_chunk(cfg, &s, true, |c| {
                let first = c.first_slot();
                let init = [c_f32(f32::NEG_INFINITY), c_f32(0.0)];
                let st = for_range(c_i32(0), g.chunks, c_i32(1), &init, |j, a| {
                    let slot = first + j.cast(ScalarType::I64);
                    let (mj, sj) = (ws.load(slot * 2), ws.load(slot * 2 + 1));
                    let m_new = a[0].max(mj);
                    let safe = finite_or_zero(m_new);
                    let e = |v: Val| ((v - safe) * LOG2E).exp2();
                    vec![m_new, a[1] * e(a[0]) + sj * e(mj)]
                });
                let (mx, rcp) = (st[0], st[1].rcp());
                let xr = RowView::of(&x, c.row, g.n, None, Some(c.split));
                let yr = RowView::of(&y, c.row, g.n, None, Some(c.split));
                let out = |v: Val| ((v - mx) * LOG2E).exp2() * rcp;
                let edges = c.edges(&xr, None, f64::NEG_INFINITY);
                c.store_edges(&yr, edges.map(out), dt);
                let (mxv, inv) = (bcast(mx, &s), bcast(rcp, &s));
                for_range_(c.start, c.end, c.step, |i| {
                    // Tiles past the body read 0 and their stores are dropped.
                    let idx = c.tiles(i);
                    let vs: Vec<Val> = idx.iter().map(|&j| load_f32(&xr.body, j, &s)).collect();
                    for (&j, &v) in idx.iter().zip(&vs) {
                        store_from_f32(&yr.body, j, ((v - mxv) * LOG2E).exp2() * inv, dt, &s);
                    }
                });
            });
        }
        Kind::Backward => {
            let y = k.tensor("y", dt);
            let dy = k.tensor("dy", dt);
            let ws = k.tensor("ws", ScalarType::F32);
            let dx = k.tensor_mut("dx", dt);
            let g = Grid::declare(k);
            g.for_each_chunk(cfg, &s, true, |c| {
                let first = c.first_slot();
                let dot = for_range(c_i32(0), g.chunks, c_i32(1), &[c_f32(0.0)], |j, a| {
                    vec![a[0] + ws.load(first + j.cast(ScalarType::I64))]
                })[0];
                let yr = RowView::of(&y, c.row, g.n, None, Some(c.split));
                let dyr = RowView::of(&dy, c.row, g.n, None, Some(c.split));
                let dxr = RowView::of(&dx, c.row, g.n, None, Some(c.split));
                let ye = c.edges(&yr, None, 0.0);
                let de = c.edges(&dyr, None, 0.0);
                c.store_edges(&dxr, [0, 1].map(|k| ye[k] * (de[k] - dot)), dt);
                let dotv = bcast(dot, &s);
                for_range_(c.start, c.end, c.step, |i| {
                    let idx = c.tiles(i);
                    let ys: Vec<Val> = idx.iter().map(|&j| load_f32(&yr.body, j, &s)).collect();
                    let ds: Vec<Val> = idx.iter().map(|&j| load_f32(&dyr.body, j, &s)).collect();
                    for ((&j, &yv), &d) in idx.iter().zip(&ys).zip(&ds) {
                        store_from_f32(&dxr.body, j, yv * (d - dotv), dt, &s);
                    }
                });
            });
        }
    })
}

/// `v`, or 0 where it is -inf (the reference point of an online softmax whose max so far is
/// -inf: every term is then 0 rather than NaN).
fn finite_or_zero(v: Val) -> Val {
    select(v.eq(f64::NEG_INFINITY), c_f32(0.0), v)
}

/// The grid parameters every split kernel ends with.
#[derive(Clone, Copy)]
struct Grid {
    m: Val,
    n: Val,
    chunks: Val,
    clen: Val,
    nblocks: Val,
}

impl Grid {
    fn declare(k: &mut KernelDef) -> Grid {
        Grid {
            m: k.scalar("m", ScalarType::I32),
            n: k.scalar("n", ScalarType::I32),
            chunks: k.scalar("chunks", ScalarType::I32),
            clen: k.scalar("clen", ScalarType::I32),
            nblocks: k.scalar("nblocks", ScalarType::I32),
        }
    }

    /// Run `body` for every (row, chunk) pair this block works on (blocks stride over the
    /// `m * chunks` pairs by the grid; in reverse pair order when `reverse`, which the finish
    /// kernels use: the stats kernel's last pairs are the likeliest to still be in L2, and
    /// blocks start roughly in index order). Block-uniform: barriers are allowed inside, and
    /// one separates consecutive pairs (their reductions share the LDS scratch).
    fn for_each_chunk(&self, cfg: &Config, s: &Shape, reverse: bool, body: impl FnOnce(Chunk)) {
        let Grid {
            m,
            n,
            chunks,
            clen,
            nblocks,
        } = *self;
        let width = s.width as i32;
        let pairs = m * chunks;
        for_range_(block_id_x(), pairs, nblocks, |i| {
            let pair = if reverse { pairs - 1 - i } else { i };
            let row = pair / chunks;
            let index = pair - row * chunks;
            let split = Split::of(cfg, s, row, n).expect("split kernels walk ragged rows");
            let lo = index * clen;
            body(Chunk {
                row,
                index,
                pair,
                chunks,
                split,
                start: lo + thread_id_x() * width,
                end: (lo + clen).min(split.len()),
                stride: (s.threads * s.width) as i32,
                step: c_i32((s.threads * s.width * SPLIT_UNROLL) as i32),
            });
            barrier();
        });
    }
}

/// One (row, chunk) pair of a split launch.
#[derive(Clone, Copy)]
struct Chunk {
    row: Val,
    index: Val,
    pair: Val,
    chunks: Val,
    split: Split,
    /// This thread's first body element of the chunk, the chunk's end, the block's stride
    /// (`threads` vectors) and the loop's step ([`SPLIT_UNROLL`] strides).
    start: Val,
    end: Val,
    stride: i32,
    step: Val,
}

impl Chunk {
    /// The body indices of this thread's [`SPLIT_UNROLL`] tiles of the loop iteration at `i`
    /// (one stride apart). They stay inside the chunk (`clen` is a multiple of the step); the
    /// ones past the row's body are out of its resource (loads read 0, stores are dropped).
    fn tiles(&self, i: Val) -> Vec<Val> {
        (0..SPLIT_UNROLL as i32)
            .map(|k| if k == 0 { i } else { i + k * self.stride })
            .collect()
    }

    /// The workspace slot of the row's chunk 0 (i64).
    fn first_slot(&self) -> Val {
        (self.row.cast(ScalarType::I64)) * self.chunks.cast(ScalarType::I64)
    }

    /// This thread's head element (chunk 0 only) and tail element (the last chunk only) of
    /// row view `r`, in f32; `fill` elsewhere.
    fn edges(&self, r: &RowView, keep_l2: Option<Val>, fill: f64) -> [Val; 2] {
        let e = r.edges.expect("split rows are ragged views");
        let [h, t] = e.load(thread_id_x(), keep_l2, fill);
        let fill = c_f32(fill as f32);
        [
            select(self.index.eq(0), h, fill),
            select(self.index.eq(self.chunks - 1), t, fill),
        ]
    }

    /// Store this thread's head and tail outputs (f32) into row view `r`, on the chunks that
    /// own them.
    fn store_edges(&self, r: &RowView, v: [Val; 2], dt: ScalarType) {
        let e = r.edges.expect("split rows are ragged views");
        if_(self.index.eq(0), || e.store_head(thread_id_x(), v[0], dt));
        if_(self.index.eq(self.chunks - 1), || {
            e.store_tail(thread_id_x(), v[1], dt)
        });
    }
}
