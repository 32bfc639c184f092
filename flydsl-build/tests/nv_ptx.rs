//! The NVIDIA build checks: the PTX of the sm_90 async-copy and matrix-move ops (compiled by
//! llc-22 when it is installed), and the rule that a kernel's PTX makes no call and declares
//! no external function (ptxas would silently drop `setmaxnreg` and serialize `wgmma`).

use flydsl_build::check::{check_code_object, check_ptx_no_calls};
use flydsl_build::ir::{Kernel, ScalarType::*, Target};
use flydsl_dsl::*;

/// PTX of `k` from llc-22, or `None` (with the reason printed) when no llc for sm_90a exists.
fn ptx_of(k: &Kernel) -> Option<Vec<u8>> {
    let tc = match flydsl_build::toolchain::Toolchain::discover(&[Target::Sm90]) {
        Ok(tc) => tc,
        Err(e) => {
            println!("skipped: no llc for sm_90a here ({e})");
            return None;
        }
    };
    let llvm = flydsl_codegen::lower(k).unwrap();
    let work =
        std::env::temp_dir().join(format!("flydsl-nv-ptx-{}-{}", k.name, std::process::id()));
    let code = tc.compile(&llvm, &k.name, Target::Sm90, &work).unwrap();
    let _ = std::fs::remove_dir_all(&work);
    Some(code)
}

/// A kernel with every new op, compiled by llc-22 to PTX.
#[test]
fn ptx_has_cp_async_groups_and_ldmatrix_stmatrix() {
    let k = KernelBuilder::new("nv_async_ops", Target::Sm90, 32)
        .build(|k| {
            let x = k.tensor("x", I32);
            let out = k.tensor_mut("out", I32);
            let s = k.lds("s", I32, 4 * 32);
            let t = thread_id_x();
            let ok = t.lt(c_i32(20));
            nv::cp_async(
                s.ptr_at(t * 4),
                x.ptr(),
                Some(t * 4),
                16,
                select(ok, c_i32(16), c_i32(0)),
            );
            nv::cp_async(s.ptr_at(t * 4), x.ptr(), None, 4, c_i32(4));
            nv::cp_async_commit();
            nv::cp_async_wait(1);
            barrier();
            let f = nv::ldmatrix(s.ptr_at(t * 4), 4, true);
            nv::stmatrix(s.ptr_at(t * 4), f.slice(0, 2), 2, false);
            out.store(t, f.at(3));
        })
        .unwrap();
    let Some(code) = ptx_of(&k) else { return };
    check_code_object(&k, &code).unwrap();
    let ptx = String::from_utf8(code).unwrap();
    let norm: String = ptx.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "cp.async.cg.shared.global [",
        "], 16, %r",
        "cp.async.ca.shared.global [",
        "cp.async.commit_group;",
        "cp.async.wait_group 1;",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {",
        "stmatrix.sync.aligned.m8n8.x2.shared.b16 [",
    ] {
        assert!(norm.contains(want), "`{want}` not in the PTX:\n{ptx}");
    }
}

#[test]
fn ptx_with_a_call_or_an_external_function_fails_naming_the_kernel() {
    let clean = "\
.version 8.4
.target sm_90a
.address_size 64
.visible .entry gemm(
\t.param .u64 .ptr .global .align 1 gemm_param_0
)
{
\t.reg .pred %p<2>;
\t// a comment that says call foo is not a call
\tsetmaxnreg.inc.sync.aligned.u32 240;
\tret;
}
";
    check_ptx_no_calls("gemm", clean).unwrap();
    let with = |extra_decl: &str, extra_inst: &str| {
        clean
            .replace(".visible .entry", &format!("{extra_decl}\n.visible .entry"))
            .replace("\tret;", &format!("{extra_inst}\n\tret;"))
    };
    let cases = [
        (
            with(
                ".extern .func (.param .b32 r) vprintf(.param .b64 a, .param .b64 b);",
                "",
            ),
            "declares an external function",
        ),
        (
            with("", "\tcall.uni (retval0), vprintf, (param0, param1);"),
            "makes a call",
        ),
        (with("", "$L__BB0_1:\t@%p1 call foo, ();"), "makes a call"),
        (with("", "\tcall (retval0), bar, ();"), "makes a call"),
    ];
    for (ptx, why) in cases {
        let e = check_ptx_no_calls("gemm", &ptx).unwrap_err();
        assert!(e.contains("kernel `gemm`") && e.contains(why), "{e}");
        assert!(
            e.contains("setmaxnreg"),
            "the error says why it matters: {e}"
        );
    }
}

#[test]
fn check_code_object_rejects_real_ptx_with_an_injected_call() {
    let k = flydsl_devtools::proof::vadd(Target::Sm90, F32).unwrap();
    let Some(code) = ptx_of(&k) else { return };
    check_code_object(&k, &code).unwrap();
    let ptx = String::from_utf8(code).unwrap();
    let bad = ptx
        .replacen(
            ".visible .entry",
            ".extern .func ext_fn\n(\n);\n.visible .entry",
            1,
        )
        .replacen("\tret;", "\tcall.uni ext_fn, ();\n\tret;", 1);
    let e = check_code_object(&k, bad.as_bytes()).unwrap_err();
    assert!(e.contains(&format!("kernel `{}`", k.name)), "{e}");
}

/// The register-A wgmma (`NvOp::WgmmaRs`): four A registers in braces, one B descriptor,
/// `tnspB` 1 for an MN-major B whose descriptor carries the N-block stride as its leading
/// byte offset (and 1024 as its stride byte offset), 0 for a K-major B.
#[test]
fn ptx_has_register_a_wgmma_with_mn_major_b() {
    use flydsl_build::ir::WgmmaB;
    let block = 8192u32;
    let k = KernelBuilder::new("wgmma_rs_ops", Target::Sm90, 128)
        .build(|k| {
            let out = k.tensor_mut("out", F32);
            let v = k.lds_aligned("v", F16, 8192, 1024);
            let p = splat(c_f32(0.5), 8);
            let frag = nv::wgmma_a_frag(p, 0, F16);
            nv::wgmma_fence();
            let mn = WgmmaB::MnMajor { block_bytes: block };
            let o = nv::wgmma_rs(128, frag, v.ptr(), mn, splat(c_f32(0.0), 64));
            let o2 = nv::wgmma_rs(64, frag, v.ptr(), WgmmaB::KMajor, splat(c_f32(0.0), 32));
            nv::wgmma_commit();
            let r = nv::wgmma_wait(0, &[o, o2]);
            out.store(thread_id_x(), r[0].at(0) + r[1].at(1));
        })
        .unwrap();
    let Some(code) = ptx_of(&k) else { return };
    check_code_object(&k, &code).unwrap();
    let ptx = String::from_utf8(code).unwrap();
    let norm: String = ptx.split_whitespace().collect::<Vec<_>>().join(" ");
    let mn_desc = ((block as u64 >> 4) << 16) | (64u64 << 32) | (1u64 << 62);
    let k_desc = (1u64 << 16) | (64u64 << 32) | (1u64 << 62);
    for want in [
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {".to_string(),
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {".to_string(),
        ", 1, 1, 1, 1;".to_string(),
        ", 1, 1, 1, 0;".to_string(),
        mn_desc.to_string(),
        k_desc.to_string(),
    ] {
        assert!(norm.contains(&want), "`{want}` not in the PTX:\n{ptx}");
    }
    // The A operand is a brace list of four 32-bit registers.
    let at = norm.find("m64n128k16").unwrap();
    let inst = &norm[at..at + norm[at..].find(';').unwrap()];
    let a_list = inst.split("}, {").nth(1).unwrap();
    let a_list = &a_list[..a_list.find('}').unwrap()];
    assert_eq!(a_list.split(", ").count(), 4, "{inst}");
    assert!(a_list.split(", ").all(|r| r.starts_with("%r")), "{inst}");
}
