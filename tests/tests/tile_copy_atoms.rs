//! The tile layer's asynchronous copy atoms on the Sim, each against a CPU model of the
//! tile it must deliver (ragged edges read as zeros), read back through the LDS tile's own
//! layout: AMD direct-to-LDS ([`CopyAtom::DirectToLds`] on gfx950, `DirectToLds32` on gfx942
//! and gfx950) and the sm_90a TMA box load ([`TmaCopy`]) into a 128-byte-swizzled tile. The
//! instructions they lower to are checked in flydsl-codegen's `lower_tile_copy`.

use flydsl_dsl::ir::{Kernel, ScalarType, Target};
use flydsl_dsl::tile::*;
use flydsl_dsl::*;
use flydsl_sim::{SimMemory, SimOptions, SimTensorMap};
use flydsl_testutil::rng::Rng;

/// Pack kernel arguments: `args[i]` is parameter i (an address or a scalar's bits).
fn kernarg(k: &Kernel, args: &[u64]) -> Vec<u8> {
    let layout = k.kernarg_layout();
    let mut buf = vec![0u8; layout.size as usize];
    for s in &layout.slots {
        let o = s.offset as usize;
        buf[o..o + s.size as usize]
            .copy_from_slice(&args[s.param].to_le_bytes()[..s.size as usize]);
    }
    buf
}

fn upload_u16(mem: &SimMemory, v: &[u16]) -> u64 {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let at = mem.alloc(bytes.len().max(2) as u64).unwrap();
    mem.write(at, &bytes).unwrap();
    at
}

fn read_u16(mem: &SimMemory, at: u64, n: usize) -> Vec<u16> {
    let mut b = vec![0u8; 2 * n];
    mem.read(at, &mut b).unwrap();
    b.chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// Tile `(bi, 0)` of shape `rows x cols` of the row-major `m x n` matrix `a`, zeros outside.
fn model_tile(
    a: &[u16],
    (m, n): (usize, usize),
    bi: usize,
    (rows, cols): (usize, usize),
) -> Vec<u16> {
    (0..rows * cols)
        .map(|x| {
            let (r, c) = (bi * rows + x / cols, x % cols);
            if r < m && c < n {
                a[r * n + c]
            } else {
                0
            }
        })
        .collect()
}

// ---- AMD direct-to-LDS ----

const DROWS: i64 = 32;
const DCOLS: i64 = 64;

/// Block `b` copies tile `(b, 0)` (`DROWS x DCOLS` bf16) of the `m x n` matrix `a` into an
/// unswizzled LDS tile with `atom`, then every thread writes the elements `t, t + threads,
/// ..` of the tile (read through the LDS layout) to `out[b * DROWS * DCOLS ..]`.
fn direct_kernel(
    target: Target,
    atom: CopyAtom,
    threads: u32,
    swizzled: bool,
) -> Result<Kernel, BuildError> {
    KernelBuilder::new("direct", target, threads).build(|k| {
        let a = k.tensor("a", ScalarType::BF16);
        let (m, n) = (
            k.scalar("m", ScalarType::I32),
            k.scalar("n", ScalarType::I32),
        );
        let out = k.tensor_mut("out", ScalarType::BF16);
        let lay = if swizzled {
            smem_xor16(DROWS, DCOLS, ScalarType::BF16).unwrap()
        } else {
            smem_row_major(DROWS, DCOLS).unwrap()
        };
        let s = STensor::new(
            k.lds("s", ScalarType::BF16, STensor::elems(&lay, 1) as u32),
            lay,
            1,
        )
        .unwrap();
        let g = GTensor::new(a, m, n).local_tile((DROWS, DCOLS), (block_id_x(), c_i32(0)));
        let tc = TiledCopy::new(atom, ScalarType::BF16, threads, (DROWS, DCOLS)).unwrap();
        let view = s.stage(c_i32(0));
        copy(&tc.partition(thread_id_x()), &g, &view);
        barrier();
        let t = thread_id_x();
        let base = block_id_x() * (DROWS * DCOLS) as i32;
        for i in (0..DROWS * DCOLS).step_by(threads as usize) {
            let x = t + i as i32;
            let v = view.load(Idx::Dyn(x / DCOLS as i32), Idx::Dyn(x % DCOLS as i32), 1);
            out.store(base + x, v);
        }
    })
}

fn run_direct(k: &Kernel, threads: u32, a: &[u16], (m, n): (usize, usize)) -> Vec<u16> {
    let blocks = m.div_ceil(DROWS as usize);
    let mem = SimMemory::new();
    let pa = upload_u16(&mem, a);
    let len = blocks * (DROWS * DCOLS) as usize;
    let po = upload_u16(&mem, &vec![0xdead; len]);
    let args = kernarg(k, &[pa, m as u64, n as u64, po]);
    flydsl_sim::launch(
        k,
        [blocks as u32, 1, 1],
        [threads, 1, 1],
        &args,
        &mem,
        &SimOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", k.target));
    read_u16(&mem, po, len)
}

#[test]
fn direct_to_lds_copies_match_the_model() {
    let mut rng = Rng::new(21);
    for (target, atom) in [
        (Target::Gfx950, CopyAtom::DirectToLds),
        (Target::Gfx950, CopyAtom::DirectToLds32),
        (Target::Gfx942, CopyAtom::DirectToLds32),
    ] {
        for threads in [64u32, 128, 256] {
            let k = direct_kernel(target, atom, threads, false).unwrap();
            // Full tiles, a ragged last row block and ragged columns (a multiple of 8).
            for (m, n) in [(64usize, 64usize), (50, 64), (37, 40)] {
                let a: Vec<u16> = (0..m * n).map(|_| rng.next_u64() as u16 | 1).collect();
                let got = run_direct(&k, threads, &a, (m, n));
                let tile = (DROWS * DCOLS) as usize;
                for b in 0..m.div_ceil(DROWS as usize) {
                    let want = model_tile(&a, (m, n), b, (DROWS as usize, DCOLS as usize));
                    assert_eq!(
                        &got[b * tile..(b + 1) * tile],
                        &want[..],
                        "{target} {atom:?} {threads} threads {m}x{n} block {b}"
                    );
                }
            }
        }
    }
}

#[test]
fn direct_to_lds_refuses_what_the_hardware_cannot_do() {
    // A swizzled tile: the lanes of a wave would not land consecutively.
    let e = direct_kernel(Target::Gfx950, CopyAtom::DirectToLds, 64, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("copy_direct") && e.contains("smem_row_major"),
        "{e}"
    );
    // 16 bytes per lane on gfx942, and either atom off AMD.
    for (t, atom) in [
        (Target::Gfx942, CopyAtom::DirectToLds),
        (Target::Gfx1201, CopyAtom::DirectToLds32),
        (Target::Sm90, CopyAtom::DirectToLds32),
    ] {
        let e = direct_kernel(t, atom, 64, false).unwrap_err().to_string();
        assert!(e.contains(&format!("{atom:?}")), "{t}: {e}");
    }
    // A whole-tile atom is not a per-thread TiledCopy.
    let e = TiledCopy::new(CopyAtom::Tma, ScalarType::BF16, 64, (64, 64))
        .unwrap_err()
        .to_string();
    assert!(e.contains("TmaCopy"), "{e}");
}

// ---- sm_90a TMA ----

const TROWS: i64 = 64;
const TCOLS: i64 = 64;

/// Block `b` loads box `(b * TROWS, col0)` of the map into a 1024-byte-aligned SW128 tile
/// with [`TmaCopy`] and an mbarrier, then every thread writes elements of the tile (read
/// through the swizzled layout) to `out[b * TROWS * TCOLS ..]`.
fn tma_kernel() -> Kernel {
    KernelBuilder::new("tma_tile", Target::Sm90, 128)
        .build(|k| {
            let map = k.tensor("a_map", ScalarType::I8);
            let col0 = k.scalar("col0", ScalarType::I32);
            let out = k.tensor_mut("out", ScalarType::BF16);
            let bar = k.lds("bar", ScalarType::I64, 1);
            let tma = TmaCopy::new(ScalarType::BF16, (TROWS, TCOLS)).unwrap();
            let s = STensor::new(
                k.lds_aligned("s", ScalarType::BF16, (TROWS * TCOLS) as u32, 1024),
                tma.layout(),
                1,
            )
            .unwrap();
            let t = thread_id_x();
            if_(t.eq(0), || {
                nv::mbar_init(bar.ptr(), 1);
                nv::fence_proxy_async();
            });
            barrier();
            let view = s.stage(c_i32(0));
            if_(t.eq(0), || {
                tma.issue(
                    map.ptr(),
                    &view,
                    bar.ptr(),
                    (block_id_x() * TROWS as i32, col0),
                );
            });
            nv::mbar_wait(bar.ptr(), c_i32(0));
            let base = block_id_x() * (TROWS * TCOLS) as i32;
            for i in (0..TROWS * TCOLS).step_by(128) {
                let x = t + i as i32;
                let v = view.load(Idx::Dyn(x / TCOLS as i32), Idx::Dyn(x % TCOLS as i32), 1);
                out.store(base + x, v);
            }
        })
        .unwrap()
}

#[test]
fn tma_copy_lands_in_the_swizzled_tile() {
    let k = tma_kernel();
    let mut rng = Rng::new(22);
    // Full tiles, ragged rows, a matrix narrower than the box, and a box starting past
    // column 0 (its right part outside the matrix).
    for (m, n, col0) in [
        (128usize, 64usize, 0usize),
        (100, 64, 0),
        (70, 48, 0),
        (64, 128, 96),
    ] {
        let a: Vec<u16> = (0..m * n).map(|_| rng.next_u64() as u16 | 1).collect();
        let mem = SimMemory::new();
        let pa = upload_u16(&mem, &a);
        let mut map = SimTensorMap {
            base: pa,
            elem_bytes: 2,
            rank: 2,
            dims: [0; 5],
            strides: [0; 5],
            boxes: [0; 5],
            swizzle128: true,
        };
        map.dims[..2].copy_from_slice(&[n as u64, m as u64]);
        map.strides[..2].copy_from_slice(&[2, 2 * n as u64]);
        map.boxes[..2].copy_from_slice(&[TCOLS as u32, TROWS as u32]);
        let enc = map.encode();
        let pm = mem.alloc(enc.len() as u64).unwrap();
        mem.write(pm, &enc).unwrap();
        let blocks = m.div_ceil(TROWS as usize);
        let tile = (TROWS * TCOLS) as usize;
        let po = upload_u16(&mem, &vec![0xdead; blocks * tile]);
        let args = kernarg(&k, &[pm, col0 as u64, po]);
        flydsl_sim::launch(
            &k,
            [blocks as u32, 1, 1],
            [128, 1, 1],
            &args,
            &mem,
            &SimOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{m}x{n}: {e}"));
        let got = read_u16(&mem, po, blocks * tile);
        for b in 0..blocks {
            let want: Vec<u16> = (0..tile)
                .map(|x| {
                    let (r, c) = (
                        b * TROWS as usize + x / TCOLS as usize,
                        col0 + x % TCOLS as usize,
                    );
                    if r < m && c < n {
                        a[r * n + c]
                    } else {
                        0
                    }
                })
                .collect();
            assert_eq!(
                &got[b * tile..(b + 1) * tile],
                &want[..],
                "{m}x{n} col0 {col0} block {b}"
            );
        }
    }
}

#[test]
fn tma_copy_checks_its_tile() {
    assert!(TmaCopy::new(ScalarType::F32, (64, 64)).is_err());
    assert!(TmaCopy::new(ScalarType::BF16, (512, 64)).is_err());
    // An STensor of another layout (unswizzled; XOR-16 on 128-byte rows *is* SW128) is
    // refused at build time.
    let e = KernelBuilder::new("bad", Target::Sm90, 128)
        .build(|k| {
            let map = k.tensor("a_map", ScalarType::I8);
            let bar = k.lds("bar", ScalarType::I64, 1);
            let tma = TmaCopy::new(ScalarType::BF16, (64, 64)).unwrap();
            let lay = smem_row_major(64, 64).unwrap();
            let s =
                STensor::new(k.lds_aligned("s", ScalarType::BF16, 64 * 64, 1024), lay, 1).unwrap();
            tma.issue(
                map.ptr(),
                &s.stage(c_i32(0)),
                bar.ptr(),
                (c_i32(0), c_i32(0)),
            );
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("TmaCopy::issue") && e.contains("TmaCopy::layout"),
        "{e}"
    );
}

// ---- gfx1250 Tensor Data Mover ----

const MROWS: i64 = 32;
const MCOLS: i64 = 64;

/// Block `b`: wave 0 loads tile `(b, col_tile)` (`MROWS x MCOLS` bf16) with [`TdmCopy`] and
/// (unless `skip_wait`) waits for it; after a barrier every thread writes elements of the
/// tile to `out[b * MROWS * MCOLS ..]`.
fn tdm_kernel(threads: u32, skip_wait: bool) -> Kernel {
    KernelBuilder::new("tdm_tile", Target::Gfx1250, threads)
        .build(|k| {
            let desc = k.tensor("a_desc", ScalarType::I32);
            let col0 = k.scalar("col0", ScalarType::I32);
            let out = k.tensor_mut("out", ScalarType::BF16);
            let tdm = TdmCopy::new(ScalarType::BF16, (MROWS, MCOLS)).unwrap();
            let s = STensor::new(
                k.lds("s", ScalarType::BF16, (MROWS * MCOLS) as u32),
                tdm.layout(),
                1,
            )
            .unwrap();
            let t = thread_id_x();
            let view = s.stage(c_i32(0));
            if_((t / 32).eq(0), || {
                tdm.issue(desc, &view, (block_id_x() * MROWS as i32, col0));
                if !skip_wait {
                    wait_tensorcnt(0);
                }
            });
            barrier();
            let base = block_id_x() * (MROWS * MCOLS) as i32;
            for i in (0..MROWS * MCOLS).step_by(threads as usize) {
                let x = t + i as i32;
                let v = view.load(Idx::Dyn(x / MCOLS as i32), Idx::Dyn(x % MCOLS as i32), 1);
                out.store(base + x, v);
            }
        })
        .unwrap()
}

/// Run [`tdm_kernel`] over the `m x n` matrix `a` with the box starting at column `col0`.
fn run_tdm(
    k: &Kernel,
    threads: u32,
    a: &[u16],
    (m, n): (usize, usize),
    col0: usize,
) -> Result<Vec<u16>, flydsl_sim::SimError> {
    let mem = SimMemory::new();
    let pa = upload_u16(&mem, a);
    let words = flydsl_dsl::ir::AmdOp::tdm_template(
        pa,
        2,
        (m as u32, n as u32),
        n as u64,
        (MROWS as u16, MCOLS as u16),
    );
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let pd = mem.alloc(bytes.len() as u64).unwrap();
    mem.write(pd, &bytes).unwrap();
    let blocks = m.div_ceil(MROWS as usize);
    let tile = (MROWS * MCOLS) as usize;
    let po = upload_u16(&mem, &vec![0xdead; blocks * tile]);
    let args = kernarg(k, &[pd, col0 as u64, po]);
    flydsl_sim::launch(
        k,
        [blocks as u32, 1, 1],
        [threads, 1, 1],
        &args,
        &mem,
        &SimOptions::default(),
    )?;
    Ok(read_u16(&mem, po, blocks * tile))
}

#[test]
fn tdm_copy_lands_the_tile_with_zeros_outside() {
    let mut rng = Rng::new(23);
    for threads in [32u32, 128] {
        let k = tdm_kernel(threads, false);
        for (m, n, col0) in [
            (64usize, 64usize, 0usize),
            (50, 64, 0),
            (37, 40, 0),
            (40, 100, 64),
        ] {
            let a: Vec<u16> = (0..m * n).map(|_| rng.next_u64() as u16 | 1).collect();
            let got =
                run_tdm(&k, threads, &a, (m, n), col0).unwrap_or_else(|e| panic!("{m}x{n}: {e}"));
            let tile = (MROWS * MCOLS) as usize;
            for b in 0..m.div_ceil(MROWS as usize) {
                let want: Vec<u16> = (0..tile)
                    .map(|x| {
                        let (r, c) = (
                            b * MROWS as usize + x / MCOLS as usize,
                            col0 + x % MCOLS as usize,
                        );
                        if r < m && c < n {
                            a[r * n + c]
                        } else {
                            0
                        }
                    })
                    .collect();
                assert_eq!(
                    &got[b * tile..(b + 1) * tile],
                    &want[..],
                    "{threads} threads {m}x{n} col0 {col0} block {b}"
                );
            }
        }
    }
}

#[test]
fn reading_a_tdm_tile_before_its_wait_is_a_reported_race() {
    let k = tdm_kernel(64, true);
    let a = vec![1u16; 64 * 64];
    let e = run_tdm(&k, 64, &a, (64, 64), 0).unwrap_err().to_string();
    assert!(
        e.contains("tensor load") && e.contains("WaitTensorcnt"),
        "{e}"
    );
}
