//! LLVM spellings of IR types, memory types and constants.
//!
//! fp8 values have no LLVM type: they travel as `i8` (their bit pattern). `i1` values live
//! in registers as `i1` and in memory as one byte.

use flydsl_ir::{AddrSpace, Const, ScalarType, Type};

/// Name of the one LDS / shared-memory block global of a kernel.
pub(crate) const LDS_SYMBOL: &str = "__flydsl_lds";

/// Name of the dynamic LDS / shared-memory region's global (an external zero-length array:
/// AMDGPU places it after the static LDS, NVPTX emits `.extern .shared`).
pub(crate) const DYN_LDS_SYMBOL: &str = "__flydsl_dyn_lds";

/// LLVM type of a scalar in registers.
pub(crate) fn scalar(s: ScalarType) -> &'static str {
    use ScalarType::*;
    match s {
        I1 => "i1",
        I8 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ => "i8",
        I16 => "i16",
        I32 => "i32",
        I64 => "i64",
        F16 => "half",
        BF16 => "bfloat",
        F32 => "float",
    }
}

/// LLVM type of a scalar in memory (`i1` is stored as a byte).
pub(crate) fn mem_scalar(s: ScalarType) -> &'static str {
    if s == ScalarType::I1 {
        "i8"
    } else {
        scalar(s)
    }
}

/// `T` or `<n x T>` for an element spelling and a lane count.
pub(crate) fn shaped(elem: &str, lanes: u32) -> String {
    if lanes == 1 {
        elem.to_string()
    } else {
        format!("<{lanes} x {elem}>")
    }
}

/// LLVM address-space number (the same on AMDGPU and NVPTX).
pub(crate) fn addrspace(a: AddrSpace) -> u32 {
    match a {
        AddrSpace::Global => 1,
        AddrSpace::Shared => 3,
        AddrSpace::Constant => 4,
    }
}

/// LLVM intrinsic name suffix of a scalar/vector register type (`f32`, `v4bf16`, `i8`).
pub(crate) fn suffix(elem_llvm: &str, lanes: u32) -> String {
    let e = match elem_llvm {
        "half" => "f16".to_string(),
        "bfloat" => "bf16".to_string(),
        "float" => "f32".to_string(),
        other => other.to_string(),
    };
    if lanes == 1 {
        e
    } else {
        format!("v{lanes}{e}")
    }
}

/// LLVM type of an IR value; `rsrc` is the target's spelling of a buffer resource.
pub(crate) fn llvm_type(t: Type, rsrc: &str) -> String {
    match t {
        Type::Scalar(s) => scalar(s).to_string(),
        Type::Vector(s, n) => shaped(scalar(s), n as u32),
        Type::Ptr(a, _) => format!("ptr addrspace({})", addrspace(a)),
        Type::BufferRsrc(_) => rsrc.to_string(),
    }
}

/// LLVM type of a scalar or vector value as stored in memory.
pub(crate) fn mem_type(t: Type) -> String {
    shaped(
        mem_scalar(t.value_elem().unwrap_or(ScalarType::I8)),
        t.lanes(),
    )
}

/// `splat (T c)` for vectors, `c` for scalars.
pub(crate) fn splat_lit(elem_ty: &str, lit: &str, lanes: u32) -> String {
    if lanes == 1 {
        lit.to_string()
    } else {
        format!("splat ({elem_ty} {lit})")
    }
}

/// Literal of an integer constant of scalar type `s` (truncated to the width).
pub(crate) fn int_lit(s: ScalarType, v: i64) -> String {
    let bits = s.bits();
    if bits == 1 {
        return if v & 1 == 1 {
            "true".into()
        } else {
            "false".into()
        };
    }
    let shift = 64 - bits;
    format!("{}", (v << shift) >> shift)
}

/// Literal of a float constant of a non-fp8 float type, rounded to nearest even.
pub(crate) fn float_lit(s: ScalarType, v: f64) -> String {
    let f = v as f32; // RNE; double rounding through f32 is innocuous for f16/bf16.
    match s {
        ScalarType::F16 => format!("0xH{:04X}", f32_to_f16_bits(f)),
        ScalarType::BF16 => format!("0xR{:04X}", f32_to_bf16_bits(f)),
        _ => format!("0x{:016X}", (f as f64).to_bits()),
    }
}

/// Literal of a constant of a non-fp8 scalar type (None for a kind/type mismatch).
pub(crate) fn const_lit(s: ScalarType, c: Const) -> Option<String> {
    match c {
        Const::Int(v) if s.is_int() => Some(int_lit(s, v)),
        Const::Float(v) if s.is_float() && !s.is_fp8() => Some(float_lit(s, v)),
        _ => None,
    }
}

/// IEEE half bits of an f32, round to nearest even.
pub(crate) fn f32_to_f16_bits(f: f32) -> u16 {
    let b = f.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let abs = b & 0x7FFF_FFFF;
    if abs > 0x7F80_0000 {
        return sign | 0x7E00 | ((abs >> 13) as u16 & 0x1FF);
    }
    if abs >= 0x477F_F000 {
        // >= 65520 rounds to infinity.
        return sign | 0x7C00;
    }
    if abs < 0x3880_0000 {
        // Below 2^-14: subnormal half; quantum 2^-24.
        let v = f32::from_bits(abs) * (1u32 << 24) as f32; // exact scaling
        let r = round_half_even(v);
        return sign | r as u16;
    }
    let shift = 13;
    let round = (1u32 << (shift - 1)) - 1 + ((abs >> shift) & 1);
    let t = (abs + round) >> shift;
    sign | (t - ((127 - 15) << 10)) as u16
}

/// bfloat16 bits of an f32, round to nearest even (NaN stays quiet NaN).
pub(crate) fn f32_to_bf16_bits(f: f32) -> u16 {
    let b = f.to_bits();
    if (b & 0x7FFF_FFFF) > 0x7F80_0000 {
        return ((b >> 16) as u16) | 0x40;
    }
    let round = 0x7FFF + ((b >> 16) & 1);
    ((b.wrapping_add(round)) >> 16) as u16
}

/// Round a non-negative float to an integer, ties to even.
fn round_half_even(v: f32) -> u32 {
    let fl = v.floor();
    let d = v - fl;
    let fl = fl as u32;
    if d > 0.5 || (d == 0.5 && fl % 2 == 1) {
        fl + 1
    } else {
        fl
    }
}

/// The LLVM local name of kernel argument `i`, spelled after its kernarg slot name so the
/// code-object metadata names the arguments like the launcher does (`%"x.len"`).
pub(crate) fn local_name(slot: &str, i: usize) -> String {
    let clean = !slot.is_empty()
        && slot
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'$'));
    if clean {
        format!("%\"{slot}\"")
    } else {
        format!("%arg{i}")
    }
}

/// The LLVM symbol of the kernel (`@name`, quoted when it has unusual characters).
pub(crate) fn symbol(name: &str) -> String {
    let plain = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$'));
    if plain {
        format!("@{name}")
    } else {
        let mut s = String::from("@\"");
        for b in name.bytes() {
            if b.is_ascii_graphic() && b != b'"' && b != b'\\' || b == b' ' {
                s.push(b as char);
            } else {
                s.push_str(&format!("\\{b:02X}"));
            }
        }
        s.push('"');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_and_bf16_constants_round_to_nearest_even() {
        assert_eq!(f32_to_f16_bits(1.0), 0x3C00);
        assert_eq!(f32_to_f16_bits(-2.0), 0xC000);
        assert_eq!(f32_to_f16_bits(65504.0), 0x7BFF);
        assert_eq!(f32_to_f16_bits(70000.0), 0x7C00);
        assert_eq!(f32_to_f16_bits(2f32.powi(-24)), 0x0001);
        assert_eq!(f32_to_f16_bits(2f32.powi(-25)), 0x0000); // tie to even
        assert_eq!(f32_to_f16_bits(1.0 + 2f32.powi(-11)), 0x3C00); // tie to even
        assert_eq!(f32_to_bf16_bits(1.0), 0x3F80);
        assert_eq!(f32_to_bf16_bits(1.0 + 2f32.powi(-8)), 0x3F80);
        assert_eq!(f32_to_bf16_bits(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
        assert_eq!(int_lit(ScalarType::I8, 255), "-1");
        assert_eq!(int_lit(ScalarType::I1, 1), "true");
        assert_eq!(symbol("a b"), "@\"a b\"");
    }
}
