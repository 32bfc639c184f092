//! The second stage of the deterministic backward: `out[c] = sum_r part[r * n + c]` over `g`
//! f32 partial rows, in row order, written in the weight dtype. One thread per column.
//!
//! Parameters: `part` (f32), `out` (weight dtype), scalars `g`, `n`.

use crate::common::st;
use crate::config::{reduce_name, Dtype, GENERIC_THREADS};
use flydsl_build::dsl::*;
use flydsl_build::ir::{Kernel, ScalarType, Target};

/// Build the column-sum kernel writing `out` for `target`.
pub fn build(out: Dtype, target: Target) -> Result<Kernel, BuildError> {
    KernelBuilder::new(&reduce_name(out), target, GENERIC_THREADS).build(|k| {
        let part = k.tensor("part", ScalarType::F32);
        let o = k.tensor_mut("out", st(out));
        let g = k.scalar("g", ScalarType::I32);
        let n = k.scalar("n", ScalarType::I32);
        let col = block_id_x() * GENERIC_THREADS as i32 + thread_id_x();
        if_(col.lt(n), || {
            let n64 = n.cast(ScalarType::I64);
            let c64 = col.cast(ScalarType::I64);
            let s = for_range(c_i32(0), g, c_i32(1), &[c_f32(0.0)], |r, acc| {
                vec![acc[0] + part.load(r.cast(ScalarType::I64) * n64 + c64)]
            });
            o.store(col, s[0].cast(st(out)));
        });
    })
}
