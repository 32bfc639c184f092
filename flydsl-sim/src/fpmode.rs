//! Denormal handling per target: which float ops flush subnormal inputs and results to a zero
//! of the same sign on the hardware, as the generator compiles for it.
//!
//! - **AMD** (all four targets): the lowering gives every kernel
//!   `"denormal-fp-math-f32"="preserve-sign,preserve-sign"`, so the code object's FP32 denormal
//!   mode is flush-in/flush-out and every f32 VALU op flushes: add, sub, mul, div, rem, min,
//!   max, fma, sqrt, trunc, floor (and the transcendentals, which flush on every target). bf16
//!   arithmetic is promoted to f32 by LLVM on gfx942, gfx950 and gfx1201, so it flushes too; on
//!   gfx1250 vector bf16 arithmetic uses native packed bf16 instructions under the f16/f64
//!   mode, which keeps denormals, so the Sim keeps them there (scalar bf16 arithmetic on
//!   gfx1250 is still promoted to f32 by LLVM 22: not modelled). f16 and f64 keep denormals.
//!   f32 atomic adds flush (global FP atomics always do; LDS ones follow the mode).
//! - **NVIDIA** (sm_90): the lowering emits no flush attribute, so f32 arithmetic keeps
//!   denormals; only the approximate transcendentals (`ex2/lg2/rsqrt/rcp.approx.ftz`) and
//!   `atom.add.f32` (flushes subnormal inputs and results, PTX ISA) flush.
//!
//! Not modelled (the Sim keeps denormals): compares (LLVM emits a bare `v_cmp_*_f32` whose
//! input flushing is not documented), moves, selects, shuffles, conversions (an f32 denormal
//! converts to zero in f16 and fp8 anyway; f32 -> bf16 keeps it through LLVM's integer
//! rounding sequence on gfx942), and matrix atoms.
//!
//! Flushing an f16 operation's f32 intermediate would change nothing: no sum, product or
//! quotient of f16 values is an f32 denormal. So only f32 and bf16 pay for the check.

use flydsl_ir::Target;

/// How one target treats f32 denormals.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FpMode {
    /// f32 arithmetic flushes denormal inputs and results.
    pub ftz_f32: bool,
    /// bf16 arithmetic (computed in f32) flushes like f32.
    pub ftz_bf16: bool,
}

impl FpMode {
    pub fn of(t: Target) -> FpMode {
        FpMode {
            ftz_f32: t.is_amd(),
            ftz_bf16: t.is_amd() && t != Target::Gfx1250,
        }
    }
}

/// An f32 subnormal becomes a zero of the same sign (on the bits: a zero exponent field
/// keeps only the sign).
#[inline]
pub(crate) fn ftz(x: f32) -> f32 {
    let b = x.to_bits();
    f32::from_bits(if b & 0x7F80_0000 == 0 {
        b & 0x8000_0000
    } else {
        b
    })
}
