//! The four fp8 formats, decoded and encoded bit-exactly (subnormals included).
//!
//! Encoding rounds to nearest even and **saturates**: a finite input never becomes NaN or
//! infinity, it is clamped to the largest finite value. NaN stays NaN. An infinite input
//! becomes infinity in E5M2 (the only format with one) and the largest finite value in the
//! others. The FNUZ formats have no negative zero: a negative input that rounds to zero gives
//! `0x00`.
//!
//! ```
//! use flydsl_sim::fp8::{self, Fp8Format};
//! assert_eq!(fp8::encode(Fp8Format::E4M3FN, 1.0), 0x38);
//! assert_eq!(fp8::encode(Fp8Format::E4M3FNUZ, 1.0), 0x40);
//! assert_eq!(fp8::decode(Fp8Format::E4M3FN, 0x7E), 448.0);
//! assert_eq!(fp8::encode(Fp8Format::E4M3FN, 1e6), 0x7E);
//! ```

use crate::minifloat::{Format, Overflow};
use flydsl_ir::ScalarType;

/// An fp8 format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Format {
    /// OCP E4M3FN: bias 7, max 448, NaN `S.1111.111`, signed zero, no infinity.
    E4M3FN,
    /// AMD gfx942 E4M3FNUZ: bias 8, max 240, `0x80` = NaN, no negative zero, no infinity.
    E4M3FNUZ,
    /// OCP E5M2: bias 15, max 57344, infinities `S.11111.00`, NaN `S.11111.{01,10,11}`.
    E5M2,
    /// AMD gfx942 E5M2FNUZ: bias 16, max 57344, `0x80` = NaN, no negative zero, no infinity.
    E5M2FNUZ,
}

impl Fp8Format {
    /// All four formats.
    pub const ALL: [Fp8Format; 4] = [
        Fp8Format::E4M3FN,
        Fp8Format::E4M3FNUZ,
        Fp8Format::E5M2,
        Fp8Format::E5M2FNUZ,
    ];

    /// The format of an fp8 scalar type (`None` for other types).
    pub fn of(t: ScalarType) -> Option<Fp8Format> {
        match t {
            ScalarType::F8E4M3FN => Some(Fp8Format::E4M3FN),
            ScalarType::F8E4M3FNUZ => Some(Fp8Format::E4M3FNUZ),
            ScalarType::F8E5M2 => Some(Fp8Format::E5M2),
            ScalarType::F8E5M2FNUZ => Some(Fp8Format::E5M2FNUZ),
            _ => None,
        }
    }

    /// The largest finite value.
    pub fn max_finite(self) -> f32 {
        match self {
            Fp8Format::E4M3FN => 448.0,
            Fp8Format::E4M3FNUZ => 240.0,
            Fp8Format::E5M2 | Fp8Format::E5M2FNUZ => 57344.0,
        }
    }

    pub(crate) fn format(self) -> Format {
        let base = Format {
            ebits: 4,
            mbits: 3,
            bias: 7,
            max_code: 0x7E,
            inf_code: None,
            nan_code: 0x7F,
            nan_signed: true,
            unsigned_zero: false,
            overflow: Overflow::Saturate,
        };
        match self {
            Fp8Format::E4M3FN => base,
            Fp8Format::E4M3FNUZ => Format {
                bias: 8,
                max_code: 0x7F,
                nan_code: 0x80,
                nan_signed: false,
                unsigned_zero: true,
                ..base
            },
            Fp8Format::E5M2 => Format {
                ebits: 5,
                mbits: 2,
                bias: 15,
                max_code: 0x7B,
                inf_code: Some(0x7C),
                nan_code: 0x7E,
                ..base
            },
            Fp8Format::E5M2FNUZ => Format {
                ebits: 5,
                mbits: 2,
                bias: 16,
                max_code: 0x7F,
                nan_code: 0x80,
                nan_signed: false,
                unsigned_zero: true,
                ..base
            },
        }
    }
}

/// Decode an fp8 code to f32 (exact: every fp8 value is an f32).
pub fn decode(fmt: Fp8Format, code: u8) -> f32 {
    fmt.format().decode(code as u32) as f32
}

/// Encode an f32 to fp8 with round-to-nearest-even and saturation.
pub fn encode(fmt: Fp8Format, x: f32) -> u8 {
    fmt.format().encode(x as f64) as u8
}

/// Encode an f64 to fp8 with a single round-to-nearest-even step and saturation.
pub fn encode_f64(fmt: Fp8Format, x: f64) -> u8 {
    fmt.format().encode(x) as u8
}

/// Decode OCP E4M3FN.
pub fn e4m3fn_to_f32(code: u8) -> f32 {
    decode(Fp8Format::E4M3FN, code)
}
/// Encode OCP E4M3FN (saturating).
pub fn f32_to_e4m3fn(x: f32) -> u8 {
    encode(Fp8Format::E4M3FN, x)
}
/// Decode AMD E4M3FNUZ.
pub fn e4m3fnuz_to_f32(code: u8) -> f32 {
    decode(Fp8Format::E4M3FNUZ, code)
}
/// Encode AMD E4M3FNUZ (saturating).
pub fn f32_to_e4m3fnuz(x: f32) -> u8 {
    encode(Fp8Format::E4M3FNUZ, x)
}
/// Decode OCP E5M2.
pub fn e5m2_to_f32(code: u8) -> f32 {
    decode(Fp8Format::E5M2, code)
}
/// Encode OCP E5M2 (saturating for finite inputs).
pub fn f32_to_e5m2(x: f32) -> u8 {
    encode(Fp8Format::E5M2, x)
}
/// Decode AMD E5M2FNUZ.
pub fn e5m2fnuz_to_f32(code: u8) -> f32 {
    decode(Fp8Format::E5M2FNUZ, code)
}
/// Encode AMD E5M2FNUZ (saturating).
pub fn f32_to_e5m2fnuz(x: f32) -> u8 {
    encode(Fp8Format::E5M2FNUZ, x)
}
