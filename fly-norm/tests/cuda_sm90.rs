//! On a CUDA device (sm_90), every sm90 variant against the CPU reference: every forward
//! family on every path with every option set, and every backward family and strategy, plus
//! the common hidden sizes. Skips (with the reason printed) when there is no CUDA device or
//! the crate was built without the `sm90` feature; fails instead when `FLYDSL_REQUIRE_GPU`
//! is set (see `flydsl_testutil::gpu`).

mod common;

use common::{bwd_case, fwd_case, n_for_bwd, n_for_fwd};
use fly_norm::{kernels, BwdStrategy, Element, Norm, Path};
use flydsl_rt::{Backend, Device, Stream, Target};
use flydsl_testutil::compare::Storage;
use flydsl_testutil::gpu;
use flydsl_testutil::norm::NormDtype;
use half::{bf16, f16};

fn cuda_stream() -> Option<Stream> {
    let devs = match Device::enumerate(Backend::Cuda) {
        Ok(d) => d,
        Err(e) => {
            gpu::skip(&format!("no CUDA backend: {e}"));
            return None;
        }
    };
    let Some(dev) = devs.into_iter().find(|d| d.target() == Target::Sm90) else {
        gpu::skip("no sm_90 CUDA device");
        return None;
    };
    if let Some(k) = kernels::ALL
        .iter()
        .find(|k| k.for_target(Target::Sm90).and_then(|v| v.code).is_none())
    {
        gpu::skip(&format!(
            "kernel {} has no sm90 code object; build with --features sm90",
            k.name
        ));
        return None;
    }
    Some(dev.stream().expect("CUDA stream"))
}

fn fwd_family<T: Element + NormDtype, W: Element + Storage>(s: &Stream, norm: Norm) {
    let paths = [
        Path::Rows(1),
        Path::Rows(4),
        Path::Fast(2),
        Path::Fast(4),
        Path::Fast(8),
        Path::Generic,
    ];
    for (pi, path) in paths.into_iter().enumerate() {
        let n = n_for_fwd(path, T::DTYPE, 32);
        for (oi, o) in fwd_case::OPTS.iter().enumerate() {
            fwd_case::case::<T, W>(s, norm, 67, n, *o, (pi * 10 + oi) as u64);
        }
    }
    for n in [1024, 2048, 4096, 5120, 7168, 8192, 14336, 16384, 1, 127] {
        fwd_case::case::<T, W>(s, norm, 9, n, fwd_case::OPTS[0], n as u64);
    }
}

fn bwd_family<T: Element + NormDtype, W: Element + Storage>(s: &Stream, norm: Norm) {
    for path in [Path::Fast(1), Path::Fast(2), Path::Fast(4), Path::Generic] {
        let n = n_for_bwd(path, T::DTYPE);
        for strategy in [BwdStrategy::Atomic, BwdStrategy::TwoStage] {
            bwd_case::case::<T, W>(s, norm, 300, n, strategy, norm == Norm::Rms, 11);
        }
    }
}

#[test]
fn every_sm90_variant_on_cuda() {
    let Some(s) = cuda_stream() else { return };
    for norm in [Norm::Layer, Norm::Rms] {
        fwd_family::<f32, f32>(&s, norm);
        fwd_family::<f16, f16>(&s, norm);
        fwd_family::<bf16, bf16>(&s, norm);
        bwd_family::<f32, f32>(&s, norm);
        bwd_family::<f16, f16>(&s, norm);
        bwd_family::<bf16, bf16>(&s, norm);
    }
    fwd_family::<f16, f32>(&s, Norm::Rms);
    fwd_family::<bf16, f32>(&s, Norm::Rms);
    bwd_family::<f16, f32>(&s, Norm::Rms);
    bwd_family::<bf16, f32>(&s, Norm::Rms);
}
