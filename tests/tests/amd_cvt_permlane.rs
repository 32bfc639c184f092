//! The AMD hardware fp8 pack/unpack (`AmdOp::CvtPkFp8`, `AmdOp::CvtPkF32Fp8`) and permlane
//! moves (`AmdOp::PermlaneSwap` on gfx950, `AmdOp::PermlaneX16` on gfx1201/gfx1250) on the
//! Sim, against CPU models written here from the ops' contracts (an fp8 codec found by
//! searching all 256 codes, not the Sim's encoder), on every AMD target that has them; and
//! the verifier's clear error on every target that does not. (The lowering's instructions
//! are checked in flydsl-codegen's `lower_amd_cvt_permlane`.)

use flydsl_dsl::ir::{AmdOp, Kernel, ScalarType, Target};
use flydsl_dsl::*;
use flydsl_sim::{SimError, SimMemory, SimOptions};
use flydsl_testutil::rng::Rng;

const AMD: [Target; 4] = [
    Target::Gfx942,
    Target::Gfx950,
    Target::Gfx1201,
    Target::Gfx1250,
];

// ---- an independent fp8 model ----

/// (exponent bits, mantissa bits, bias, fnuz) of an fp8 type.
fn params(t: ScalarType) -> (u32, u32, i32, bool) {
    match t {
        ScalarType::F8E4M3FN => (4, 3, 7, false),
        ScalarType::F8E4M3FNUZ => (4, 3, 8, true),
        ScalarType::F8E5M2 => (5, 2, 15, false),
        ScalarType::F8E5M2FNUZ => (5, 2, 16, true),
        _ => unreachable!("{t}"),
    }
}

/// The value of a code: `None` for NaN, `Some(±inf)` for E5M2's infinities.
fn value(t: ScalarType, code: u8) -> Option<f64> {
    let (eb, mb, bias, fnuz) = params(t);
    if fnuz && code == 0x80 {
        return None;
    }
    let neg = code & 0x80 != 0;
    let e = u32::from(code >> mb) & ((1 << eb) - 1);
    let m = u32::from(code) & ((1 << mb) - 1);
    let top = (1 << eb) - 1;
    if !fnuz && t == ScalarType::F8E4M3FN && e == top && m == (1 << mb) - 1 {
        return None;
    }
    if !fnuz && t == ScalarType::F8E5M2 && e == top {
        return if m == 0 {
            Some(if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        } else {
            None
        };
    }
    let mag = if e == 0 {
        f64::from(m) * 2f64.powi(1 - bias - mb as i32)
    } else {
        (1.0 + f64::from(m) / f64::from(1u32 << mb)) * 2f64.powi(e as i32 - bias)
    };
    Some(if neg { -mag } else { mag })
}

/// The largest finite value of `t`, from the codes.
fn max_finite(t: ScalarType) -> f64 {
    (0..=255u8)
        .filter_map(|c| value(t, c))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// The op's encoding by search: clamp to ±max, then the nearest finite code, ties to the
/// even code; a zero result keeps the input's sign where the format has -0. NaN: `None`.
fn model_encode(t: ScalarType, x: f32) -> Option<u8> {
    if x.is_nan() {
        return None;
    }
    let m = max_finite(t);
    let x = f64::from(x).clamp(-m, m);
    let mut best: Option<(u8, f64)> = None;
    for c in 0..=255u8 {
        let Some(v) = value(t, c).filter(|v| v.is_finite()) else {
            continue;
        };
        let d = (v - x).abs();
        best = match best {
            Some((bc, bd)) if bd < d || (bd == d && (bc & 1 == 0 || c & 1 == 1)) => Some((bc, bd)),
            _ => Some((c, d)),
        };
    }
    let (c, _) = best.expect("codes");
    let (_, _, _, fnuz) = params(t);
    Some(if value(t, c) == Some(0.0) {
        if x.is_sign_negative() && !fnuz {
            0x80
        } else {
            0
        }
    } else {
        c
    })
}

/// Values that probe every rule: zeros, the smallest subnormals, the midpoints between
/// neighbouring codes (ties) and just off them, ±max and past it, infinities, NaN, and
/// random values over the whole exponent range.
fn probes(t: ScalarType, rng: &mut Rng) -> Vec<f32> {
    let mut v = vec![
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-30,
        -1e-30,
    ];
    let mut finite: Vec<f64> = (0..=255u8)
        .filter_map(|c| value(t, c))
        .filter(|x| x.is_finite())
        .collect();
    finite.sort_by(f64::total_cmp);
    finite.dedup();
    for w in finite.windows(2) {
        let mid = (w[0] + w[1]) / 2.0;
        v.extend([
            mid as f32,
            (mid * (1.0 + 1e-6)) as f32,
            (mid * (1.0 - 1e-6)) as f32,
        ]);
        v.push(w[0] as f32);
    }
    let m = max_finite(t);
    v.extend([(m * 1.01) as f32, -(m * 1.01) as f32, 1e30, -1e30]);
    for _ in 0..256 {
        let e = (rng.next_u64() % 40) as i32 - 20;
        let s = if rng.next_u64().is_multiple_of(2) {
            1.0
        } else {
            -1.0
        };
        let f = 1.0 + (rng.next_u64() % 1000) as f64 / 1000.0;
        v.push((s * f * 2f64.powi(e)) as f32);
    }
    // A multiple of 4 (one i32 of codes per 4 values).
    while !v.len().is_multiple_of(4) {
        v.push(1.0);
    }
    v
}

// ---- running kernels ----

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

fn upload(mem: &SimMemory, words: &[u32]) -> u64 {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let at = mem.alloc(bytes.len().max(4) as u64).unwrap();
    mem.write(at, &bytes).unwrap();
    at
}

/// Run `k` (one block of `threads`) with 32-bit-word inputs `ins` and `outs` output buffers
/// of `out_len` words each; returns the outputs.
fn run(
    k: &Kernel,
    threads: u32,
    ins: &[&[u32]],
    outs: usize,
    out_len: usize,
) -> Result<Vec<Vec<u32>>, SimError> {
    let mem = SimMemory::new();
    let mut args: Vec<u64> = ins.iter().map(|x| upload(&mem, x)).collect();
    let out_at: Vec<u64> = (0..outs)
        .map(|_| upload(&mem, &vec![0u32; out_len]))
        .collect();
    args.extend(&out_at);
    flydsl_sim::launch(
        k,
        [1, 1, 1],
        [threads, 1, 1],
        &kernarg(k, &args),
        &mem,
        &SimOptions::default(),
    )?;
    Ok(out_at
        .iter()
        .map(|&a| {
            let mut b = vec![0u8; out_len * 4];
            mem.read(a, &mut b).unwrap();
            b.chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect())
}

// ---- fp8 pack / unpack ----

/// Thread `t` packs `x[4t .. 4t + 4]` into `p[t]` (two `CvtPkFp8`, the second on top of the
/// first) and unpacks `p[t]` into `y[4t .. 4t + 4]` (two `CvtPkF32Fp8`).
fn fp8_kernel(target: Target, t: ScalarType) -> Result<Kernel, BuildError> {
    KernelBuilder::new("fp8_pk", target, 64).build(|k| {
        let x = k.tensor("x", ScalarType::F32);
        let n = k.scalar("n", ScalarType::I32);
        let p = k.tensor_mut("p", ScalarType::I32);
        let y = k.tensor_mut("y", ScalarType::F32);
        let i = thread_id_x();
        if_(i.lt(n), || {
            let v = x.load_vec(i * 4, 4, 16);
            let packed = cvt_pk_fp8x4(v, t);
            p.store(i, packed);
            let lo = cvt_pk_f32_fp8(packed, false, t);
            let hi = cvt_pk_f32_fp8(packed, true, t);
            y.store_aligned(i * 4, lo, 8, false);
            y.store_aligned(i * 4 + 2, hi, 8, false);
        });
    })
}

#[test]
fn fp8_pack_and_unpack_match_the_model_on_every_amd_target() {
    let mut rng = Rng::new(8);
    for target in AMD {
        let types = AmdOp::fp8_types(target);
        assert_eq!(types.len(), 2, "{target}");
        for &t in types {
            let k = fp8_kernel(target, t).unwrap();
            let vals = probes(t, &mut rng);
            for chunk in vals.chunks(256) {
                let words: Vec<u32> = chunk.iter().map(|x| x.to_bits()).collect();
                let n = (chunk.len() / 4) as u32;
                let out = run_fp8(&k, &words, n).unwrap();
                let (p, y) = (&out[0], &out[1]);
                for (j, &x) in chunk.iter().enumerate() {
                    let code = (p[j / 4] >> (8 * (j % 4))) as u8;
                    let want = model_encode(t, x);
                    match want {
                        None => assert!(
                            value(t, code).is_none(),
                            "{target} {t}: NaN packed to {code:#04x}"
                        ),
                        Some(c) => assert_eq!(code, c, "{target} {t}: pack({x:e}) = {code:#04x}"),
                    }
                    let back = f32::from_bits(y[j]);
                    match value(t, code) {
                        None => assert!(back.is_nan(), "{target} {t}: unpack({code:#04x})"),
                        Some(v) => assert_eq!(
                            back.to_bits(),
                            (v as f32).to_bits(),
                            "{target} {t}: unpack({code:#04x})"
                        ),
                    }
                }
            }
        }
    }
}

/// [`run`] for the fp8 kernel, whose parameters are (x, n, p, y).
fn run_fp8(k: &Kernel, x: &[u32], n: u32) -> Result<Vec<Vec<u32>>, SimError> {
    let mem = SimMemory::new();
    let xa = upload(&mem, x);
    let pa = upload(&mem, &vec![0u32; n as usize]);
    let ya = upload(&mem, &vec![0u32; 4 * n as usize]);
    flydsl_sim::launch(
        k,
        [1, 1, 1],
        [64, 1, 1],
        &kernarg(k, &[xa, u64::from(n), pa, ya]),
        &mem,
        &SimOptions::default(),
    )?;
    let read = |a: u64, len: usize| -> Vec<u32> {
        let mut b = vec![0u8; len * 4];
        mem.read(a, &mut b).unwrap();
        b.chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    Ok(vec![read(pa, n as usize), read(ya, 4 * n as usize)])
}

#[test]
fn every_code_unpacks_exactly() {
    for target in AMD {
        for &t in AmdOp::fp8_types(target) {
            let k = fp8_kernel(target, t).unwrap();
            // Pack is the identity on the values of every finite code: round trip all 256.
            let codes: Vec<u8> = (0..=255u8)
                .filter(|&c| value(t, c).is_some_and(f64::is_finite))
                .collect();
            let mut x: Vec<f32> = codes.iter().map(|&c| value(t, c).unwrap() as f32).collect();
            while !x.len().is_multiple_of(4) {
                x.push(0.0);
            }
            let words: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
            let out = run_fp8(&k, &words, (x.len() / 4) as u32).unwrap();
            for (j, &c) in codes.iter().enumerate() {
                let got = (out[0][j / 4] >> (8 * (j % 4))) as u8;
                // Every finite code comes back (FNUZ's 0x80 is its NaN, left out).
                assert_eq!(got, c, "{target} {t}: code {c:#04x} does not round-trip");
                assert_eq!(f32::from_bits(out[1][j]), x[j], "{target} {t}: {c:#04x}");
            }
        }
    }
}

#[test]
fn fp8_ops_reject_other_formats_and_targets() {
    for target in Target::ALL {
        let ok = AmdOp::fp8_types(target);
        for t in [
            ScalarType::F8E4M3FN,
            ScalarType::F8E4M3FNUZ,
            ScalarType::F8E5M2,
            ScalarType::F8E5M2FNUZ,
        ] {
            let r = fp8_kernel(target, t);
            if ok.contains(&t) {
                assert!(r.is_ok(), "{target} {t}: {:?}", r.err());
            } else {
                let e = r.unwrap_err().to_string();
                assert!(e.contains("CvtPkFp8"), "{target} {t}: {e}");
                assert!(e.contains(target.name()), "{target} {t}: {e}");
            }
        }
    }
}

// ---- permlanes ----

/// Thread `t`: `(a', b') = permlane_swap(x[t], y[t], rows)`; `a'` to `o1[t]`, `b'` to
/// `o2[t]`; only threads below `active` run it.
fn swap_kernel(target: Target, rows: u32, active: u32) -> Result<Kernel, BuildError> {
    KernelBuilder::new("swap", target, 64).build(|k| {
        let x = k.tensor("x", ScalarType::I32);
        let y = k.tensor("y", ScalarType::F32);
        let o1 = k.tensor_mut("o1", ScalarType::F32);
        let o2 = k.tensor_mut("o2", ScalarType::F32);
        let t = thread_id_x();
        if_(t.lt(active as i32), || {
            let a = x.load(t).bitcast(flydsl_dsl::ir::Type::s(ScalarType::F32));
            let (na, nb) = permlane_swap(a, y.load(t), rows);
            o1.store(t, na);
            o2.store(t, nb);
        });
    })
}

#[test]
fn permlane_swaps_match_the_model_on_gfx950() {
    let mut rng = Rng::new(16);
    let x: Vec<u32> = (0..64).map(|_| rng.next_u64() as u32).collect();
    let y: Vec<u32> = (0..64).map(|_| rng.next_u64() as u32).collect();
    for rows in [16u32, 32] {
        let k = swap_kernel(Target::Gfx950, rows, 64).unwrap();
        let out = run(&k, 64, &[&x, &y], 2, 64).unwrap();
        // The contract: rows of 16 lanes; permlane16 swaps odd rows of a with even rows of
        // b, permlane32 rows 2, 3 of a with rows 0, 1 of b.
        let (mut a, mut b) = (x.clone(), y.clone());
        let row = |l: usize| l / 16;
        let swapped = |l: usize| match rows {
            16 => row(l) % 2 == 1,
            _ => row(l) >= 2,
        };
        for l in (0..a.len()).filter(|&l| swapped(l)) {
            let m = l - rows as usize;
            std::mem::swap(&mut a[l], &mut b[m]);
        }
        assert_eq!(out[0], a, "permlane{rows}.swap: new a");
        assert_eq!(out[1], b, "permlane{rows}.swap: new b");
        assert_ne!(out[0], x, "the swap moved something");
    }
}

#[test]
fn permlane_swap_needs_the_whole_wave_and_gfx950() {
    let zeros = vec![0u32; 64];
    let k = swap_kernel(Target::Gfx950, 16, 40).unwrap();
    let e = run(&k, 64, &[&zeros, &zeros], 2, 64)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("PermlaneSwap") && e.contains("partly active"),
        "{e}"
    );
    for t in [
        Target::Gfx942,
        Target::Gfx1201,
        Target::Gfx1250,
        Target::Sm90,
    ] {
        let e = swap_kernel(t, 16, 64).unwrap_err().to_string();
        assert!(
            e.contains("PermlaneSwap") && e.contains("gfx950"),
            "{t}: {e}"
        );
    }
    let e = swap_kernel(Target::Gfx950, 8, 64).unwrap_err().to_string();
    assert!(e.contains("rows = 8"), "{e}");
}

/// Thread `t`: `o[t] = permlanex16(x[t], sel)` for threads below `active`.
fn x16_kernel(target: Target, sel: u64, threads: u32, active: u32) -> Result<Kernel, BuildError> {
    KernelBuilder::new("x16", target, threads).build(|k| {
        let x = k.tensor("x", ScalarType::I32);
        let o = k.tensor_mut("o", ScalarType::I32);
        let t = thread_id_x();
        if_(t.lt(active as i32), || {
            o.store(t, permlanex16(x.load(t), sel))
        });
    })
}

#[test]
fn permlanex16_matches_the_model_on_gfx12() {
    let mut rng = Rng::new(17);
    for target in [Target::Gfx1201, Target::Gfx1250] {
        for threads in [32u32, 64] {
            let x: Vec<u32> = (0..threads).map(|_| rng.next_u64() as u32).collect();
            for sel in [PERMLANEX16_SWAP_ROWS, rng.next_u64(), 0] {
                let k = x16_kernel(target, sel, threads, threads).unwrap();
                let out = run(&k, threads, &[&x], 1, threads as usize).unwrap();
                let want: Vec<u32> = (0..threads as usize)
                    .map(|l| {
                        let (half, i) = (l / 32 * 32, l % 32);
                        let other = if i < 16 { 16 } else { 0 };
                        let s = ((sel >> (4 * (i % 16))) & 0xf) as usize;
                        x[half + other + s]
                    })
                    .collect();
                assert_eq!(out[0], want, "{target} {threads} threads sel {sel:#x}");
            }
        }
    }
}

#[test]
fn permlanex16_needs_whole_halves_and_gfx12() {
    let zeros = vec![0u32; 32];
    let k = x16_kernel(Target::Gfx1201, PERMLANEX16_SWAP_ROWS, 32, 20).unwrap();
    let e = run(&k, 32, &[&zeros], 1, 32).unwrap_err().to_string();
    assert!(
        e.contains("PermlaneX16") && e.contains("partly active"),
        "{e}"
    );
    for t in [Target::Gfx942, Target::Gfx950, Target::Sm90] {
        let e = x16_kernel(t, 0, 64, 64).unwrap_err().to_string();
        assert!(
            e.contains("PermlaneX16") && e.contains("gfx1201"),
            "{t}: {e}"
        );
    }
}
