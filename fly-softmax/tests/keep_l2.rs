//! The forward with the keep-in-L2 hint forced on (`FLYDSL_KEEP_L2=1`, set before the first
//! launch of this test binary, which runs as its own process): every forward variant that
//! sm_90 builds, on the sm_90 Sim (the only target whose kernels branch on the hint) and, when
//! present, on the CUDA device, against the CPU reference.

mod common;

use common::{check_fwd, cuda_sm90_device};
use fly_softmax::plan::all;
use fly_softmax::table::{Kind, Path};
use fly_softmax::Dispatch;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Backend, Device, Target};

#[test]
fn forward_with_the_hint_forced_on() {
    // The only test of this binary: no other thread reads the environment meanwhile.
    std::env::set_var("FLYDSL_KEEP_L2", "1");
    assert_eq!(flydsl_rt::hints::keep_l2_override(), Some(true));
    let mut devices = vec![Device::sim(Target::Sm90)];
    devices.extend(cuda_sm90_device());
    let mut checked = 0;
    for dev in &devices {
        for v in all(Kind::Forward) {
            let c = v.config;
            if c.amd_only() {
                continue;
            }
            // Short rows on the Sim (an interpreter), longer ones on the GPU.
            let sim = dev.backend() == Backend::Sim;
            let n = match c.path {
                Path::Vector => c.class as usize - 8,
                Path::Scalar => c.class as usize - 3,
                Path::LoopVector if sim => 3 * c.threads as usize * 8 + 40,
                Path::LoopVector => 65536 + 8,
                Path::LoopScalar => 1021,
                Path::Ragged => c.class as usize - 3,
                Path::LoopRagged | Path::Split if sim => 2 * 8192 + 43,
                Path::LoopRagged | Path::Split => 150_001,
            };
            let m = if sim && n >= 8192 { 2 } else { 37 };
            macro_rules! run {
                ($t:ty) => {{
                    let name = v.name::<$t>();
                    if c.serves(<$t as fly_softmax::Element>::DTYPE) {
                        let what = format!("{name} with the hint on {} ({m}x{n})", dev.name());
                        check_fwd::<$t>(&what, dev, m, n, Dispatch::Variant(&name));
                        checked += 1;
                    }
                }};
            }
            run!(f32);
            run!(f16);
            run!(bf16);
        }
    }
    assert!(checked >= 10, "only {checked} variants checked");
}
