//! The CUDA backend on a real NVIDIA GPU (sm_90), with a PTX vector add embedded at build time
//! (`tests/data/vadd_sm90.ptx`, produced from the same hand-built IR by `flydsl_codegen`
//! and `llc-22`; regenerate with
//! `cargo test -p flydsl-rt --test cuda_ptx -- --ignored regenerate_ptx_fixture`).
//!
//! On a machine without a CUDA device the GPU test prints `skipped: no CUDA device` and passes
//! (fails where `FLYDSL_REQUIRE_GPU` is set),
//! so the test binary can be built here and run on the GPU machine, where no `llc` exists.

mod common;

use common::*;
use flydsl_ir::Target;
use flydsl_rt::*;

const VADD_PTX: &str = include_str!("data/vadd_sm90.ptx");

#[test]
fn fixture_matches_the_ir_signature() {
    let k = vadd(Target::Sm90, 256);
    let module = flydsl_ir::codeobj::parse_ptx(VADD_PTX).expect("fixture parses");
    let entry = module.entry("vadd").expect("fixture has .entry vadd");
    flydsl_ir::codeobj::check_kernarg_layout_ptx(entry, &k.kernarg_layout()).unwrap();
}

#[test]
fn vadd_on_a_cuda_device() {
    let dev = match Device::enumerate(Backend::Cuda) {
        Ok(d) if !d.is_empty() => d[0].clone(),
        Ok(_) | Err(Error::BackendUnavailable { .. }) => {
            // The device bundle's run sets FLYDSL_REQUIRE_GPU (flydsl-testutil's convention;
            // flydsl-rt cannot depend on that crate): there a missing GPU is a failure.
            let required = std::env::var("FLYDSL_REQUIRE_GPU")
                .is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0");
            assert!(
                !required,
                "FLYDSL_REQUIRE_GPU is set, but there is no CUDA device"
            );
            println!("skipped: no CUDA device");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(dev.target(), Target::Sm90);
    let k = vadd(Target::Sm90, 256);
    let table = table("demo", vec![(k, Some(VADD_PTX.as_bytes()))]);
    for n in [1usize, 1000, 1 << 20] {
        let a: Vec<f32> = (0..n).map(|i| (i % 1013) as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| 0.5 - (i % 7) as f32).collect();
        let da = DeviceBuffer::from_slice(&dev, &a).unwrap();
        let db = DeviceBuffer::from_slice(&dev, &b).unwrap();
        let dc = DeviceBuffer::<f32>::zeroed(&dev, n).unwrap();
        let mut args = KernelArgs::new(48);
        args.tensor(0, &da);
        args.tensor(16, &db);
        args.tensor(32, &dc);
        let s = dev.stream().unwrap();
        // SAFETY: the kernel guards its index with c.len; all lengths are n.
        unsafe { s.launch(table, LaunchConfig::for_elements(n as u64, 256), &args) }.unwrap();
        s.synchronize().unwrap();
        let c = dc.to_vec().unwrap();
        for i in 0..n {
            assert_eq!(c[i], a[i] + b[i], "n={n} element {i}");
        }
    }
}

#[test]
#[ignore = "regenerates tests/data/vadd_sm90.ptx; needs llc-22"]
fn regenerate_ptx_fixture() {
    let k = vadd(Target::Sm90, 256);
    let ll = flydsl_codegen::lower(&k).unwrap();
    let dir = std::env::temp_dir().join(format!("flydsl-rt-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("vadd.ll"), ll).unwrap();
    let llc = std::env::var("FLYDSL_LLC").unwrap_or_else(|_| "llc-22".into());
    let st = std::process::Command::new(llc)
        .args([
            "-O3",
            "-mtriple=nvptx64-nvidia-cuda",
            "-mcpu=sm_90a",
            "-mattr=+ptx84",
        ])
        .arg(dir.join("vadd.ll"))
        .arg("-o")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/vadd_sm90.ptx"
        ))
        .status()
        .unwrap();
    assert!(st.success());
}
