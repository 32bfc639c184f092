//! Scalar semantics on raw bits: every value is held as a `u64` whose low `bits()` bits are the
//! value's bit pattern (zero above). This module converts those bits to and from numbers.

use crate::fp8::Fp8Format;
use crate::minifloat;
use flydsl_ir::ScalarType;

/// Mask of the low `bits` bits.
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Sign-extend the low `bits` bits.
pub(crate) fn sext(v: u64, bits: u32) -> i64 {
    let s = 64 - bits;
    ((v << s) as i64) >> s
}

/// Canonical bits of an integer of type `t` (two's complement truncation).
pub(crate) fn int_bits(t: ScalarType, v: i64) -> u64 {
    (v as u64) & mask(t.bits())
}

/// Exact value of a float of type `t` given its bits.
pub(crate) fn float_val(t: ScalarType, b: u64) -> f64 {
    match t {
        ScalarType::F32 => f32::from_bits(b as u32) as f64,
        ScalarType::F16 => minifloat::F16.decode(b as u32),
        ScalarType::BF16 => f32::from_bits((b as u32) << 16) as f64,
        _ => match Fp8Format::of(t) {
            Some(f) => f.format().decode(b as u32),
            None => sext(b, t.bits()) as f64,
        },
    }
}

/// Bits of the float type `t` nearest to `x` (round to nearest even; fp8 saturates).
pub(crate) fn float_bits(t: ScalarType, x: f64) -> u64 {
    match t {
        ScalarType::F32 => (x as f32).to_bits() as u64,
        ScalarType::F16 => minifloat::F16.encode(x) as u64,
        ScalarType::BF16 => minifloat::BF16.encode(x) as u64,
        _ => match Fp8Format::of(t) {
            Some(f) => f.format().encode(x) as u64,
            None => 0,
        },
    }
}

/// Value of an f32 given its bits (for the f16/bf16 fast paths: decode is exact).
#[inline]
pub(crate) fn f32_of(t: ScalarType, b: u64) -> f32 {
    match t {
        ScalarType::F32 => f32::from_bits(b as u32),
        ScalarType::BF16 => f32::from_bits((b as u32) << 16),
        ScalarType::F16 => half::f16::from_bits(b as u16).to_f32(),
        _ => float_val(t, b) as f32,
    }
}

/// Bits of type `t` nearest to the f32 `x`.
#[inline]
pub(crate) fn f32_to(t: ScalarType, x: f32) -> u64 {
    match t {
        ScalarType::F32 => x.to_bits() as u64,
        ScalarType::BF16 => {
            let b = x.to_bits();
            if x.is_nan() {
                ((b >> 16) & 0x8000 | 0x7FC0) as u64
            } else {
                // Round to nearest even on the dropped 16 bits; a carry into the exponent
                // (up to infinity) is the correct result.
                ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u64
            }
        }
        _ => float_bits(t, x as f64),
    }
}

/// Flush an f32 subnormal to a zero of the same sign.
pub(crate) fn flush_denorm(x: f64) -> f64 {
    if x != 0.0 && x.abs() < f32::MIN_POSITIVE as f64 {
        0.0f64.copysign(x)
    } else {
        x
    }
}

/// Float -> integer conversion: truncate toward zero, saturate to the target range, NaN -> 0.
pub(crate) fn float_to_int(x: f64, to: ScalarType, unsigned: bool) -> u64 {
    if x.is_nan() {
        return 0;
    }
    let bits = to.bits();
    let t = x.trunc();
    if unsigned {
        let max = mask(bits) as f64;
        let v = if t <= 0.0 {
            0
        } else if t >= max {
            mask(bits)
        } else {
            t as u64
        };
        v & mask(bits)
    } else {
        let min = -(2f64.powi(bits as i32 - 1));
        let max = 2f64.powi(bits as i32 - 1) - 1.0;
        let v = if t <= min {
            min as i64
        } else if t >= max {
            max as i64
        } else {
            t as i64
        };
        int_bits(to, v)
    }
}

/// Integer bits -> float bits (signed or unsigned source).
pub(crate) fn int_to_float(b: u64, from: ScalarType, unsigned: bool, to: ScalarType) -> u64 {
    let bits = from.bits();
    if to == ScalarType::F32 {
        // Rust's integer -> f32 casts round to nearest even in one step.
        let x = if unsigned {
            (b & mask(bits)) as f32
        } else {
            sext(b, bits) as f32
        };
        return x.to_bits() as u64;
    }
    let x = if unsigned {
        (b & mask(bits)) as f64
    } else {
        sext(b, bits) as f64
    };
    float_bits(to, x)
}
