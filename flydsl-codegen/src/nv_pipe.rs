//! NVIDIA Hopper ops ([`NvOp`]): mbarriers, TMA, wgmma, setmaxnreg and proxy fences, as
//! inline PTX (LLVM 22 has no `wgmma.mma_async` intrinsic, and inline PTX keeps the rest
//! independent of the intrinsics' signature drift); `cp.async` through the `llvm.nvvm.cp.async.*`
//! intrinsics (so LLVM knows their memory effects), `ldmatrix` / `stmatrix` as inline PTX. Every asm is `sideeffect` with a memory
//! clobber where it orders memory, and nothing here is a call: ptxas drops `setmaxnreg` and
//! serializes wgmma in kernels that make external calls.

use super::func::Func;
use super::LowerError;
use flydsl_ir::{NvOp, Op, ScalarType, Type, ValueId, WgmmaB};

/// The i32 shared-window address of an LDS pointer operand.
fn shared_addr(f: &mut Func, p: ValueId) -> Result<String, LowerError> {
    let p = f.get(p)?;
    Ok(f.inst(format!("ptrtoint ptr addrspace(3) {p} to i32")))
}

/// Lower `LdsAddr` (both targets).
pub(crate) fn lds_addr(f: &mut Func, p: ValueId) -> Result<String, LowerError> {
    shared_addr(f, p)
}

/// A side-effecting asm statement with no results.
fn asm_void(f: &mut Func, text: &str, cons: &str, args: &[String]) {
    let args = args.join(", ");
    f.emit(format!(
        "call void asm sideeffect \"{text}\", \"{cons}\"({args})"
    ));
}

/// Lower one Hopper op; defines its results.
pub(crate) fn lower(f: &mut Func, op: &Op, nv: &NvOp) -> Result<(), LowerError> {
    match nv {
        NvOp::MbarInit { bar, count } => {
            let b = shared_addr(f, *bar)?;
            asm_void(
                f,
                "mbarrier.init.shared::cta.b64 [$0], $1;",
                "r,r,~{memory}",
                &[format!("i32 {b}"), format!("i32 {count}")],
            );
        }
        NvOp::MbarArriveExpectTx { bar, bytes } => {
            let b = shared_addr(f, *bar)?;
            let n = f.get(*bytes)?;
            asm_void(
                f,
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
                "r,r,~{memory}",
                &[format!("i32 {b}"), format!("i32 {n}")],
            );
        }
        NvOp::MbarArrive { bar } => {
            let b = shared_addr(f, *bar)?;
            asm_void(
                f,
                "mbarrier.arrive.shared::cta.b64 _, [$0];",
                "r,~{memory}",
                &[format!("i32 {b}")],
            );
        }
        NvOp::MbarWait { bar, parity } => mbar_wait(f, *bar, *parity)?,
        NvOp::FenceProxyAsync => {
            asm_void(f, "fence.proxy.async.shared::cta;", "~{memory}", &[]);
        }
        NvOp::ElectOne => {
            let r = f.inst(
                "call i32 asm sideeffect \"{ .reg .pred p; elect.sync _|p, 0xffffffff; \
                 selp.u32 $0, 1, 0, p; }\", \"=r\"()",
            );
            let b = f.inst(format!("icmp ne i32 {r}, 0"));
            f.def(op.results[0], b);
        }
        NvOp::SetMaxNReg { inc, regs } => {
            let dir = if *inc { "inc" } else { "dec" };
            asm_void(
                f,
                &format!("setmaxnreg.{dir}.sync.aligned.u32 {regs};"),
                "",
                &[],
            );
        }
        NvOp::TmaLoad {
            tmap,
            dst,
            bar,
            coords,
        } => {
            let d = shared_addr(f, *dst)?;
            let b = shared_addr(f, *bar)?;
            let m = f.get(*tmap)?;
            let n = coords.len();
            let mut args = vec![
                format!("i32 {d}"),
                format!("ptr addrspace(1) {m}"),
                format!("i32 {b}"),
            ];
            for &c in coords {
                args.push(format!("i32 {}", f.get(c)?));
            }
            let cs: Vec<String> = (0..n).map(|i| format!("${}", i + 3)).collect();
            asm_void(
                f,
                &format!(
                    "cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \
                     [$0], [$1, {{{}}}], [$2];",
                    cs.join(", ")
                ),
                &format!("r,l,r{},~{{memory}}", ",r".repeat(n)),
                &args,
            );
        }
        NvOp::WgmmaFence => asm_void(f, "wgmma.fence.sync.aligned;", "~{memory}", &[]),
        NvOp::WgmmaCommit => asm_void(f, "wgmma.commit_group.sync.aligned;", "~{memory}", &[]),
        NvOp::Wgmma { n, a, b, acc } => {
            let da = descriptor(f, *a)?;
            let db = descriptor(f, *b)?;
            // (operand type, accumulator type, the operands after the descriptors): 16-bit
            // forms take scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b; fp8
            // forms have no transpose immediates; s8 takes scale-d alone.
            let ta = f.ty(*a)?;
            let (elem, dty, tail) = match ta {
                Type::Ptr(_, ScalarType::F16) => ("f16", "f32", "1, 1, 1, 0, 0"),
                Type::Ptr(_, ScalarType::BF16) => ("bf16", "f32", "1, 1, 1, 0, 0"),
                Type::Ptr(_, ScalarType::F8E4M3FN) => ("e4m3", "f32", "1, 1, 1"),
                Type::Ptr(_, ScalarType::F8E5M2) => ("e5m2", "f32", "1, 1, 1"),
                Type::Ptr(_, ScalarType::I8) => ("s8", "s32", "1"),
                t => return Err(f.err(format!("wgmma operand of type {t}"))),
            };
            let k = ta.elem().map_or(16, flydsl_ir::wgmma_k);
            let regs = (n / 2) as usize;
            let text = format!(
                "wgmma.mma_async.sync.aligned.m64n{n}k{k}.{dty}.{elem}.{elem} {{{}}}, ${}, ${}, {tail};",
                (0..regs).map(|i| format!("${i}")).collect::<Vec<_>>().join(", "),
                regs,
                regs + 1
            );
            let acc_in = f.get(*acc)?;
            let out = tied_asm_of(
                f,
                &text,
                regs,
                &acc_in,
                &[format!("i64 {da}"), format!("i64 {db}")],
                "l,l",
                dty == "s32",
            );
            f.def(op.results[0], out);
        }
        NvOp::WgmmaRs {
            n,
            a,
            b,
            b_layout,
            acc,
        } => {
            let (lbo, sbo, trans) = match b_layout {
                WgmmaB::KMajor => (16, 1024, 0),
                WgmmaB::MnMajor { block_bytes } => (*block_bytes, 1024, 1),
            };
            let db = descriptor_with(f, *b, lbo, sbo)?;
            let elem = match f.ty(*b)? {
                Type::Ptr(_, ScalarType::F16) => "f16",
                Type::Ptr(_, ScalarType::BF16) => "bf16",
                t => return Err(f.err(format!("wgmma operand of type {t}"))),
            };
            let regs = (n / 2) as usize;
            // Operands after the tied accumulator outputs: the four A registers, then B.
            let text = format!(
                "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{elem}.{elem} {{{}}}, {{${}, ${}, ${}, ${}}}, ${}, 1, 1, 1, {trans};",
                (0..regs).map(|i| format!("${i}")).collect::<Vec<_>>().join(", "),
                regs,
                regs + 1,
                regs + 2,
                regs + 3,
                regs + 4
            );
            let fa = f.get(*a)?;
            let mut extra = Vec::new();
            for i in 0..4 {
                let e = f.inst(format!("extractelement <4 x i32> {fa}, i32 {i}"));
                extra.push(format!("i32 {e}"));
            }
            extra.push(format!("i64 {db}"));
            let acc_in = f.get(*acc)?;
            let out = tied_asm(f, &text, regs, &acc_in, &extra, "r,r,r,r,l");
            f.def(op.results[0], out);
        }
        NvOp::WgmmaWait { pending, values } => {
            // One asm per accumulator: each is tied through its own wait (waiting twice is
            // free: the second finds nothing pending beyond `pending`).
            for (&v, &r) in values.iter().zip(&op.results) {
                let ty = f.ty(v)?;
                let regs = ty.lanes() as usize;
                let int = ty.value_elem() == Some(ScalarType::I32);
                let (lt, c) = if int { ("i32", "r") } else { ("float", "f") };
                let x = f.get(v)?;
                let out = if regs == 1 {
                    f.inst(format!(
                        "call {lt} asm sideeffect \"wgmma.wait_group.sync.aligned {pending};\", \
                         \"={c},0,~{{memory}}\"({lt} {x})"
                    ))
                } else {
                    tied_asm_of(
                        f,
                        &format!("wgmma.wait_group.sync.aligned {pending};"),
                        regs,
                        &x,
                        &[],
                        "",
                        int,
                    )
                };
                f.def(r, out);
            }
        }
        NvOp::CpAsync {
            dst,
            src,
            index,
            bytes,
            src_bytes,
        } => {
            let d = f.get(*dst)?;
            let (p, pt) = f.get_t(*src)?;
            let s = match index {
                None => p,
                Some(i) => {
                    let flydsl_ir::Type::Ptr(_, e) = pt else {
                        return Err(f.err("cp.async source is not a pointer"));
                    };
                    let (iv, it) = f.get_t(*i)?;
                    let il = f.lty(it);
                    f.inst(format!(
                        "getelementptr {}, ptr addrspace(1) {p}, {il} {iv}",
                        super::ty::mem_scalar(e)
                    ))
                }
            };
            let n = f.get(*src_bytes)?;
            let cache = if *bytes == 16 { "cg" } else { "ca" };
            f.call(
                "void",
                &format!("llvm.nvvm.cp.async.{cache}.shared.global.{bytes}.s"),
                &[
                    ("ptr addrspace(3)", d.as_str()),
                    ("ptr addrspace(1)", s.as_str()),
                    ("i32", n.as_str()),
                ],
            );
        }
        NvOp::CpAsyncCommit => {
            f.call("void", "llvm.nvvm.cp.async.commit.group", &[]);
        }
        NvOp::CpAsyncWait { pending } => {
            f.call(
                "void",
                "llvm.nvvm.cp.async.wait.group",
                &[("i32", pending.to_string().as_str())],
            );
        }
        NvOp::LdMatrix { ptr, count, trans } => {
            let a = shared_addr(f, *ptr)?;
            let n = *count as usize;
            let regs: Vec<String> = (0..n).map(|i| format!("${i}")).collect();
            let text = format!(
                "ldmatrix.sync.aligned.m8n8.x{n}{}.shared.b16 {{{}}}, [${n}];",
                if *trans { ".trans" } else { "" },
                regs.join(", ")
            );
            let cons = format!("{}r,~{{memory}}", "=r,".repeat(n));
            let out = if n == 1 {
                f.inst(format!(
                    "call i32 asm sideeffect \"{text}\", \"{cons}\"(i32 {a})"
                ))
            } else {
                let st = format!("{{ {} }}", vec!["i32"; n].join(", "));
                let r = f.inst(format!(
                    "call {st} asm sideeffect \"{text}\", \"{cons}\"(i32 {a})"
                ));
                let mut v = "poison".to_string();
                for i in 0..n {
                    let e = f.inst(format!("extractvalue {st} {r}, {i}"));
                    v = f.inst(format!("insertelement <{n} x i32> {v}, i32 {e}, i32 {i}"));
                }
                v
            };
            f.def(op.results[0], out);
        }
        NvOp::StMatrix {
            ptr,
            value,
            count,
            trans,
        } => {
            let a = shared_addr(f, *ptr)?;
            let n = *count as usize;
            let x = f.get(*value)?;
            let mut args = vec![format!("i32 {a}")];
            if n == 1 {
                args.push(format!("i32 {x}"));
            } else {
                for i in 0..n {
                    let e = f.inst(format!("extractelement <{n} x i32> {x}, i32 {i}"));
                    args.push(format!("i32 {e}"));
                }
            }
            let regs: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
            asm_void(
                f,
                &format!(
                    "stmatrix.sync.aligned.m8n8.x{n}{}.shared.b16 [$0], {{{}}};",
                    if *trans { ".trans" } else { "" },
                    regs.join(", ")
                ),
                &format!("r{},~{{memory}}", ",r".repeat(n)),
                &args,
            );
        }
    }
    Ok(())
}

/// An asm statement whose first `regs` outputs are the f32 lanes of the vector `acc`
/// (`<regs x float>`), tied to the same inputs, after `extra` inputs (constraints
/// `extra_cons`). Returns the new vector.
#[allow(dead_code)]
fn tied_asm(
    f: &mut Func,
    text: &str,
    regs: usize,
    acc: &str,
    extra: &[String],
    extra_cons: &str,
) -> String {
    tied_asm_of(f, text, regs, acc, extra, extra_cons, false)
}

/// [`tied_asm`] over f32 lanes (`int` false: `<regs x float>`, constraint `f`) or i32
/// lanes (`int` true: `<regs x i32>`, constraint `r`, the s32 accumulators of s8 wgmma).
fn tied_asm_of(
    f: &mut Func,
    text: &str,
    regs: usize,
    acc: &str,
    extra: &[String],
    extra_cons: &str,
    int: bool,
) -> String {
    let (et, c) = if int { ("i32", "=r") } else { ("float", "=f") };
    let vt = format!("<{regs} x {et}>");
    let mut args: Vec<String> = extra.to_vec();
    for i in 0..regs {
        let e = f.inst(format!("extractelement {vt} {acc}, i32 {i}"));
        args.push(format!("{et} {e}"));
    }
    let mut cons: Vec<String> = vec![c.to_string(); regs];
    if !extra_cons.is_empty() {
        cons.push(extra_cons.to_string());
    }
    cons.extend((0..regs).map(|i| i.to_string()));
    cons.push("~{memory}".to_string());
    let st = format!("{{ {} }}", vec![et; regs].join(", "));
    let r = f.inst(format!(
        "call {st} asm sideeffect \"{text}\", \"{}\"({})",
        cons.join(","),
        args.join(", ")
    ));
    let mut v = "poison".to_string();
    for i in 0..regs {
        let e = f.inst(format!("extractvalue {st} {r}, {i}"));
        v = f.inst(format!("insertelement {vt} {v}, {et} {e}, i32 {i}"));
    }
    v
}

/// The wgmma shared-memory descriptor of a K-major 128-byte-swizzled operand at LDS pointer
/// `p`: start address >> 4 in bits 0..14, leading byte offset 16 (encoded 1, unused by
/// swizzled K-major tiles) in bits 16..30, stride byte offset 1024 (one 8-row group,
/// encoded 64) in bits 32..46, layout 1 (128-byte swizzle) in bits 62..64.
fn descriptor(f: &mut Func, p: ValueId) -> Result<String, LowerError> {
    descriptor_with(f, p, 16, 1024)
}

/// A 128-byte-swizzle wgmma descriptor of the operand at LDS pointer `p` with leading and
/// stride byte offsets `lbo` and `sbo` (multiples of 16 below 2^18; encoded >> 4). K-major:
/// `lbo` unused (16), `sbo` 1024; MN-major (`WgmmaB::MnMajor`): `lbo` the bytes between
/// 64-element N blocks, `sbo` 1024 between groups of 8 k rows.
fn descriptor_with(f: &mut Func, p: ValueId, lbo: u32, sbo: u32) -> Result<String, LowerError> {
    let a = shared_addr(f, p)?;
    let a = f.inst(format!("and i32 {a}, 262143"));
    let a = f.inst(format!("lshr i32 {a}, 4"));
    let a = f.inst(format!("zext i32 {a} to i64"));
    let fixed: u64 = ((lbo as u64 >> 4) << 16) | ((sbo as u64 >> 4) << 32) | (1 << 62);
    Ok(f.inst(format!("or i64 {a}, {fixed}")))
}

/// Wait for a phase: `mbarrier.try_wait.parity` (which itself suspends for a while) in a
/// loop until it reports the phase complete.
fn mbar_wait(f: &mut Func, bar: ValueId, parity: ValueId) -> Result<(), LowerError> {
    let b = shared_addr(f, bar)?;
    let p = f.get(parity)?;
    let (lw, ld) = (f.new_label("mbar_wait"), f.new_label("mbar_done"));
    f.br(&lw);
    f.start_block(&lw);
    let r = f.inst(format!(
        "call i32 asm sideeffect \"{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, \
         [$1], $2; selp.u32 $0, 1, 0, p; }}\", \"=r,r,r,~{{memory}}\"(i32 {b}, i32 {p})"
    ));
    let done = f.inst(format!("icmp ne i32 {r}, 0"));
    f.cond_br(&done, &ld, &lw);
    f.start_block(&ld);
    Ok(())
}
