//! Sim checks of the Hopper pipeline (issue #13 item 5): bounded value storage on the wgmma
//! GEMM, "wgmma results appear at the wait" (a verifier rule), and TMA / wgmma accesses in
//! the LDS race detector with mbarrier ordering.
//!
//! Kernels run on `flydsl_sim` directly (raw memory, hand-packed kernel arguments) so the
//! launch report and the exact error are visible.

use fly_gemm::table::{BM, BN, LDS_BYTES, THREADS};
use flydsl_dsl::ir::{Kernel, NvOp, Op, OpKind, ScalarType::*, Target};
use flydsl_dsl::nv::{
    fence_proxy_async, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_wait, tma_load, wgmma,
    wgmma_commit, wgmma_fence, wgmma_wait,
};
use flydsl_dsl::*;
use flydsl_sim::{launch_with_lds, LaunchReport, SimError, SimMemory, SimOptions, SimTensorMap};
use flydsl_testutil::rng::Rng;

/// Upload `vals` (bf16 bits) and a SW128 tensor map over them (`dims = [k, rows]`, box
/// `[64, box_rows]`); returns the map's address.
fn bf16_map(mem: &SimMemory, vals: &[u16], k: u64, rows: u64, box_rows: u32) -> u64 {
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let base = mem.alloc(bytes.len() as u64).unwrap();
    mem.write(base, &bytes).unwrap();
    let mut map = SimTensorMap {
        base,
        elem_bytes: 2,
        rank: 2,
        dims: [0; 5],
        strides: [0; 5],
        boxes: [0; 5],
        swizzle128: true,
    };
    map.dims[..2].copy_from_slice(&[k, rows]);
    map.strides[..2].copy_from_slice(&[2, 2 * k]);
    map.boxes[..2].copy_from_slice(&[64, box_rows]);
    let enc = map.encode();
    let at = mem.alloc(enc.len() as u64).unwrap();
    mem.write(at, &enc).unwrap();
    at
}

/// Pack kernel arguments: `args[i]` is parameter i (an address or a scalar's bits).
fn kernarg(k: &Kernel, args: &[u64]) -> Vec<u8> {
    let layout = k.kernarg_layout();
    let mut buf = vec![0u8; layout.size as usize];
    for s in &layout.slots {
        let v = args[s.param];
        let o = s.offset as usize;
        buf[o..o + s.size as usize].copy_from_slice(&v.to_le_bytes()[..s.size as usize]);
    }
    buf
}

/// fly-gemm's Hopper kernel (bf16, no epilogue) as the build embedded its IR.
fn gemm_kernel() -> Kernel {
    let (_, k) = fly_gemm::kernel_variants()
        .into_iter()
        .find(|(name, _)| *name == "gemm_wgmma_bf16_none")
        .expect("fly-gemm has the bf16 kernel");
    let v = k
        .variants
        .iter()
        .find(|v| v.target == Target::Sm90)
        .unwrap();
    flydsl_dsl::ir::from_bytes(v.ir).unwrap()
}

/// bf16 bits of multiples of 1/2 in [-1, 1] (exact products and sums).
fn halves(rng: &mut Rng, n: usize) -> Vec<u16> {
    rng.randn(n)
        .into_iter()
        .map(|x| {
            let h = ((x * 1.5).round() / 2.0).clamp(-1.0, 1.0);
            (h.to_bits() >> 16) as u16
        })
        .collect()
}

fn bf16_f64(b: u16) -> f64 {
    f32::from_bits(u32::from(b) << 16) as f64
}

/// The words (u64 per thread) every SSA value of `k` takes: what the Sim held for the whole
/// run before value storage followed the live set.
fn all_value_bytes(k: &Kernel, threads: u64) -> u64 {
    let words: u64 = k
        .values
        .iter()
        .map(|t| match *t {
            flydsl_dsl::ir::Type::Vector(_, n) => n as u64,
            flydsl_dsl::ir::Type::BufferRsrc(_) => 2,
            _ => 1,
        })
        .sum();
    words * threads * 8
}

#[test]
fn wgmma_gemm_value_storage_follows_the_live_set() {
    let k = gemm_kernel();
    let (m, n, kd) = (128usize, 256usize, 512usize);
    let mem = SimMemory::new();
    let mut rng = Rng::new(5);
    let a = halves(&mut rng, m * kd);
    let b = halves(&mut rng, n * kd);
    let am = bf16_map(&mem, &a, kd as u64, m as u64, BM);
    let bm = bf16_map(&mem, &b, kd as u64, n as u64, BN);
    let c = mem.alloc((m * n * 2) as u64).unwrap();
    // Parameters: a_map, b_map, bias (unread without an epilogue), c, m, n, k.
    let args = kernarg(&k, &[am, bm, c, c, m as u64, n as u64, kd as u64]);
    let grid = (m as u32).div_ceil(BM) * (n as u32).div_ceil(BN);
    let opts = SimOptions {
        threads: 1,
        ..SimOptions::default()
    };
    let rep: LaunchReport = launch_with_lds(
        &k,
        [grid, 1, 1],
        [THREADS, 1, 1],
        LDS_BYTES,
        &args,
        &mem,
        &opts,
    )
    .unwrap();
    let all = all_value_bytes(&k, THREADS as u64);
    println!(
        "wgmma_gemm {m}x{n}x{kd}: {} values, all values {all} bytes, peak held {} bytes",
        k.values.len(),
        rep.peak_value_bytes
    );
    assert!(
        rep.peak_value_bytes * 3 < all,
        "peak value storage {} is not well below the {all} bytes of all values",
        rep.peak_value_bytes
    );
    // The result is still exact.
    let mut out = vec![0u8; m * n * 2];
    mem.read(c, &mut out).unwrap();
    for i in (0..m).step_by(7) {
        for j in (0..n).step_by(5) {
            let want: f64 = (0..kd)
                .map(|p| bf16_f64(a[i * kd + p]) * bf16_f64(b[j * kd + p]))
                .sum();
            let got = u16::from_le_bytes([out[2 * (i * n + j)], out[2 * (i * n + j) + 1]]);
            assert_eq!(got, half::bf16::from_f64(want).to_bits(), "C[{i}][{j}]");
        }
    }
}

// ---- wgmma results appear at the wait ----

/// A one-wgmma kernel: A and B (64 x 16 bf16, SW128 tiles in LDS, zero here), then
/// `read(acc after wgmma + commit, wgmma_wait)` writes lane 0 of the result.
fn one_wgmma(pending: u32, read_before_wait: bool) -> Result<Kernel, BuildError> {
    KernelBuilder::new("one_wgmma", Target::Sm90, 128).build(|k| {
        let out = k.tensor_mut("out", F32);
        let tiles = k.lds_aligned("tiles", BF16, 2 * 64 * 64, 1024);
        let acc = splat(c_f32(0.0), 32);
        let a = tiles.ptr_at(c_i32(0));
        let b = tiles.ptr_at(c_i32(64 * 64));
        wgmma_fence();
        let d = wgmma(64, a, b, acc);
        wgmma_commit();
        let w = wgmma_wait(pending, &[d])[0];
        let v = if read_before_wait { d } else { w };
        out.store(thread_id_x(), v.at(0));
    })
}

#[test]
fn reading_a_wgmma_result_before_its_wait_is_reported() {
    // Correct: wait 0 after the commit covers the batch.
    one_wgmma(0, false).unwrap();
    // The wgmma's own result read, not the wait's: reported at build time.
    let e = one_wgmma(0, true).unwrap_err().to_string();
    assert!(
        e.contains("reads a wgmma accumulator before wgmma.wait_group") && e.contains("Extract"),
        "{e}"
    );
    // wait_group 1 leaves the only batch in flight.
    let e = one_wgmma(1, false).unwrap_err().to_string();
    assert!(
        e.contains("reads a wgmma accumulator before wgmma.wait_group"),
        "{e}"
    );
    // The GEMM (accumulator carried through the loop, waited with pending 1 inside it and 0
    // after it) passes.
    flydsl_dsl::ir::verify(&gemm_kernel()).unwrap();
}

#[test]
fn the_sim_reports_a_wgmma_result_read_before_the_wait() {
    // Take the correct GEMM and point its epilogue's reads at the K loop's result instead of
    // the final wait's (`wait_group 0` after the loop, inside the persistent tile loop): the
    // Sim refuses the kernel and names the op.
    let mut k = gemm_kernel();
    fn final_wait(ops: &[Op]) -> Option<(flydsl_dsl::ir::ValueId, flydsl_dsl::ir::ValueId)> {
        ops.iter().find_map(|op: &Op| match &op.kind {
            OpKind::Nv(NvOp::WgmmaWait { pending: 0, values }) => Some((values[0], op.results[0])),
            OpKind::For { body, .. } => final_wait(&body.ops),
            OpKind::If {
                then_block,
                else_block,
                ..
            } => final_wait(&then_block.ops).or_else(|| final_wait(&else_block.ops)),
            _ => None,
        })
    }
    let body = &mut k.body.ops;
    let (wait_in, wait_out) = final_wait(body).expect("the GEMM waits for its last batch");
    fn redirect(ops: &mut [Op], from: flydsl_dsl::ir::ValueId, to: flydsl_dsl::ir::ValueId) {
        for op in ops {
            match &mut op.kind {
                OpKind::Extract(v, _) if *v == from => *v = to,
                OpKind::For { body, .. } => redirect(&mut body.ops, from, to),
                OpKind::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    redirect(&mut then_block.ops, from, to);
                    redirect(&mut else_block.ops, from, to);
                }
                _ => {}
            }
        }
    }
    redirect(body, wait_out, wait_in);
    let mem = SimMemory::new();
    let args = kernarg(&k, &[0, 0, 0, 0, 1, 8, 8]);
    let e = launch_with_lds(
        &k,
        [1, 1, 1],
        [256, 1, 1],
        LDS_BYTES,
        &args,
        &mem,
        &SimOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, SimError::Verify(_)), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("`Extract`") && e.contains("reads a wgmma accumulator before wgmma.wait_group"),
        "{e}"
    );
}

// ---- TMA and wgmma in the race detector ----

/// How the pipeline orders the refill of a stage after the wgmmas that read it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Refill {
    /// A workgroup barrier before the refill (the GEMM's way).
    Barrier,
    /// Every thread arrives on the stage's "empty" mbarrier; the issuing thread waits on it.
    EmptyMbarrier,
    /// Nothing: warpgroup 1 may still be reading when thread 0 refills.
    Unordered,
}

const PM: u32 = 128;
const PN: u32 = 64;
const PK: u32 = 64;
const PSTAGES: i32 = 2;
const PSTAGE_BYTES: u32 = (PM + PN) * PK * 2;

/// `C (128 x 64, f32) = A (128 x K) * B (64 x K)^T`: the wgmma GEMM's pipeline in small
/// (two stages, two warpgroups, one workgroup), with the refill ordered as `refill` says.
fn pipeline(refill: Refill) -> Kernel {
    KernelBuilder::new("pipe", Target::Sm90, 256)
        .build(|k| {
            let a_map = k.tensor("a_map", I8);
            let b_map = k.tensor("b_map", I8);
            let c = k.tensor_mut("c", F32);
            let kd = k.scalar("k", I32);
            let full = k.lds("full", I64, PSTAGES as u32);
            let empty = k.lds("empty", I64, PSTAGES as u32);
            let tiles =
                k.lds_dynamic("tiles")
                    .array_aligned(BF16, PSTAGES as u32 * PSTAGE_BYTES / 2, 1024);
            let tid = thread_id_x();
            let wg = tid / 128;
            let ktiles = kd / PK as i32;
            let se = (PSTAGE_BYTES / 2) as i32;
            let a_tile = move |s: Val| tiles.ptr_at(s * se);
            let b_tile = move |s: Val| tiles.ptr_at(s * se + (PM * PK) as i32);
            let leader = tid.eq(0);
            if_(leader, || {
                for s in 0..PSTAGES {
                    mbar_init(full.ptr_at(c_i32(s)), 1);
                    mbar_init(empty.ptr_at(c_i32(s)), 256);
                }
                fence_proxy_async();
            });
            barrier();
            let issue = move |kt: Val| {
                let s = kt % PSTAGES;
                mbar_arrive_expect_tx(full.ptr_at(s), c_i32(PSTAGE_BYTES as i32));
                tma_load(
                    a_map.ptr(),
                    a_tile(s),
                    full.ptr_at(s),
                    &[kt * PK as i32, c_i32(0)],
                );
                tma_load(
                    b_map.ptr(),
                    b_tile(s),
                    full.ptr_at(s),
                    &[kt * PK as i32, c_i32(0)],
                );
            };
            if_(leader, || {
                for_range_(c_i32(0), ktiles.min(PSTAGES - 1), c_i32(1), issue)
            });
            let zero = splat(c_f32(0.0), PN / 2);
            let acc = for_range(c_i32(0), ktiles, c_i32(1), &[zero], |kt, carried| {
                let s = kt % PSTAGES;
                mbar_wait(full.ptr_at(s), (kt / PSTAGES) & 1);
                wgmma_fence();
                let mut acc = carried[0];
                let a_rows = ptr_offset(a_tile(s), wg * (64 * PK) as i32);
                for kk in 0..(PK / 16) as i32 {
                    let a = ptr_offset(a_rows, c_i32(kk * 16));
                    let b = ptr_offset(b_tile(s), c_i32(kk * 16));
                    acc = wgmma(PN, a, b, acc);
                }
                wgmma_commit();
                let acc = wgmma_wait(1, &[acc])[0];
                // The wgmmas of kt - 1 are done: stage (kt - 1) % STAGES is free.
                let next = kt + (PSTAGES - 1);
                let prev = kt - 1;
                match refill {
                    Refill::Barrier => barrier(),
                    Refill::EmptyMbarrier => if_(kt.gt(0), || {
                        mbar_arrive(empty.ptr_at(prev % PSTAGES));
                    }),
                    Refill::Unordered => {}
                }
                if_(leader & next.lt(ktiles), || {
                    if refill == Refill::EmptyMbarrier {
                        if_(kt.gt(0), || {
                            mbar_wait(empty.ptr_at(prev % PSTAGES), (prev / PSTAGES) & 1)
                        });
                    }
                    issue(next)
                });
                vec![acc]
            });
            let acc = wgmma_wait(0, &acc)[0];
            let w = (tid % 128) / 32;
            let l = tid % 32;
            let row0 = wg * 64 + w * 16 + l / 4;
            for h in 0..2i32 {
                for j in 0..(PN / 8) as i32 {
                    for e in 0..2i32 {
                        let col = (l % 4) * 2 + (j * 8 + e);
                        let at = (row0 + h * 8) * PN as i32 + col;
                        c.store(at, acc.at((4 * j + 2 * h + e) as u32));
                    }
                }
            }
        })
        .unwrap()
}

/// Run the small pipeline with K = 256 (4 k-tiles over 2 stages: every stage is refilled).
fn run_pipeline(refill: Refill) -> Result<(), SimError> {
    let k = pipeline(refill);
    let kd = 256usize;
    let mem = SimMemory::new();
    let mut rng = Rng::new(9);
    let a = halves(&mut rng, PM as usize * kd);
    let b = halves(&mut rng, PN as usize * kd);
    let am = bf16_map(&mem, &a, kd as u64, PM as u64, PM);
    let bm = bf16_map(&mem, &b, kd as u64, PN as u64, PN);
    let c = mem.alloc((PM * PN * 4) as u64).unwrap();
    let args = kernarg(&k, &[am, bm, c, kd as u64]);
    let lds = PSTAGES as u32 * PSTAGE_BYTES + 1024;
    launch_with_lds(
        &k,
        [1, 1, 1],
        [256, 1, 1],
        lds,
        &args,
        &mem,
        &SimOptions::default(),
    )?;
    let mut out = vec![0u8; (PM * PN * 4) as usize];
    mem.read(c, &mut out).unwrap();
    for i in 0..PM as usize {
        for j in 0..PN as usize {
            let want: f64 = (0..kd)
                .map(|p| bf16_f64(a[i * kd + p]) * bf16_f64(b[j * kd + p]))
                .sum();
            let o = 4 * (i * PN as usize + j);
            let got = f32::from_le_bytes(out[o..o + 4].try_into().unwrap());
            assert_eq!(got as f64, want, "{refill:?}: C[{i}][{j}]");
        }
    }
    Ok(())
}

#[test]
fn a_refill_ordered_by_a_barrier_or_an_empty_mbarrier_is_clean() {
    run_pipeline(Refill::Barrier).unwrap();
    run_pipeline(Refill::EmptyMbarrier).unwrap();
}

#[test]
fn a_refill_without_the_barrier_is_a_race_with_the_other_warpgroups_wgmma_reads() {
    let e = run_pipeline(Refill::Unordered).unwrap_err();
    let SimError::LdsRace {
        array,
        first,
        first_kind,
        second,
        second_kind,
        ..
    } = &e
    else {
        panic!("expected an LDS race, got {e}");
    };
    assert_eq!(
        array, "tiles (dynamic region of 50176 bytes; index in bytes)",
        "{e}"
    );
    assert_eq!(first.thread, [128, 0, 0], "{e}");
    assert_eq!(*first_kind, flydsl_sim::LdsAccess::WgmmaRead, "{e}");
    assert_eq!(second.thread, [0, 0, 0], "{e}");
    assert_eq!(*second_kind, flydsl_sim::LdsAccess::TmaWrite, "{e}");
}
