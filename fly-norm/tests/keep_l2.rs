//! The forward with the keep-in-L2 hint forced on (`FLYDSL_KEEP_L2=1`, set before the first
//! launch of this test binary, which runs as its own process): every forward family on every
//! vectorised path (the paths that branch on the hint) with every option set (so the hinted
//! loads of x and of the residual both run), on the sm_90 Sim (the only target whose kernels
//! branch on it) and on the CUDA device when there is one, against the CPU reference.

mod common;

use common::{cuda_stream, fwd_case, n_for_fwd, sim};
use fly_norm::{Element, Norm, Path};
use flydsl_rt::{Stream, Target};
use flydsl_testutil::compare::Storage;
use flydsl_testutil::norm::NormDtype;
use half::{bf16, f16};

const PATHS: [Path; 5] = [
    Path::Rows(1),
    Path::Rows(4),
    Path::Fast(2),
    Path::Fast(4),
    Path::Fast(8),
];

fn family<T: Element + NormDtype, W: Element + Storage>(s: &Stream, norm: Norm, m: usize) {
    for (pi, path) in PATHS.into_iter().enumerate() {
        let n = n_for_fwd(path, T::DTYPE, 32);
        for (oi, o) in fwd_case::OPTS.iter().enumerate() {
            fwd_case::case::<T, W>(s, norm, m, n, *o, (pi * 10 + oi) as u64);
        }
    }
}

#[test]
fn forward_with_the_hint_forced_on() {
    // The only test of this binary: no other thread reads the environment meanwhile.
    std::env::set_var("FLYDSL_KEEP_L2", "1");
    assert_eq!(flydsl_rt::hints::keep_l2_override(), Some(true));
    let mut streams = vec![(sim(Target::Sm90), 3)];
    streams.extend(cuda_stream().map(|s| (s, 67)));
    for (s, m) in &streams {
        for norm in [Norm::Layer, Norm::Rms] {
            family::<f32, f32>(s, norm, *m);
            family::<bf16, bf16>(s, norm, *m);
        }
        family::<f16, f16>(s, Norm::Layer, *m);
        family::<bf16, f32>(s, Norm::Rms, *m);
    }
}
