//! Bit-exact encoding and decoding of the narrow binary float formats (f16, bf16, fp8) with
//! round-to-nearest-even, computed from `f64` so there is no double rounding.

/// What an out-of-range finite value becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// IEEE behaviour: round to infinity.
    Inf,
    /// Clamp to the largest finite magnitude (fp8 conversions).
    Saturate,
}

/// A narrow binary floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Format {
    /// Exponent bits.
    pub ebits: u32,
    /// Mantissa (fraction) bits.
    pub mbits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// Largest finite code with the sign bit clear.
    pub max_code: u32,
    /// Code of +infinity, if the format has one.
    pub inf_code: Option<u32>,
    /// Code of the canonical NaN, without sign.
    pub nan_code: u32,
    /// Whether NaN codes carry the sign of the input.
    pub nan_signed: bool,
    /// True for the FNUZ formats: no negative zero (the `0x80` pattern is NaN).
    pub unsigned_zero: bool,
    /// Behaviour on overflow of a finite value.
    pub overflow: Overflow,
}

/// IEEE binary16.
pub(crate) const F16: Format = Format {
    ebits: 5,
    mbits: 10,
    bias: 15,
    max_code: 0x7BFF,
    inf_code: Some(0x7C00),
    nan_code: 0x7E00,
    nan_signed: true,
    unsigned_zero: false,
    overflow: Overflow::Inf,
};

/// bfloat16.
pub(crate) const BF16: Format = Format {
    ebits: 8,
    mbits: 7,
    bias: 127,
    max_code: 0x7F7F,
    inf_code: Some(0x7F80),
    nan_code: 0x7FC0,
    nan_signed: true,
    unsigned_zero: false,
    overflow: Overflow::Inf,
};

impl Format {
    fn sign_shift(&self) -> u32 {
        self.ebits + self.mbits
    }

    /// Decode a code to its exact value.
    pub fn decode(&self, code: u32) -> f64 {
        let sign = (code >> self.sign_shift()) & 1;
        let mag = code & ((1 << self.sign_shift()) - 1);
        if self.unsigned_zero && sign == 1 && mag == 0 {
            return f64::NAN;
        }
        let s = if sign == 1 { -1.0 } else { 1.0 };
        if Some(mag) == self.inf_code {
            return s * f64::INFINITY;
        }
        if mag > self.max_code && Some(mag) != self.inf_code {
            return f64::NAN;
        }
        let e = (mag >> self.mbits) as i32;
        let m = (mag & ((1 << self.mbits) - 1)) as f64;
        let frac = (1u64 << self.mbits) as f64;
        if e == 0 {
            s * m / frac * pow2(1 - self.bias)
        } else {
            s * (1.0 + m / frac) * pow2(e - self.bias)
        }
    }

    /// Encode `x`, rounding to nearest even.
    pub fn encode(&self, x: f64) -> u32 {
        let sbit = 1u32 << self.sign_shift();
        let neg = x.is_sign_negative();
        if x.is_nan() {
            return if self.nan_signed && neg {
                self.nan_code | sbit
            } else {
                self.nan_code
            };
        }
        let sign = if neg { sbit } else { 0 };
        let a = x.abs();
        if a.is_infinite() {
            return sign | self.inf_code.unwrap_or(self.max_code);
        }
        let min_exp = 1 - self.bias;
        // Quantum (spacing of representable values) at `a`.
        let e = if a == 0.0 {
            min_exp
        } else {
            exponent_of(a).max(min_exp)
        };
        let quantum = pow2(e - self.mbits as i32);
        let r = round_half_even(a / quantum);
        let mag = if r == 0.0 {
            0
        } else if e == min_exp && r < (1u64 << self.mbits) as f64 {
            r as u32
        } else {
            // r is in [2^mbits, 2^(mbits+1)]; the carry into the exponent field is automatic.
            (((e + self.bias) as u32) << self.mbits) + (r as u32 - (1 << self.mbits))
        };
        let over = mag > self.max_code;
        let mag = match (over, self.overflow) {
            (false, _) => mag,
            (true, Overflow::Saturate) => self.max_code,
            (true, Overflow::Inf) => self.inf_code.unwrap_or(self.max_code),
        };
        if mag == 0 && self.unsigned_zero {
            return 0;
        }
        sign | mag
    }
}

/// `2^k` exactly (k within the f64 normal range).
pub(crate) fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// floor(log2(a)) of a positive normal f64.
fn exponent_of(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

/// Round to an integer, ties to even (input is non-negative and below 2^52).
fn round_half_even(q: f64) -> f64 {
    let f = q.floor();
    let d = q - f;
    if d > 0.5 || (d == 0.5 && f % 2.0 != 0.0) {
        f + 1.0
    } else {
        f
    }
}
