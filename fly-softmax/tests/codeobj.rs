//! Structural checks: the lowered LLVM IR of every target (always, no toolchain needed), and
//! the embedded code objects of the targets this build compiled (`--features all-targets`):
//! valid ELF / PTX, kernarg layout equal to what the launcher packs, LDS as declared, no
//! scratch, and the expected instruction classes (128-bit buffer loads/stores, v_exp_f32).

use fly_softmax::plan::{all, candidates, variant_by_name, Variant};
use fly_softmax::table::{DType, Kind};
use fly_softmax::Element;
use flydsl_devtools::inspect::{count_instructions, disassemble};
use flydsl_ir::codeobj::{check_kernarg_layout, check_kernarg_layout_ptx, parse_hsaco, parse_ptx};
use flydsl_ir::Target;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::Device;

fn ir_of<T: Element>(v: &Variant, t: Target) -> flydsl_ir::Kernel {
    let var = v
        .kernel::<T>()
        .for_target(t)
        .expect("IR is embedded for every target");
    flydsl_ir::from_bytes(var.ir).expect("embedded IR decodes")
}

#[test]
fn lowered_ir_has_128bit_buffer_accesses_and_64bit_row_offsets() {
    for t in Target::ALL {
        let dev = Device::sim(t);
        // The vector path, and the ragged path of an odd n (its body is 128-bit accesses).
        for (kind, n) in [
            (Kind::Forward, 8192),
            (Kind::Backward, 8192),
            (Kind::Forward, 8191),
            (Kind::Backward, 8191),
        ] {
            let v = candidates::<bf16>(kind, &dev, n)[0];
            assert_eq!(v.config.path.is_ragged(), n % 8 != 0);
            let llvm = flydsl_codegen::lower(&ir_of::<bf16>(&v, t)).expect("lowers");
            let name = v.name::<bf16>();
            assert!(
                llvm.contains("mul i64"),
                "{name} on {t}: no 64-bit row offset"
            );
            if t.is_amd() {
                assert!(
                    llvm.contains("llvm.amdgcn.raw.ptr.buffer.load.v4i32"),
                    "{name} on {t}: no 128-bit buffer load"
                );
                assert!(
                    llvm.contains("llvm.amdgcn.raw.ptr.buffer.store.v4i32"),
                    "{name} on {t}"
                );
            } else {
                assert!(
                    llvm.contains("load <8 x bfloat>"),
                    "{name} on {t}: no 128-bit load"
                );
            }
        }
    }
}

/// Call `f(target, ir, code, name)` for every built code object of every kernel (both of a
/// split configuration's).
fn every_built<T: Element>(mut f: impl FnMut(Target, &'static [u8], &'static [u8], &str)) -> usize {
    let mut count = 0;
    for kind in [Kind::Forward, Kind::Backward] {
        for v in all(kind) {
            for k in v.kernels::<T>() {
                for var in k.variants {
                    if let Some(code) = var.code {
                        count += 1;
                        f(var.target, var.ir, code, k.name);
                    }
                }
            }
        }
    }
    count
}

fn check_objects<T: Element>() -> usize {
    every_built::<T>(|t, ir, code, name| {
        let ir = flydsl_ir::from_bytes(ir).expect("embedded IR decodes");
        let layout = ir.kernarg_layout();
        if t.is_amd() {
            let co = parse_hsaco(code).unwrap_or_else(|e| panic!("{name} ({t}): {e}"));
            assert_eq!(co.target(), Some(t), "{name}: e_flags arch");
            assert_eq!(
                co.code_object_version, 5,
                "{name} ({t}): code object version"
            );
            let meta = co
                .kernel(name)
                .unwrap_or_else(|| panic!("{name} ({t}): no metadata"));
            check_kernarg_layout(meta, &layout).unwrap_or_else(|e| panic!("{name} ({t}): {e}"));
            assert!(!meta.uses_scratch(), "{name} ({t}): scratch / spills");
            assert_eq!(
                meta.group_segment_fixed_size,
                ir.lds_bytes(),
                "{name} ({t}): LDS"
            );
            assert_eq!(
                meta.wavefront_size,
                t.wave_size(),
                "{name} ({t}): wave size"
            );
        } else {
            let text = std::str::from_utf8(code).expect("PTX is text");
            let m = parse_ptx(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let e = m.entry(name).unwrap_or_else(|| panic!("{name}: no .entry"));
            check_kernarg_layout_ptx(e, &layout).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                m.static_shared_bytes(e) <= 48 * 1024,
                "{name}: shared memory"
            );
        }
    })
}

#[test]
fn code_objects_are_valid() {
    let n = check_objects::<f32>() + check_objects::<f16>() + check_objects::<bf16>();
    if n == 0 {
        println!("skipped: this build has no code objects (build with --features all-targets)");
    }
}

/// Expected instruction classes of the fast paths.
#[test]
fn fast_paths_use_128bit_memory_and_hardware_exp() {
    let mut checked = 0;
    for (kind, name, loads, stores, exps) in [
        (
            Kind::Forward,
            "softmax_fwd_bf16_v8192_t256_g256_e32_w0",
            4,
            4,
            32,
        ),
        (
            Kind::Backward,
            "softmax_bwd_bf16_v8192_t256_g256_e32_w0",
            8,
            4,
            0,
        ),
        (
            Kind::Forward,
            "softmax_fwd_f32_v4096_t256_g256_e16_w0",
            4,
            4,
            16,
        ),
        // The ragged path: the same 128-bit body, plus one exp each for the head and tail.
        (
            Kind::Forward,
            "softmax_fwd_bf16_r8192_t256_g256_e32_w0",
            4,
            4,
            34,
        ),
        (
            Kind::Backward,
            "softmax_bwd_bf16_r8192_t256_g256_e32_w0",
            8,
            4,
            0,
        ),
    ] {
        let dtype = if name.contains("_bf16_") {
            DType::BF16
        } else {
            DType::F32
        };
        let v = match dtype {
            DType::BF16 => variant_by_name::<bf16>(name),
            _ => variant_by_name::<f32>(name),
        }
        .unwrap_or_else(|| panic!("{name} is not in the table"));
        assert_eq!(v.config.kind, kind);
        let table = match dtype {
            DType::BF16 => v.kernel::<bf16>(),
            _ => v.kernel::<f32>(),
        };
        for var in table.variants {
            let Some(code) = var.code else { continue };
            let t = var.target;
            if t.is_amd() {
                let asm = match disassemble(code, t.mcpu()) {
                    Ok(a) => a,
                    Err(e) => {
                        println!("skipped disassembly of {name} ({t}): {e}");
                        continue;
                    }
                };
                // gfx9 spells the 128-bit forms `dwordx4`, gfx12 `b128`.
                let (ld, st) = match t {
                    Target::Gfx942 | Target::Gfx950 => {
                        ("buffer_load_dwordx4", "buffer_store_dwordx4")
                    }
                    _ => ("buffer_load_b128", "buffer_store_b128"),
                };
                assert_eq!(count_instructions(&asm, ld), loads, "{name} ({t})");
                assert_eq!(count_instructions(&asm, st), stores, "{name} ({t})");
                if exps > 0 {
                    assert_eq!(count_instructions(&asm, "v_exp_f32"), exps, "{name} ({t})");
                }
            } else {
                let ptx = std::str::from_utf8(code).unwrap();
                let v4 =
                    ptx.matches("ld.global.v4").count() + ptx.matches("ld.global.nc.v4").count();
                assert!(
                    v4 >= loads,
                    "{name} (sm90): {v4} 128-bit loads, expected {loads}"
                );
                if exps > 0 {
                    assert!(
                        ptx.matches("ex2.approx").count() >= exps,
                        "{name} (sm90): ex2.approx"
                    );
                }
            }
            checked += 1;
        }
    }
    if checked == 0 {
        println!("skipped: this build has no code objects (build with --features all-targets)");
    }
}
