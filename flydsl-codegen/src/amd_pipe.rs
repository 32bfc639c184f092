//! Lowering of the AMD-only pipeline primitives ([`AmdOp`]): the LDS-only barrier, explicit
//! vector-memory waits, scheduling controls, direct-to-LDS loads, gfx950 transposing reads,
//! gfx1250 TDM, DPP, hardware fp8 pack/unpack and the permlane moves. The verifier has
//! already checked that the op exists on the kernel's target (an AMD one).

use super::func::Func;
use super::ty;
use super::LowerError;
use flydsl_ir::{AmdOp, ScalarType, Target, Type, ValueId};

/// The MMRA tag that restricts a fence to LDS (LLVM AMDGPUUsage, "Memory Model Relaxation
/// Annotations"): the memory legalizer then waits on LDS counters only, plus the wave's own
/// pending direct-to-LDS loads.
const LDS_ONLY: &str = "!{!\"amdgpu-synchronize-as\", !\"local\"}";

/// Lower one AMD-only op; `results` are its result values (the verifier checked their
/// number and types).
pub(crate) fn lower(f: &mut Func, op: &AmdOp, results: &[ValueId]) -> Result<(), LowerError> {
    match *op {
        AmdOp::LdsBarrier => {
            let m = f.metadata(LDS_ONLY);
            f.emit(format!("fence syncscope(\"workgroup\") release, !mmra {m}"));
            f.call("void", "llvm.amdgcn.s.barrier", &[]);
            f.emit(format!("fence syncscope(\"workgroup\") acquire, !mmra {m}"));
        }
        AmdOp::WaitVmcnt(n) => wait_vmcnt(f, n),
        AmdOp::SchedBarrier(mask) => {
            f.call(
                "void",
                "llvm.amdgcn.sched.barrier",
                &[("i32", &mask.to_string())],
            );
        }
        AmdOp::SchedGroupBarrier {
            mask,
            size,
            sync_id,
        } => {
            let (m, s, i) = (mask.to_string(), size.to_string(), sync_id.to_string());
            f.call(
                "void",
                "llvm.amdgcn.sched.group.barrier",
                &[("i32", &m), ("i32", &s), ("i32", &i)],
            );
        }
        AmdOp::SetPrio(p) => {
            f.call("void", "llvm.amdgcn.s.setprio", &[("i16", &p.to_string())]);
        }
        AmdOp::BufferLoadToLds {
            rsrc,
            index,
            lds,
            bytes,
        } => {
            let (r, rt) = f.get_t(rsrc)?;
            let Type::BufferRsrc(e) = rt else {
                return Err(f.err(format!("expected a buffer resource, got {rt}")));
            };
            let idx = f.get(index)?;
            let l = f.get(lds)?;
            let off = f.inst(format!("mul i32 {idx}, {}", e.size_bytes()));
            f.call(
                "void",
                "llvm.amdgcn.raw.ptr.buffer.load.lds",
                &[
                    ("ptr addrspace(8)", &r),
                    ("ptr addrspace(3)", &l),
                    ("i32", &bytes.to_string()),
                    ("i32", &off),
                    ("i32", "0"),
                    ("i32", "0"),
                    ("i32", "0"),
                ],
            );
        }
        AmdOp::LdsReadTr16 { ptr, index } => {
            let [r] = results else {
                return Err(f.err(format!("expects 1 result, has {}", results.len())));
            };
            let (p, pt) = f.get_t(ptr)?;
            let Type::Ptr(_, e) = pt else {
                return Err(f.err(format!("expected an LDS pointer, got {pt}")));
            };
            let (i, it) = f.get_t(index)?;
            let il = f.lty(it);
            let addr = f.inst(format!(
                "getelementptr {}, ptr addrspace(3) {p}, {il} {i}",
                ty::mem_scalar(e)
            ));
            let suffix = match e {
                ScalarType::F16 => "v4f16",
                ScalarType::BF16 => "v4bf16",
                _ => "v4i16",
            };
            let vt = f.lty(Type::vec(e, 4));
            let v = f.call(
                &vt,
                &format!("llvm.amdgcn.ds.read.tr16.b64.{suffix}"),
                &[("ptr addrspace(3)", &addr)],
            );
            f.def(*r, v);
        }
        AmdOp::TensorLoadToLds { ref groups } => {
            let mut args: Vec<(String, String)> = Vec::new();
            for &g in groups {
                let (v, t) = f.get_t(g)?;
                args.push((f.lty(t), v));
            }
            args.push(("i32".into(), "0".into()));
            let name = if groups.len() == 2 {
                "llvm.amdgcn.tensor.load.to.lds.d2"
            } else {
                "llvm.amdgcn.tensor.load.to.lds"
            };
            let a: Vec<(&str, &str)> = args.iter().map(|(t, v)| (t.as_str(), v.as_str())).collect();
            f.call("void", name, &a);
        }
        AmdOp::Dpp { value, ctrl } => {
            let [r] = results else {
                return Err(f.err(format!("expects 1 result, has {}", results.len())));
            };
            let code = ctrl.encode().map_err(|e| f.err(e))?;
            let (x, t) = f.get_t(value)?;
            let xi = f.bitcast_to_i32(&x, t);
            let c = code.to_string();
            // old = the value itself and bound_ctrl off: a lane whose source is outside its
            // row keeps its own value.
            let v = f.call(
                "i32",
                "llvm.amdgcn.update.dpp.i32",
                &[
                    ("i32", &xi),
                    ("i32", &xi),
                    ("i32", &c),
                    ("i32", "15"),
                    ("i32", "15"),
                    ("i1", "false"),
                ],
            );
            let v = f.bitcast_from_i32(v, t);
            f.def(*r, v);
        }
        AmdOp::CvtPkFp8 { a, b, old, hi, to } => {
            let [r] = results else {
                return Err(f.err(format!("expects 1 result, has {}", results.len())));
            };
            let max = fp8_max(to).ok_or_else(|| f.err(format!("{to} is not an fp8 type")))?;
            let (xa, xb, o) = (f.get(a)?, f.get(b)?, f.get(old)?);
            let ca = clamp(f, &xa, max);
            let cb = clamp(f, &xb, max);
            let name = format!("llvm.amdgcn.cvt.pk.{}.f32", fp8_kind(to));
            let v = f.call(
                "i32",
                &name,
                &[
                    ("float", &ca),
                    ("float", &cb),
                    ("i32", &o),
                    ("i1", if hi { "true" } else { "false" }),
                ],
            );
            f.def(*r, v);
        }
        AmdOp::CvtPkF32Fp8 { src, hi, from } => {
            let [r] = results else {
                return Err(f.err(format!("expects 1 result, has {}", results.len())));
            };
            let x = f.get(src)?;
            let name = format!("llvm.amdgcn.cvt.pk.f32.{}", fp8_kind(from));
            let v = f.call(
                "<2 x float>",
                &name,
                &[("i32", &x), ("i1", if hi { "true" } else { "false" })],
            );
            f.def(*r, v);
        }
        AmdOp::PermlaneSwap { a, b, rows } => {
            let [ra, rb] = results else {
                return Err(f.err(format!("expects 2 results, has {}", results.len())));
            };
            let (xa, t) = f.get_t(a)?;
            let xb = f.get(b)?;
            let (ia, ib) = (f.bitcast_to_i32(&xa, t), f.bitcast_to_i32(&xb, t));
            let pair = f.call(
                "{i32, i32}",
                &format!("llvm.amdgcn.permlane{rows}.swap"),
                &[("i32", &ia), ("i32", &ib), ("i1", "false"), ("i1", "false")],
            );
            let na = f.inst(format!("extractvalue {{i32, i32}} {pair}, 0"));
            let nb = f.inst(format!("extractvalue {{i32, i32}} {pair}, 1"));
            let na = f.bitcast_from_i32(na, t);
            let nb = f.bitcast_from_i32(nb, t);
            f.def(*ra, na);
            f.def(*rb, nb);
        }
        AmdOp::PermlaneX16 { value, sel } => {
            let [r] = results else {
                return Err(f.err(format!("expects 1 result, has {}", results.len())));
            };
            let (x, t) = f.get_t(value)?;
            let xi = f.bitcast_to_i32(&x, t);
            let (lo, hi) = (
                (sel as u32 as i32).to_string(),
                ((sel >> 32) as u32 as i32).to_string(),
            );
            // old = the value itself; fi and bound_ctrl off (every lane is active).
            let v = f.call(
                "i32",
                "llvm.amdgcn.permlanex16.i32",
                &[
                    ("i32", &xi),
                    ("i32", &xi),
                    ("i32", &lo),
                    ("i32", &hi),
                    ("i1", "false"),
                    ("i1", "false"),
                ],
            );
            let v = f.bitcast_from_i32(v, t);
            f.def(*r, v);
        }
        AmdOp::WaitTensorcnt(n) => {
            f.call(
                "void",
                "llvm.amdgcn.s.wait.tensorcnt",
                &[("i16", &n.to_string())],
            );
        }
    }
    Ok(())
}

/// `fp8` or `bf8` (E5M2) in the conversion intrinsics' names.
fn fp8_kind(t: ScalarType) -> &'static str {
    match t {
        ScalarType::F8E5M2 | ScalarType::F8E5M2FNUZ => "bf8",
        _ => "fp8",
    }
}

/// The largest finite value of an fp8 type.
fn fp8_max(t: ScalarType) -> Option<f64> {
    match t {
        ScalarType::F8E4M3FN => Some(448.0),
        ScalarType::F8E4M3FNUZ => Some(240.0),
        ScalarType::F8E5M2 | ScalarType::F8E5M2FNUZ => Some(57344.0),
        _ => None,
    }
}

/// `x` clamped to `[-max, max]`, NaN kept (`llvm.minimum` / `llvm.maximum` propagate NaN).
fn clamp(f: &mut Func, x: &str, max: f64) -> String {
    let hi = format!("0x{:016X}", max.to_bits());
    let lo = format!("0x{:016X}", (-max).to_bits());
    let m = f.call("float", "llvm.minimum.f32", &[("float", x), ("float", &hi)]);
    f.call(
        "float",
        "llvm.maximum.f32",
        &[("float", &m), ("float", &lo)],
    )
}

/// `s_waitcnt vmcnt(n)` on gfx9 (the other counters left at their "no wait" maximum:
/// vmcnt bits 3:0 and 15:14, expcnt 6:4 = 7, lgkmcnt 11:8 = 15), `s_wait_loadcnt n` on gfx12.
fn wait_vmcnt(f: &mut Func, n: u32) {
    match f.target {
        Target::Gfx942 | Target::Gfx950 => {
            let imm = (n & 0xf) | ((n >> 4) & 0x3) << 14 | 0x7 << 4 | 0xf << 8;
            f.call(
                "void",
                "llvm.amdgcn.s.waitcnt",
                &[("i32", &imm.to_string())],
            );
        }
        _ => {
            f.call(
                "void",
                "llvm.amdgcn.s.wait.loadcnt",
                &[("i16", &n.to_string())],
            );
        }
    }
}
