//! The building blocks (`flydsl_dsl::blocks`) on the Sim, for wave-64 (gfx942) and wave-32
//! (gfx1201, sm_90) targets, against CPU references: group reductions of every group size,
//! run-time group sizes, reductions across groups, block reductions of several values at
//! several block sizes, team reductions with a tuple merge, and the row helpers.

use flydsl_dsl::blocks::*;
use flydsl_dsl::ir::{Kernel, ScalarType::*, Target};
use flydsl_dsl::*;

const TARGETS: [Target; 3] = [Target::Gfx942, Target::Gfx1201, Target::Sm90];

/// Integer-valued inputs (sums are exact in f32), distinct enough that a wrong lane shows.
fn input(len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 37 + 11) % 101) as f32 - 50.0)
        .collect()
}

/// Run `k` on the Sim: f32 tensor `x` (input), f32 tensor `out` of `out_len` elements, i32
/// scalars by name; returns `out`.
fn run(
    k: &Kernel,
    grid: u32,
    block: u32,
    x: &[f32],
    out_len: usize,
    scalars: &[(&str, i32)],
) -> Vec<f32> {
    let mem = flydsl_sim::SimMemory::new();
    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let xa = mem.alloc(xb.len().max(4) as u64).unwrap();
    mem.write(xa, &xb).unwrap();
    let oa = mem.alloc((out_len * 4) as u64).unwrap();
    let layout = k.kernarg_layout();
    let mut args = vec![0u8; layout.size as usize];
    for s in &layout.slots {
        let o = s.offset as usize;
        let bytes: Vec<u8> = match s.name.as_str() {
            "x" => xa.to_le_bytes().to_vec(),
            "x.len" => (x.len() as i64).to_le_bytes().to_vec(),
            "out" => oa.to_le_bytes().to_vec(),
            "out.len" => (out_len as i64).to_le_bytes().to_vec(),
            name => {
                let v = scalars
                    .iter()
                    .find(|(n, _)| *n == name)
                    .unwrap_or_else(|| panic!("no {name}"));
                v.1.to_le_bytes().to_vec()
            }
        };
        args[o..o + bytes.len()].copy_from_slice(&bytes);
    }
    let opts = flydsl_sim::SimOptions::default();
    flydsl_sim::launch(k, [grid, 1, 1], [block, 1, 1], &args, &mem, &opts)
        .unwrap_or_else(|e| panic!("{}: {e}", k.name));
    let mut b = vec![0u8; out_len * 4];
    mem.read(oa, &mut b).unwrap();
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// CPU reference: (sum, max, min) of `xs`.
fn smm(xs: &[f32]) -> [f32; 3] {
    let s: f64 = xs.iter().map(|&v| v as f64).sum();
    let mx = xs.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let mn = xs.iter().cloned().fold(f32::INFINITY, f32::min);
    [s as f32, mx, mn]
}

#[test]
fn group_reduce_every_group_size_build_time_and_run_time() {
    for t in TARGETS {
        let ws = t.wave_size();
        let block = 2 * ws;
        let mut g = 1;
        while g <= ws {
            for dynamic in [false, true] {
                let k = KernelBuilder::new("group", t, block)
                    .build(|k| {
                        let x = k.tensor("x", F32);
                        let out = k.tensor_mut("out", F32);
                        let lanes = k.scalar("lanes", I32);
                        let tid = thread_id_x();
                        let v = x.load(tid);
                        let grp = if dynamic {
                            Group::Dyn(lanes)
                        } else {
                            Group::Lanes(g)
                        };
                        let s = group_reduce(v, grp, |a, b| Op::Sum.apply(a, b));
                        let mx = group_reduce(v, grp, |a, b| Op::Max.apply(a, b));
                        let mn = group_reduce(v, grp, |a, b| Op::Min.apply(a, b));
                        out.store(tid * 3, s);
                        out.store(tid * 3 + 1, mx);
                        out.store(tid * 3 + 2, mn);
                    })
                    .unwrap();
                let x = input(block as usize);
                let got = run(&k, 1, block, &x, 3 * block as usize, &[("lanes", g as i32)]);
                for tid in 0..block as usize {
                    let g0 = tid / g as usize * g as usize;
                    let want = smm(&x[g0..g0 + g as usize]);
                    assert_eq!(
                        &got[3 * tid..3 * tid + 3],
                        &want,
                        "{t} group {g} dyn {dynamic} thread {tid}"
                    );
                }
            }
            g *= 2;
        }
    }
}

#[test]
fn group_reduce_across_groups() {
    for t in TARGETS {
        let ws = t.wave_size();
        let mut g = 1;
        while g <= ws {
            let k = KernelBuilder::new("across", t, ws)
                .build(|k| {
                    let x = k.tensor("x", F32);
                    let out = k.tensor_mut("out", F32);
                    let tid = thread_id_x();
                    out.store(tid, group_reduce_across(x.load(tid), g, |a, b| a + b));
                })
                .unwrap();
            let x = input(ws as usize);
            let got = run(&k, 1, ws, &x, ws as usize, &[]);
            for (l, &got) in got.iter().enumerate() {
                let want: f32 = (0..ws as usize)
                    .filter(|i| i % g as usize == l % g as usize)
                    .map(|i| x[i])
                    .sum();
                assert_eq!(got, want, "{t} group {g} lane {l}");
            }
            g *= 2;
        }
    }
}

#[test]
fn block_reduce_n_several_values_block_sizes_and_regions() {
    for t in TARGETS {
        let ws = t.wave_size();
        let max_waves = 8;
        for waves in [1, 2, 3, 4, 8] {
            let block = waves * ws;
            let k = KernelBuilder::new("block", t, max_waves * ws)
                .build(|k| {
                    let x = k.tensor("x", F32);
                    let out = k.tensor_mut("out", F32);
                    let lds = k.lds("red", F32, Scratch::len(2, 3, max_waves));
                    let s = Scratch::new(lds, max_waves);
                    let tid = thread_id_x();
                    let nw = block_dim_x() / ws as i32;
                    let row = block_id_x() * block_dim_x();
                    let v = x.load(row + tid);
                    // Two reductions back to back in two regions (no barrier between them).
                    let r = block_reduce_n(
                        &[(v, Op::Sum), (v, Op::Max), (v, Op::Min)],
                        s.region(c_i32(0), 3 * max_waves),
                        nw,
                    );
                    let r2 = block_reduce_n(
                        &[(v * 2.0f32, Op::Sum)],
                        s.region(c_i32(1), 3 * max_waves),
                        nw,
                    );
                    let o = (block_id_x() * block_dim_x() + tid) * 4;
                    for (j, &rv) in r.iter().chain(&r2).enumerate() {
                        out.store(o + j as i32, rv);
                    }
                })
                .unwrap();
            let grid = 3;
            let x = input((grid * block) as usize);
            let got = run(&k, grid, block, &x, (4 * grid * block) as usize, &[]);
            for b in 0..grid as usize {
                let rows = &x[b * block as usize..(b + 1) * block as usize];
                let [s, mx, mn] = smm(rows);
                for tid in 0..block as usize {
                    let o = (b * block as usize + tid) * 4;
                    assert_eq!(
                        &got[o..o + 4],
                        &[s, mx, mn, 2.0 * s],
                        "{t} waves {waves} block {b} thread {tid}"
                    );
                }
            }
        }
    }
}

#[test]
fn team_reduce_tuple_merge_teams_below_and_equal_to_the_block() {
    for t in TARGETS {
        let ws = t.wave_size();
        let block = 4 * ws;
        let mut team = 1;
        while team <= block {
            let k = KernelBuilder::new("team", t, block)
                .build(|k| {
                    let x = k.tensor("x", F32);
                    let out = k.tensor_mut("out", F32);
                    let s = Scratch::new(k.lds("red", F32, 3 * 4), 4);
                    let tid = thread_id_x();
                    let v = x.load(tid);
                    // (count, sum, max of v - running mean): not lane-wise, order sensitive only
                    // through rounding (integer values keep it exact).
                    let r = team_reduce(&[c_f32(1.0), v, v], team, Some(s), |a, b| {
                        vec![a[0] + b[0], a[1] + b[1], a[2].max(b[2])]
                    });
                    for (j, &rv) in r.iter().enumerate() {
                        out.store(tid * 3 + j as i32, rv);
                    }
                })
                .unwrap();
            let x = input(block as usize);
            let got = run(&k, 1, block, &x, 3 * block as usize, &[]);
            for tid in 0..block as usize {
                let g0 = tid / team as usize * team as usize;
                let [s, mx, _] = smm(&x[g0..g0 + team as usize]);
                assert_eq!(
                    &got[3 * tid..3 * tid + 3],
                    &[team as f32, s, mx],
                    "{t} team {team} thread {tid}"
                );
            }
            team *= 2;
        }
    }
}

#[test]
fn block_reduce_with_identity_and_trailing_barrier() {
    for t in TARGETS {
        let ws = t.wave_size();
        for threads in [ws, 2 * ws, 4 * ws] {
            let k = KernelBuilder::new("blk", t, threads)
                .build(|k| {
                    let x = k.tensor("x", F32);
                    let out = k.tensor_mut("out", F32);
                    let lds = k.lds("red", F32, threads / ws);
                    let tid = thread_id_x();
                    let v = x.load(tid);
                    let a = block_reduce(v, threads, lds, f32::NEG_INFINITY, |a, b| a.max(b));
                    // The slots are reused at once: the trailing barrier makes that safe.
                    let b = block_reduce(v, threads, lds, 0.0f32, |a, b| a + b);
                    out.store(tid * 2, a);
                    out.store(tid * 2 + 1, b);
                })
                .unwrap();
            let x = input(threads as usize);
            let got = run(&k, 1, threads, &x, 2 * threads as usize, &[]);
            let [s, mx, _] = smm(&x);
            for tid in 0..threads as usize {
                assert_eq!(
                    &got[2 * tid..2 * tid + 2],
                    &[mx, s],
                    "{t} {threads} thread {tid}"
                );
            }
        }
    }
}

#[test]
fn horizontal_reductions_and_row_helpers() {
    for t in TARGETS {
        for lanes in [1u32, 2, 4, 8] {
            let k = KernelBuilder::new("rows", t, 32)
                .build(|k| {
                    let x = k.tensor("x", F32);
                    let out = k.tensor_mut("out", F32);
                    let n = k.scalar("n", I32);
                    let keep = k.scalar("keep", I32).ne(0);
                    let tid = thread_id_x();
                    // Row 1 of a [2, n] matrix; row 0 read through an invalid resource.
                    let r = row_rsrc(&x, c_i32(1), n, None);
                    let dead = row_rsrc(&x, c_i32(0), n, Some(tid.lt(0)));
                    let i = tid * lanes as i32;
                    // One access of at most 128 bits (`load_vec` splits wider vectors).
                    let v = load_row(r, &[i], lanes.min(4), 0, keep)[0];
                    let w = load_vec(r, i, lanes);
                    let o = tid * 8;
                    out.store(o, hsum(v));
                    out.store(o + 1, hfold(v, |a, b| a + b));
                    out.store(o + 2, hmax(w));
                    out.store(o + 3, hreduce(w, |a, b| a.min(b)));
                    out.store(o + 4, hsum(load_vec(dead, i, lanes)));
                    let or = row_rsrc(&out, c_i32(1), c_i32(8 * 32), None);
                    // out row 1 (elements 256..): the vector stored back in 128-bit pieces.
                    store_vec(or, i, opaque(widen(w.cast(BF16)), n >> 31));
                })
                .unwrap();
            let n = 32 * lanes as usize;
            let x = input(2 * n);
            for keep in [0, 1] {
                let got = run(
                    &k,
                    1,
                    32,
                    &x,
                    2 * 8 * 32,
                    &[("n", n as i32), ("keep", keep)],
                );
                for tid in 0..32usize {
                    let v = &x[n + tid * lanes as usize..n + (tid + 1) * lanes as usize];
                    let [_, mx, mn] = smm(v);
                    let [s4, _, _] = smm(&v[..v.len().min(4)]);
                    assert_eq!(
                        &got[tid * 8..tid * 8 + 5],
                        &[s4, s4, mx, mn, 0.0],
                        "{t} lanes {lanes} thread {tid}"
                    );
                    // Integer values up to 50 are exact in bf16.
                    let back = &got[256 + tid * lanes as usize..256 + (tid + 1) * lanes as usize];
                    assert_eq!(back, v, "{t} lanes {lanes} thread {tid}");
                }
            }
        }
    }
}

#[test]
fn misuse_is_a_build_error_naming_the_function() {
    let e = KernelBuilder::new("bad_group", Target::Gfx1201, 64)
        .build(|_| {
            let _ = group_reduce(c_f32(1.0), Group::Lanes(64), |a, b| a + b);
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("group_reduce") && e.to_string().contains("Lanes(64)"),
        "{e}"
    );
    let e = KernelBuilder::new("bad_team", Target::Gfx942, 256)
        .build(|_| {
            let _ = team_reduce(&[c_f32(1.0)], 128, None, |a, b| vec![a[0] + b[0]]);
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("team_reduce") && e.to_string().contains("Scratch"),
        "{e}"
    );
    let e = KernelBuilder::new("bad_team", Target::Gfx942, 256)
        .build(|_| {
            let _ = team_reduce(&[c_f32(1.0)], 96, None, |a, b| vec![a[0] + b[0]]);
        })
        .unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
}
