//! sm_90 register-A wgmma (`NvOp::WgmmaRs`) with a K-major or MN-major ("transposed") B, and
//! the `nv::wgmma_a_frag` helper that turns an f32 accumulator into A fragments: exact
//! results on the Sim (racecheck on) against a CPU matrix product written here. Its PTX is
//! checked in flydsl-build's `tests/nv_ptx.rs`; attention (fly-attn's Hopper kernel,
//! `fly-attn/tests/cuda.rs`) runs it on the GPU.
//!
//! The kernel computes `O = C + S V` the way attention's `O += P V` does: `S` (64 x K, f32)
//! is read into registers in the wgmma accumulator layout, rounded to 16 bits and packed
//! into one A fragment per k16 step; `V` (K x N) is staged in LDS in the 128-byte swizzle,
//! either MN-major (row `k` holds `V[k][n]`, 64-element column blocks) or K-major (row `n`
//! holds `V[k][n]` over k). Inputs are small multiples of 1/4, so every product and sum is
//! exact in f32 and the result must match the CPU product bit for bit.

use flydsl_dsl::ir::{Kernel, ScalarType, ScalarType::*, Target, WgmmaB};
use flydsl_dsl::*;
use flydsl_sim::{SimMemory, SimOptions};

/// The wgmma accumulator layout: thread `tl` of the warpgroup, register `reg` holds
/// element `(row, col)` of the 64 x N matrix.
fn acc_pos(tl: usize, reg: usize) -> (usize, usize) {
    let (w, l) = (tl / 32, tl % 32);
    let (j, q) = (reg / 4, reg % 4);
    (16 * w + l / 4 + 8 * (q / 2), 8 * j + 2 * (l % 4) + q % 2)
}

/// `O = C + S V`: S 64 x `kdim`, V `kdim` x `n` (both f32 in global memory, rounded to
/// `dt` in the kernel), C from `c` (64 x n), O written to `out` (64 x n), all row-major.
fn kernel(dt: ScalarType, kdim: u32, n: u32, mn_major: bool) -> Kernel {
    let name = format!("wgmma_rs_{}_{kdim}_{n}_{mn_major}", dt.name());
    KernelBuilder::new(&name, Target::Sm90, 128)
        .build(|k| {
            let s_in = k.tensor("s", F32);
            let v_in = k.tensor("v", F32);
            let c_in = k.tensor("c", F32);
            let out = k.tensor_mut("out", F32);
            let t = thread_id_x();
            let (w, l) = (t / 32, t % 32);
            // MN-major: kdim rows of 128 bytes per 64-wide N block. K-major: n rows of 128
            // bytes (kdim <= 64).
            let block_bytes = kdim * 128;
            let elems = if mn_major {
                (n / 64) * kdim * 64
            } else {
                n * 64
            };
            let vt = k.lds_aligned("vt", dt, elems, 1024);
            // Stage V: thread t writes elements t, t + 128, ... of V (kdim x n).
            for_range_(c_i32(0), c_i32((kdim * n) as i32), c_i32(128), |i0| {
                let i = i0 + t;
                if_(i.lt(c_i32((kdim * n) as i32)), || {
                    let (kk, nn) = (i / n as i32, i % n as i32);
                    let lin = if mn_major {
                        kk * 128 + (nn % 64) * 2 + (nn / 64) * block_bytes as i32
                    } else {
                        nn * 128 + kk * 2
                    };
                    let sw = lin ^ (((lin / 128) % 8) * 16);
                    vt.store(sw / 2, v_in.load(i).cast(dt));
                });
            });
            barrier();
            let regs = n / 2;
            // C and S in the accumulator layout.
            let pos = |reg: u32| {
                let (j, q) = ((reg / 4) as i32, (reg % 4) as i32);
                let row = w * 16 + l / 4 + 8 * (q / 2);
                let col = (l % 4) * 2 + (8 * j + q % 2);
                (row, col)
            };
            let c: Vec<Val> = (0..regs)
                .map(|r| {
                    let (row, col) = pos(r);
                    c_in.load(row * n as i32 + col)
                })
                .collect();
            let sv: Vec<Val> = (0..kdim / 2)
                .map(|r| {
                    let (row, col) = pos(r);
                    s_in.load(row * kdim as i32 + col)
                })
                .collect();
            let s_acc = vec_of(&sv);
            let mut acc = vec_of(&c);
            let layout = if mn_major {
                WgmmaB::MnMajor { block_bytes }
            } else {
                WgmmaB::KMajor
            };
            nv::wgmma_fence();
            for kk in 0..kdim / 16 {
                let frag = nv::wgmma_a_frag(s_acc, kk, dt);
                let step = if mn_major { kk * 16 * 64 } else { kk * 16 };
                acc = nv::wgmma_rs(n, frag, vt.ptr_at(c_i32(step as i32)), layout, acc);
            }
            nv::wgmma_commit();
            let acc = nv::wgmma_wait(0, &[acc])[0];
            for r in 0..regs {
                let (row, col) = pos(r);
                out.store(row * n as i32 + col, acc.at(r));
            }
        })
        .unwrap()
}

fn run(k: &Kernel, s: &[f32], v: &[f32], c: &[f32]) -> Vec<f32> {
    let mem = SimMemory::new();
    let put = |x: &[f32]| {
        let b = mem.alloc((x.len() * 4) as u64).unwrap();
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        mem.write(b, &bytes).unwrap();
        b
    };
    let (sb, vb, cb) = (put(s), put(v), put(c));
    let ob = mem.alloc((c.len() * 4) as u64).unwrap();
    let layout = k.kernarg_layout();
    let mut args = vec![0u8; layout.size as usize];
    for slot in &layout.slots {
        let o = slot.offset as usize;
        let bytes: Vec<u8> = match slot.name.as_str() {
            "s" => sb.to_le_bytes().to_vec(),
            "v" => vb.to_le_bytes().to_vec(),
            "c" => cb.to_le_bytes().to_vec(),
            "out" => ob.to_le_bytes().to_vec(),
            "s.len" => (s.len() as u64).to_le_bytes().to_vec(),
            "v.len" => (v.len() as u64).to_le_bytes().to_vec(),
            "c.len" | "out.len" => (c.len() as u64).to_le_bytes().to_vec(),
            other => panic!("unexpected kernel argument {other}"),
        };
        args[o..o + bytes.len()].copy_from_slice(&bytes);
    }
    let opts = SimOptions {
        racecheck: true,
        ..SimOptions::default()
    };
    flydsl_sim::launch(k, [1, 1, 1], [128, 1, 1], &args, &mem, &opts).unwrap();
    let mut b = vec![0u8; c.len() * 4];
    mem.read(ob, &mut b).unwrap();
    b.chunks(4)
        .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
        .collect()
}

/// Deterministic multiples of 1/4 in [-2, 2].
fn quarters(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x % 17) as f32 - 8.0) / 4.0
        })
        .collect()
}

fn check(dt: ScalarType, kdim: u32, n: u32, mn_major: bool) {
    let (kd, nn) = (kdim as usize, n as usize);
    let s = quarters(1 + kd as u64, 64 * kd);
    let v = quarters(7 + nn as u64, kd * nn);
    let c = quarters(3, 64 * nn);
    let got = run(&kernel(dt, kdim, n, mn_major), &s, &v, &c);
    for i in 0..64 {
        for j in 0..nn {
            let want: f64 = c[i * nn + j] as f64
                + (0..kd)
                    .map(|x| s[i * kd + x] as f64 * v[x * nn + j] as f64)
                    .sum::<f64>();
            assert_eq!(
                got[i * nn + j] as f64,
                want,
                "{dt:?} K={kdim} N={n} mn_major={mn_major}: O[{i}][{j}]"
            );
        }
    }
}

#[test]
fn register_a_wgmma_with_mn_major_b_matches_cpu() {
    for dt in [BF16, F16] {
        check(dt, 32, 128, true);
        check(dt, 16, 64, true);
        check(dt, 64, 256, true);
    }
}

#[test]
fn register_a_wgmma_with_k_major_b_matches_cpu() {
    for dt in [BF16, F16] {
        check(dt, 32, 64, false);
        check(dt, 64, 32, false);
    }
}

#[test]
fn a_fragment_layout_is_the_accumulator_layout_restricted_to_k16_columns() {
    // The helper's documented contract, in CPU terms: accumulator registers 8kk..8kk+8 of a
    // thread, paired, are the A-fragment registers 0..4 of step kk.
    for tl in 0..128 {
        for kk in 0..4 {
            for r in 0..4 {
                for h in 0..2 {
                    let (row, col) = acc_pos(tl, 8 * kk + 2 * r + h);
                    let (w, l) = (tl / 32, tl % 32);
                    let a_row = 16 * w + l / 4 + 8 * (r % 2);
                    let a_col = 16 * kk + 2 * (l % 4) + 8 * (r / 2) + h;
                    assert_eq!((row, col), (a_row, a_col));
                }
            }
        }
    }
}
