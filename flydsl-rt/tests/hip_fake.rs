//! The HIP backend end to end against the fake `libamdhip64` (crate `flydsl-fake-hip`): the
//! hand-built IR is lowered with `flydsl_codegen`, compiled with `llc-22` + `rust-lld` to a
//! real gfx942 HSACO, loaded through `hipModuleLoadData` and run by the simulator behind the
//! fake.
//!
//! Needs `llc-22` (or `FLYDSL_LLC`) and the fake's cdylib: run `cargo build -p flydsl-fake-hip`
//! first (if it is missing the test builds it into `target/fake-hip-build`). Without `llc` the
//! test prints `skipped` and passes.

mod common;

use common::*;
use flydsl_ir::{Kernel, Param, ParamKind, ScalarType, Target};
use flydsl_rt::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
    }
}

fn fake_lib() -> PathBuf {
    let built = target_dir().join("debug/libamdhip64.so");
    if built.exists() {
        return built;
    }
    // `cargo test` holds the lock of its own target directory: build into another one.
    let dir = target_dir().join("fake-hip-build");
    let status = Command::new(env!("CARGO"))
        .args(["build", "-p", "flydsl-fake-hip", "--target-dir"])
        .arg(&dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build -p flydsl-fake-hip");
    assert!(status.success(), "cargo build -p flydsl-fake-hip failed");
    dir.join("debug/libamdhip64.so")
}

fn llc() -> Option<String> {
    let cand = std::env::var("FLYDSL_LLC").unwrap_or_else(|_| "llc-22".into());
    Command::new(&cand)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| cand)
}

fn rust_lld() -> PathBuf {
    let out = |args: &[&str]| {
        String::from_utf8(
            Command::new("rustc")
                .args(args)
                .output()
                .expect("rustc")
                .stdout,
        )
        .unwrap()
    };
    let sysroot = out(&["--print", "sysroot"]);
    let host = out(&["-vV"])
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc host triple");
    Path::new(sysroot.trim()).join(format!("lib/rustlib/{host}/bin/rust-lld"))
}

/// Lower, compile and link `k` to an HSACO.
fn hsaco(llc: &str, k: &Kernel, dir: &Path, tag: &str) -> &'static [u8] {
    let ll = flydsl_codegen::lower(k).expect("lower the test kernel");
    let (ll_path, o_path, so_path) = (
        dir.join(format!("{tag}.ll")),
        dir.join(format!("{tag}.o")),
        dir.join(format!("{tag}.hsaco")),
    );
    std::fs::write(&ll_path, ll).unwrap();
    let st = Command::new(llc)
        .args([
            "-O3",
            "-mtriple=amdgcn-amd-amdhsa",
            &format!("-mcpu={}", k.target.mcpu()),
            "-filetype=obj",
        ])
        .arg(&ll_path)
        .arg("-o")
        .arg(&o_path)
        .status()
        .unwrap();
    assert!(st.success(), "llc failed on {}", ll_path.display());
    let st = Command::new(rust_lld())
        .args(["-flavor", "gnu", "-shared"])
        .arg(&o_path)
        .arg("-o")
        .arg(&so_path)
        .status()
        .unwrap();
    assert!(st.success(), "rust-lld failed");
    leak(std::fs::read(&so_path).unwrap())
}

#[test]
fn vadd_through_the_fake_hip_runtime() {
    let Some(llc) = llc() else {
        println!("skipped: llc-22 not found (set FLYDSL_LLC)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("flydsl-rt-hip-fake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let k = vadd(Target::Gfx942, 256);
    std::fs::write(dir.join("vadd.gfx942.ir"), flydsl_ir::to_bytes(&k)).unwrap();
    let code = hsaco(&llc, &k, &dir, "vadd");

    std::env::set_var("FLYDSL_HIP_LIB", fake_lib());
    std::env::set_var("FLYDSL_FAKE_HIP_IR_DIR", &dir);
    std::env::remove_var("FLYDSL_FAKE_HIP_ARCH");

    let devs = Device::enumerate(Backend::Hip).unwrap();
    assert_eq!(devs.len(), 1);
    let dev = &devs[0];
    assert_eq!(dev.backend(), Backend::Hip);
    assert_eq!(dev.target(), Target::Gfx942);
    assert_eq!(dev.arch(), "gfx942:sramecc+:xnack-");
    assert_eq!(
        (dev.wave_size(), dev.max_lds_bytes(), dev.compute_units()),
        (64, 65536, 304)
    );
    assert_eq!(&Device::best().unwrap(), dev, "HIP is preferred");

    let vadd_table = table("demo", vec![(k.clone(), Some(code))]);
    let n = 1000;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let b: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
    let da = DeviceBuffer::from_slice(dev, &a).unwrap();
    let db = DeviceBuffer::from_slice(dev, &b).unwrap();
    let dc = DeviceBuffer::<f32>::zeroed(dev, n).unwrap();
    let mut args = KernelArgs::new(48);
    args.tensor(0, &da);
    args.tensor(16, &db);
    args.tensor(32, &dc);
    let s = dev.stream().unwrap();
    let start = s.record_event().unwrap();
    for _ in 0..2 {
        // SAFETY: the kernel guards its index with c.len; all lengths are n.
        unsafe { s.launch(vadd_table, LaunchConfig::for_elements(n as u64, 256), &args) }.unwrap();
    }
    let end = s.record_event().unwrap();
    s.synchronize().unwrap();
    end.synchronize().unwrap();
    assert!(Event::elapsed_ms(&start, &end).unwrap() >= 0.0);
    let c = dc.to_vec().unwrap();
    for i in 0..n {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }

    // A code object whose kernel has another signature than the IR: caught before loading.
    let mut other = k.clone();
    other.params.push(Param {
        name: "extra".into(),
        kind: ParamKind::Scalar(ScalarType::I32),
    });
    other.values.push(flydsl_ir::Type::s(ScalarType::I32));
    other
        .param_values
        .push(vec![flydsl_ir::ValueId(other.values.len() as u32 - 1)]);
    let wrong_code = hsaco(&llc, &other, &dir, "vadd_extra");
    let wrong = table_with_code(&k, wrong_code);
    // SAFETY: rejected before launching.
    let err =
        unsafe { s.launch(wrong, LaunchConfig::for_elements(n as u64, 256), &args) }.unwrap_err();
    assert!(matches!(err, Error::CodeObjectMismatch { .. }), "{err}");
    assert!(err.to_string().contains("extra"), "{err}");

    // Sim-only variants (no code object) are a MissingVariant on HIP.
    let sim_only = table("fly-demo", vec![(k.clone(), None)]);
    // SAFETY: rejected before launching.
    let err = unsafe { s.launch(sim_only, LaunchConfig::linear(1, 64), &args) }.unwrap_err();
    assert!(
        err.to_string()
            .contains("fly-demo = { features = [\"gfx942\"] }"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn table_with_code(k: &Kernel, code: &'static [u8]) -> &'static KernelVariants {
    table("demo", vec![(k.clone(), Some(code))])
}
