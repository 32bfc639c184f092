//! Toolchain selection and the build cache, through `Builder` (one test binary of its own:
//! these tests set environment variables, so they run serially in one test).

use flydsl_build::ir::{ScalarType, Target};
use flydsl_build::Builder;
use flydsl_devtools::proof;

fn out_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("flydsl-toolchain-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn llc_present() -> bool {
    flydsl_build::toolchain::which("llc-22").is_some()
}

#[test]
fn toolchain_selection_and_cache() {
    // 1. No GPU target: no toolchain is looked for at all, even a broken one.
    std::env::set_var("FLYDSL_LLC", "/nonexistent/llc");
    let out = out_dir("none");
    let r = Builder::new("t", &out, &[])
        .kernel("vadd_f32", |t| proof::vadd(t, ScalarType::F32))
        .run()
        .expect("a Sim-only build needs no LLVM");
    assert!(r.variants.is_empty());
    assert!(out.join("vadd_f32.gfx942.ir").is_file() && out.join("flydsl_kernels.rs").is_file());

    // 2. A GPU target without a capable llc: a clear error naming every way to fix it.
    let e = Builder::new("t", out_dir("missing"), &[Target::Gfx942])
        .kernel("vadd_f32", |t| proof::vadd(t, ScalarType::F32))
        .run()
        .unwrap_err()
        .to_string();
    for needle in [
        "apt-get install llvm-22",
        "FLYDSL_LLC",
        "ROCM_PATH",
        "gfx942",
    ] {
        assert!(e.contains(needle), "missing `{needle}` in: {e}");
    }
    std::env::remove_var("FLYDSL_LLC");

    if !llc_present() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have llc-22 installed"
        );
        println!("skipped the cache half: llc-22 is not installed");
        return;
    }
    // 3. Unchanged kernels are never recompiled: the second build is all cache hits and
    //    produces identical code objects.
    let out = out_dir("cache");
    let build = || {
        Builder::new("t", &out, &[Target::Gfx942, Target::Sm90])
            .kernel("vadd_f32", |t| proof::vadd(t, ScalarType::F32))
            .kernel("block_sum_f32", proof::block_sum)
            .run()
            .unwrap()
    };
    let first = build();
    assert_eq!(first.variants.len(), 4);
    assert!(first.variants.iter().all(|v| !v.cached));
    let hsaco = std::fs::read(out.join("vadd_f32.gfx942.hsaco")).unwrap();
    let second = build();
    assert!(
        second.variants.iter().all(|v| v.cached),
        "{:?}",
        second.variants
    );
    assert_eq!(
        std::fs::read(out.join("vadd_f32.gfx942.hsaco")).unwrap(),
        hsaco
    );

    // 4. FLYDSL_DUMP_DIR receives each variant's LLVM IR, assembly and code object.
    let dump = out_dir("dump");
    std::env::set_var("FLYDSL_DUMP_DIR", &dump);
    Builder::new("t", out_dir("dumped"), &[Target::Gfx1201, Target::Sm90])
        .kernel("vadd_f32", |t| proof::vadd(t, ScalarType::F32))
        .run()
        .unwrap();
    std::env::remove_var("FLYDSL_DUMP_DIR");
    for f in [
        "vadd_f32.gfx1201.ll",
        "vadd_f32.gfx1201.s",
        "vadd_f32.gfx1201.hsaco",
        "vadd_f32.sm90.ll",
        "vadd_f32.sm90.ptx",
    ] {
        assert!(dump.join(f).is_file(), "{f} not dumped");
    }
    let asm = std::fs::read_to_string(dump.join("vadd_f32.gfx1201.s")).unwrap();
    assert!(asm.contains("gfx1201"), "the assembly is not for gfx1201");

    // 5. Unknown target names are rejected with the list of valid ones.
    let e = flydsl_build::parse_targets("gfx942,gfx908").unwrap_err();
    assert!(e.contains("gfx908") && e.contains("gfx950"), "{e}");
}
