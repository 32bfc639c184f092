//! Matrix-core atoms: MFMA (gfx942/gfx950, including the gfx950 block-scaled MFMA), WMMA
//! (gfx1201/gfx1250; 16-bit, fp8 and signed int8) and `mma.sync` (sm_90: f16/bf16 m16n8k16,
//! e4m3/e5m2/s8 m16n8k32), with the operand re-typing each LLVM 22 intrinsic expects.

use super::func::Func;
use super::{vector, LowerError};
use flydsl_ir::{MmaAtom, ValueId};

/// How the A/B operands are handed to the intrinsic.
enum Operand {
    /// As they are.
    Same,
    /// Bitcast to this type (bf16 as i16 lanes, 8 x 8-bit as i64).
    Cast(&'static str),
}

/// Lower `Mma`.
pub(crate) fn lower(
    f: &mut Func,
    atom: MmaAtom,
    a: ValueId,
    b: ValueId,
    c: ValueId,
) -> Result<String, LowerError> {
    if !atom.supported_on(f.target) {
        return Err(f.err(format!(
            "matrix atom {atom:?} does not exist on {}",
            f.target
        )));
    }
    let (ta, tb, tc) = atom.operand_types(f.target);
    let (xa, xb, xc) = (f.get(a)?, f.get(b)?, f.get(c)?);
    for (v, want) in [(a, ta), (b, tb), (c, tc)] {
        if f.ty(v)? != want {
            return Err(f.err(format!(
                "{atom:?} operand %{} is {}, expected {want}",
                v.0,
                f.ty(v)?
            )));
        }
    }
    let (la, lb, lc) = (f.lty(ta), f.lty(tb), f.lty(tc));
    use MmaAtom::*;
    if let Some(form) = SyncForm::of(atom) {
        return mma_sync(f, form, (&xa, &la), (&xb, &lb), (&xc, &lc));
    }
    let (name, operand, form) = match atom {
        Mfma16x16x16F16 => (
            "llvm.amdgcn.mfma.f32.16x16x16f16",
            Operand::Same,
            Form::Mfma,
        ),
        Mfma16x16x16Bf16 => (
            "llvm.amdgcn.mfma.f32.16x16x16bf16.1k",
            Operand::Cast("<4 x i16>"),
            Form::Mfma,
        ),
        Mfma32x32x8F16 => ("llvm.amdgcn.mfma.f32.32x32x8f16", Operand::Same, Form::Mfma),
        Mfma32x32x8Bf16 => (
            "llvm.amdgcn.mfma.f32.32x32x8bf16.1k",
            Operand::Cast("<4 x i16>"),
            Form::Mfma,
        ),
        Mfma16x16x32Fp8 => (
            "llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8",
            Operand::Cast("i64"),
            Form::Mfma,
        ),
        Mfma16x16x32I8 => (
            "llvm.amdgcn.mfma.i32.16x16x32.i8",
            Operand::Cast("i64"),
            Form::Mfma,
        ),
        Mfma16x16x32F16 => (
            "llvm.amdgcn.mfma.f32.16x16x32.f16",
            Operand::Same,
            Form::Mfma,
        ),
        Mfma16x16x32Bf16 => (
            "llvm.amdgcn.mfma.f32.16x16x32.bf16",
            Operand::Same,
            Form::Mfma,
        ),
        Wmma16x16x16F16 => (
            "llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v8f16",
            Operand::Same,
            Form::Wmma12,
        ),
        Wmma16x16x16Bf16 => (
            "llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v8i16",
            Operand::Cast("<8 x i16>"),
            Form::Wmma12,
        ),
        Wmma16x16x32F16 => (
            "llvm.amdgcn.wmma.f32.16x16x32.f16.v8f32.v16f16",
            Operand::Same,
            Form::Wmma1250,
        ),
        Wmma16x16x32Bf16 => (
            "llvm.amdgcn.wmma.f32.16x16x32.bf16.v8f32.v16bf16",
            Operand::Same,
            Form::Wmma1250,
        ),
        Wmma16x16x64Fp8 => (
            "llvm.amdgcn.wmma.f32.16x16x64.fp8.fp8.v8f32.v8i32",
            Operand::Cast("<8 x i32>"),
            Form::Wmma1250Int,
        ),
        Wmma16x16x128Fp8 => (
            "llvm.amdgcn.wmma.f32.16x16x128.fp8.fp8.v8f32.v16i32",
            Operand::Cast("<16 x i32>"),
            Form::Wmma1250Int,
        ),
        Mfma32x32x16F16 => (
            "llvm.amdgcn.mfma.f32.32x32x16.f16",
            Operand::Same,
            Form::Mfma,
        ),
        Mfma32x32x16Bf16 => (
            "llvm.amdgcn.mfma.f32.32x32x16.bf16",
            Operand::Same,
            Form::Mfma,
        ),
        Mfma32x32x16Fp8 => (
            "llvm.amdgcn.mfma.f32.32x32x16.fp8.fp8",
            Operand::Cast("i64"),
            Form::Mfma,
        ),
        Mfma16x16x64I8 => (
            "llvm.amdgcn.mfma.i32.16x16x64.i8",
            Operand::Cast("<4 x i32>"),
            Form::Mfma,
        ),
        Wmma16x16x16Fp8 => (
            "llvm.amdgcn.wmma.f32.16x16x16.fp8.fp8.v8f32.v2i32",
            Operand::Cast("<2 x i32>"),
            Form::Wmma12,
        ),
        Wmma16x16x16I8 => (
            "llvm.amdgcn.wmma.i32.16x16x16.iu8.v8i32.v2i32",
            Operand::Cast("<2 x i32>"),
            Form::Wmma12Iu8,
        ),
        Wmma16x16x64I8 => (
            "llvm.amdgcn.wmma.i32.16x16x64.iu8.v8i32.v8i32",
            Operand::Cast("<8 x i32>"),
            Form::Wmma1250Iu8,
        ),
        MfmaScale16x16x128Fp8 => {
            return Err(f.err(format!("{atom:?} is a scaled atom: use MmaScaled")))
        }
        MmaM16N8K16F16 | MmaM16N8K16Bf16 | MmaM16N8K32E4M3 | MmaM16N8K32E5M2 | MmaM16N8K32S8 => {
            return Err(f.err("unreachable mma.sync atom"))
        }
    };
    let (oa, ob, ot) = match operand {
        Operand::Same => (xa, xb, la.clone()),
        Operand::Cast(t) => {
            let oa = f.inst(format!("bitcast {la} {xa} to {t}"));
            let ob = f.inst(format!("bitcast {lb} {xb} to {t}"));
            (oa, ob, t.to_string())
        }
    };
    let ot = ot.as_str();
    let lc = lc.as_str();
    Ok(match form {
        Form::Mfma => f.call(
            lc,
            name,
            &[
                (ot, &oa),
                (ot, &ob),
                (lc, &xc),
                ("i32", "0"),
                ("i32", "0"),
                ("i32", "0"),
            ],
        ),
        Form::Wmma12 => f.call(lc, name, &[(ot, &oa), (ot, &ob), (lc, &xc)]),
        Form::Wmma12Iu8 => f.call(
            lc,
            name,
            &[
                ("i1", "true"),
                (ot, &oa),
                ("i1", "true"),
                (ot, &ob),
                (lc, &xc),
                ("i1", "false"),
            ],
        ),
        Form::Wmma1250Iu8 => f.call(
            lc,
            name,
            &[
                ("i1", "true"),
                (ot, &oa),
                ("i1", "true"),
                (ot, &ob),
                (lc, &xc),
                ("i1", "false"),
                ("i1", "false"),
            ],
        ),
        Form::Wmma1250 => f.call(
            lc,
            name,
            &[
                ("i1", "false"),
                (ot, &oa),
                ("i1", "false"),
                (ot, &ob),
                ("i16", "0"),
                (lc, &xc),
                ("i1", "false"),
                ("i1", "false"),
            ],
        ),
        Form::Wmma1250Int => f.call(
            lc,
            name,
            &[
                (ot, &oa),
                (ot, &ob),
                ("i16", "0"),
                (lc, &xc),
                ("i1", "false"),
                ("i1", "false"),
            ],
        ),
    })
}

/// Lower `MmaScaled` (gfx950 `v_mfma_scale_f32_16x16x128_f8f6f4`, fp8 A and B).
///
/// The call is `(A, B, C, i32 cbsz = 0 /*A fp8*/, i32 blgp = 0 /*B fp8*/, i32 opselA = 0,
/// scaleA, i32 opselB = 0, scaleB)`: opsel is fixed to 0, so byte 0 of each lane's scale
/// word is the E8M0 scale the hardware uses.
pub(crate) fn lower_scaled(
    f: &mut Func,
    atom: MmaAtom,
    [a, b, c, sa, sb]: [ValueId; 5],
) -> Result<String, LowerError> {
    if !atom.supported_on(f.target) {
        return Err(f.err(format!(
            "matrix atom {atom:?} does not exist on {}",
            f.target
        )));
    }
    let name = match atom {
        MmaAtom::MfmaScale16x16x128Fp8 => "llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.v8i32.v8i32",
        _ => return Err(f.err(format!("{atom:?} takes no scales: use Mma"))),
    };
    let (ta, tb, tc) = atom.operand_types(f.target);
    let i32t = flydsl_ir::Type::s(flydsl_ir::ScalarType::I32);
    for (v, want) in [(a, ta), (b, tb), (c, tc), (sa, i32t), (sb, i32t)] {
        if f.ty(v)? != want {
            return Err(f.err(format!(
                "{atom:?} operand %{} is {}, expected {want}",
                v.0,
                f.ty(v)?
            )));
        }
    }
    let (la, lb, lc) = (f.lty(ta), f.lty(tb), f.lty(tc));
    let (xa, xb, xc) = (f.get(a)?, f.get(b)?, f.get(c)?);
    let (xsa, xsb) = (f.get(sa)?, f.get(sb)?);
    let ot = "<8 x i32>";
    let oa = f.inst(format!("bitcast {la} {xa} to {ot}"));
    let ob = f.inst(format!("bitcast {lb} {xb} to {ot}"));
    let lc = lc.as_str();
    Ok(f.call(
        lc,
        name,
        &[
            (ot, &oa),
            (ot, &ob),
            (lc, &xc),
            ("i32", "0"),
            ("i32", "0"),
            ("i32", "0"),
            ("i32", &xsa),
            ("i32", "0"),
            ("i32", &xsb),
        ],
    ))
}

/// Argument conventions of the AMD matrix intrinsics.
enum Form {
    /// `(A, B, C, i32 cbsz, i32 abid, i32 blgp)`, modifiers 0.
    Mfma,
    /// gfx12 WMMA `(A, B, C)`.
    Wmma12,
    /// gfx1250 WMMA `(i1 negA, A, i1 negB, B, i16 modC, C, i1 reuseA, i1 reuseB)`, all 0.
    Wmma1250,
    /// gfx1250 8-bit WMMA `(A, B, i16 modC, C, i1 reuseA, i1 reuseB)`, all 0 (no neg bits).
    Wmma1250Int,
    /// gfx12 integer WMMA `(i1 signA, A, i1 signB, B, C, i1 clamp)`: signed A and B, no
    /// clamp (the i32 accumulation wraps).
    Wmma12Iu8,
    /// gfx1250 integer WMMA `(i1 signA, A, i1 signB, B, C, i1 reuseA, i1 reuseB)`: signed A
    /// and B, no reuse hints.
    Wmma1250Iu8,
}

/// An sm_90 `mma.sync` atom: its LLVM intrinsic and how its registers are typed.
struct SyncForm {
    /// The `llvm.nvvm.mma.*` intrinsic (LLVM 22 names; the fp8 forms need PTX ISA 8.4).
    name: &'static str,
    /// Registers of A and B: 32-bit words (`i32`) or pairs of halves (`<2 x half>`).
    reg: &'static str,
    /// Scalar type of C/D (`float` or `i32`).
    acc: &'static str,
}

impl SyncForm {
    fn of(atom: MmaAtom) -> Option<SyncForm> {
        use MmaAtom::*;
        let (name, reg, acc) = match atom {
            MmaM16N8K16F16 => (
                "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
                "<2 x half>",
                "float",
            ),
            MmaM16N8K16Bf16 => ("llvm.nvvm.mma.m16n8k16.row.col.bf16", "i32", "float"),
            MmaM16N8K32E4M3 => (
                "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32",
                "i32",
                "float",
            ),
            MmaM16N8K32E5M2 => (
                "llvm.nvvm.mma.m16n8k32.row.col.f32.e5m2.e5m2.f32",
                "i32",
                "float",
            ),
            MmaM16N8K32S8 => ("llvm.nvvm.mma.m16n8k32.row.col.s8", "i32", "i32"),
            _ => return None,
        };
        Some(SyncForm { name, reg, acc })
    }
}

/// sm_90 `mma.sync.aligned.{m16n8k16,m16n8k32}.row.col.*`: A in 4 and B in 2 32-bit registers
/// (element 0 in the low bits of register 0: halves as `<2 x half>` slices, everything else
/// through a bitcast to `<n x i32>`), C/D 4 `f32` or `i32` passed and returned as scalars.
fn mma_sync(
    f: &mut Func,
    form: SyncForm,
    (xa, la): (&str, &str),
    (xb, lb): (&str, &str),
    (xc, lc): (&str, &str),
) -> Result<String, LowerError> {
    let regs = |f: &mut Func, x: &str, lt: &str, n: u32| -> Vec<String> {
        if form.reg == "i32" {
            let v = f.inst(format!("bitcast {lt} {x} to <{n} x i32>"));
            (0..n)
                .map(|i| f.inst(format!("extractelement <{n} x i32> {v}, i64 {i}")))
                .collect()
        } else {
            (0..n)
                .map(|i| vector::slice_operand(f, x, lt, 2 * i, 2))
                .collect()
        }
    };
    let ra = regs(f, xa, la, 4);
    let rb = regs(f, xb, lb, 2);
    let rc: Vec<String> = (0..4)
        .map(|i| f.inst(format!("extractelement {lc} {xc}, i64 {i}")))
        .collect();
    let mut args: Vec<(&str, &str)> = Vec::new();
    for r in ra.iter().chain(rb.iter()) {
        args.push((form.reg, r));
    }
    for r in &rc {
        args.push((form.acc, r));
    }
    let st = format!("{{ {0}, {0}, {0}, {0} }}", form.acc);
    let d = f.call(&st, form.name, &args);
    let outs: Vec<String> = (0..4)
        .map(|i| f.inst(format!("extractvalue {st} {d}, {i}")))
        .collect();
    Ok(vector::build_operands(f, &outs, form.acc))
}
