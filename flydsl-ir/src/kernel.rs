//! Kernels, parameters, blocks and ops.

use crate::{ScalarType, Target, Type, ValueId};
use serde::{Deserialize, Serialize};

/// A kernel parameter as the user sees it; each lowers to one or more kernel arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// Name (used in generated launchers and error messages).
    pub name: String,
    /// What it is.
    pub kind: ParamKind,
}

/// The kinds of kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParamKind {
    /// A global tensor: lowers to a pointer argument and an `i64` element-count argument.
    Tensor {
        /// Element type.
        elem: ScalarType,
        /// Whether the kernel writes it.
        writable: bool,
    },
    /// A scalar passed by value.
    Scalar(ScalarType),
}

/// A statically sized LDS / shared-memory array of the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LdsArray {
    /// Name (for diagnostics).
    pub name: String,
    /// Element type.
    pub elem: ScalarType,
    /// Number of elements.
    pub len: u32,
    /// Byte offset inside the workgroup's LDS block (assigned by the builder, aligned).
    pub offset: u32,
    /// Alignment in bytes.
    pub align: u32,
}

/// The kernel's dynamic LDS / shared-memory region: its size is chosen per launch
/// (`LaunchConfig::dynamic_lds_bytes` in flydsl-rt), it starts at
/// [`Kernel::dynamic_lds_offset`] (after the static arrays, [`DYNAMIC_LDS_ALIGN`]-aligned) and
/// [`OpKind::DynLdsBase`] points into it at a run-time byte offset, so one region can hold
/// several arrays whose lengths are known only at launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicLds {
    /// Name (for diagnostics and the LLVM symbol).
    pub name: String,
}

/// Alignment in bytes of the dynamic LDS region's start (what both AMD and NVIDIA guarantee).
pub const DYNAMIC_LDS_ALIGN: u32 = 16;

/// Byte offsets of arrays laid out in order in a dynamic LDS region (each starts at the
/// previous end rounded up to [`DYNAMIC_LDS_ALIGN`]: the rule the DSL's dynamic LDS arrays
/// follow), and the region's total bytes: what a launch passes as its dynamic LDS size.
/// `None` when the total overflows `u64`.
///
/// ```
/// use flydsl_ir::{dynamic_lds_layout, ScalarType};
/// // 3 f32 (12 B), then 10 f16 at 16, then 1 i8 at 48.
/// let fields = [(ScalarType::F32, 3), (ScalarType::F16, 10), (ScalarType::I8, 1)];
/// assert_eq!(dynamic_lds_layout(&fields), Some((vec![0, 16, 48], 49)));
/// ```
pub fn dynamic_lds_layout(fields: &[(ScalarType, u64)]) -> Option<(Vec<u64>, u64)> {
    let mut offsets = Vec::with_capacity(fields.len());
    let mut end = 0u64;
    for &(elem, len) in fields {
        let start = end.checked_next_multiple_of(u64::from(DYNAMIC_LDS_ALIGN))?;
        offsets.push(start);
        end = start.checked_add(len.checked_mul(u64::from(elem.size_bytes()))?)?;
    }
    Some((offsets, end))
}

/// Kernel attributes passed to the code generator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelAttrs {
    /// Largest workgroup size this kernel is launched with (flat-work-group-size upper bound,
    /// `maxntid` on NVIDIA). Launches above it are rejected.
    pub max_threads: u32,
    /// AMD waves-per-EU minimum (occupancy hint), if any.
    pub waves_per_eu: Option<u32>,
    /// Register cap per thread, if any: NVIDIA `maxnreg`; on AMD `amdgpu-num-vgpr`, so the
    /// code object's VGPRs per lane (architectural plus accumulation) stay within it (the
    /// build's code-object check fails a kernel where LLVM could not meet it).
    pub max_registers: Option<u32>,
    /// AMD: LLVM's `loop-rotate` runs before code generation and large vector phis stay
    /// whole, so matrix-atom accumulators carried by a loop update in place instead of
    /// living in two register sets (the portable GEMM's 64 x 256 tile on gfx942: 312 -> 220
    /// VGPRs). Off by default: rotation costs registers in the norm kernels' row loops.
    #[serde(default)]
    pub rotate_loops: bool,
}

/// A complete kernel in IR form, built for one target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// Symbol name.
    pub name: String,
    /// The target it was built for (wave size, atoms and fp8 formats follow from it).
    pub target: Target,
    /// User-level parameters; [`Kernel::param_values`] holds their SSA values.
    pub params: Vec<Param>,
    /// For each param, its values: a tensor has (pointer, extent), a scalar one value.
    pub param_values: Vec<Vec<ValueId>>,
    /// Type of every SSA value, indexed by [`ValueId`].
    pub values: Vec<Type>,
    /// Static LDS arrays.
    pub lds: Vec<LdsArray>,
    /// The dynamic LDS region, if the kernel uses one.
    #[serde(default)]
    pub dynamic_lds: Option<DynamicLds>,
    /// Attributes.
    pub attrs: KernelAttrs,
    /// The body (ends with no terminator; returning is implicit).
    pub body: Block,
    /// Where each op was written in the kernel's source (debug information: not
    /// serialized, not lowered, ignored by equality; empty unless built by the DSL).
    #[serde(skip)]
    pub src_locs: crate::SrcLocs,
}

impl Kernel {
    /// An empty kernel with no parameters and an empty body.
    pub fn empty(name: &str, target: Target) -> Kernel {
        Kernel {
            name: name.to_string(),
            target,
            params: vec![],
            param_values: vec![],
            values: vec![],
            lds: vec![],
            dynamic_lds: None,
            attrs: KernelAttrs {
                max_threads: 256,
                waves_per_eu: None,
                max_registers: None,
                rotate_loops: false,
            },
            body: Block::default(),
            src_locs: crate::SrcLocs::default(),
        }
    }
    /// Type of a value.
    pub fn ty(&self, v: ValueId) -> Type {
        self.values[v.0 as usize]
    }
    /// Total static LDS bytes.
    pub fn lds_bytes(&self) -> u32 {
        self.lds
            .iter()
            .map(|a| a.offset + a.len * a.elem.size_bytes())
            .max()
            .unwrap_or(0)
    }
    /// Byte offset of the dynamic LDS region: the static LDS rounded up to
    /// [`DYNAMIC_LDS_ALIGN`]. A launch with `d` dynamic bytes uses `dynamic_lds_offset() + d`
    /// bytes of LDS in all.
    ///
    /// ```
    /// use flydsl_ir::{Kernel, LdsArray, ScalarType, Target};
    /// let mut k = Kernel::empty("k", Target::Gfx942);
    /// k.lds.push(LdsArray { name: "a".into(), elem: ScalarType::F32, len: 3, offset: 0, align: 4 });
    /// assert_eq!((k.lds_bytes(), k.dynamic_lds_offset()), (12, 16));
    /// ```
    pub fn dynamic_lds_offset(&self) -> u32 {
        self.lds_bytes().next_multiple_of(DYNAMIC_LDS_ALIGN)
    }
}

/// A list of ops; blocks of `for` bodies have arguments (induction variable, carried values).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Block {
    /// Block arguments.
    pub args: Vec<ValueId>,
    /// The ops in order. Region bodies end with [`OpKind::Yield`].
    pub ops: Vec<Op>,
}

/// One operation with its results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// SSA results.
    pub results: Vec<ValueId>,
    /// What it does.
    pub kind: OpKind,
}

/// A constant value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Const {
    /// Integer of any int type (two's complement, truncated to the type).
    Int(i64),
    /// Float of any float type (rounded to the type, RNE).
    Float(f64),
}

/// Grid dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    /// x
    X,
    /// y
    Y,
    /// z
    Z,
}

/// Thread-geometry queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Special {
    /// Thread index in the workgroup.
    ThreadId(Dim),
    /// Workgroup index in the grid.
    BlockId(Dim),
    /// Workgroup size.
    BlockDim(Dim),
    /// Number of workgroups.
    GridDim(Dim),
    /// Lane index within the wave.
    LaneId,
}

/// Two-operand arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    /// a + b (wrapping for ints)
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// Float division; signed integer division.
    Div,
    /// Unsigned integer division.
    UDiv,
    /// Signed integer remainder; float remainder.
    Rem,
    /// Unsigned remainder.
    URem,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Bitwise xor.
    Xor,
    /// Shift left.
    Shl,
    /// Logical shift right.
    LShr,
    /// Arithmetic shift right.
    AShr,
    /// Signed min; float min returning the non-NaN operand (IEEE minNum).
    Min,
    /// Signed max; float max returning the non-NaN operand (IEEE maxNum).
    Max,
    /// Unsigned min.
    UMin,
    /// Unsigned max.
    UMax,
    /// Float min propagating NaN (IEEE minimum).
    MinNan,
    /// Float max propagating NaN (IEEE maximum).
    MaxNan,
}

/// One-operand arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnOp {
    /// -a
    Neg,
    /// bitwise not
    Not,
    /// |a|
    Abs,
    /// 2^a (hardware fast form where present: `v_exp_f32`, `ex2.approx`)
    Exp2,
    /// log2(a) (hardware fast form)
    Log2,
    /// 1/sqrt(a) (hardware fast form)
    Rsqrt,
    /// 1/a (hardware fast form)
    Rcp,
    /// sqrt(a), correctly rounded
    Sqrt,
    /// Round toward zero to an integral float.
    Trunc,
    /// Round down to an integral float.
    Floor,
}

/// Comparison predicates (integers compare signed unless `U*`; floats are ordered except `Ne`,
/// which is true when unordered). The unsigned predicates `U*` are integer-only: the verifier
/// rejects them on floats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpPred {
    /// ==
    Eq,
    /// != (floats: unordered or not equal)
    Ne,
    /// <
    Lt,
    /// <=
    Le,
    /// >
    Gt,
    /// >=
    Ge,
    /// unsigned <
    ULt,
    /// unsigned <=
    ULe,
    /// unsigned >
    UGt,
    /// unsigned >=
    UGe,
}

/// Conversions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CastKind {
    /// Numeric conversion: int widening sign-extends, narrowing truncates; float<->float rounds
    /// to nearest even (fp8 saturates to the format's max finite value); float->int truncates
    /// toward zero and saturates; int->float is signed.
    Convert,
    /// Like `Convert` but integers are treated as unsigned (zero-extend, unsigned int->float).
    ConvertUnsigned,
    /// Reinterpret the bits (same total size).
    Bitcast,
}

/// Cross-lane shuffle modes (within one wave).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShuffleMode {
    /// Read lane `lane ^ operand`.
    Xor,
    /// Read lane `operand` (an i32 value per lane).
    Idx,
    /// Read lane `lane + operand` (unchanged if out of the wave).
    Down,
}

/// Matrix-core atoms: one wave computes `D = A * B + C` for a fixed tile shape, with the
/// lane-to-element layout documented by the vendor (see the Sim for the exact maps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MmaAtom {
    /// gfx942/gfx950 `v_mfma_f32_16x16x16_f16`: A,B `<4 x f16>`, C `<4 x f32>`.
    Mfma16x16x16F16,
    /// gfx942/gfx950 `v_mfma_f32_16x16x16_bf16`: A,B `<4 x bf16>`, C `<4 x f32>`.
    Mfma16x16x16Bf16,
    /// gfx942/gfx950 `v_mfma_f32_32x32x8_f16`: A,B `<4 x f16>`, C `<16 x f32>`.
    Mfma32x32x8F16,
    /// gfx942/gfx950 `v_mfma_f32_32x32x8_bf16`: A,B `<4 x bf16>`, C `<16 x f32>`.
    Mfma32x32x8Bf16,
    /// gfx942 (fnuz) / gfx950 (OCP) `v_mfma_f32_16x16x32_fp8_fp8`: A,B `<8 x fp8>`, C `<4 x f32>`.
    Mfma16x16x32Fp8,
    /// gfx942/gfx950 `v_mfma_i32_16x16x32_i8`: A,B `<8 x i8>`, C `<4 x i32>`.
    Mfma16x16x32I8,
    /// gfx950 `v_mfma_f32_16x16x32_f16`: A,B `<8 x f16>`, C `<4 x f32>`.
    Mfma16x16x32F16,
    /// gfx950 `v_mfma_f32_16x16x32_bf16`: A,B `<8 x bf16>`, C `<4 x f32>`.
    Mfma16x16x32Bf16,
    /// gfx1201 `v_wmma_f32_16x16x16_f16` (wave32): A,B `<8 x f16>`, C `<8 x f32>`.
    Wmma16x16x16F16,
    /// gfx1201 `v_wmma_f32_16x16x16_bf16` (wave32): A,B `<8 x bf16>`, C `<8 x f32>`.
    Wmma16x16x16Bf16,
    /// gfx1250 `v_wmma_f32_16x16x32_f16`: A,B `<16 x f16>`, C `<8 x f32>`.
    Wmma16x16x32F16,
    /// gfx1250 `v_wmma_f32_16x16x32_bf16`: A,B `<16 x bf16>`, C `<8 x f32>`.
    Wmma16x16x32Bf16,
    /// gfx1250 `v_wmma_f32_16x16x64_fp8_fp8` (wave32): A,B `<32 x e4m3fn>` (OCP fp8, handed
    /// to the intrinsic as `<8 x i32>`), C `<8 x f32>`.
    Wmma16x16x64Fp8,
    /// gfx1250 `v_wmma_f32_16x16x128_fp8_fp8` (wave32): A,B `<64 x e4m3fn>` (handed to the
    /// intrinsic as `<16 x i32>`), C `<8 x f32>`.
    Wmma16x16x128Fp8,
    /// gfx950 `v_mfma_scale_f32_16x16x128_f8f6f4` with fp8 (OCP E4M3FN) A and B: A,B
    /// `<32 x e4m3fn>`, C `<4 x f32>`. Only usable through [`OpKind::MmaScaled`], which adds
    /// the per-lane E8M0 scale words.
    MfmaScale16x16x128Fp8,
    /// sm_90 `mma.sync.m16n8k16.row.col.f32.f16.f16.f32`: A `<8 x f16>`, B `<4 x f16>`, C `<4 x f32>`.
    MmaM16N8K16F16,
    /// sm_90 `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32`: A `<8 x bf16>`, B `<4 x bf16>`, C `<4 x f32>`.
    MmaM16N8K16Bf16,
    /// gfx950 `v_mfma_f32_32x32x16_f16`: A,B `<8 x f16>`, C `<16 x f32>`.
    Mfma32x32x16F16,
    /// gfx950 `v_mfma_f32_32x32x16_bf16`: A,B `<8 x bf16>`, C `<16 x f32>`.
    Mfma32x32x16Bf16,
    /// gfx942 (fnuz) / gfx950 (OCP) `v_mfma_f32_32x32x16_fp8_fp8`: A,B `<8 x fp8>` (the
    /// target's E4M3, handed to the intrinsic as `i64`), C `<16 x f32>`.
    Mfma32x32x16Fp8,
    /// gfx950 `v_mfma_i32_16x16x64_i8` (signed): A,B `<16 x i8>` (handed to the intrinsic as
    /// `<4 x i32>`), C `<4 x i32>`; the accumulation wraps modulo 2^32.
    Mfma16x16x64I8,
    /// gfx1201 `v_wmma_f32_16x16x16_fp8_fp8` (wave32): A,B `<8 x e4m3fn>` (OCP fp8, handed to
    /// the intrinsic as `<2 x i32>`), C `<8 x f32>`.
    Wmma16x16x16Fp8,
    /// gfx1201 `v_wmma_i32_16x16x16_iu8` (wave32) with signed A and B: A,B `<8 x i8>` (handed
    /// to the intrinsic as `<2 x i32>`), C `<8 x i32>`; no clamp, the accumulation wraps.
    Wmma16x16x16I8,
    /// gfx1250 `v_wmma_i32_16x16x64_iu8` (wave32) with signed A and B: A,B `<32 x i8>` (handed
    /// to the intrinsic as `<8 x i32>`), C `<8 x i32>`; the accumulation wraps.
    Wmma16x16x64I8,
    /// sm_90 `mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32` (PTX ISA 8.4): A
    /// `<16 x e4m3fn>`, B `<8 x e4m3fn>` (in 4 and 2 32-bit registers, element 0 in the low
    /// byte), C `<4 x f32>`.
    MmaM16N8K32E4M3,
    /// sm_90 `mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32` (PTX ISA 8.4): A
    /// `<16 x e5m2>`, B `<8 x e5m2>`, C `<4 x f32>`.
    MmaM16N8K32E5M2,
    /// sm_90 `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32` (no `.satfinite`: the
    /// accumulation wraps): A `<16 x i8>`, B `<8 x i8>`, C `<4 x i32>`.
    MmaM16N8K32S8,
}

impl MmaAtom {
    /// Every atom, in declaration order.
    ///
    /// ```
    /// use flydsl_ir::{MmaAtom, Target};
    /// // Every atom exists on at least one target.
    /// assert!(MmaAtom::ALL.iter().all(|a| Target::ALL.iter().any(|&t| a.supported_on(t))));
    /// ```
    pub const ALL: [MmaAtom; 27] = {
        use MmaAtom::*;
        [
            Mfma16x16x16F16,
            Mfma16x16x16Bf16,
            Mfma32x32x8F16,
            Mfma32x32x8Bf16,
            Mfma16x16x32Fp8,
            Mfma16x16x32I8,
            Mfma16x16x32F16,
            Mfma16x16x32Bf16,
            Wmma16x16x16F16,
            Wmma16x16x16Bf16,
            Wmma16x16x32F16,
            Wmma16x16x32Bf16,
            Wmma16x16x64Fp8,
            Wmma16x16x128Fp8,
            MfmaScale16x16x128Fp8,
            MmaM16N8K16F16,
            MmaM16N8K16Bf16,
            Mfma32x32x16F16,
            Mfma32x32x16Bf16,
            Mfma32x32x16Fp8,
            Mfma16x16x64I8,
            Wmma16x16x16Fp8,
            Wmma16x16x16I8,
            Wmma16x16x64I8,
            MmaM16N8K32E4M3,
            MmaM16N8K32E5M2,
            MmaM16N8K32S8,
        ]
    };
    /// (M, N, K) of the tile one wave computes.
    pub fn shape(self) -> (u32, u32, u32) {
        use MmaAtom::*;
        match self {
            Mfma16x16x16F16 | Mfma16x16x16Bf16 | Wmma16x16x16F16 | Wmma16x16x16Bf16 => (16, 16, 16),
            Mfma32x32x8F16 | Mfma32x32x8Bf16 => (32, 32, 8),
            Mfma16x16x32Fp8 | Mfma16x16x32I8 | Mfma16x16x32F16 | Mfma16x16x32Bf16 => (16, 16, 32),
            Wmma16x16x32F16 | Wmma16x16x32Bf16 => (16, 16, 32),
            Wmma16x16x64Fp8 => (16, 16, 64),
            Wmma16x16x128Fp8 => (16, 16, 128),
            MfmaScale16x16x128Fp8 => (16, 16, 128),
            MmaM16N8K16F16 | MmaM16N8K16Bf16 => (16, 8, 16),
            Mfma32x32x16F16 | Mfma32x32x16Bf16 | Mfma32x32x16Fp8 => (32, 32, 16),
            Mfma16x16x64I8 | Wmma16x16x64I8 => (16, 16, 64),
            Wmma16x16x16Fp8 | Wmma16x16x16I8 => (16, 16, 16),
            MmaM16N8K32E4M3 | MmaM16N8K32E5M2 | MmaM16N8K32S8 => (16, 8, 32),
        }
    }
    /// Element type of A and B on `target` (fp8 follows the target's native format).
    pub fn in_type(self, target: Target) -> ScalarType {
        use MmaAtom::*;
        match self {
            Mfma16x16x16F16 | Mfma32x32x8F16 | Mfma16x16x32F16 | Mfma32x32x16F16
            | Wmma16x16x16F16 | Wmma16x16x32F16 | MmaM16N8K16F16 => ScalarType::F16,
            Mfma16x16x16Bf16 | Mfma32x32x8Bf16 | Mfma16x16x32Bf16 | Mfma32x32x16Bf16
            | Wmma16x16x16Bf16 | Wmma16x16x32Bf16 | MmaM16N8K16Bf16 => ScalarType::BF16,
            Mfma16x16x32Fp8
            | Mfma32x32x16Fp8
            | Wmma16x16x16Fp8
            | Wmma16x16x64Fp8
            | Wmma16x16x128Fp8
            | MfmaScale16x16x128Fp8 => target.native_fp8_e4m3(),
            MmaM16N8K32E4M3 => ScalarType::F8E4M3FN,
            MmaM16N8K32E5M2 => ScalarType::F8E5M2,
            Mfma16x16x32I8 | Mfma16x16x64I8 | Wmma16x16x16I8 | Wmma16x16x64I8 | MmaM16N8K32S8 => {
                ScalarType::I8
            }
        }
    }
    /// Whether A and B are signed 8-bit integers with an `i32` accumulator (which wraps
    /// modulo 2^32) rather than floats with an `f32` accumulator.
    ///
    /// ```
    /// use flydsl_ir::{MmaAtom, ScalarType};
    /// assert!(MmaAtom::MmaM16N8K32S8.is_integer());
    /// assert_eq!(MmaAtom::MmaM16N8K32S8.acc_type(), ScalarType::I32);
    /// assert!(!MmaAtom::MmaM16N8K32E4M3.is_integer());
    /// ```
    pub fn is_integer(self) -> bool {
        use MmaAtom::*;
        matches!(
            self,
            Mfma16x16x32I8 | Mfma16x16x64I8 | Wmma16x16x16I8 | Wmma16x16x64I8 | MmaM16N8K32S8
        )
    }
    /// Accumulator element type.
    pub fn acc_type(self) -> ScalarType {
        if self.is_integer() {
            ScalarType::I32
        } else {
            ScalarType::F32
        }
    }
    /// Per-lane element counts of (A, B, C) on a wave of `wave` lanes.
    pub fn frag_lanes(self, wave: u32) -> (u32, u32, u32) {
        let (m, n, k) = self.shape();
        (m * k / wave, k * n / wave, m * n / wave)
    }
    /// Types of the (A, B, C/D) operands per lane.
    pub fn operand_types(self, target: Target) -> (Type, Type, Type) {
        let (a, b, c) = self.frag_lanes(target.wave_size());
        let it = self.in_type(target);
        (
            Type::vec(it, a),
            Type::vec(it, b),
            Type::vec(self.acc_type(), c),
        )
    }
    /// Whether `target` has this instruction.
    pub fn supported_on(self, target: Target) -> bool {
        use MmaAtom::*;
        match self {
            Mfma16x16x16F16 | Mfma16x16x16Bf16 | Mfma32x32x8F16 | Mfma32x32x8Bf16
            | Mfma16x16x32Fp8 | Mfma16x16x32I8 | Mfma32x32x16Fp8 => {
                matches!(target, Target::Gfx942 | Target::Gfx950)
            }
            Mfma16x16x32F16 | Mfma16x16x32Bf16 | Mfma32x32x16F16 | Mfma32x32x16Bf16
            | Mfma16x16x64I8 => target == Target::Gfx950,
            Wmma16x16x16F16 | Wmma16x16x16Bf16 | Wmma16x16x16Fp8 | Wmma16x16x16I8 => {
                target == Target::Gfx1201
            }
            Wmma16x16x32F16 | Wmma16x16x32Bf16 | Wmma16x16x64Fp8 | Wmma16x16x128Fp8
            | Wmma16x16x64I8 => target == Target::Gfx1250,
            MfmaScale16x16x128Fp8 => target == Target::Gfx950,
            MmaM16N8K16F16 | MmaM16N8K16Bf16 | MmaM16N8K32E4M3 | MmaM16N8K32E5M2
            | MmaM16N8K32S8 => target == Target::Sm90,
        }
    }
    /// Whether the atom takes per-block E8M0 scales (used only through
    /// [`OpKind::MmaScaled`], never through [`OpKind::Mma`]).
    pub fn is_scaled(self) -> bool {
        self == MmaAtom::MfmaScale16x16x128Fp8
    }
    /// The preferred 8-bit-input atom of a target that [`OpKind::Mma`] issues: signed int8
    /// (`int`, s32 accumulation) or the target's fp8 E4M3 ([`Target::native_fp8_e4m3`]:
    /// FNUZ on gfx942, OCP elsewhere; f32 accumulation). K per atom: 32 on gfx942, gfx950
    /// fp8 and sm_90; 64 for gfx950 int8 and gfx1250; 16 on gfx1201.
    ///
    /// ```
    /// use flydsl_ir::{MmaAtom, Target};
    /// for t in Target::ALL {
    ///     for int in [false, true] {
    ///         let a = MmaAtom::native_8bit(t, int);
    ///         assert!(a.supported_on(t) && !a.is_scaled());
    ///     }
    /// }
    /// assert_eq!(MmaAtom::native_8bit(Target::Gfx950, true).shape(), (16, 16, 64));
    /// ```
    pub fn native_8bit(target: Target, int: bool) -> MmaAtom {
        use MmaAtom::*;
        match (target, int) {
            (Target::Gfx942 | Target::Gfx950, false) => Mfma16x16x32Fp8,
            (Target::Gfx942, true) => Mfma16x16x32I8,
            (Target::Gfx950, true) => Mfma16x16x64I8,
            (Target::Gfx1201, false) => Wmma16x16x16Fp8,
            (Target::Gfx1201, true) => Wmma16x16x16I8,
            (Target::Gfx1250, false) => Wmma16x16x64Fp8,
            (Target::Gfx1250, true) => Wmma16x16x64I8,
            (Target::Sm90, false) => MmaM16N8K32E4M3,
            (Target::Sm90, true) => MmaM16N8K32S8,
        }
    }
    /// The preferred 16-bit-input atom of a target, for `f16` or `bf16` inputs.
    pub fn native_16bit(target: Target, bf16: bool) -> MmaAtom {
        use MmaAtom::*;
        match (target, bf16) {
            (Target::Gfx942, false) => Mfma16x16x16F16,
            (Target::Gfx942, true) => Mfma16x16x16Bf16,
            (Target::Gfx950, false) => Mfma16x16x32F16,
            (Target::Gfx950, true) => Mfma16x16x32Bf16,
            (Target::Gfx1201, false) => Wmma16x16x16F16,
            (Target::Gfx1201, true) => Wmma16x16x16Bf16,
            (Target::Gfx1250, false) => Wmma16x16x32F16,
            (Target::Gfx1250, true) => Wmma16x16x32Bf16,
            (Target::Sm90, false) => MmaM16N8K16F16,
            (Target::Sm90, true) => MmaM16N8K16Bf16,
        }
    }
}

/// Memory-access hints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemFlags {
    /// Alignment in bytes the access may assume (e.g. 16 for 128-bit vector access).
    pub align: u32,
    /// Non-temporal (streaming) hint.
    pub nontemporal: bool,
    /// Keep-in-L2 hint for global and buffer loads: the lines read are the last the L2
    /// evicts (NVPTX: an `L2::evict_last` cache policy on the load). A hint only, with no
    /// effect on results; AMD targets and stores ignore it.
    #[serde(default)]
    pub keep_l2: bool,
}

/// The operations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum OpKind {
    /// A constant of the result type (scalar, or splatted into a vector).
    Const(Const),
    /// Thread-geometry query (i32).
    Special(Special),
    /// Elementwise binary op; operands and result share a type.
    Binary(BinOp, ValueId, ValueId),
    /// Elementwise unary op.
    Unary(UnOp, ValueId),
    /// Fused multiply-add a*b+c (floats).
    Fma(ValueId, ValueId, ValueId),
    /// Elementwise compare; result is i1 (or a vector of i1).
    Cmp(CmpPred, ValueId, ValueId),
    /// `cond ? a : b` (cond i1 scalar, or a vector matching a/b).
    Select(ValueId, ValueId, ValueId),
    /// Conversion to the result type.
    Cast(CastKind, ValueId),
    /// Broadcast a scalar into the result vector.
    Splat(ValueId),
    /// Element `index` of a vector.
    Extract(ValueId, u32),
    /// Copy of a vector with element `index` replaced.
    Insert(ValueId, ValueId, u32),
    /// A vector built from scalars, in order.
    Build(Vec<ValueId>),
    /// Elements `[start, start + result lanes)` of a vector.
    Slice(ValueId, u32),
    /// Pointer to the first element of an LDS array.
    LdsBase(u32),
    /// Pointer into the dynamic LDS region at the i32 byte offset operand (keep it a multiple
    /// of the result's element size); the pointer's element type is the result's. Needs
    /// [`Kernel::dynamic_lds`].
    DynLdsBase(ValueId),
    /// `ptr + index` elements (index i32 or i64).
    PtrAdd(ValueId, ValueId),
    /// Load of the result type from `ptr[index]` (index counts pointer elements; a vector load
    /// reads `lanes` consecutive elements).
    Load {
        /// Pointer.
        ptr: ValueId,
        /// Element index (i32 or i64).
        index: ValueId,
        /// Hints.
        flags: MemFlags,
    },
    /// Store `value` at `ptr[index]`.
    Store {
        /// Pointer.
        ptr: ValueId,
        /// Element index.
        index: ValueId,
        /// Value (scalar or vector of the pointer's element type).
        value: ValueId,
        /// Hints.
        flags: MemFlags,
    },
    /// Make a buffer resource over `ptr` with `num_elems` (i64) valid elements.
    MakeRsrc {
        /// Base pointer (global).
        ptr: ValueId,
        /// Valid element count (i64).
        num_elems: ValueId,
    },
    /// Buffer load at element `index` (i32); elements out of range read as 0.
    BufferLoad {
        /// Resource.
        rsrc: ValueId,
        /// Element index (i32).
        index: ValueId,
        /// Hints.
        flags: MemFlags,
    },
    /// Buffer store at element `index` (i32); out-of-range elements are dropped.
    BufferStore {
        /// Resource.
        rsrc: ValueId,
        /// Element index (i32).
        index: ValueId,
        /// Value.
        value: ValueId,
        /// Hints.
        flags: MemFlags,
    },
    /// Atomic add to `ptr[index]`, returning the old value (f32 or i32, relaxed, device scope).
    AtomicAdd {
        /// Pointer (global or shared).
        ptr: ValueId,
        /// Element index.
        index: ValueId,
        /// Addend.
        value: ValueId,
    },
    /// Release store of the `i32` flag `value` at `ptr[index]` (global memory) at **system
    /// scope**: every memory write this thread made before it (and, after a workgroup
    /// [`OpKind::Barrier`], those of its workgroup) is visible to any agent (another GPU, the
    /// host) that reads the flag with [`OpKind::FlagWait`]. Lowered to an LLVM
    /// `store atomic ... release` without a `syncscope` (system scope): `st.release.sys` on
    /// NVIDIA, `buffer_wbl2 sc0 sc1` + a store with `sc0 sc1` on gfx942/gfx950.
    FlagStore {
        /// Pointer (global, `i32` elements).
        ptr: ValueId,
        /// Element index (i32 or i64).
        index: ValueId,
        /// The flag value (`i32`).
        value: ValueId,
    },
    /// Poll the `i32` at `ptr[index]` (global memory) with system-scope acquire loads until it
    /// equals `expect` or more than `timeout` (`i64`) ticks of the target's steady counter
    /// ([`Target::steady_counter_hz`]) have passed since the first poll. The result (`i1`)
    /// is true when the value was seen; then every write the agent that stored it with
    /// [`OpKind::FlagStore`] made before that store is visible to this thread. Each lane
    /// polls its own address; the op returns when every active lane is done. Lowered to a
    /// loop of `load atomic ... acquire` (system scope: `ld.acquire.sys` on NVIDIA, a load
    /// with `sc0 sc1` then `buffer_inv sc0 sc1` on gfx942/gfx950) and reads of
    /// `llvm.readsteadycounter` (`%globaltimer`, `s_memrealtime`). The Sim polls the memory
    /// of every Sim device it can reach and measures the timeout in host time.
    FlagWait {
        /// Pointer (global, `i32` elements).
        ptr: ValueId,
        /// Element index (i32 or i64).
        index: ValueId,
        /// The value waited for (`i32`).
        expect: ValueId,
        /// The bound of the wait in steady-counter ticks (`i64`).
        timeout: ValueId,
    },
    /// System-scope release fence of this thread: its earlier memory writes are complete
    /// (visible to every agent that synchronizes with a later release of this workgroup)
    /// before its later ones. Followed by a workgroup [`OpKind::Barrier`] and one lane's
    /// [`OpKind::FlagStore`], it publishes the whole workgroup's writes on targets whose
    /// workgroup barrier does not wait for global stores to complete (gfx942/gfx950: LLVM
    /// `fence release`, `buffer_wbl2 sc0 sc1` + `s_waitcnt vmcnt(0)`). On NVIDIA, where a
    /// `bar.sync` already makes a later system-scope release cumulative, kernels need not
    /// use it (it lowers to `fence.acq_rel.sys` there).
    FenceRelease,
    /// Workgroup barrier (also orders LDS and global memory within the workgroup).
    Barrier,
    /// Cross-lane shuffle of a 32-bit value (i32 or f32) within the wave.
    Shuffle(ShuffleMode, ValueId, ValueId),
    /// Value of the first active lane (wave-uniform result).
    ReadFirstLane(ValueId),
    /// Matrix-core atom `D = A*B + C`.
    Mma(MmaAtom, ValueId, ValueId, ValueId),
    /// Block-scaled matrix-core atom `MmaScaled(atom, a, b, c, scale_a, scale_b)`:
    /// `D = C + sum over K-blocks of 32 of scaleA(row, blk) * scaleB(col, blk) * (A_blk * B_blk)`
    /// for a scaled atom ([`MmaAtom::is_scaled`]). `scale_a` / `scale_b` are `i32` per lane,
    /// each holding four E8M0 bytes (value `2^(s-127)`, `0xFF` = NaN). The byte selector
    /// (`opsel`) is fixed to 0: only byte 0 (bits 0..8) of each lane's word is used. For
    /// `MfmaScale16x16x128Fp8`, lane `l` supplies the scale of A row `l % 16` (B column
    /// `l % 16`) for K-block `l / 16`.
    MmaScaled(MmaAtom, ValueId, ValueId, ValueId, ValueId, ValueId),
    /// Structured if: runs `then` or `else`, each ending in a `Yield` of the results.
    If {
        /// i1 condition.
        cond: ValueId,
        /// Taken when true.
        then_block: Block,
        /// Taken when false.
        else_block: Block,
    },
    /// Structured counted loop `for iv in (lb..ub).step_by(step)` with loop-carried values.
    /// `lb`, `ub`, `step` and the induction variable share one type, `i32` or `i64`. The
    /// body's args are `[iv, carried...]`; it ends with a `Yield` of the next carried values;
    /// the op's results are the final carried values (the initial ones when the body never
    /// runs).
    ///
    /// Contract (what the Sim executes and both lowerings emit), in the bounds' type:
    /// - the body runs first with `iv = lb` if `lb < ub` (signed), else never;
    /// - after a run with `iv`, it runs again with `iv + step` if `iv + step < ub` as exact
    ///   integers, with no overflow: the loop ends correctly for any `ub` up to the type's
    ///   maximum (a loop from `i32::MAX - 10` to `i32::MAX` by 4 runs 3 times) and `iv` never
    ///   wraps. (The lowering steps `iv` by `umin(step, ub - iv)`, the difference unsigned, so
    ///   it lands on `ub` instead of wrapping; the Sim tests `ub - iv > step`, unsigned.)
    /// - `step` must be > 0 whenever the body runs. A step of 0 never ends and a negative
    ///   step runs the body once on hardware; the Sim reports both as a fault.
    For {
        /// Lower bound.
        lb: ValueId,
        /// Upper bound (exclusive).
        ub: ValueId,
        /// Step (> 0).
        step: ValueId,
        /// Initial carried values.
        init: Vec<ValueId>,
        /// Body.
        body: Block,
    },
    /// Ends a region, passing values to the enclosing op's results.
    Yield(Vec<ValueId>),
    /// The i32 LDS address of an LDS pointer: its byte offset in the workgroup's LDS window
    /// (what hardware address computations such as swizzles and wgmma descriptors see).
    LdsAddr(ValueId),
    /// An NVIDIA Hopper op ([`crate::NvOp`]; sm_90 only).
    Nv(crate::NvOp),
    /// An AMD-only operation (pipeline primitives); each [`AmdOp`] variant documents its
    /// contract and [`AmdOp::targets`] where it exists.
    Amd(crate::AmdOp),
}
