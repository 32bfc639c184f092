//! Softmax benches: forward (bf16, f32) and backward (bf16) at the shapes, or at the
//! caller's. Bytes: x read + y written (forward); y, dy read and dx written (backward), the
//! same counting as `bench/peers.py`.

use crate::bench_ctx::{add, e, report, Ctx, FWD_SHAPES, R, SMX_BWD_SHAPES};
use crate::elem::{inputs, Dtype};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::DeviceBuffer;
use flydsl_testutil::compare::Storage;

pub(crate) fn run(c: &mut Ctx) -> R<()> {
    let all = [Dtype::BF16, Dtype::F16, Dtype::F32];
    for dt in c.dtypes(&[Dtype::BF16, Dtype::F32], &all) {
        for sh in c.shapes2(&FWD_SHAPES) {
            let r = match dt {
                Dtype::BF16 => softmax_fwd::<bf16>(c, dt, sh),
                Dtype::F16 => softmax_fwd::<f16>(c, dt, sh),
                _ => softmax_fwd::<f32>(c, dt, sh),
            };
            report("softmax_fwd", sh, r);
        }
    }
    for dt in c.dtypes(&[Dtype::BF16], &all) {
        for sh in c.shapes2(&SMX_BWD_SHAPES) {
            let r = match dt {
                Dtype::BF16 => softmax_bwd::<bf16>(c, dt, sh),
                Dtype::F16 => softmax_bwd::<f16>(c, dt, sh),
                _ => softmax_bwd::<f32>(c, dt, sh),
            };
            report("softmax_bwd", sh, r);
        }
    }
    Ok(())
}

pub(crate) fn softmax_fwd<T: fly_softmax::Element + Storage>(
    c: &mut Ctx,
    dt: Dtype,
    shape: (usize, usize),
) -> R<()> {
    let (m, n) = c.shape(shape);
    let x = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(1, m * n)).map_err(e)?;
    let mut y = DeviceBuffer::<T>::zeroed(&c.dev, m * n).map_err(e)?;
    let s = &c.stream;
    let ms = c.timer.median(s, &mut || {
        fly_softmax::softmax(s, &x, &mut y, fly_softmax::SoftmaxArgs { m, n }).map_err(e)
    })?;
    add(
        &mut c.rows,
        "softmax_fwd",
        dt.name(),
        (m, n),
        ms,
        (2 * m * n * dt.bytes() as usize) as f64,
    );
    Ok(())
}

pub(crate) fn softmax_bwd<T: fly_softmax::Element + Storage>(
    c: &mut Ctx,
    dt: Dtype,
    shape: (usize, usize),
) -> R<()> {
    let (m, n) = c.shape(shape);
    let y = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(2, m * n)).map_err(e)?;
    let dy = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(3, m * n)).map_err(e)?;
    let mut dx = DeviceBuffer::<T>::zeroed(&c.dev, m * n).map_err(e)?;
    let s = &c.stream;
    let ms = c.timer.median(s, &mut || {
        fly_softmax::softmax_backward(s, &y, &dy, &mut dx, fly_softmax::SoftmaxArgs { m, n })
            .map_err(e)
    })?;
    add(
        &mut c.rows,
        "softmax_bwd",
        dt.name(),
        (m, n),
        ms,
        (3 * m * n * dt.bytes() as usize) as f64,
    );
    Ok(())
}
