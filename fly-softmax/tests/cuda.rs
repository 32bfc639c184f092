//! The sm90 variants on a real NVIDIA GPU (CUDA backend) against the CPU reference. Skips with
//! a printed reason when there is no CUDA device or the build has no sm90 code objects (fails
//! instead where `FLYDSL_REQUIRE_GPU` is set: `flydsl_testutil::gpu`).

mod common;

use common::{check_bwd, check_fwd, cuda_sm90_device};
use fly_softmax::plan::all;
use fly_softmax::table::{Kind, Path};
use fly_softmax::Dispatch;
use flydsl_rt::half::{bf16, f16};

#[test]
fn sm90_every_variant_on_cuda() {
    let Some(dev) = cuda_sm90_device() else {
        return;
    };
    for kind in [Kind::Forward, Kind::Backward] {
        for v in all(kind) {
            if v.config.amd_only() {
                continue;
            }
            let c = v.config;
            let n = match c.path {
                Path::Vector => c.class as usize - 8,
                Path::Scalar => c.class as usize - 3,
                Path::LoopVector => 65536 + 8,
                Path::LoopScalar => 40009,
                Path::Ragged => c.class as usize - 3,
                Path::LoopRagged | Path::Split => 150_001,
            };
            let m = 37;
            macro_rules! run {
                ($t:ty) => {{
                    let name = v.name::<$t>();
                    let what = format!("{name} on {} ({m}x{n})", dev.name());
                    // A class whose rows do not fit in registers in this dtype is never
                    // dispatched for it.
                    let serves = c.serves(<$t as fly_softmax::Element>::DTYPE);
                    match kind {
                        _ if !serves => {}
                        Kind::Forward => {
                            check_fwd::<$t>(&what, &dev, m, n, Dispatch::Variant(&name))
                        }
                        Kind::Backward => {
                            check_bwd::<$t>(&what, &dev, m, n, Dispatch::Variant(&name))
                        }
                    }
                }};
            }
            run!(f32);
            run!(f16);
            run!(bf16);
        }
    }
}

#[test]
fn sm90_dispatch_on_cuda_odd_and_large_shapes() {
    let Some(dev) = cuda_sm90_device() else {
        return;
    };
    for (m, n) in [
        (0, 7),
        (1, 1),
        (37, 127),
        (5, 1021),
        (64, 8192),
        (3, 100_003),
        (4096, 1024),
        // Ragged rows (n not a multiple of the vector width) through the resident and the
        // looped ragged paths, at sizes on both sides of the classes.
        (9, 3),
        (17, 129),
        (4096, 127),
        (9, 1021),
        (5, 8191),
        (5, 32767),
        (5, 32769),
        (3, 150_001),
        // Split rows: a row alone, and both sides of the 2-rows-per-SM threshold (264 on
        // the H200's 132 SMs).
        (1, 150_001),
        (1, 262_144),
        (263, 65_537),
        (264, 65_537),
        // Many very short rows (the n = 128 class).
        (65536, 128),
    ] {
        check_fwd::<bf16>(&format!("bf16 {m}x{n}"), &dev, m, n, Dispatch::Default);
        check_fwd::<f32>(&format!("f32 {m}x{n}"), &dev, m, n, Dispatch::Default);
        check_bwd::<f16>(&format!("bwd f16 {m}x{n}"), &dev, m, n, Dispatch::Default);
    }
}
