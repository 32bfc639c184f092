//! sm_90 `cp.async` (zero-fill, commit groups, waits) and `ldmatrix` / `stmatrix`: exact
//! results on the Sim against CPU models written here, and the Sim's reports of reads that
//! come too early. Their PTX is checked in flydsl-build's `tests/nv_ptx.rs`.

use flydsl_dsl::ir::{Kernel, ScalarType::*, Target};
use flydsl_dsl::*;
use flydsl_sim::{SimError, SimMemory, SimOptions};

/// Launch one workgroup of `threads` threads of `k`, whose parameters are any of `x: u32[]`,
/// `n: i32`, `out: u32[]` (by name); returns `out`.
fn run(
    k: &Kernel,
    threads: u32,
    x: &[u32],
    n: i32,
    out_len: usize,
    opts: &SimOptions,
) -> Result<Vec<u32>, SimError> {
    let mem = SimMemory::new();
    let xb = mem.alloc((x.len() * 4).max(16) as u64).unwrap();
    let xbytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    mem.write(xb, &xbytes).unwrap();
    let ob = mem.alloc((out_len * 4) as u64).unwrap();
    let layout = k.kernarg_layout();
    let mut args = vec![0u8; layout.size as usize];
    for s in &layout.slots {
        let o = s.offset as usize;
        let bytes: Vec<u8> = match s.name.as_str() {
            "x" => xb.to_le_bytes().to_vec(),
            "x.len" => (x.len() as u64).to_le_bytes().to_vec(),
            "out" => ob.to_le_bytes().to_vec(),
            "out.len" => (out_len as u64).to_le_bytes().to_vec(),
            "n" => n.to_le_bytes().to_vec(),
            other => panic!("unexpected kernel argument {other}"),
        };
        args[o..o + bytes.len()].copy_from_slice(&bytes);
    }
    flydsl_sim::launch(k, [1, 1, 1], [threads, 1, 1], &args, &mem, opts)?;
    let mut b = vec![0u8; out_len * 4];
    mem.read(ob, &mut b).unwrap();
    Ok(b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

const T: u32 = 64;

/// Each thread copies `w = bytes / 4` words `x[w t ..]` into LDS with zero-fill past `n`,
/// commits, waits, and after a barrier thread `t` writes the words thread `t + 1` copied.
fn staged_copy(bytes: u32) -> Kernel {
    KernelBuilder::new("staged_copy", Target::Sm90, T)
        .build(|k| {
            let x = k.tensor("x", I32);
            let n = k.scalar("n", I32);
            let out = k.tensor_mut("out", I32);
            let w = (bytes / 4) as i32;
            let s = k.lds("s", I32, T * w as u32);
            let t = thread_id_x();
            let i = t * w;
            // Words of this copy inside x: clamp(n - i, 0, w).
            let words = (n - i).max(c_i32(0)).min(c_i32(w));
            // A copy wholly past the end keeps its (out-of-range) index: it reads nothing.
            nv::cp_async(s.ptr_at(i), x.ptr(), Some(i), bytes, words * 4);
            nv::cp_async_commit();
            nv::cp_async_wait(0);
            barrier();
            let src = ((t + 1) % T as i32) * w;
            for j in 0..w {
                out.store(i + j, s.load(src + j));
            }
        })
        .unwrap()
}

#[test]
fn cp_async_copies_and_zero_fills_ragged_edges_exactly() {
    let x: Vec<u32> = (0..T * 4).map(|i| 0x1000_0000 + i * 7).collect();
    for bytes in [4u32, 8, 16] {
        let w = (bytes / 4) as usize;
        let k = staged_copy(bytes);
        for n in [0usize, 1, 37, 150, (T as usize) * w] {
            let got = run(
                &k,
                T,
                &x[..n],
                n as i32,
                T as usize * w,
                &SimOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{bytes} B, n = {n}: {e}"));
            for t in 0..T as usize {
                for j in 0..w {
                    let e = ((t + 1) % T as usize) * w + j;
                    let want = if e < n { x[e] } else { 0 };
                    assert_eq!(
                        got[t * w + j],
                        want,
                        "{bytes} B, n = {n}, out[{}]",
                        t * w + j
                    );
                }
            }
        }
    }
}

/// Two groups (stages 0 and 1); after `wait_group(pending)` this thread reads its own copy of
/// stage `read`.
fn two_groups(pending: u32, read: i32) -> Kernel {
    KernelBuilder::new("two_groups", Target::Sm90, T)
        .build(|k| {
            let x = k.tensor("x", I32);
            let out = k.tensor_mut("out", I32);
            let s = k.lds("s", I32, 2 * 4 * T);
            let t = thread_id_x();
            for st in 0..2 {
                let i = t * 4 + st * 4 * T as i32;
                nv::cp_async(s.ptr_at(i), x.ptr(), Some(i), 16, c_i32(16));
                nv::cp_async_commit();
            }
            nv::cp_async_wait(pending);
            out.store(t, s.load(t * 4 + read * 4 * T as i32));
        })
        .unwrap()
}

fn expect_fault(r: Result<Vec<u32>, SimError>, what: &str, words: &[&str]) {
    expect_fault_or_race(r, what, words, false)
}

/// Like [`expect_fault`]; with `race_ok`, an LDS race report is accepted instead (racecheck
/// sees a read by another thread in the epoch of the copy first).
fn expect_fault_or_race(r: Result<Vec<u32>, SimError>, what: &str, words: &[&str], race_ok: bool) {
    match r {
        Err(SimError::LdsRace { .. }) if race_ok => {}
        Err(e @ SimError::Fault { .. }) => {
            let m = e.to_string();
            for w in words {
                assert!(m.contains(w), "{what}: `{w}` not in: {m}");
            }
        }
        other => panic!("{what}: expected a fault, got {other:?}"),
    }
}

#[test]
fn wait_group_lands_only_the_older_groups() {
    let x: Vec<u32> = (0..8 * T).collect();
    let o = SimOptions::default();
    // wait_group 1: stage 0 has landed, stage 1 may still be in flight.
    let got = run(&two_groups(1, 0), T, &x, 0, T as usize, &o).unwrap();
    assert_eq!(got, (0..T).map(|t| t * 4).collect::<Vec<_>>());
    expect_fault(
        run(&two_groups(1, 1), T, &x, 0, T as usize, &o),
        "stage 1 after wait_group 1",
        &["cp.async of this thread", "commit group 1", "still writing"],
    );
    let got = run(&two_groups(0, 1), T, &x, 0, T as usize, &o).unwrap();
    assert_eq!(got, (0..T).map(|t| 4 * T + t * 4).collect::<Vec<_>>());
    // A wait before any commit covers nothing.
    expect_fault(
        run(&two_groups(2, 0), T, &x, 0, T as usize, &o),
        "stage 0 after wait_group 2",
        &["commit group 0"],
    );
}

/// Thread t copies 16 bytes, waits (or not), optionally syncs, then reads thread t+1's copy
/// (or its own), plainly or through `ldmatrix`.
fn neighbour_read(wait: bool, sync: bool, own: bool, ldm: bool) -> Kernel {
    KernelBuilder::new("neighbour_read", Target::Sm90, 32)
        .build(|k| {
            let x = k.tensor("x", I32);
            let out = k.tensor_mut("out", I32);
            let s = k.lds("s", I32, 4 * 32);
            let t = thread_id_x();
            nv::cp_async(s.ptr_at(t * 4), x.ptr(), Some(t * 4), 16, c_i32(16));
            nv::cp_async_commit();
            if wait {
                nv::cp_async_wait(0);
            }
            if sync {
                barrier();
            }
            let r = if own { t } else { (t + 1) % 32 };
            let v = if ldm {
                // Lane l addresses 16-byte row r of s (as 8 x 16-bit elements).
                nv::ldmatrix(s.ptr_at(r * 4), 1, false)
            } else {
                s.load(r * 4)
            };
            out.store(t, v);
        })
        .unwrap()
}

#[test]
fn early_reads_of_cp_async_bytes_are_reported_even_without_racecheck() {
    let x: Vec<u32> = (0..128).collect();
    let no_race = SimOptions {
        racecheck: false,
        ..SimOptions::default()
    };
    for o in [SimOptions::default(), no_race] {
        for ldm in [false, true] {
            let r = |w, s, own| run(&neighbour_read(w, s, own, ldm), 32, &x, 0, 32, &o);
            let what = |s: &str| format!("{s} (ldmatrix: {ldm}, racecheck: {})", o.racecheck);
            expect_fault(r(false, true, false), &what("no wait"), &["still writing"]);
            expect_fault(
                r(false, false, true),
                &what("own, no wait"),
                &["still writing"],
            );
            expect_fault_or_race(
                r(true, false, false),
                &what("wait, no barrier"),
                &["no workgroup barrier since the wait"],
                o.racecheck,
            );
            r(true, false, true).unwrap_or_else(|e| panic!("{}: {e}", what("own after wait")));
            r(true, true, false).unwrap_or_else(|e| panic!("{}: {e}", what("wait + barrier")));
        }
    }
}

#[test]
fn cp_async_into_a_stage_another_thread_reads_is_a_race() {
    // Thread t reads s[t + 1] and then cp.asyncs into s[t] in the same barrier epoch:
    // thread t - 1 read that word, so the copy races with it.
    let k = KernelBuilder::new("war", Target::Sm90, 32)
        .build(|k| {
            let x = k.tensor("x", I32);
            let out = k.tensor_mut("out", I32);
            let s = k.lds("s", I32, 4 * 33);
            let t = thread_id_x();
            out.store(t, s.load((t + 1) * 4));
            nv::cp_async(s.ptr_at(t * 4), x.ptr(), Some(t * 4), 16, c_i32(16));
            nv::cp_async_commit();
            nv::cp_async_wait(0);
        })
        .unwrap();
    let x: Vec<u32> = (0..128).collect();
    // The read of never-written LDS is the point here (it makes the WAR pair): initcheck off.
    let opts = SimOptions {
        initcheck: false,
        ..SimOptions::default()
    };
    match run(&k, 32, &x, 0, 32, &opts) {
        Err(SimError::LdsRace { .. }) => {}
        other => panic!("expected an LDS race, got {other:?}"),
    }
}

#[test]
fn cp_async_bad_src_bytes_and_alignment_are_faults() {
    let bad = |sb: i32, off: i32| {
        KernelBuilder::new("bad", Target::Sm90, 32)
            .build(|k| {
                let x = k.tensor("x", I32);
                let s = k.lds("s", I32, 4 * 33);
                let t = thread_id_x();
                nv::cp_async(s.ptr_at(t * 4 + off), x.ptr(), Some(t * 4), 16, c_i32(sb));
            })
            .unwrap()
    };
    let x: Vec<u32> = (0..128).collect();
    let o = SimOptions::default();
    expect_fault(
        run(&bad(17, 0), 32, &x, 0, 1, &o),
        "src_bytes 17",
        &["src_bytes is 17"],
    );
    expect_fault(
        run(&bad(-1, 0), 32, &x, 0, 1, &o),
        "src_bytes -1",
        &["src_bytes is -1"],
    );
    expect_fault(
        run(&bad(16, 1), 32, &x, 0, 1, &o),
        "misaligned",
        &["16-byte aligned"],
    );
    run(&bad(16, 0), 32, &x, 0, 1, &o).unwrap();
}

/// Lane `l` supplies the address of row `PERM(l)` of a 32-row x 8-column table of 16-bit
/// elements (a bijection, so the rows are not in lane order).
fn perm(l: u32) -> u32 {
    (l * 5 + 3) % 32
}

/// CPU model of `ldmatrix`: the (lane, register, half) that receives element `(r, c)` of
/// matrix `i` (the inverse of the contract's lane-to-element map, derived from the PTX ISA
/// fragment figure: a row of 8 elements is spread over 4 consecutive lanes, two per lane).
fn owner(r: u32, c: u32, trans: bool) -> (u32, u32) {
    if trans {
        (4 * c + r / 2, r % 2)
    } else {
        (4 * r + c / 2, c % 2)
    }
}

/// The 16-bit table: element `(row, col)` is `x` packed two per word (row-major).
fn table_elem(x: &[u32], row: u32, col: u32) -> u16 {
    let e = row * 8 + col;
    (x[(e / 2) as usize] >> (16 * (e % 2))) as u16
}

fn ldmatrix_kernel(count: u32, trans: bool) -> Kernel {
    KernelBuilder::new("ldm", Target::Sm90, 32)
        .build(|k| {
            let x = k.tensor("x", I32);
            let out = k.tensor_mut("out", I32);
            let s = k.lds("s", I32, 4 * 32);
            let t = thread_id_x();
            for j in 0..4 {
                s.store(t * 4 + j, x.load(t * 4 + j));
            }
            barrier();
            let row = (t * 5 + 3) % 32;
            let f = nv::ldmatrix(s.ptr_at(row * 4), count, trans);
            for i in 0..count {
                let v = if count == 1 { f } else { f.at(i) };
                out.store(t * count as i32 + i as i32, v);
            }
        })
        .unwrap()
}

#[test]
fn ldmatrix_matches_the_cpu_model() {
    let x: Vec<u32> = (0..128u32)
        .map(|i| i.wrapping_mul(2654435761).rotate_left(7))
        .collect();
    for count in [1u32, 2, 4] {
        for trans in [false, true] {
            let got = run(
                &ldmatrix_kernel(count, trans),
                32,
                &x,
                0,
                32 * count as usize,
                &SimOptions::default(),
            )
            .unwrap();
            let mut want = vec![0u32; 32 * count as usize];
            for i in 0..count {
                for r in 0..8 {
                    for c in 0..8 {
                        let e = table_elem(&x, perm(8 * i + r), c) as u32;
                        let (lane, half) = owner(r, c, trans);
                        want[(lane * count + i) as usize] |= e << (16 * half);
                    }
                }
            }
            assert_eq!(got, want, "ldmatrix x{count} trans={trans}");
        }
    }
}

fn stmatrix_kernel(count: u32, trans: bool) -> Kernel {
    KernelBuilder::new("stm", Target::Sm90, 32)
        .build(|k| {
            let x = k.tensor("x", I32);
            let out = k.tensor_mut("out", I32);
            let s = k.lds("s", I32, 4 * 32);
            let t = thread_id_x();
            let regs: Vec<Val> = (0..count)
                .map(|i| x.load(t * count as i32 + i as i32))
                .collect();
            let v = if count == 1 { regs[0] } else { vec_of(&regs) };
            let row = (t * 5 + 3) % 32;
            nv::stmatrix(s.ptr_at(row * 4), v, count, trans);
            barrier();
            for j in 0..4 {
                out.store(t * 4 + j, s.load(t * 4 + j));
            }
        })
        .unwrap()
}

#[test]
fn stmatrix_matches_the_cpu_model() {
    let x: Vec<u32> = (0..128u32)
        .map(|i| i.wrapping_mul(40503).rotate_left(11) ^ 0x5a5a)
        .collect();
    for count in [1u32, 2, 4] {
        for trans in [false, true] {
            let got = run(
                &stmatrix_kernel(count, trans),
                32,
                &x[..32 * count as usize],
                0,
                128,
                // Rows no lane addresses are read back unwritten (zero on the Sim with
                // initcheck off).
                &SimOptions {
                    initcheck: false,
                    ..SimOptions::default()
                },
            )
            .unwrap();
            // Rows no lane addresses stay zero (LDS starts zeroed on the Sim).
            let mut want = vec![0u32; 128];
            for i in 0..count {
                for r in 0..8 {
                    for c in 0..8 {
                        let (lane, half) = owner(r, c, trans);
                        let e = (x[(lane * count + i) as usize] >> (16 * half)) & 0xffff;
                        let at = perm(8 * i + r) * 8 + c;
                        want[(at / 2) as usize] |= e << (16 * (at % 2));
                    }
                }
            }
            assert_eq!(got, want, "stmatrix x{count} trans={trans}");
        }
    }
}

/// Run `k` (a [`flydsl_devtools::proof::tiled_mma_with`] kernel: `a`, `b` bf16, `c` f32,
/// `m`, `n`, `k`) on the sm90 Sim with memcheck and racecheck; returns C.
fn run_gemm(k: &Kernel, a: &[f32], b: &[f32], (m, n, kk): (usize, usize, usize)) -> Vec<f32> {
    let mem = SimMemory::new();
    let bf = |v: &[f32]| -> Vec<u8> {
        v.iter()
            .flat_map(|&x| half::bf16::from_f32(x).to_bits().to_le_bytes())
            .collect()
    };
    let up = |bytes: &[u8]| {
        let p = mem.alloc(bytes.len() as u64).unwrap();
        mem.write(p, bytes).unwrap();
        p
    };
    let (da, db) = (up(&bf(a)), up(&bf(b)));
    let nan: Vec<u8> = (0..m * n).flat_map(|_| f32::NAN.to_le_bytes()).collect();
    let dc = up(&nan);
    let layout = k.kernarg_layout();
    let mut args = vec![0u8; layout.size as usize];
    for s in &layout.slots {
        let bytes: Vec<u8> = match s.name.as_str() {
            "a" => da.to_le_bytes().to_vec(),
            "a.len" => ((m * kk) as u64).to_le_bytes().to_vec(),
            "b" => db.to_le_bytes().to_vec(),
            "b.len" => ((n * kk) as u64).to_le_bytes().to_vec(),
            "c" => dc.to_le_bytes().to_vec(),
            "c.len" => ((m * n) as u64).to_le_bytes().to_vec(),
            "m" => (m as i32).to_le_bytes().to_vec(),
            "n" => (n as i32).to_le_bytes().to_vec(),
            "k" => (kk as i32).to_le_bytes().to_vec(),
            other => panic!("unexpected kernel argument {other}"),
        };
        args[s.offset as usize..s.offset as usize + bytes.len()].copy_from_slice(&bytes);
    }
    let (grid, block) = flydsl_devtools::proof::tiled_mma_launch(Target::Sm90, m, n);
    flydsl_sim::launch(k, grid, block, &args, &mem, &SimOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", k.name));
    let mut out = vec![0u8; m * n * 4];
    mem.read(dc, &mut out).unwrap();
    out.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The proof GEMM moves tiles by cp.async and reads fragments with ldmatrix on sm90 by
/// default, and the register-staged copies and vector fragment loads stay selectable: all
/// are exact on the Sim (racecheck on) at ragged M, N, K, with 2 and 3 stages.
#[test]
fn tiled_mma_with_and_without_cp_async_is_exact_on_the_sm90_sim() {
    use flydsl_devtools::proof::{tiled_mma_with, GemmConfig};
    let base = GemmConfig::for_target(Target::Sm90);
    assert!(base.async_copy, "sm90 uses cp.async by default");
    let mut seed = 12345u64;
    let mut ints = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 33) % 9) as f32 - 4.0
            })
            .collect()
    };
    for (m, n, kk) in [(100, 72, 136), (130, 8, 40)] {
        let (a, b) = (ints(m * kk), ints(n * kk));
        for (async_copy, stages, ldmatrix) in [
            (true, 2, true),
            (true, 3, true),
            (false, 2, true),
            (true, 2, false),
        ] {
            let cfg = GemmConfig {
                async_copy,
                stages,
                ldmatrix,
                ..base
            };
            let k = tiled_mma_with(Target::Sm90, BF16, cfg, "gemm").unwrap();
            let body = format!("{:?}", k.body);
            assert_eq!(
                body.contains("CpAsync"),
                async_copy,
                "cp.async iff selected"
            );
            assert_eq!(body.contains("LdMatrix"), ldmatrix, "ldmatrix iff selected");
            let c = run_gemm(&k, &a, &b, (m, n, kk));
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..kk).map(|p| a[i * kk + p] * b[j * kk + p]).sum();
                    assert_eq!(
                        c[i * n + j],
                        want,
                        "async {async_copy}, ldmatrix {ldmatrix}, {stages} stages, \
                         {m}x{n}x{kk}: C[{i}][{j}]"
                    );
                }
            }
        }
    }
}

/// The sm90 proof GEMM's PTX (when sm90 is built): tiles move by `cp.async` in commit
/// groups, every A / B fragment comes from `ldmatrix` (x4 for A, x2 for B), and no plain
/// shared load is left.
#[test]
fn sm90_tiled_mma_ptx_uses_cp_async_and_ldmatrix() {
    use flydsl_devtools::proof::GemmConfig;
    use flydsl_dsl::ir::MmaAtom;
    let Some(code) = flydsl_tests::proof::TILED_MMA_BF16
        .for_target(Target::Sm90)
        .and_then(|v| v.code)
    else {
        println!("skipped: sm90 not built (build with --features sm90)");
        return;
    };
    let ptx = std::str::from_utf8(code).unwrap();
    let cfg = GemmConfig::for_target(Target::Sm90);
    let (m, n, k) = MmaAtom::native_16bit(Target::Sm90, true).shape();
    let ksteps = cfg.bk / k;
    let count = |s: &str| ptx.matches(s).count() as u32;
    let (tm, tn) = (cfg.warps.0 * cfg.reps.0 * m, cfg.warps.1 * cfg.reps.1 * n);
    let threads = cfg.warps.0 * cfg.warps.1 * 32;
    // Per stage, each thread copies its 16-byte vectors of the A and B tiles.
    let per_stage = (tm + tn) * cfg.bk / 8 / threads;
    assert!(count("cp.async.cg.shared.global") >= per_stage, "cp.async");
    assert!(count("cp.async.commit_group") >= 1 && count("cp.async.wait_group") >= 1);
    let x4 = count("ldmatrix.sync.aligned.m8n8.x4.shared.b16");
    let x2 = count("ldmatrix.sync.aligned.m8n8.x2.shared.b16");
    assert!(x4 >= cfg.reps.0 * ksteps, "ldmatrix.x4 for A: {x4}");
    assert!(x2 >= cfg.reps.1 * ksteps, "ldmatrix.x2 for B: {x2}");
    assert_eq!(
        count("ld.shared"),
        0,
        "a fragment still read with ld.shared"
    );
    assert!(count("mma.sync.aligned.m16n8k16") >= cfg.reps.0 * cfg.reps.1 * ksteps);
}
