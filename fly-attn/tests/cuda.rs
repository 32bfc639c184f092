//! The sm90 kernels on an H200 (CUDA) against the f64 reference, the same cases as the
//! Sim's `sim.rs` spot checks; skipped with a printed reason without a GPU or sm90 code
//! objects (fails instead where `FLYDSL_REQUIRE_GPU` is set).

mod common;

use common::{check, cuda_sm90_device};
use flydsl_rt::half::{bf16, f16};
use flydsl_testutil::attn::AttnShape;

#[test]
fn h200_matches_the_reference() {
    let Some(dev) = cuda_sm90_device() else {
        return;
    };
    for d in (32..=256).step_by(32) {
        check::<bf16>(
            &dev,
            &AttnShape::dense(2, 129, 127, 4, 2, d, false),
            Some(1),
            d as u64,
        );
        check::<f16>(
            &dev,
            &AttnShape::dense(1, 127, 65, 4, 1, d, true),
            Some(1),
            d as u64 + 1,
        );
    }
    check::<bf16>(
        &dev,
        &AttnShape::dense(2, 1000, 1500, 8, 2, 128, true),
        None,
        3,
    );
    check::<f16>(
        &dev,
        &AttnShape::dense(1, 1, 4096, 8, 8, 64, false),
        Some(8),
        4,
    );
    check::<bf16>(
        &dev,
        &AttnShape::dense(4, 65, 17, 2, 1, 64, true),
        Some(1),
        5,
    );
    let s = AttnShape::varlen(&[17, 0, 300, 1], &[33, 5, 0, 700], 4, 2, 128, true);
    check::<bf16>(&dev, &s, Some(1), 6);
    check::<f16>(&dev, &s, Some(4), 7);
}
