//! Norm benches: RMSNorm / LayerNorm forward (bf16, f32) at the shapes and backward
//! (bf16). Bytes: x read + y written + weights read once (forward); x, dy read, dx written,
//! gamma read and dgamma written (backward) — the same counting as `bench/peers.py`. Also,
//! with no torch peer, the widest hidden sizes (14336, 16384) for RMSNorm's dynamic-quant
//! forward (x read, q and yscale written) and both backwards in bf16 and f32: the kernels
//! that serve them differ from the bench shapes' (4 tiles a thread, or the generic path).

use crate::bench_ctx::{add, e, report, Ctx, FWD_SHAPES, NORM_BWD_SHAPES, R};
use crate::elem::{inputs, Dtype};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::DeviceBuffer;
use flydsl_testutil::compare::Storage;

pub(crate) fn fwd<T: fly_norm::Element + Storage>(
    c: &mut Ctx,
    dt: Dtype,
    shape: (usize, usize),
) -> R<()> {
    let (m, n) = c.shape(shape);
    let x = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(1, m * n)).map_err(e)?;
    let g = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(2, n)).map_err(e)?;
    let b = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(3, n)).map_err(e)?;
    let mut y = DeviceBuffer::<T>::zeroed(&c.dev, m * n).map_err(e)?;
    let s = &c.stream;
    let args = fly_norm::NormArgs::new(m, n);
    let es = dt.bytes() as usize;
    let ms = c.timer.median(s, &mut || {
        fly_norm::rms_norm(s, &x, &g, &mut y, args).map_err(e)
    })?;
    add(
        &mut c.rows,
        "rmsnorm_fwd",
        dt.name(),
        (m, n),
        ms,
        (2 * m * n * es + n * es) as f64,
    );
    let ms = c.timer.median(s, &mut || {
        fly_norm::layer_norm(s, &x, &g, Some(&b), &mut y, args).map_err(e)
    })?;
    add(
        &mut c.rows,
        "layernorm_fwd",
        dt.name(),
        (m, n),
        ms,
        (2 * m * n * es + 2 * n * es) as f64,
    );
    Ok(())
}

/// The widest hidden sizes (see the module docs).
const WIDE_SHAPES: [(usize, usize); 2] = [(4096, 14336), (4096, 16384)];

fn fwd_quant<T: fly_norm::Element + Storage>(
    c: &mut Ctx,
    dt: Dtype,
    shape: (usize, usize),
) -> R<()> {
    let (m, n) = c.shape(shape);
    let x = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(7, m * n)).map_err(e)?;
    let g = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(8, n)).map_err(e)?;
    let mut q = DeviceBuffer::<i8>::zeroed(&c.dev, m * n).map_err(e)?;
    let mut ys = DeviceBuffer::<f32>::zeroed(&c.dev, m).map_err(e)?;
    let s = &c.stream;
    let args = fly_norm::NormArgs::new(m, n);
    let ms = c.timer.median(s, &mut || {
        fly_norm::rms_norm_quant(s, &x, &g, None, &mut q, &mut ys, args).map_err(e)
    })?;
    let es = dt.bytes() as usize;
    let bytes = (m * n * es + m * n + 4 * m + n * es) as f64;
    add(
        &mut c.rows,
        "rmsnorm_fwd_quant",
        dt.name(),
        (m, n),
        ms,
        bytes,
    );
    Ok(())
}

pub(crate) fn bwd<T: fly_norm::Element + Storage>(
    c: &mut Ctx,
    dt: Dtype,
    shape: (usize, usize),
) -> R<()> {
    let (m, n) = c.shape(shape);
    let x = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(4, m * n)).map_err(e)?;
    let dy = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(5, m * n)).map_err(e)?;
    let g = DeviceBuffer::from_slice(&c.dev, &inputs::<T>(6, n)).map_err(e)?;
    let mean = DeviceBuffer::from_slice(&c.dev, &vec![0.1f32; m]).map_err(e)?;
    let rstd = DeviceBuffer::from_slice(&c.dev, &vec![1.3f32; m]).map_err(e)?;
    let mut dx = DeviceBuffer::<T>::zeroed(&c.dev, m * n).map_err(e)?;
    let mut dg = DeviceBuffer::<T>::zeroed(&c.dev, n).map_err(e)?;
    let mut db = DeviceBuffer::<T>::zeroed(&c.dev, n).map_err(e)?;
    let s = &c.stream;
    let args = fly_norm::NormBwdArgs::new(m, n);
    let es = dt.bytes() as usize;
    let bytes = (3 * m * n * es + 2 * n * es) as f64;
    let ms = c.timer.median(s, &mut || {
        fly_norm::rms_norm_bwd(s, &x, &g, &dy, &rstd, None, &mut dx, &mut dg, args).map_err(e)
    })?;
    add(&mut c.rows, "rmsnorm_bwd", dt.name(), (m, n), ms, bytes);
    let ms = c.timer.median(s, &mut || {
        fly_norm::layer_norm_bwd(
            s, &x, &g, &dy, &mean, &rstd, &mut dx, &mut dg, &mut db, args,
        )
        .map_err(e)
    })?;
    add(
        &mut c.rows,
        "layernorm_bwd",
        dt.name(),
        (m, n),
        ms,
        bytes + (n * es) as f64,
    );
    Ok(())
}

pub fn run(c: &mut Ctx) -> R<()> {
    let all = [Dtype::BF16, Dtype::F16, Dtype::F32];
    for dt in c.dtypes(&[Dtype::BF16, Dtype::F32], &all) {
        for sh in c.shapes2(&FWD_SHAPES) {
            let r = match dt {
                Dtype::BF16 => fwd::<bf16>(c, dt, sh),
                Dtype::F16 => fwd::<f16>(c, dt, sh),
                _ => fwd::<f32>(c, dt, sh),
            };
            report("norm_fwd", sh, r);
        }
    }
    for dt in c.dtypes(&[Dtype::BF16], &all) {
        for sh in c.shapes2(&NORM_BWD_SHAPES) {
            let r = match dt {
                Dtype::BF16 => bwd::<bf16>(c, dt, sh),
                Dtype::F16 => bwd::<f16>(c, dt, sh),
                _ => bwd::<f32>(c, dt, sh),
            };
            report("norm_bwd", sh, r);
        }
    }
    // The widest hidden sizes only with the default shapes and dtypes.
    if !c.shapes.is_empty() || !c.dtypes.is_empty() {
        return Ok(());
    }
    for sh in WIDE_SHAPES {
        report("norm_fwd_quant", sh, fwd_quant::<bf16>(c, Dtype::BF16, sh));
        report("norm_fwd_quant", sh, fwd_quant::<f32>(c, Dtype::F32, sh));
        report("norm_bwd", sh, bwd::<bf16>(c, Dtype::BF16, sh));
        report("norm_bwd", sh, bwd::<f32>(c, Dtype::F32, sh));
    }
    Ok(())
}
