//! Backward softmax kernels: `dx = y * (dy - sum(dy * y))` per row, the dot product in f32 with
//! a fixed reduction order (deterministic run to run).
//!
//! Parameters (the generated launcher takes them in this order): `y`, `dy` (read), `dx`
//! (written), `m` rows, `n` columns, `nblocks` (the launched grid).
//!
//! Traffic tiers: classes up to [`BWD_BOTH_RESIDENT_MAX`] keep `y` and `dy` in registers (read
//! both once, write dx: 3 units); larger resident classes keep only `y` and read `dy` twice
//! (4 units); the looped paths keep neither (5 units).

use crate::common::*;
use crate::table::{kernel_name, Config, DType, BWD_BOTH_RESIDENT_MAX};
use flydsl_build::dsl::*;
use flydsl_build::ir::{Kernel, ScalarType, Target};

/// Build the backward kernel of `cfg` for `dtype` on `target`.
pub fn build(target: Target, dtype: DType, cfg: &Config) -> Result<Kernel, BuildError> {
    let dt = scalar_type(dtype);
    let s = Shape::of(cfg, dtype);
    KernelBuilder::new(&kernel_name(cfg, dtype), target, cfg.threads)
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
                let yr = row_rsrc(&y, row, n, valid);
                let dyr = row_rsrc(&dy, row, n, valid);
                let dxr = row_rsrc(&dx, row, n, valid);
                let rows = Rows {
                    y: yr,
                    dy: dyr,
                    dx: dxr,
                    dt,
                    s,
                    n,
                };
                let finish = |dot: Val| group_reduce(dot, s.group, sdot, |a, b| a + b);
                if resident(cfg) {
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

/// The per-row resources and static shape.
struct Rows {
    y: Rsrc,
    dy: Rsrc,
    dx: Rsrc,
    dt: ScalarType,
    s: Shape,
    n: Val,
}

impl Rows {
    /// Register-resident row: `y` always resident; `dy` resident too when `both`, else read
    /// again for the output. Tails past `n` read zero and contribute nothing to the dot.
    fn resident(&self, both: bool, reduce: impl Fn(Val) -> Val) {
        let s = &self.s;
        let lane = lane_in_row(s.group, s.threads);
        let idx: Vec<Val> = (0..s.tiles).map(|j| tile_index(lane, j, s)).collect();
        let ys: Vec<Val> = idx.iter().map(|&i| load_f32(&self.y, i, s)).collect();
        let mut dys = Vec::new();
        let mut acc = f32_const(s.width, 0.0);
        for (&i, &yv) in idx.iter().zip(&ys) {
            let d = load_f32(&self.dy, i, s);
            acc = yv.fma(d, acc);
            if both {
                dys.push(d);
            }
        }
        let dot = bcast(reduce(horizontal(acc, |a, b| a + b)), s);
        for (j, (&i, &yv)) in idx.iter().zip(&ys).enumerate() {
            let d = if both {
                dys[j]
            } else {
                load_f32(&self.dy, i, s)
            };
            store_from_f32(&self.dx, i, yv * (d - dot), self.dt, s);
        }
    }

    /// Neither operand resident: pass 1 streams both for the dot, pass 2 streams both again.
    fn looped(&self, reduce: impl Fn(Val) -> Val) {
        let s = &self.s;
        let start = thread_id_x() * s.width as i32;
        let step = c_i32((s.threads * s.width) as i32);
        let acc = for_range(start, self.n, step, &[f32_const(s.width, 0.0)], |i, c| {
            vec![load_f32(&self.y, i, s).fma(load_f32(&self.dy, i, s), c[0])]
        });
        let dot = bcast(reduce(horizontal(acc[0], |a, b| a + b)), s);
        for_range_(start, self.n, step, |i| {
            let yv = load_f32(&self.y, i, s);
            let d = load_f32(&self.dy, i, s);
            store_from_f32(&self.dx, i, yv * (d - dot), self.dt, s);
        });
    }
}
