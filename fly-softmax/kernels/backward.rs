//! Backward softmax kernels: `dx = y * (dy - sum(dy * y))` per row, the dot product in f32 with
//! a fixed reduction order (deterministic run to run).
//!
//! Parameters (the generated launcher takes them in this order): `y`, `dy` (read), `dx`
//! (written), `m` rows, `n` columns, `nblocks` (the launched grid).
//!
//! Traffic tiers: classes up to [`BWD_BOTH_RESIDENT_MAX`] keep `y` and `dy` in registers (read
//! both once, write dx: 3 units); larger resident classes keep only `y` and read `dy` twice
//! (4 units, the second read mostly from L2); the looped paths keep neither (5 units).
//! Classes from [`BWD_PACKED_MIN`] keep `y` in the element dtype (a 65536-element bf16 row is
//! 32 registers per thread of a 1024-thread block) plus, where the target's register budget
//! allows, the first `dy` tiles; the rest of `dy` is read again last tile first, so the tiles
//! read last the first time (the likeliest to still be in L2) come first.

use crate::common::*;
use crate::table::{kernel_name, Config, DType, BWD_BOTH_RESIDENT_MAX, BWD_PACKED_MIN};
use flydsl_dsl::ir::{Kernel, ScalarType, Target};
use flydsl_dsl::*;

/// Build the backward kernel of `cfg` for `dtype` on `target`.
pub fn build(target: Target, dtype: DType, cfg: &Config) -> Result<Kernel, BuildError> {
    let dt = dtype.scalar();
    let name = kernel_name(cfg, dtype);
    let mut cfg = *cfg;
    if !cfg.serves(dtype) {
        // Never dispatched for this dtype (the row would not fit in registers): build the
        // looped kernel of the same block size so the launcher table stays complete.
        cfg.path = cfg.path.looped();
        cfg.group = cfg.threads;
        cfg.ept = 0;
    }
    let cfg = &cfg;
    let s = Shape::of(cfg, dtype);
    KernelBuilder::new(&name, target, cfg.threads)
        .waves_per_eu(wpe(cfg))
        .build(|k| {
            let y = k.tensor("y", dt);
            let dy = k.tensor("dy", dt);
            let dx = k.tensor_mut("dx", dt);
            let m = k.scalar("m", ScalarType::I32);
            let n = k.scalar("n", ScalarType::I32);
            let nblocks = k.scalar("nblocks", ScalarType::I32);
            let ws = target.wave_size();
            let sdot = scratch(k, "red_dot", cfg, ws);
            let cross = sdot.is_some();
            for_each_row(m, nblocks, cfg, |row, valid| {
                let sp = Split::of(cfg, &s, row, n);
                let rows = Rows {
                    y: RowView::of(&y, row, n, valid, sp),
                    dy: RowView::of(&dy, row, n, valid, sp),
                    dx: RowView::of(&dx, row, n, valid, sp),
                    dt,
                    s,
                };
                let finish = |dot: Val| row_reduce(dot, s.group, sdot, |a, b| a + b);
                if resident(cfg) && cfg.class >= BWD_PACKED_MIN {
                    // `nblocks >> 31` is 0 (the grid is positive) but opaque to the compiler.
                    rows.packed(packed_dy_tiles(target, cfg), nblocks >> 31, finish);
                } else if resident(cfg) {
                    rows.resident(cfg.class <= BWD_BOTH_RESIDENT_MAX, finish);
                } else {
                    rows.looped(finish);
                }
                if cross {
                    // The next row's reduction rewrites the scratch slots this one just read.
                    barrier();
                }
            });
        })
}

/// How many `dy` tiles the packed path keeps in registers besides `y` (the rest is read
/// again). NVIDIA gives a 1024-thread block 64 registers per thread, which packed `y` already
/// half fills; AMD's wave64 targets give 128 VGPRs at 16 waves per workgroup.
fn packed_dy_tiles(target: Target, cfg: &Config) -> u32 {
    let tiles = cfg.ept / 8; // the packed path is built for 2-byte dtypes only (`serves`)
    if target.is_amd() {
        tiles
    } else {
        0
    }
}

/// The per-row views and static shape.
struct Rows {
    y: RowView,
    dy: RowView,
    dx: RowView,
    dt: ScalarType,
    s: Shape,
}

impl Rows {
    /// A ragged row's head and tail of `y` and `dy` on lane `lane` (f32, 0 where the lane owns
    /// none) and their part of the dot; 0 and no edges on other paths.
    fn edges(&self, lane: Val) -> (Option<[[Val; 2]; 2]>, Val) {
        let zero = c_f32(0.0);
        match (self.y.edges, self.dy.edges) {
            (Some(ye), Some(de)) => {
                let [yh, yt] = ye.load(lane, None, 0.0);
                let [dh, dt] = de.load(lane, None, 0.0);
                (Some([[yh, yt], [dh, dt]]), yh.fma(dh, yt * dt))
            }
            _ => (None, zero),
        }
    }

    /// Write a ragged row's head and tail of `dx` from [`Rows::edges`]'s values and the dot.
    fn store_edges(&self, lane: Val, edges: Option<[[Val; 2]; 2]>, dot: Val) {
        if let (Some(out), Some([ys, ds])) = (self.dx.edges, edges) {
            out.store(lane, [0, 1].map(|k| ys[k] * (ds[k] - dot)), self.dt);
        }
    }

    /// Register-resident row: `y` always resident; `dy` resident too when `both`, else read
    /// again for the output. Tails past `n` read zero and contribute nothing to the dot.
    fn resident(&self, both: bool, reduce: impl Fn(Val) -> Val) {
        let s = &self.s;
        let lane = lane_in_row(s.group, s.threads);
        let idx: Vec<Val> = (0..s.tiles).map(|j| tile_index(lane, j, s)).collect();
        let ys: Vec<Val> = idx.iter().map(|&i| load_f32(&self.y.body, i, s)).collect();
        let (edges, edge_dot) = self.edges(lane);
        let mut dys = Vec::new();
        let mut acc = f32_const(s.width, 0.0);
        for (&i, &yv) in idx.iter().zip(&ys) {
            let d = load_f32(&self.dy.body, i, s);
            acc = yv.fma(d, acc);
            if both {
                dys.push(d);
            }
        }
        let dot = reduce(hfold(acc, |a, b| a + b) + edge_dot);
        // Where only `y` stays resident, the head and tail are read again too, so that no
        // edge value is live across the reduction (at 64 elements a thread they would make
        // ptxas spill on sm_90).
        let edges = if both { edges } else { self.edges(lane).0 };
        self.store_edges(lane, edges, dot);
        let dot = bcast(dot, s);
        for (j, (&i, &yv)) in idx.iter().zip(&ys).enumerate() {
            let d = if both {
                dys[j]
            } else {
                load_f32(&self.dy.body, i, s)
            };
            store_from_f32(&self.dx.body, i, yv * (d - dot), self.dt, s);
        }
    }

    /// Register-resident row in the element dtype: `y` and the first `keep` tiles of `dy`
    /// stay as loaded and are widened again for the output through [`opaque`] with `zero` (a zero the
    /// compiler cannot see through, so it cannot keep the first widening alive instead).
    /// The other `dy` tiles are read again, last first.
    fn packed(&self, keep: u32, zero: Val, reduce: impl Fn(Val) -> Val) {
        let s = &self.s;
        let lane = lane_in_row(s.group, s.threads);
        let idx: Vec<Val> = (0..s.tiles).map(|j| tile_index(lane, j, s)).collect();
        let raw = |r: &Rsrc, i: Val| r.load_vec(i, s.width, s.align());
        let ys: Vec<Val> = idx.iter().map(|&i| raw(&self.y.body, i)).collect();
        let mut kept = Vec::new();
        let mut acc = f32_const(s.width, 0.0);
        for (j, (&i, &yv)) in idx.iter().zip(&ys).enumerate() {
            let d = raw(&self.dy.body, i);
            acc = yv.cast(ScalarType::F32).fma(d.cast(ScalarType::F32), acc);
            if (j as u32) < keep {
                kept.push(d);
            }
        }
        let dot = bcast(reduce(hfold(acc, |a, b| a + b)), s);
        let widen = |v: Val| opaque(v, zero).cast(ScalarType::F32);
        // Re-read `dy` in batches of up to 4 tiles (16 registers), each batch's loads issued
        // before its stores so several L2 reads are in flight per thread.
        let order: Vec<usize> = (0..s.tiles as usize).rev().collect();
        for batch in order.chunks(4) {
            let ds: Vec<Val> = batch
                .iter()
                .map(|&j| match kept.get(j) {
                    Some(&d) => widen(d),
                    None => load_f32(&self.dy.body, idx[j], s),
                })
                .collect();
            for (&j, &d) in batch.iter().zip(&ds) {
                let out = widen(ys[j]) * (d - dot);
                store_from_f32(&self.dx.body, idx[j], out, self.dt, s);
            }
        }
    }

    /// Neither operand resident: pass 1 streams both for the dot, pass 2 streams both again
    /// (column counters below `n + 8192 < 2^31`, as the forward's looped kernel).
    fn looped(&self, reduce: impl Fn(Val) -> Val) {
        let s = &self.s;
        let tid = thread_id_x();
        let start = tid * s.width as i32;
        let step = c_i32((s.threads * s.width) as i32);
        let (y, dy, len) = (&self.y.body, &self.dy.body, self.y.len);
        let (edges, edge_dot) = self.edges(tid);
        let acc = for_range(start, len, step, &[f32_const(s.width, 0.0)], |i, c| {
            vec![load_f32(y, i, s).fma(load_f32(dy, i, s), c[0])]
        });
        let dot = reduce(hfold(acc[0], |a, b| a + b) + edge_dot);
        self.store_edges(tid, edges, dot);
        let dot = bcast(dot, s);
        for_range_(start, len, step, |i| {
            let yv = load_f32(y, i, s);
            let d = load_f32(dy, i, s);
            store_from_f32(&self.dx.body, i, yv * (d - dot), self.dt, s);
        });
    }
}
