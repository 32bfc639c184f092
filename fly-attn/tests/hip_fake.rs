//! The HIP backend end to end with the real AMD code objects: through the workspace's
//! test-only fake `libamdhip64` (kernarg buffers checked against each HSACO's metadata,
//! kernels run by the Sim from this crate's IR), or a real HIP GPU where one is present.
//! Skipped with a printed reason when neither the fake library nor a GPU is there, or this
//! build has no code object for the device's target.

mod common;

use common::check;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Backend, Device};
use flydsl_testutil::attn::AttnShape;

fn hip_device() -> Option<Device> {
    // The fake reads `<kernel>.<target>.ir` from the build script's output (a real HIP
    // library ignores this); use it when cargo built it next to this test binary and no
    // library was named.
    std::env::set_var("FLYDSL_FAKE_HIP_IR_DIR", env!("OUT_DIR"));
    if std::env::var_os("FLYDSL_HIP_LIB").is_none() {
        let exe = std::env::current_exe().expect("test binary path");
        let dir = exe.parent().expect("test binary folder");
        let found = [dir.join("libamdhip64.so"), dir.join("../libamdhip64.so")]
            .into_iter()
            .find(|p| p.is_file());
        match found {
            Some(p) => std::env::set_var("FLYDSL_HIP_LIB", p),
            None => {
                println!("skipped: no HIP library (build the workspace for the fake one)");
                return None;
            }
        }
    }
    let dev = match Device::enumerate(Backend::Hip) {
        Ok(list) if !list.is_empty() => list.into_iter().next().unwrap(),
        Ok(_) => {
            println!("skipped: no HIP device");
            return None;
        }
        Err(e) => {
            println!("skipped: HIP unavailable ({e})");
            return None;
        }
    };
    let t = dev.target();
    let built = fly_attn::kernel_variants()
        .iter()
        .all(|(_, k)| k.built_targets().any(|b| b == t));
    if !built {
        println!("skipped: no {t} code objects in this build (--features {t} or all-targets)");
        return None;
    }
    Some(dev)
}

#[test]
fn hip_backend_runs_the_code_objects() {
    let Some(dev) = hip_device() else { return };
    check::<bf16>(
        &dev,
        &AttnShape::dense(1, 33, 65, 2, 1, 64, true),
        Some(1),
        1,
    );
    check::<f16>(
        &dev,
        &AttnShape::dense(2, 17, 40, 2, 2, 96, false),
        Some(3),
        2,
    );
    let s = AttnShape::varlen(&[17, 0, 40], &[5, 9, 0], 2, 1, 256, false);
    check::<bf16>(&dev, &s, None, 3);
}
