//! Norm verification: RMSNorm / LayerNorm forward against the CPU reference.

use crate::elem::{inputs, Dtype};
use crate::verify_outcome::{Outcome, R};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{DeviceBuffer, Stream};
use flydsl_testutil::compare::{max_abs_err, widen};
use flydsl_testutil::norm::{layer_norm_fwd, rms_norm_fwd, NormDtype};

fn e(x: flydsl_rt::Error) -> String {
    x.to_string()
}

fn case<T: fly_norm::Element + NormDtype>(
    family: &str,
    s: &Stream,
    m: usize,
    n: usize,
) -> R<Outcome> {
    let dev = s.device();
    let x: Vec<T> = inputs(21, m * n);
    let g: Vec<T> = inputs(22, n);
    let b: Vec<T> = inputs(23, n);
    let (dx, dg, db) = (
        DeviceBuffer::from_slice(dev, &x).map_err(e)?,
        DeviceBuffer::from_slice(dev, &g).map_err(e)?,
        DeviceBuffer::from_slice(dev, &b).map_err(e)?,
    );
    let mut y = DeviceBuffer::<T>::zeroed(dev, m * n).map_err(e)?;
    let args = fly_norm::NormArgs::new(m, n);
    let want = if family == "rmsnorm" {
        fly_norm::rms_norm(s, &dx, &dg, &mut y, args).map_err(e)?;
        rms_norm_fwd::<T>(&widen(&x), None, &widen(&g), m, n, args.eps as f64).y
    } else {
        fly_norm::layer_norm(s, &dx, &dg, Some(&db), &mut y, args).map_err(e)?;
        layer_norm_fwd::<T>(
            &widen(&x),
            None,
            &widen(&g),
            Some(&widen(&b)),
            m,
            n,
            args.eps as f64,
        )
        .y
    };
    let got = widen(&y.to_vec().map_err(e)?);
    let w = max_abs_err(&got, &want);
    let peak = want
        .iter()
        .fold(0f64, |a, &v| a.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    let tol = T::TOL.fwd_atol;
    let pass = if w.abs_err <= tol {
        Ok(())
    } else {
        Err(format!(
            "element {}: got {}, want {}",
            w.index, w.got, w.want
        ))
    };
    Ok(Outcome {
        max_abs: w.abs_err,
        max_rel: w.abs_err / peak,
        tolerance: format!("max abs {tol:e}"),
        pass,
    })
}

pub fn run(family: &str, s: &Stream, dt: Dtype, m: usize, n: usize) -> R<Outcome> {
    match dt {
        Dtype::F32 => case::<f32>(family, s, m, n),
        Dtype::F16 => case::<f16>(family, s, m, n),
        Dtype::BF16 => case::<bf16>(family, s, m, n),
    }
}
