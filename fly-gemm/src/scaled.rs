//! [`gemm_scaled`]: the fp8 / int8 GEMM with per-row and per-column scales.

use crate::quant::QuantElement;
use crate::table::{self, scaled_key, Quant, Tile, TileConfig, PORTABLE_CONFIGS8, TILES};
use crate::{kernels, BLayout, GemmArgs};
use flydsl_rt::validate::Call;
use flydsl_rt::{
    DeviceBuffer, Element, LaunchConfig, Result, Stream, Target, TensorMap, TmaSwizzle,
};

/// `C = act((A * B^T) * scale_a[m] * scale_b[n] + bias[n])` on `stream` with 8-bit inputs
/// `Q` ([`QuantElement`]: `flydsl_rt::F8E4M3FN` or, on gfx942, `flydsl_rt::F8E4M3FNUZ`,
/// f32 accumulation; `i8`, exact s32 accumulation) and output `T` (bf16 or f16).
///
/// A is `[m, k]` and B `[n, k]`, both row-major `Q` (make them with
/// [`crate::quantize_rows`]), or B in the preshuffled layout ([`BLayout::Preshuffled`],
/// [`crate::preshuffle_b`]; `n % 16 == 0`, `k % 64 == 0`); `scale_a` has `m` and `scale_b`
/// `n` f32 values; bias `[n]` (in `T`) is required exactly when the epilogue has one; C is
/// `[m, n]` row-major `T`. The accumulator is converted to f32 (int8: from the exact s32
/// sum), multiplied by `scale_a[row]` and then `scale_b[col]`, the bias and activation are
/// applied in f32 and the result is rounded once.
///
/// Dispatch: on sm90 with plain B, `k % 16 == 0` and C aligned to two elements (any buffer
/// this crate allocates) the Hopper wgmma kernel with the tile
/// [`Tile::pick_scaled`] chooses ([`gemm_scaled_with`] pins one); everything
/// else (the AMD targets, preshuffled B, other `k` on sm90) takes the portable tile-layer
/// kernel with [`default_config8`], or for preshuffled B where the target reads it global ->
/// registers the reference's direct-B configs ([`gemm_scaled_with_config`] pins one). Any `k >= 1`
/// works with plain B (rows that are not whole 16-byte vectors are read one element at a
/// time).
///
/// Errors (before anything is written): a length other than `m * k` (A), `n * k` (B), `m`
/// (`scale_a`), `n` (`scale_b`, bias) or `m * n` (C), a missing or unexpected bias, `n` or
/// `k` of 0, preshuffled B with `n % 16 != 0` or `k % 64 != 0`, a dimension past
/// [`MAX_DIM`](crate::MAX_DIM) (or a tile's row panel past 2^31 elements), buffers on another device, an
/// input type the device's matrix instructions do not read (e4m3fn on gfx942, e4m3fnuz
/// elsewhere), a device this build has no kernel for.
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
/// let args = GemmArgs { m, n, k, epilogue: Epilogue::None, ..Default::default() };
/// gemm_scaled(&s, &a, &b, &sa, &sb, None, &mut c, args)?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == 16.0)); // 16 * 0.5 * 2
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
///
/// The same call on gfx942 takes e4m3fnuz inputs:
///
/// ```
/// use flydsl_rt::{half::f16, Device, DeviceBuffer, Target, F8E4M3FNUZ};
/// use fly_gemm::{gemm_scaled, quantize_rows, GemmArgs};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream()?;
/// let (m, n, k) = (2, 16, 7); // any k
/// let (a, sa) = quantize_rows::<F8E4M3FNUZ>(&vec![0.5; m * k], m, k)?;
/// let (b, sb) = quantize_rows::<F8E4M3FNUZ>(&vec![-2.0; n * k], n, k)?;
/// let up = |v: &[F8E4M3FNUZ]| DeviceBuffer::from_slice(&dev, v);
/// let (a, b) = (up(&a)?, up(&b)?);
/// let (sa, sb) = (DeviceBuffer::from_slice(&dev, &sa)?, DeviceBuffer::from_slice(&dev, &sb)?);
/// let mut c = DeviceBuffer::<f16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, ..Default::default() };
/// gemm_scaled(&s, &a, &b, &sa, &sb, None, &mut c, args)?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == -7.0)); // 7 * 0.5 * -2
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
    let call = Call::new("fly_gemm::gemm_scaled");
    check(&call, stream, a, b, scale_a, scale_b, bias, c, args)?;
    let tile = Tile::pick_scaled(Q::QUANT, args.m, args.n);
    let wgmma_takes = stream.device().target() == Target::Sm90
        && args.b_layout == BLayout::Plain
        && args.k.is_multiple_of(16)
        && crate::grid::c_pairs_aligned(c)
        && kernels::wgmma_scaled::<T>(scaled_key(Q::QUANT, args.epilogue, tile)).is_some();
    let route = if wgmma_takes {
        Route::Wgmma(
            tile,
            table::split_k(tile, args.m, args.n, args.k, table::BK8 as usize),
        )
    } else {
        let target = stream.device().target();
        Route::Portable(crate::pick_config(
            &PORTABLE_CONFIGS8,
            args,
            exists8::<Q, T>(target),
        ))
    };
    launch(&call, stream, a, b, scale_a, scale_b, bias, c, args, route)
}

/// The portable kernel's general 8-bit config for a shape: the single-stage 16-row tile for
/// `m <= 16` (decode), the 64 x 128 ping-pong tile otherwise (the 16-bit rule of
/// [`crate::default_config`] on [`PORTABLE_CONFIGS8`], with the same exception for
/// preshuffled B in [`gemm_scaled`]).
///
/// ```
/// assert_eq!(fly_gemm::default_config8(1, 4096, 4096).tile_k, 256);
/// assert_eq!(fly_gemm::default_config8(1024, 4096, 4096).lds_stage, 2);
/// ```
pub fn default_config8(m: usize, n: usize, k: usize) -> TileConfig {
    let i = crate::default_config(m, n, k).index().unwrap_or(1);
    PORTABLE_CONFIGS8[i]
}

/// [`gemm_scaled`] on the Hopper wgmma kernel with a pinned tile config (one of [`TILES`])
/// instead of the dispatcher's ([`Tile::pick_scaled`]): for benchmarks and callers who tune their
/// own shapes. Every config is correct at every shape it accepts.
///
/// Errors: those of [`gemm_scaled`], a `tile` that is not in [`TILES`], and what only the
/// portable kernel takes (a target other than sm90, preshuffled B, `k % 16 != 0`, a C view
/// not aligned to two elements).
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
/// let args = GemmArgs { m, n, k, epilogue: Epilogue::None, ..Default::default() };
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
    let call = Call::new("fly_gemm::gemm_scaled_with");
    pinned(
        &call, stream, a, b, scale_a, scale_b, bias, c, args, tile, 1,
    )
}

/// [`gemm_scaled_with`] with K split over `splits` workgroups per tile (1: none): each sums
/// its slice of K into an f32 workspace (fp8 with the same two-level accumulation, int8
/// exactly per slice) and a second kernel adds the slices in order, then applies the
/// scales, bias and activation (deterministic). [`gemm_scaled`] splits K when the tiles fill
/// less than half the device ([`table::split_k`]).
///
/// Errors: those of [`gemm_scaled_with`], `splits` of 0, past [`table::MAX_SPLITS`] or past
/// the K stages (`k.div_ceil(table::BK8)`), and `m` past 65535 with `splits > 1`.
///
/// ```
/// use flydsl_rt::{half::f16, Device, DeviceBuffer, Target};
/// use fly_gemm::{gemm_scaled_with_split, table::TILES, GemmArgs};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let (m, n, k) = (3, 16, 272); // 3 stages of 128
/// let a = DeviceBuffer::from_slice(&dev, &vec![2i8; m * k])?;
/// let b = DeviceBuffer::from_slice(&dev, &vec![-1i8; n * k])?;
/// let sa = DeviceBuffer::from_slice(&dev, &vec![0.5f32; m])?;
/// let sb = DeviceBuffer::from_slice(&dev, &vec![0.25f32; n])?;
/// let mut c = DeviceBuffer::<f16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, ..Default::default() };
/// gemm_scaled_with_split(&s, &a, &b, &sa, &sb, None, &mut c, args, TILES[2], 3)?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == -68.0)); // 272 * -2 * 0.125
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm_scaled_with_split<Q: QuantElement, T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
    splits: usize,
) -> Result<()> {
    let call = Call::new("fly_gemm::gemm_scaled_with_split");
    pinned(
        &call, stream, a, b, scale_a, scale_b, bias, c, args, tile, splits,
    )
}

/// The pinned wgmma entries ([`gemm_scaled_with`], [`gemm_scaled_with_split`]): the tile,
/// the operands, then sm90 (so an input type the target does not read is reported as
/// such), what the wgmma kernel needs, `splits` in range.
#[allow(clippy::too_many_arguments)]
fn pinned<Q: QuantElement, T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
    splits: usize,
) -> Result<()> {
    check_tile(call, tile)?;
    check(call, stream, a, b, scale_a, scale_b, bias, c, args)?;
    check_sm90(call, stream)?;
    crate::check_wgmma_pin(call, args, 1, "fly_gemm::gemm_scaled")?;
    crate::splitk::check_splits(call, splits, args.k, table::BK8)?;
    let route = Route::Wgmma(tile, splits);
    launch(call, stream, a, b, scale_a, scale_b, bias, c, args, route)
}

/// A pinned wgmma tile is one of [`TILES`].
fn check_tile(call: &Call<'_>, tile: Tile) -> Result<()> {
    if !TILES.contains(&tile) {
        return Err(call.error(
            "tile",
            format_args!("{tile:?}"),
            "not one of the built 8-bit tile configs",
            format_args!("pass one of fly_gemm::table::TILES: {TILES:?}"),
        ));
    }
    Ok(())
}

/// The pinned wgmma kernel runs on sm90 only.
fn check_sm90(call: &Call<'_>, stream: &Stream) -> Result<()> {
    let target = stream.device().target();
    if target != Target::Sm90 {
        return Err(call.error(
            "stream",
            format_args!("a {target} device"),
            "the wgmma kernel exists on sm90 (and the sm90 Sim) only",
            "call fly_gemm::gemm_scaled or gemm_scaled_with_config (the portable kernel)",
        ));
    }
    Ok(())
}

/// [`gemm_scaled`] on the portable tile-layer kernel with a pinned `config` (one of
/// [`PORTABLE_CONFIGS8`]), on every target (on sm90 too, where [`gemm_scaled`] would take
/// the wgmma kernel). Same arguments and errors as [`gemm_scaled`], plus a config outside
/// the table. With plain B and `k % 16 != 0` every config runs as the 64 x 128 x 64 one
/// (the only one with a scalar-load variant).
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target};
/// use fly_gemm::{gemm_scaled_with_config, GemmArgs, PORTABLE_CONFIGS8};
/// let dev = Device::sim(Target::Gfx1201);
/// let s = dev.stream()?;
/// let (m, n, k) = (3, 16, 64);
/// let a = DeviceBuffer::from_slice(&dev, &vec![3i8; m * k])?;
/// let b = DeviceBuffer::from_slice(&dev, &vec![-1i8; n * k])?;
/// let sa = DeviceBuffer::from_slice(&dev, &vec![0.5f32; m])?;
/// let sb = DeviceBuffer::from_slice(&dev, &vec![2.0f32; n])?;
/// let mut c = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, ..Default::default() };
/// gemm_scaled_with_config(&s, &a, &b, &sa, &sb, None, &mut c, args, PORTABLE_CONFIGS8[0])?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == -192.0)); // 64 * -3 * 0.5 * 2
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm_scaled_with_config<Q: QuantElement, T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    config: TileConfig,
) -> Result<()> {
    let call = Call::new("fly_gemm::gemm_scaled_with_config");
    if config.index8().is_none() {
        return Err(call.error(
            "config",
            format_args!("{config:?}"),
            "not a config of the portable kernel's 8-bit table",
            format_args!("pass one of fly_gemm::PORTABLE_CONFIGS8: {PORTABLE_CONFIGS8:?}"),
        ));
    }
    check(&call, stream, a, b, scale_a, scale_b, bias, c, args)?;
    launch(
        &call,
        stream,
        a,
        b,
        scale_a,
        scale_b,
        bias,
        c,
        args,
        Route::Portable(config),
    )
}

/// The checks every 8-bit entry point shares (before anything is written): shapes, lengths,
/// devices, the bias, preshuffled B's rules, and an input type the device's matrix
/// instructions read.
#[allow(clippy::too_many_arguments)]
fn check<Q: QuantElement, T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: Option<&DeviceBuffer<T>>,
    c: &DeviceBuffer<T>,
    args: GemmArgs,
) -> Result<()> {
    crate::check_operands(call, stream, a, b, bias, c, args)?;
    call.buffer(
        "scale_a",
        scale_a,
        stream,
        args.m,
        "m (one scale per row of A)",
    )?;
    call.buffer(
        "scale_b",
        scale_b,
        stream,
        args.n,
        "n (one scale per row of B)",
    )?;
    let target = stream.device().target();
    if !Q::QUANT.on(target) {
        let fix = match Q::QUANT {
            Quant::Fp8 => "gfx942 reads fp8 as e4m3fnuz: quantize with flydsl_rt::F8E4M3FNUZ",
            _ => "only gfx942 reads fp8 as e4m3fnuz: quantize with flydsl_rt::F8E4M3FN",
        };
        return Err(call.error(
            "Q",
            Q::QUANT.name(),
            format_args!(
                "{target}'s matrix instructions do not read {}",
                Q::QUANT.name()
            ),
            fix,
        ));
    }
    Ok(())
}

/// The 8-bit portable launcher of `key` for inputs `Q` and output `T`, if any.
pub(crate) fn portable8<Q: QuantElement, T: Element>(
    key: usize,
) -> Option<&'static flydsl_rt::Launcher<usize, kernels::Portable8Fn<Q, T>>> {
    flydsl_rt::launcher(Q::portable8().get::<T>(), &key)
}

/// Whether the 8-bit portable kernel of `key` exists for `Q`, `T` on `target`.
fn exists8<Q: QuantElement, T: Element>(target: Target) -> impl Fn(usize) -> bool {
    move |key| portable8::<Q, T>(key).is_some_and(|l| l.kernel.for_target(target).is_some())
}

/// Which 8-bit kernel serves a call, decided after [`check`].
enum Route {
    /// The Hopper wgmma kernel with this tile and K split count.
    Wgmma(Tile, usize),
    /// The portable tile-layer kernel with this config (of [`PORTABLE_CONFIGS8`]).
    Portable(TileConfig),
}

#[allow(clippy::too_many_arguments)]
fn launch<Q: QuantElement, T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    route: Route,
) -> Result<()> {
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
    let GemmArgs { m, n, k, .. } = args;
    match route {
        Route::Wgmma(tile, splits) => wgmma(
            call, stream, a, b, scale_a, scale_b, bias_buf, c, args, tile, splits,
        ),
        Route::Portable(config) => {
            let target = stream.device().target();
            let (key, ci) =
                crate::portable_key(&PORTABLE_CONFIGS8, config, args, 1, exists8::<Q, T>(target));
            let Some(launcher) = portable8::<Q, T>(key) else {
                return Err(call.error(
                    "T",
                    T::DTYPE,
                    "the 8-bit kernels write bf16 or f16",
                    "pass a bf16 or f16 bias and C",
                ));
            };
            call.kernel(stream, launcher.kernel)?;
            if m == 0 {
                return Ok(());
            }
            let cfg = crate::portable_launch(call, target, PORTABLE_CONFIGS8[ci], args)?;
            // SAFETY: the lengths were checked (A m * k, B n * k, scale_a m, scale_b n,
            // C m * n, bias n or unread), the kernel guards every access against m, n, k
            // (zeros past the edges, stores dropped), m, n, k fit in i32 (MAX_DIM) and one
            // tile's row panels stay below 2^31 (portable_launch).
            unsafe {
                (launcher.launch)(
                    stream,
                    cfg,
                    a,
                    b,
                    scale_a,
                    scale_b,
                    bias_buf,
                    c,
                    m as i32,
                    n as i32,
                    k as i32,
                    args.epilogue.index() as i32,
                )
            }
        }
    }
}

/// Launch the scaled Hopper kernel of `tile` (checked: sm90, plain B, `k % 16 == 0`).
#[allow(clippy::too_many_arguments)]
fn wgmma<Q: QuantElement, T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<Q>,
    b: &DeviceBuffer<Q>,
    scale_a: &DeviceBuffer<f32>,
    scale_b: &DeviceBuffer<f32>,
    bias: &DeviceBuffer<T>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
    splits: usize,
) -> Result<()> {
    let GemmArgs {
        m, n, k, epilogue, ..
    } = args;
    let Some(launcher) = kernels::wgmma_scaled::<T>(scaled_key(Q::QUANT, epilogue, tile)) else {
        return Err(call.error(
            "T",
            T::DTYPE,
            "the 8-bit kernels write bf16 or f16",
            "pass a bf16 or f16 bias and C",
        ));
    };
    call.kernel(stream, launcher.kernel)?;
    crate::grid::check_c_pairs(call, c)?;
    if m == 0 {
        return Ok(());
    }
    let (m64, n64, k64) = (m as u64, n as u64, k as u64);
    // Rows of A and of B per tile (a swapped tile's wgmma reads them the other way round).
    let (bk, bm, bn) = (table::BK8, tile.c_rows(), tile.c_cols());
    let a_map = TensorMap::tiled(a, &[k64, m64], &[k64], &[bk, bm], TmaSwizzle::B128)?;
    let b_map = TensorMap::tiled(b, &[k64, n64], &[k64], &[bk, bn], TmaSwizzle::B128)?;
    if splits > 1 {
        let key = table::scaled_partial_key(Q::QUANT, tile);
        let Some(partial) = kernels::partial8(key) else {
            return Err(call.fail(format!("no split-K kernel for {:?} {tile:?}", Q::QUANT)));
        };
        let ops = crate::splitk::Operands {
            a_map: a_map.buffer(),
            b_map: b_map.buffer(),
            scales: Some((scale_a, scale_b)),
            bias,
            c,
        };
        return crate::splitk::launch(
            call,
            stream,
            partial,
            ops,
            (m, n, k),
            tile,
            bk,
            splits,
            epilogue,
        );
    }
    let tiles = crate::grid::tile_grid(call, tile, m, n)?;
    let grid = crate::grid::persistent_grid(call, stream, tiles, 1, k.div_ceil(bk as usize))?;
    let cfg = LaunchConfig::linear(grid, tile.threads()).with_dynamic_lds(tile.lds_bytes());
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
            bias,
            c,
            m as i32,
            n as i32,
            k as i32,
        )
    }
}
