//! The 8-bit forms of `NvOp::Wgmma` (m64nNk32: fp8 e4m3fn / e5m2 with f32 accumulation, s8
//! with s32 accumulation): the Sim against a CPU model of the instruction, the verifier's
//! type rules, and the PTX llc-22 makes of them (when llc for sm_90a is installed).
//!
//! The probe kernel stores a 64 x 128 A tile and an N x 128 B tile (K-major, 128-byte rows,
//! 128-byte swizzle) into LDS, runs four k32 wgmmas over the four 32-byte K slices and
//! writes every thread's accumulator registers out. The model computes, per register of the
//! documented accumulator layout, `acc = trunc13(round_f32(acc + sum of 32 exact products))` per
//! slice (fp8; `trunc13` keeps 13 mantissa bits, as Hopper does) or the exact integer sum
//! (s8).

use flydsl_build::check::check_code_object;
use flydsl_dsl::ir::{wgmma_acc_elem, Kernel, ScalarType, ScalarType::*, Target};
use flydsl_dsl::nv::{fence_proxy_async, wgmma, wgmma_commit, wgmma_fence, wgmma_wait};
use flydsl_dsl::*;
use flydsl_rt::sim::{fp8, launch_with_lds, SimMemory, SimOptions};
use flydsl_testutil::rng::Rng;

const KW: u32 = 128; // bytes (= elements) per tile row: four k32 slices

/// The probe kernel for operands `elem` and wgmma N `n`.
fn probe(elem: ScalarType, n: u32) -> Result<Kernel, BuildError> {
    let acc_t = wgmma_acc_elem(elem);
    KernelBuilder::new("wgmma8_probe", Target::Sm90, 128).build(|k| {
        let a = k.tensor("a", elem);
        let b = k.tensor("b", elem);
        let out = k.tensor_mut("out", acc_t);
        let rows = 64 + n;
        let tiles = k.lds_aligned("tiles", elem, rows * KW, 1024);
        let t = thread_id_x();
        for_range_(c_i32(0), c_i32(rows as i32), c_i32(1), |i| {
            // Element (row i, byte t) of the A-then-B tile, stored 128-byte swizzled.
            let lin = i * KW as i32 + t;
            let sw = lin ^ (((lin >> 7) & 7) << 4);
            if_(i.lt(64), || tiles.store(sw, a.load(lin)));
            if_(i.ge(64), || tiles.store(sw, b.load(lin - (64 * KW) as i32)));
        });
        barrier();
        fence_proxy_async();
        let zero = if acc_t == I32 { c_i32(0) } else { c_f32(0.0) };
        let mut acc = splat(zero, n / 2);
        wgmma_fence();
        for kk in 0..(KW / 32) as i32 {
            let pa = tiles.ptr_at(c_i32(kk * 32));
            let pb = tiles.ptr_at(c_i32((64 * KW) as i32 + kk * 32));
            acc = wgmma(n, pa, pb, acc);
        }
        wgmma_commit();
        let acc = wgmma_wait(0, &[acc])[0];
        for r in 0..n / 2 {
            out.store(t * (n / 2) as i32 + r as i32, acc.at(r));
        }
    })
}

/// Random operand bytes: any s8; finite fp8 codes.
fn operand(rng: &mut Rng, elem: ScalarType, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| loop {
            let b = (rng.next_u64() >> 13) as u8;
            let nan = match elem {
                F8E4M3FN => b & 0x7f == 0x7f,
                F8E5M2 => b & 0x7f >= 0x7c, // infinities and NaNs
                _ => false,
            };
            if !nan {
                break b;
            }
        })
        .collect()
}

fn value(elem: ScalarType, b: u8) -> f64 {
    match elem {
        F8E4M3FN => fp8::e4m3fn_to_f32(b) as f64,
        F8E5M2 => fp8::e5m2_to_f32(b) as f64,
        _ => b as i8 as f64,
    }
}

/// Run the probe on the Sim (memcheck, racecheck, initcheck on) and compare every
/// accumulator register with the model.
fn check(elem: ScalarType, n: u32, seed: u64) {
    let k = probe(elem, n).unwrap();
    let mut rng = Rng::new(seed);
    let a = operand(&mut rng, elem, 64 * KW as usize);
    let b = operand(&mut rng, elem, (n * KW) as usize);
    let mem = SimMemory::new();
    let up = |v: &[u8]| {
        let p = mem.alloc(v.len() as u64).unwrap();
        mem.write(p, v).unwrap();
        p
    };
    let (pa, pb) = (up(&a), up(&b));
    let regs = (n / 2) as usize;
    let pout = mem.alloc((128 * regs * 4) as u64).unwrap();
    let layout = k.kernarg_layout();
    let mut args = vec![0u8; layout.size as usize];
    // (address, elements) of each tensor parameter.
    let tensors = [(pa, a.len()), (pb, b.len()), (pout, 128 * regs)];
    for s in &layout.slots {
        let (addr, len) = tensors[s.param];
        let v = if s.is_pointer { addr } else { len as u64 };
        let o = s.offset as usize;
        args[o..o + s.size as usize].copy_from_slice(&v.to_le_bytes()[..s.size as usize]);
    }
    launch_with_lds(
        &k,
        [1; 3],
        [128, 1, 1],
        0,
        &args,
        &mem,
        &SimOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{elem} n={n}: {e}"));
    let mut out = vec![0u8; 128 * regs * 4];
    mem.read(pout, &mut out).unwrap();
    let int = elem == I8;
    for t in 0..128 {
        let (w, l) = (t / 32, t % 32);
        for reg in 0..regs {
            let (j, q) = (reg / 4, reg % 4);
            let row = 16 * w + l / 4 + 8 * (q / 2);
            let col = 8 * j + 2 * (l % 4) + q % 2;
            let o = 4 * (t * regs + reg);
            let bytes: [u8; 4] = out[o..o + 4].try_into().unwrap();
            let ctx = || format!("{elem} n={n}: thread {t} reg {reg} = D[{row}][{col}]");
            if int {
                let want: i64 = (0..KW as usize)
                    .map(|p| {
                        (a[row * KW as usize + p] as i8 as i64)
                            * (b[col * KW as usize + p] as i8 as i64)
                    })
                    .sum();
                assert_eq!(i32::from_le_bytes(bytes) as i64, want, "{}", ctx());
            } else {
                let mut acc = 0f32;
                for s in 0..(KW / 32) as usize {
                    let sum: f64 = (32 * s..32 * s + 32)
                        .map(|p| {
                            value(elem, a[row * KW as usize + p])
                                * value(elem, b[col * KW as usize + p])
                        })
                        .sum();
                    // Each fp8 wgmma keeps 13 mantissa bits of its sum, truncated (the
                    // Hopper behaviour the Sim models).
                    acc = f32::from_bits(((acc as f64 + sum) as f32).to_bits() & !0x3FF);
                }
                assert_eq!(f32::from_le_bytes(bytes), acc, "{}", ctx());
            }
        }
    }
}

#[test]
fn the_sim_matches_the_model_for_e4m3_e5m2_and_s8() {
    for (elem, n, seed) in [
        (F8E4M3FN, 256, 1),
        (F8E4M3FN, 24, 2),
        (F8E5M2, 64, 3),
        (I8, 256, 4),
        (I8, 8, 5),
    ] {
        check(elem, n, seed);
    }
}

#[test]
fn the_verifier_rejects_mismatched_8bit_accumulators_and_operands() {
    let bad_acc = KernelBuilder::new("bad_acc", Target::Sm90, 128).build(|k| {
        let out = k.tensor_mut("out", F32);
        let tiles = k.lds_aligned("tiles", I8, 128 * KW, 1024);
        let acc = splat(c_f32(0.0), 8);
        wgmma_fence();
        let d = wgmma(16, tiles.ptr_at(c_i32(0)), tiles.ptr_at(c_i32(8192)), acc);
        wgmma_commit();
        out.store(thread_id_x(), wgmma_wait(0, &[d])[0].at(0));
    });
    let e = bad_acc.unwrap_err().to_string();
    assert!(e.contains("<8 x i32> accumulator"), "{e}");
    let mixed = KernelBuilder::new("mixed", Target::Sm90, 128).build(|k| {
        let out = k.tensor_mut("out", F32);
        let ta = k.lds_aligned("ta", F8E4M3FN, 64 * KW, 1024);
        let tb = k.lds_aligned("tb", F8E5M2, 64 * KW, 1024);
        let acc = splat(c_f32(0.0), 8);
        wgmma_fence();
        let d = wgmma(16, ta.ptr_at(c_i32(0)), tb.ptr_at(c_i32(0)), acc);
        wgmma_commit();
        out.store(thread_id_x(), wgmma_wait(0, &[d])[0].at(0));
    });
    let e = mixed.unwrap_err().to_string();
    assert!(e.contains("both the same"), "{e}");
}

/// PTX of `k` from llc-22, or `None` (with the reason printed) when no llc for sm_90a exists.
fn ptx_of(k: &Kernel) -> Option<String> {
    let tc = match flydsl_build::toolchain::Toolchain::discover(&[Target::Sm90]) {
        Ok(tc) => tc,
        Err(e) => {
            println!("skipped: no llc for sm_90a here ({e})");
            return None;
        }
    };
    let llvm = flydsl_codegen::lower(k).unwrap();
    let work = std::env::temp_dir().join(format!("fly-gemm-wgmma8-{}", std::process::id()));
    let code = tc.compile(&llvm, &k.name, Target::Sm90, &work).unwrap();
    let _ = std::fs::remove_dir_all(&work);
    check_code_object(k, &code).unwrap();
    Some(String::from_utf8(code).unwrap())
}

#[test]
fn ptx_has_k32_wgmma_with_the_8bit_operand_forms() {
    for (elem, n, want, reg) in [
        (
            F8E4M3FN,
            256,
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3",
            "%r",
        ),
        (
            F8E5M2,
            32,
            "wgmma.mma_async.sync.aligned.m64n32k32.f32.e5m2.e5m2",
            "%r",
        ),
        (
            I8,
            256,
            "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8",
            "%r",
        ),
    ] {
        let Some(ptx) = ptx_of(&probe(elem, n).unwrap()) else {
            return;
        };
        let lines: Vec<&str> = ptx.lines().filter(|l| l.contains(want)).collect();
        assert_eq!(
            lines.len(),
            4,
            "{elem}: four k32 wgmmas per 128-byte row:\n{ptx}"
        );
        // The operands: n/2 accumulator registers, two descriptors, then the immediates:
        // scale-d, imm-scale-a, imm-scale-b for fp8, scale-d alone for s8.
        let first = lines[0];
        let inside = first.split('{').nth(1).and_then(|r| r.split('}').next());
        let regs = inside.map_or(0, |r| r.split(',').filter(|x| x.contains(reg)).count());
        assert_eq!(
            regs,
            (n / 2) as usize,
            "{elem}: `{reg}` registers in {first}"
        );
        let imms = first.rsplit("%rd").next().unwrap();
        let want_imms = if elem == I8 { ", 1;" } else { ", 1, 1, 1;" };
        assert!(
            imms.replace(' ', "").ends_with(&want_imms.replace(' ', "")),
            "{elem}: immediates `{imms}`, want `{want_imms}`"
        );
        assert!(ptx.contains("wgmma.wait_group.sync.aligned 0"));
        for bad in [".local", "call.uni", "call "] {
            assert!(!ptx.contains(bad), "{elem}: PTX contains `{bad}`");
        }
    }
}
