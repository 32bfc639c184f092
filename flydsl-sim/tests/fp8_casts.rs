//! fp8 decode/encode (matrix-layouts.md §1.3, §2.3, §9.6) and RNE casts to bf16/f16.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::fp8::{self, Fp8Format};
use flydsl_sim::{launch, SimMemory, SimOptions};

/// Reference decoder written from the format definitions (sign, exponent, mantissa fields).
fn ref_decode(fmt: Fp8Format, c: u8) -> f32 {
    let (eb, bias): (u32, i32) = match fmt {
        Fp8Format::E4M3FN => (4, 7),
        Fp8Format::E4M3FNUZ => (4, 8),
        Fp8Format::E5M2 => (5, 15),
        Fp8Format::E5M2FNUZ => (5, 16),
    };
    let mb = 7 - eb;
    let s = if c & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let e = ((c >> mb) & ((1 << eb) - 1) as u8) as i32;
    let m = (c & ((1 << mb) - 1) as u8) as f32;
    let fnuz = matches!(fmt, Fp8Format::E4M3FNUZ | Fp8Format::E5M2FNUZ);
    if fnuz && c == 0x80 {
        return f32::NAN;
    }
    match fmt {
        Fp8Format::E4M3FN if c & 0x7F == 0x7F => return f32::NAN,
        Fp8Format::E5M2 if e == 31 => {
            return if m == 0.0 {
                s * f32::INFINITY
            } else {
                f32::NAN
            }
        }
        _ => {}
    }
    let scale = 2f32.powi(mb as i32);
    if e == 0 {
        s * m / scale * 2f32.powi(1 - bias)
    } else {
        s * (1.0 + m / scale) * 2f32.powi(e - bias)
    }
}

#[test]
fn documented_fp8_values() {
    // §9.6: gfx942 0x40 = 1.0, 0x7F = 240, 0x80 = NaN; OCP 0x38 = 1.0, 0x7E = 448, 0x7F = NaN,
    // 0x80 = -0.
    assert_eq!(fp8::e4m3fnuz_to_f32(0x40), 1.0);
    assert_eq!(fp8::e4m3fnuz_to_f32(0x7F), 240.0);
    assert!(fp8::e4m3fnuz_to_f32(0x80).is_nan());
    assert_eq!(fp8::e4m3fn_to_f32(0x38), 1.0);
    assert_eq!(fp8::e4m3fn_to_f32(0x7E), 448.0);
    assert!(fp8::e4m3fn_to_f32(0x7F).is_nan());
    assert!(fp8::e4m3fn_to_f32(0xFF).is_nan());
    let nz = fp8::e4m3fn_to_f32(0x80);
    assert!(nz == 0.0 && nz.is_sign_negative());
    // E5M2: 1.0 = 0x3C, inf = 0x7C, max 57344 = 0x7B; FNUZ: 1.0 = 0x40, 0x80 NaN.
    assert_eq!(fp8::e5m2_to_f32(0x3C), 1.0);
    assert_eq!(fp8::e5m2_to_f32(0x7C), f32::INFINITY);
    assert_eq!(fp8::e5m2_to_f32(0x7B), 57344.0);
    assert!(fp8::e5m2_to_f32(0x7D).is_nan());
    assert_eq!(fp8::e5m2fnuz_to_f32(0x40), 1.0);
    assert_eq!(fp8::e5m2fnuz_to_f32(0x7F), 57344.0);
    assert!(fp8::e5m2fnuz_to_f32(0x80).is_nan());
    // Smallest subnormals.
    assert_eq!(fp8::e4m3fn_to_f32(0x01), 2f32.powi(-9));
    assert_eq!(fp8::e4m3fnuz_to_f32(0x01), 2f32.powi(-10));
    assert_eq!(fp8::e5m2_to_f32(0x01), 2f32.powi(-16));
    assert_eq!(fp8::e5m2fnuz_to_f32(0x01), 2f32.powi(-17));
    assert_eq!(fp8::f32_to_e4m3fn(1.0), 0x38);
    assert_eq!(fp8::f32_to_e4m3fnuz(1.0), 0x40);
    assert_eq!(fp8::f32_to_e5m2(-1.0), 0xBC);
    assert_eq!(fp8::f32_to_e5m2fnuz(-2.0), 0xC4);
}

#[test]
fn all_codes_decode_per_definition_and_round_trip() {
    for fmt in Fp8Format::ALL {
        for c in 0..=255u8 {
            let v = fp8::decode(fmt, c);
            let r = ref_decode(fmt, c);
            assert!(
                v.to_bits() == r.to_bits() || (v.is_nan() && r.is_nan()),
                "{fmt:?} {c:#x}: {v} vs {r}"
            );
            let back = fp8::encode(fmt, v);
            if v.is_nan() {
                assert!(fp8::decode(fmt, back).is_nan(), "{fmt:?} {c:#x}");
            } else {
                assert_eq!(back, c, "{fmt:?} {c:#x} ({v}) did not round-trip");
            }
        }
    }
}

#[test]
fn fp8_encode_rounds_to_nearest_even_and_saturates() {
    // E4M3FN around 1.0: spacing 1/8. 1 + 1/16 is a tie -> even (1.0 = 0x38); 1 + 3/16 -> 1.25.
    assert_eq!(fp8::f32_to_e4m3fn(1.0 + 1.0 / 16.0), 0x38);
    assert_eq!(fp8::f32_to_e4m3fn(1.0 + 3.0 / 16.0), 0x3A);
    assert_eq!(fp8::f32_to_e4m3fn(1.0 + 1.0 / 16.0 + 1e-4), 0x39);
    // Subnormal tie: 2^-10 is halfway between 0 and 2^-9 -> 0 (even), keeps the sign.
    assert_eq!(fp8::f32_to_e4m3fn(2f32.powi(-10)), 0x00);
    assert_eq!(fp8::f32_to_e4m3fn(-(2f32.powi(-10))), 0x80);
    assert_eq!(fp8::f32_to_e4m3fn(3.0 * 2f32.powi(-10)), 0x02);
    // FNUZ has no -0: a tiny negative rounds to +0, never to the NaN pattern 0x80.
    assert_eq!(fp8::f32_to_e4m3fnuz(-1e-9), 0x00);
    assert_eq!(fp8::f32_to_e5m2fnuz(-0.0), 0x00);
    // Saturation: finite never becomes inf/NaN.
    for fmt in Fp8Format::ALL {
        let max = fmt.max_finite();
        for x in [max * 1.01, max * 2.0, 1e30, f32::MAX] {
            assert_eq!(fp8::decode(fmt, fp8::encode(fmt, x)), max, "{fmt:?} {x}");
            assert_eq!(fp8::decode(fmt, fp8::encode(fmt, -x)), -max, "{fmt:?} {x}");
        }
        assert!(fp8::decode(fmt, fp8::encode(fmt, f32::NAN)).is_nan());
    }
    // 464 is the tie between 448 and (non-existent) 480 in E4M3FN: saturates to 448.
    assert_eq!(fp8::f32_to_e4m3fn(464.0), 0x7E);
    assert_eq!(fp8::f32_to_e5m2(f32::INFINITY), 0x7C);
    assert_eq!(fp8::f32_to_e4m3fn(f32::INFINITY), 0x7E);
}

/// y_bits[i] = cast(x[i] as f32 -> dst) read back as raw bits.
fn cast_kernel(dst: ScalarType) -> Kernel {
    let mut b = B::new("cast", Target::Gfx950);
    let (px, _) = b.tensor("x", ScalarType::F32);
    let (py, _) = b.tensor("y", dst);
    let i = b.tid();
    let x = b.load(px, i, F32);
    let c = b.cast(CastKind::Convert, x, Type::Scalar(dst));
    b.store(py, i, c);
    b.finish()
}

fn run_cast(dst: ScalarType, xs: &[f32]) -> Vec<u64> {
    let k = cast_kernel(dst);
    let mem = SimMemory::new();
    let dx = upload_f32(&mem, xs);
    let es = dst.size_bytes() as usize;
    let dy = mem.alloc((xs.len() * es) as u64).unwrap();
    let args = pack(
        &k,
        &[
            Arg::Tensor(dx, xs.len() as i64),
            Arg::Tensor(dy, xs.len() as i64),
        ],
    );
    launch(
        &k,
        [1, 1, 1],
        [xs.len() as u32, 1, 1],
        &args,
        &mem,
        &SimOptions::default(),
    )
    .unwrap();
    let mut b = vec![0u8; xs.len() * es];
    mem.read(dy, &mut b).unwrap();
    b.chunks(es)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..es].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect()
}

#[test]
fn bf16_and_f16_casts_round_ties_to_even() {
    let f = f32::from_bits;
    // bf16 keeps the top 16 bits of f32. Ties: 0x3F80_8000 (between 0x3F80 and 0x3F81) -> even
    // 0x3F80; 0x3F81_8000 -> 0x3F82; just above the tie rounds up; max-ish overflows to inf.
    let xs = [
        f(0x3F80_8000),
        f(0x3F81_8000),
        f(0x3F80_8001),
        f(0xBF80_7FFF),
        f(0x7F7F_FFFF),
        1.0,
    ];
    let want = [0x3F80, 0x3F82, 0x3F81, 0xBF80, 0x7F80, 0x3F80];
    assert_eq!(run_cast(ScalarType::BF16, &xs), want);
    // f16: 1 + 2^-11 is the tie between 1.0 (0x3C00) and 1 + 2^-10 (0x3C01) -> 0x3C00;
    // 1 + 3*2^-11 -> 0x3C02; 65520 (tie between max 65504 and 2^16) -> inf; subnormal tie
    // 2^-25 (half of the smallest subnormal) -> 0; 3*2^-25 -> 0x0002.
    let xs = [
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        65520.0,
        2f32.powi(-25),
        3.0 * 2f32.powi(-25),
        -2.5,
    ];
    let want = [0x3C00, 0x3C02, 0x7C00, 0x0000, 0x0002, 0xC100];
    assert_eq!(run_cast(ScalarType::F16, &xs), want);
    // fp8 on the device path matches the host module (OCP on gfx950).
    let xs = [1.0, 1.0625, 500.0, -3.0e-3, f32::NAN];
    let got = run_cast(ScalarType::F8E4M3FN, &xs);
    let want: Vec<u64> = xs.iter().map(|&x| fp8::f32_to_e4m3fn(x) as u64).collect();
    assert_eq!(got, want);
    // float -> int truncates toward zero and saturates, NaN -> 0.
    let xs = [2.9, -2.9, 3e9, -3e9, f32::NAN];
    let got: Vec<i32> = run_cast(ScalarType::I32, &xs)
        .into_iter()
        .map(|v| v as u32 as i32)
        .collect();
    assert_eq!(got, [2, -2, i32::MAX, i32::MIN, 0]);
}
