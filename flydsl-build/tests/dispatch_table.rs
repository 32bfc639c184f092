//! Typed dispatch tables through `Builder::table`: written into the glue after the launchers,
//! and refused when they name undeclared kernels or reuse a static's name.

use flydsl_build::glue::DispatchTable;
use flydsl_build::ir::{DType, ScalarType};
use flydsl_build::Builder;
use flydsl_devtools::proof;

fn out_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("flydsl-table-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn tables_are_written_after_the_launchers() {
    let out = out_dir("ok");
    let table = DispatchTable::new("VADD", "VaddFns")
        .entry(&[DType::F32], "0u8", "vadd_f32")
        .entry(&[DType::F16], "1u8", "vadd_f16");
    Builder::new("t", &out, &[])
        .kernel("vadd_f32", |t| proof::vadd(t, ScalarType::F32))
        .kernel("vadd_f16", |t| proof::vadd(t, ScalarType::F16))
        .table(table)
        .run()
        .unwrap();
    let glue = std::fs::read_to_string(out.join("flydsl_kernels.rs")).unwrap();
    let table = glue
        .find("pub(crate) static VADD: ::flydsl_rt::PerElement<VaddFns>")
        .unwrap();
    assert!(glue.find("pub unsafe fn vadd_f16").unwrap() < table);
    assert!(glue.contains("key: 1u8, kernel: &VADD_F16, launch: vadd_f16"));
    assert!(
        glue.contains("    bf16: &[\n    ],"),
        "no bf16 entries: an empty slice\n{glue}"
    );
    assert!(glue.contains("pub static ALL_KERNELS: &[&::flydsl_rt::KernelVariants] = &[\n    &VADD_F32,\n    &VADD_F16,\n];"));
}

#[test]
fn bad_tables_are_refused() {
    let undeclared = DispatchTable::new("T", "M").entry(&[DType::F32], "0", "nope");
    let e = Builder::new("t", out_dir("undeclared"), &[])
        .kernel("vadd_f32", |t| proof::vadd(t, ScalarType::F32))
        .table(undeclared)
        .run()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`nope`, which is not declared"), "{e}");
    let clash = DispatchTable::new("VADD_F32", "M").entry(&[DType::F32], "0", "vadd_f32");
    let e = Builder::new("t", out_dir("clash"), &[])
        .kernel("vadd_f32", |t| proof::vadd(t, ScalarType::F32))
        .table(clash)
        .run()
        .unwrap_err()
        .to_string();
    assert!(e.contains("has the name of another static"), "{e}");
}
