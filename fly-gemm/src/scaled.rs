//! [`gemm_scaled`]: the fp8 / int8 GEMM with per-row and per-column scales.

use crate::quant::QuantElement;
use crate::table::{self, scaled_key, Tile, TILES};
use crate::{kernels, GemmArgs, MAX_DIM};
use flydsl_rt::validate::Call;
use flydsl_rt::{
    DeviceBuffer, Element, LaunchConfig, Result, Stream, Target, TensorMap, TmaSwizzle,
};

/// `C = act((A * B^T) * scale_a[m] * scale_b[n] + bias[n])` on `stream` with 8-bit inputs
/// `Q` ([`QuantElement`]: `flydsl_rt::F8E4M3FN`, f32 accumulation, or `i8`, exact s32
/// accumulation) and output `T` (bf16 or f16).
///
/// A is `[m, k]` and B `[n, k]`, both row-major `Q` (make them with
/// [`crate::quantize_rows`]); `scale_a` has `m` and `scale_b` `n` f32 values; bias `[n]`
/// (in `T`) is required exactly when the epilogue has one; C is `[m, n]` row-major `T`. The
/// accumulator is converted to f32 (int8: from the exact s32 sum), multiplied by
/// `scale_a[row]` and then `scale_b[col]`, the bias and activation are applied in f32 and
/// the result is rounded once.
///
/// Errors (before anything is written): a length other than `m * k` (A), `n * k` (B), `m`
/// (`scale_a`), `n` (`scale_b`, bias) or `m * n` (C), a missing or unexpected bias, `n` or
/// `k` of 0, `k` not a multiple of 16 (TMA row strides are 16-byte multiples: pad K with
/// zeros), a dimension past [`MAX_DIM`], buffers on another device, and a device this build
/// has no 8-bit kernel for (so far: sm90 and its Sim only).
///
/// The tile config comes from [`Tile::pick`]: 128 x 256 when that makes at least
/// [`table::FILL_TILES`] workgroups, else 128 x 128, else 64 x 64 (small M is memory-bound;
/// more, smaller workgroups read B with more SMs). [`gemm_scaled_with`] pins one.
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target, F8E4M3FN};
/// use fly_gemm::{gemm_scaled, quantize_rows, Epilogue, GemmArgs};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let (m, n, k) = (2, 3, 16);
/// let (a, sa) = quantize_rows::<F8E4M3FN>(&vec![0.5; m * k], m, k)?;
/// let (b, sb) = quantize_rows::<F8E4M3FN>(&vec![2.0; n * k], n, k)?;
/// let up = |v: &[F8E4M3FN]| DeviceBuffer::from_slice(&dev, v);
/// let (a, b) = (up(&a)?, up(&b)?);
/// let (sa, sb) = (DeviceBuffer::from_slice(&dev, &sa)?, DeviceBuffer::from_slice(&dev, &sb)?);
/// let mut c = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, epilogue: Epilogue::None };
/// gemm_scaled(&s, &a, &b, &sa, &sb, None, &mut c, args)?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == 16.0)); // 16 * 0.5 * 2
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm_scaled<Q: QuantElement, T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
) -> Result<()> {
    let tile = Tile::pick(args.m, args.n);
    run(
        "fly_gemm::gemm_scaled",
        stream,
        a,
        b,
        scale_a,
        scale_b,
        bias,
        c,
        args,
        tile,
    )
}

/// [`gemm_scaled`] with a pinned tile config (one of [`TILES`]) instead of the
/// dispatcher's ([`Tile::pick`]): for benchmarks and callers who tune their own shapes.
/// Every config is correct at every shape [`gemm_scaled`] accepts.
///
/// Errors: those of [`gemm_scaled`], and a `tile` that is not in [`TILES`].
///
/// ```
/// use flydsl_rt::{half::f16, Device, DeviceBuffer, Target};
/// use fly_gemm::{gemm_scaled_with, table::TILES, Epilogue, GemmArgs};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let (m, n, k) = (3, 16, 32);
/// let a = DeviceBuffer::from_slice(&dev, &vec![2i8; m * k])?;
/// let b = DeviceBuffer::from_slice(&dev, &vec![-1i8; n * k])?;
/// let sa = DeviceBuffer::from_slice(&dev, &vec![0.5f32; m])?;
/// let sb = DeviceBuffer::from_slice(&dev, &vec![0.25f32; n])?;
/// let mut c = DeviceBuffer::<f16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, epilogue: Epilogue::None };
/// gemm_scaled_with(&s, &a, &b, &sa, &sb, None, &mut c, args, TILES[2])?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == -8.0)); // 32 * -2 * 0.125
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm_scaled_with<Q: QuantElement, T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
) -> Result<()> {
    let op = "fly_gemm::gemm_scaled_with";
    if !TILES.contains(&tile) {
        return Err(Call::new(op).error(
            "tile",
            format_args!("{tile:?}"),
            "not one of the built 8-bit tile configs",
            format_args!("pass one of fly_gemm::table::TILES: {TILES:?}"),
        ));
    }
    run(op, stream, a, b, scale_a, scale_b, bias, c, args, tile)
}

#[allow(clippy::too_many_arguments)]
fn run<Q: QuantElement, T: Element>(
    op: &'static str,
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
) -> Result<()> {
    let call = Call::new(op);
    let GemmArgs { m, n, k, epilogue } = args;
    for (name, v) in [("m", m), ("n", n), ("k", k)] {
        call.at_most(name, v, MAX_DIM, "split the GEMM")?;
    }
    if n == 0 || k == 0 {
        let (arg, v) = if n == 0 { ("n", n) } else { ("k", k) };
        return Err(call.error(
            arg,
            v,
            "B needs at least one row and one column",
            "pass n >= 1 and k >= 1 (an empty batch is m = 0)",
        ));
    }
    if !k.is_multiple_of(16) {
        return Err(call.error(
            "k",
            k,
            "k must be a multiple of 16 for 8-bit inputs (TMA reads rows whose byte strides \
             are multiples of 16)",
            "pad A and B with zero columns up to the next multiple of 16",
        ));
    }
    let mk = call.product(m, k)?;
    let nk = call.product(n, k)?;
    let mn = call.product(m, n)?;
    call.buffer("a", a, stream, mk, "m * k")?;
    call.buffer("b", b, stream, nk, "n * k")?;
    call.buffer("scale_a", scale_a, stream, m, "m (one scale per row of A)")?;
    call.buffer("scale_b", scale_b, stream, n, "n (one scale per row of B)")?;
    call.buffer("c", c, stream, mn, "m * n")?;
    match (epilogue.has_bias(), bias) {
        (true, Some(bias)) => call.buffer("bias", bias, stream, n, "n")?,
        (true, None) => {
            return Err(call.error(
                "bias",
                "None",
                format_args!("epilogue {epilogue:?} adds a bias"),
                "pass Some(bias) with n elements, or Epilogue::None",
            ))
        }
        (false, Some(_)) => {
            return Err(call.error(
                "bias",
                "Some(..)",
                "Epilogue::None reads no bias",
                "pass None, or an epilogue with a bias",
            ))
        }
        (false, None) => {}
    }
    let target = stream.device().target();
    let launcher = match kernels::wgmma_scaled::<T>(scaled_key(Q::QUANT, epilogue, tile)) {
        Some(l) if target == Target::Sm90 => l,
        _ => {
            return Err(call.error(
                "stream",
                format_args!(
                    "a {target} device with {} inputs and {} output",
                    Q::QUANT.name(),
                    T::DTYPE
                ),
                "fly-gemm has 8-bit (e4m3fn, i8) kernels with bf16 or f16 output on sm90 (and \
                 the sm90 Sim) only so far",
                "run on an H100/H200 or on Device::sim(Target::Sm90)",
            ))
        }
    };
    call.kernel(stream, launcher.kernel)?;
    if m == 0 {
        return Ok(());
    }
    let (m64, n64, k64) = (m as u64, n as u64, k as u64);
    let (bk, bm, bn) = (table::BK8, tile.bm, tile.bn);
    let a_map = TensorMap::tiled(a, &[k64, m64], &[k64], &[bk, bm], TmaSwizzle::B128)?;
    let b_map = TensorMap::tiled(b, &[k64, n64], &[k64], &[bk, bn], TmaSwizzle::B128)?;
    let tiles = tile.tiles(m, n);
    let grid = u32::try_from(tiles).map_err(|_| {
        call.error(
            "m, n",
            format_args!("{m}, {n}"),
            format_args!("{tiles} tiles of {bm} x {bn} exceed the grid's 2^32 - 1 workgroups"),
            "split the GEMM along M",
        )
    })?;
    let cfg = LaunchConfig::linear(grid, tile.threads()).with_dynamic_lds(tile.lds_bytes());
    // Without a bias the kernel never reads it, but the launcher takes a `T` buffer and
    // C is borrowed mutably: pass an empty stand-in (no device allocation happens for zero
    // elements; the 16-bit `gemm` passes A, which has the output's type there).
    let placeholder;
    let bias_buf: &DeviceBuffer<T> = match bias {
        Some(b) => b,
        None => {
            placeholder = DeviceBuffer::<T>::alloc(stream.device(), 0)?;
            &placeholder
        }
    };
    // SAFETY: the maps describe `a` and `b` exactly (their lengths were checked: m * k and
    // n * k, TensorMap::tiled re-checks the extents), the scales hold m and n values, C
    // holds m * n elements and bias n (or is unread); the kernel guards rows < m and
    // columns < n and TMA zero-fills past the edges; m, n, k fit in i32 (MAX_DIM).
    unsafe {
        (launcher.launch)(
            stream,
            cfg,
            a_map.buffer(),
            b_map.buffer(),
            scale_a,
            scale_b,
            bias_buf,
            c,
            m as i32,
            n as i32,
            k as i32,
        )
    }?;
    Ok(())
}
