//! fly-gemm: `C = epilogue(A * B^T)` for 16-bit inputs with f32 accumulation.
//!
//! A is `[m, k]` and B is `[n, k]`, both row-major (K contiguous: activations and a linear
//! layer's weight), C is `[m, n]` row-major, bias `[n]`; all in one dtype, bf16 or f16.
//! The epilogues ([`Epilogue`]) add the bias and apply ReLU, SiLU or tanh-GELU in f32 before
//! rounding.
//!
//! Kernels: the NVIDIA Hopper kernel (sm_90a: TMA-fed multi-stage mbarrier pipeline into
//! wgmma, five tile configs picked by [`Tile::pick`]; `kernels/wgmma.rs`) and its 8-bit
//! form [`gemm_scaled`] (fp8 or int8 inputs with per-row `scale_a` and per-column
//! `scale_b`, bf16 or f16 output; k32 wgmma; `kernels/wgmma_scaled.rs`) with the host
//! quantization helpers ([`quantize_rows`], [`dequantize_rows`]); both split K over several
//! workgroups per tile when their tiles would leave most SMs idle ([`table::split_k`],
//! [`gemm_with_split`]); and the portable tile-layer
//! kernel (`kernels/portable.rs`, 16-bit and 8-bit: fp8 e4m3fnuz on gfx942 and e4m3fn
//! elsewhere, int8) on gfx942, gfx950, gfx1201, gfx1250 and on sm90 as the fallback for what
//! wgmma refuses (16-bit `k % 8 != 0`, 8-bit `k % 16 != 0`, preshuffled B, a C view not
//! aligned to two elements). B is plain
//! row-major or in the reference's preshuffled layout ([`BLayout`], [`preshuffle_b`]) for
//! every input type. Every kernel also runs on the Sim of its target.
//!
//! ```
//! use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target};
//! use fly_gemm::{gemm, Epilogue, GemmArgs};
//! let dev = Device::sim(Target::Sm90);
//! let s = dev.stream()?;
//! let (m, n, k) = (2, 3, 8);
//! let a = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; m * k])?;
//! let b = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(0.5); n * k])?;
//! let bias = DeviceBuffer::from_slice(&dev, &[bf16::ONE, bf16::ZERO, bf16::from_f32(-8.0)])?;
//! let mut c = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;
//! let args = GemmArgs { m, n, k, epilogue: Epilogue::BiasRelu, ..Default::default() };
//! gemm(&s, &a, &b, Some(&bias), &mut c, args)?;
//! let c: Vec<f32> = c.to_vec()?.iter().map(|x| x.to_f32()).collect();
//! assert_eq!(c, [5.0, 4.0, 0.0, 5.0, 4.0, 0.0]);
//! # Ok::<(), flydsl_rt::Error>(())
//! ```

mod grid;
mod kernels;
mod quant;
mod scaled;
mod splitk;
pub mod table;

pub use quant::{dequantize_rows, quantize_rows, quantize_rows_into, QuantElement};
pub use scaled::{
    default_config8, gemm_scaled, gemm_scaled_with, gemm_scaled_with_config, gemm_scaled_with_split,
};
pub use table::{Epilogue, Quant, Tile};

// ---- portable GEMM (gemmport): preshuffled B ----
pub mod preshuffle;
pub use preshuffle::{preshuffle_b, preshuffle_b_array, unpreshuffle_b, unpreshuffle_b_array};
// ---- end portable GEMM ----

use flydsl_rt::validate::Call;
/// The workspace's dtype enum (the build script shares `table.rs` through it).
pub use flydsl_rt::DType;
use flydsl_rt::{
    DeviceBuffer, Element, LaunchConfig, Result, Stream, Target, TensorMap, TmaSwizzle,
};

/// The shape and epilogue of one [`gemm`] call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmArgs {
    /// Rows of A and C (0 is a no-op).
    pub m: usize,
    /// Rows of B, columns of C (>= 1).
    pub n: usize,
    /// Columns of A and B (>= 1).
    pub k: usize,
    /// The fused epilogue.
    pub epilogue: Epilogue,
    /// How B is laid out in memory ([`BLayout::Plain`] by default).
    pub b_layout: BLayout,
}

impl Default for GemmArgs {
    /// `m = n = k = 0` (set them), no epilogue, plain B.
    fn default() -> GemmArgs {
        GemmArgs {
            m: 0,
            n: 0,
            k: 0,
            epilogue: Epilogue::None,
            b_layout: BLayout::Plain,
        }
    }
}

// ---- portable GEMM (gemmport): B layouts, config pinning, dispatch ----

/// How B (`n x k`) is laid out in memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BLayout {
    /// Row-major `[n, k]` (a linear layer's weight as stored).
    #[default]
    Plain,
    /// The reference's preshuffled layout ([`preshuffle_b`]): needs `n % 16 == 0` and
    /// `k * size_of::<T>() % 64 == 0`.
    Preshuffled,
}

pub use table::{TileConfig, PORTABLE_CONFIGS, PORTABLE_CONFIGS8};

/// The portable kernel's general config for a shape: the single-stage 16-row tile for
/// `m <= 16` (decode), the 64 x 128 ping-pong tile otherwise. [`gemm`] uses it except for
/// preshuffled B on a target that reads B global -> registers, where it takes the
/// reference's direct-B configs (16 x 128 x 256 for `m <= 16`, 64 x 256 x 128 otherwise;
/// [`table::DIRECT_B_CONFIGS`]).
///
/// ```
/// assert_eq!(fly_gemm::default_config(1, 4096, 4096).tile_m, 16);
/// assert_eq!(fly_gemm::default_config(1024, 4096, 4096).lds_stage, 2);
/// ```
pub fn default_config(m: usize, _n: usize, _k: usize) -> TileConfig {
    if m <= 16 {
        PORTABLE_CONFIGS[0]
    } else {
        PORTABLE_CONFIGS[1]
    }
}

/// [`gemm`] on the portable tile-layer kernel with a pinned `config` (one of
/// [`PORTABLE_CONFIGS`]), on every target (on sm90 too, where [`gemm`] would take the wgmma
/// kernel). Same arguments and errors as [`gemm`], plus a config outside the table. With
/// plain B and `k % 8 != 0` every config runs as the 64 x 128 x 32 one (the only one with
/// a scalar-load variant).
///
/// ```
/// use flydsl_rt::{half::f16, Device, DeviceBuffer, Target};
/// use fly_gemm::{gemm_with, GemmArgs, PORTABLE_CONFIGS};
/// let dev = Device::sim(Target::Gfx1201);
/// let s = dev.stream()?;
/// let (m, n, k) = (3, 16, 5);
/// let a = DeviceBuffer::from_slice(&dev, &vec![f16::ONE; m * k])?;
/// let b = DeviceBuffer::from_slice(&dev, &vec![f16::from_f32(0.5); n * k])?;
/// let mut c = DeviceBuffer::<f16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, ..Default::default() };
/// gemm_with(&s, &a, &b, None, &mut c, args, PORTABLE_CONFIGS[1])?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == 2.5));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn gemm_with<T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    config: TileConfig,
) -> Result<()> {
    let call = Call::new("fly_gemm::gemm_with");
    if config.index().is_none() {
        return Err(call.error(
            "config",
            format_args!("{config:?}"),
            "not a config of the portable kernel's table",
            format_args!("pass one of fly_gemm::PORTABLE_CONFIGS: {PORTABLE_CONFIGS:?}"),
        ));
    }
    check(&call, stream, a, b, bias, c, args)?;
    portable(&call, stream, a, b, bias, c, args, config)
}

/// The checks every entry point shares (before anything is written).
fn check<T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &DeviceBuffer<T>,
    args: GemmArgs,
) -> Result<()> {
    check_operands(call, stream, a, b, bias, c, args)
}

/// The shape, length, device and bias checks of every entry point, 16-bit or 8-bit: A and
/// B of elements `A` (preshuffled B: `n % 16 == 0`, `k * size_of::<A>() % 64 == 0`), bias
/// and C of `T`.
pub(crate) fn check_operands<A: flydsl_rt::DeviceRepr, T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<A>,
    b: &DeviceBuffer<A>,
    bias: Option<&DeviceBuffer<T>>,
    c: &DeviceBuffer<T>,
    args: GemmArgs,
) -> Result<()> {
    let GemmArgs {
        m,
        n,
        k,
        epilogue,
        b_layout,
    } = args;
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
    if b_layout == BLayout::Preshuffled {
        preshuffle::check(call, n, k, std::mem::size_of::<A>())?;
    }
    let mk = call.product(m, k)?;
    let nk = call.product(n, k)?;
    let mn = call.product(m, n)?;
    call.buffer("a", a, stream, mk, "m * k")?;
    let what = match b_layout {
        BLayout::Plain => "n * k",
        BLayout::Preshuffled => "n * k (preshuffled)",
    };
    call.buffer("b", b, stream, nk, what)?;
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
    Ok(())
}

/// Launch the portable kernel (arguments checked by [`check`]).
#[allow(clippy::too_many_arguments)]
fn portable<T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    config: TileConfig,
) -> Result<()> {
    let target = stream.device().target();
    let (key, ci) = portable_key(&PORTABLE_CONFIGS, config, args, 2, exists16::<T>(target));
    let Some(launcher) = kernels::portable::<T>(key) else {
        return Err(call.error(
            "T",
            T::DTYPE,
            "fly-gemm has kernels for bf16 and f16 only so far",
            "convert A, B, bias and C to bf16 or f16",
        ));
    };
    call.kernel(stream, launcher.kernel)?;
    if args.m == 0 {
        return Ok(());
    }
    let cfg = portable_launch(call, target, PORTABLE_CONFIGS[ci], args)?;
    // Without a bias the kernel never reads it: pass A (any T buffer will do).
    let bias_buf: &DeviceBuffer<T> = bias.unwrap_or(a);
    let GemmArgs { m, n, k, .. } = args;
    // SAFETY: the lengths were checked (A m * k, B n * k, C m * n, bias n or unread), the
    // kernel guards every access against m, n, k (zeros past the edges, stores dropped),
    // m, n, k fit in i32 (MAX_DIM) and one tile's row panels stay below 2^31 (checked by
    // portable_launch).
    unsafe {
        (launcher.launch)(
            stream,
            cfg,
            a,
            b,
            bias_buf,
            c,
            m as i32,
            n as i32,
            k as i32,
            args.epilogue.index() as i32,
        )
    }
}

/// Whether the 16-bit portable kernel of `key` exists for `T` on `target`.
fn exists16<T: Element>(target: Target) -> impl Fn(usize) -> bool {
    move |key| kernels::portable::<T>(key).is_some_and(|l| l.kernel.for_target(target).is_some())
}

/// The portable variant that serves `args` with `config` (an entry of `configs`, the table
/// of `elem_bytes`-byte inputs): its dispatch key and config index. Preshuffled B reads
/// chunks; plain B reads 16-byte vectors when its rows are whole vectors
/// (`k * elem_bytes % 16 == 0`), else takes the scalar variant, which only the
/// [`table::SCALAR_CONFIG`] tile has; a config with no kernel for the read on this target
/// (`exists(key)` false: the direct-B configs elsewhere) runs as
/// [`table::GENERAL_CONFIG`].
pub(crate) fn portable_key(
    configs: &[TileConfig],
    config: TileConfig,
    args: GemmArgs,
    elem_bytes: usize,
    exists: impl Fn(usize) -> bool,
) -> (usize, usize) {
    let read = match args.b_layout {
        BLayout::Preshuffled => table::BRead::Preshuffled,
        BLayout::Plain if (args.k * elem_bytes).is_multiple_of(16) => table::BRead::Plain,
        BLayout::Plain => table::BRead::PlainScalar,
    };
    let ok = |ci: usize| table::has_variant(ci, read) && exists(table::portable_key(ci, read));
    let ci = match configs.iter().position(|&c| c == config) {
        Some(ci) if ok(ci) => ci,
        _ if read == table::BRead::PlainScalar => table::SCALAR_CONFIG,
        _ => table::GENERAL_CONFIG,
    };
    (table::portable_key(ci, read), ci)
}

/// The portable kernel's config for a call (`configs` of its input size): with
/// preshuffled B on a target that reads it global -> registers, the reference's configs
/// (16 x 128 x 256 for `m <= 16`, 64 x 256 x 128 otherwise; `exists` says whether the key's
/// kernel exists on the device); else [`default_config`]'s rule.
pub(crate) fn pick_config(
    configs: &[TileConfig],
    args: GemmArgs,
    exists: impl Fn(usize) -> bool,
) -> TileConfig {
    let small = args.m <= 16;
    if args.b_layout == BLayout::Preshuffled {
        let ci = table::DIRECT_B_CONFIGS[usize::from(!small)];
        if exists(table::portable_key(ci, table::BRead::Preshuffled)) {
            return configs[ci];
        }
    }
    configs[usize::from(!small)]
}

/// The launch geometry of the portable kernel with `config` for `args` (`m >= 1`): grid
/// `(ceil(m / tile_m), ceil(n / tile_n))` of four waves, or an error when one tile's row
/// panels pass the kernel's i32 index arithmetic or the grid its limits.
pub(crate) fn portable_launch(
    call: &Call<'_>,
    target: Target,
    config: TileConfig,
    args: GemmArgs,
) -> Result<LaunchConfig> {
    let GemmArgs { m, n, k, .. } = args;
    let (tm, tn) = (config.tile_m as usize, config.tile_n as usize);
    let lim = 1usize << 31;
    if tm * k >= lim || tn * k >= lim || tm * n >= lim {
        return Err(call.error(
            "k, n",
            format_args!("{k}, {n}"),
            format_args!(
                "one {tm} x {tn} tile's row panels (tile_m * k, tile_n * k, tile_m * n) \
                 must stay below 2^31 elements"
            ),
            "split the GEMM along K or N",
        ));
    }
    let threads = table::PORTABLE_WAVES * target.wave_size();
    let (gm, gn) = (m.div_ceil(tm), n.div_ceil(tn));
    // Grid x <= 2^31 - 1 (CUDA) with x * threads < 2^32 (HIP); y <= 65535 (CUDA).
    let (gm, gn) = match (u32::try_from(gm), u32::try_from(gn)) {
        (Ok(x), Ok(y)) if (x as u64) * (threads as u64) < 1 << 32 && y <= 65535 => (x, y),
        _ => {
            return Err(call.error(
                "m, n",
                format_args!("{m}, {n}"),
                format_args!(
                    "{gm} x {gn} tiles of {tm} x {tn}: at most 2^32 / {threads} along M, \
                     65535 along N"
                ),
                "split the GEMM",
            ))
        }
    };
    Ok(LaunchConfig::grid_2d([gm, gn], [threads, 1]))
}
// ---- end portable GEMM ----

/// Largest `m`, `n` and `k`: the kernel computes tile coordinates and TMA coordinates in
/// i32 (C offsets in i64), with room for one tile past the end.
///
/// ```
/// assert!(fly_gemm::MAX_DIM as i64 + 256 <= i32::MAX as i64);
/// ```
pub const MAX_DIM: usize = i32::MAX as usize - 65536;

/// `C = epilogue(A * B^T)` on `stream`: see the crate docs for the layouts. `bias` is
/// required exactly when the epilogue has one ([`Epilogue::has_bias`]).
///
/// Dispatch: on sm90 with plain B, `k % 8 == 0` and C aligned to two elements (any buffer
/// this crate allocates), the wgmma kernel with the tile config
/// [`Tile::pick`] chooses (128 x 256 when that makes nearly [`table::FILL_TILES`]
/// workgroups, else above M = 64 128 x 128 or, where that makes too few tiles, 128 x 64,
/// else the swapped small-M tile; pin one with
/// [`gemm_with_tile`]); everything
/// else (the AMD targets, preshuffled B, other `k` on sm90) takes the portable tile-layer
/// kernel with [`default_config`], or for preshuffled B where the target reads it global ->
/// registers the reference's direct-B configs (pin one with [`gemm_with`]).
///
/// Errors (before anything is written): a length other than `m * k` (A), `n * k` (B),
/// `m * n` (C) or `n` (bias), a missing or unexpected bias, `n` or `k` of 0, preshuffled B
/// with `n % 16 != 0` or `k * size_of::<T>() % 64 != 0`, a dimension past [`MAX_DIM`] (or a
/// tile's row panel past 2^31 elements), buffers on another device, a dtype other than bf16
/// and f16, a device this build has no kernel for.
pub fn gemm<T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
) -> Result<()> {
    let call = Call::new("fly_gemm::gemm");
    check(&call, stream, a, b, bias, c, args)?;
    let GemmArgs {
        m,
        n,
        k,
        epilogue,
        b_layout,
    } = args;
    let target = stream.device().target();
    // ---- portable GEMM (gemmport): what the wgmma kernel does not take ----
    let tile = Tile::pick(m, n);
    let wgmma_takes = target == Target::Sm90
        && b_layout == BLayout::Plain
        && k.is_multiple_of(8)
        && grid::c_pairs_aligned(c)
        && kernels::wgmma::<T>(table::key16(epilogue, tile)).is_some();
    if !wgmma_takes {
        let config = pick_config(&PORTABLE_CONFIGS, args, exists16::<T>(target));
        return portable(&call, stream, a, b, bias, c, args, config);
    }
    // ---- end portable GEMM ----
    let splits = table::split_k(tile, m, n, k, table::BK as usize);
    wgmma(&call, stream, a, b, bias, c, args, tile, splits)
}

/// [`gemm`] on the Hopper wgmma kernel with a pinned tile config (one of [`table::TILES`])
/// instead of the dispatcher's ([`Tile::pick`]): for benchmarks and callers who tune their
/// own shapes. Every config is correct at every shape it accepts.
///
/// Errors: those of [`gemm`], a `tile` that is not in [`table::TILES`], and what only the
/// portable kernel takes (a target other than sm90, preshuffled B, `k % 8 != 0`, a C view
/// not aligned to two elements).
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target};
/// use fly_gemm::{gemm_with_tile, table::TILES, GemmArgs};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let (m, n, k) = (2, 16, 8);
/// let a = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; m * k])?;
/// let b = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(0.5); n * k])?;
/// let mut c = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, ..Default::default() };
/// gemm_with_tile(&s, &a, &b, None, &mut c, args, TILES[2])?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == 4.0));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
pub fn gemm_with_tile<T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
) -> Result<()> {
    let call = Call::new("fly_gemm::gemm_with_tile");
    pinned(&call, stream, a, b, bias, c, args, tile, 1)
}

/// [`gemm_with_tile`] with K split over `splits` workgroups per tile (1: none, as
/// [`gemm_with_tile`]): each sums its slice of K into an f32 workspace and a second kernel
/// adds the slices in order and applies the epilogue (deterministic). [`gemm`] splits K when
/// the tiles fill less than half the device ([`table::split_k`]); pin a count to tune it.
///
/// Errors: those of [`gemm_with_tile`], `splits` of 0, past [`table::MAX_SPLITS`] or past
/// the K stages (`k.div_ceil(table::BK)`), and `m` past 65535 with `splits > 1`.
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target};
/// use fly_gemm::{gemm_with_split, table::TILES, Epilogue, GemmArgs};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let (m, n, k) = (2, 16, 200); // 4 stages of 64: splits of 64, 64, 64 and 8
/// let a = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; m * k])?;
/// let b = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(0.5); n * k])?;
/// let bias = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(-1.0); n])?;
/// let mut c = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, epilogue: Epilogue::Bias, ..Default::default() };
/// gemm_with_split(&s, &a, &b, Some(&bias), &mut c, args, TILES[2], 4)?;
/// assert!(c.to_vec()?.iter().all(|x| x.to_f32() == 99.0));
/// # Ok::<(), flydsl_rt::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm_with_split<T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
    splits: usize,
) -> Result<()> {
    let call = Call::new("fly_gemm::gemm_with_split");
    pinned(&call, stream, a, b, bias, c, args, tile, splits)
}

/// The pinned Hopper entries ([`gemm_with_tile`], [`gemm_with_split`]): `tile` one of
/// [`table::TILES`], the operands, what the wgmma kernel needs, `splits` in range.
#[allow(clippy::too_many_arguments)]
fn pinned<T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
    splits: usize,
) -> Result<()> {
    if !table::TILES.contains(&tile) {
        return Err(call.error(
            "tile",
            format_args!("{tile:?}"),
            "not one of the built tile configs",
            format_args!("pass one of fly_gemm::table::TILES: {:?}", table::TILES),
        ));
    }
    check(call, stream, a, b, bias, c, args)?;
    check_wgmma_pin(call, args, std::mem::size_of::<T>(), "fly_gemm::gemm")?;
    splitk::check_splits(call, splits, args.k, table::BK)?;
    wgmma(call, stream, a, b, bias, c, args, tile, splits)
}

/// What a pinned Hopper wgmma kernel needs beyond [`check_operands`]: plain B and rows of
/// whole 16-byte TMA strides (`k * elem_bytes % 16 == 0`); `portable` names the entry point
/// that takes everything else.
pub(crate) fn check_wgmma_pin(
    call: &Call<'_>,
    args: GemmArgs,
    elem_bytes: usize,
    portable: &str,
) -> Result<()> {
    if args.b_layout != BLayout::Plain {
        return Err(call.error(
            "args.b_layout",
            format_args!("{:?}", args.b_layout),
            "the wgmma kernel reads plain row-major B",
            format_args!("pass BLayout::Plain, or call {portable} (it takes the portable kernel)"),
        ));
    }
    let align = 16 / elem_bytes.clamp(1, 16);
    if !args.k.is_multiple_of(align) {
        return Err(call.error(
            "args.k",
            args.k,
            format_args!(
                "the wgmma kernel needs k % {align} == 0 for {elem_bytes}-byte inputs (TMA row \
                 strides are 16-byte multiples)"
            ),
            format_args!("pad K with zeros, or call {portable} (it takes the portable kernel)"),
        ));
    }
    Ok(())
}

/// Launch the Hopper wgmma kernel of `tile` over `splits` K splits (arguments checked by
/// [`check`]; plain B, `k % 8 == 0`; `splits` checked or from the rule).
#[allow(clippy::too_many_arguments)]
fn wgmma<T: Element>(
    call: &Call<'_>,
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
    tile: Tile,
    splits: usize,
) -> Result<()> {
    let GemmArgs {
        m, n, k, epilogue, ..
    } = args;
    let target = stream.device().target();
    let launcher = match kernels::wgmma::<T>(table::key16(epilogue, tile)) {
        Some(l) if target == Target::Sm90 => l,
        _ => {
            return Err(call.error(
                "stream",
                format_args!("a {target} device with {} data", T::DTYPE),
                "the wgmma kernel exists for bf16 and f16 on sm90 (and the sm90 Sim)",
                "run on an H100/H200 or on Device::sim(Target::Sm90), or call fly_gemm::gemm",
            ))
        }
    };
    call.kernel(stream, launcher.kernel)?;
    grid::check_c_pairs(call, c)?;
    if m == 0 {
        return Ok(());
    }
    let (m64, n64, k64) = (m as u64, n as u64, k as u64);
    // Rows of A and of B per tile (a swapped tile's wgmma reads them the other way round).
    let (bk, bm, bn) = (table::BK, tile.c_rows(), tile.c_cols());
    let a_map = TensorMap::tiled(a, &[k64, m64], &[k64], &[bk, bm], TmaSwizzle::B128)?;
    let b_map = TensorMap::tiled(b, &[k64, n64], &[k64], &[bk, bn], TmaSwizzle::B128)?;
    // Without a bias the kernels never read it: pass A's buffer (any T buffer will do).
    let bias_buf: &DeviceBuffer<T> = match bias {
        Some(b) => b,
        None => a,
    };
    if splits > 1 {
        let Some(partial) = kernels::partial16::<T>(tile.index()) else {
            return Err(call.fail(format!("no split-K kernel for {} {tile:?}", T::DTYPE)));
        };
        let ops = splitk::Operands {
            a_map: a_map.buffer(),
            b_map: b_map.buffer(),
            scales: None,
            bias: bias_buf,
            c,
        };
        return splitk::launch(
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
    let tiles = grid::tile_grid(call, tile, m, n)?;
    let grid = grid::persistent_grid(call, stream, tiles, 1, k.div_ceil(bk as usize))?;
    let cfg = LaunchConfig::linear(grid, tile.threads()).with_dynamic_lds(tile.lds_bytes());
    // SAFETY: the maps describe `a` and `b` exactly (their lengths were checked: m * k and
    // n * k, TensorMap::tiled re-checks the extents), C holds m * n elements and bias n (or
    // is unread); the kernel guards rows < m and columns < n and TMA zero-fills past the
    // edges; m, n, k fit in i32 (MAX_DIM).
    unsafe {
        (launcher.launch)(
            stream,
            cfg,
            a_map.buffer(),
            b_map.buffer(),
            bias_buf,
            c,
            m as i32,
            n as i32,
            k as i32,
        )
    }?;
    // The maps' device buffers are freed when they drop; the runtime frees device memory
    // only after the stream's work that uses it (see DeviceBuffer).
    Ok(())
}

/// Every Hopper kernel of this crate with its name (for structural tests and inspection):
/// the 16-bit kernels (bf16, f16 x 5 tile configs x 5 epilogues), the 8-bit ones (bf16,
/// f16 output x 5 tile configs x e4m3fn, i8 input x 5 epilogues), then the split-K
/// partial-sum kernels (bf16, f16 x 5 tiles; e4m3fn, i8 x 5 tiles) and reduces (bf16, f16
/// x 5 epilogues); the portable kernels are [`portable_variants`].
///
/// ```
/// assert_eq!(fly_gemm::kernel_variants().len(), 150 + 20 + 10);
/// ```
pub fn kernel_variants() -> Vec<(&'static str, &'static flydsl_rt::KernelVariants)> {
    use flydsl_rt::half::{bf16, f16};
    use kernels::generated as g;
    let mut v = Vec::new();
    let mut add = |l: &'static flydsl_rt::KernelVariants| v.push((l.name, l));
    g::WGMMA.get::<bf16>().iter().for_each(|l| add(l.kernel));
    g::WGMMA.get::<f16>().iter().for_each(|l| add(l.kernel));
    g::WGMMA_SCALED
        .get::<bf16>()
        .iter()
        .for_each(|l| add(l.kernel));
    g::WGMMA_SCALED
        .get::<f16>()
        .iter()
        .for_each(|l| add(l.kernel));
    g::WGMMA_PARTIAL
        .get::<bf16>()
        .iter()
        .for_each(|l| add(l.kernel));
    g::WGMMA_PARTIAL
        .get::<f16>()
        .iter()
        .for_each(|l| add(l.kernel));
    g::WGMMA_SCALED_PARTIAL
        .get::<f32>()
        .iter()
        .for_each(|l| add(l.kernel));
    g::SPLITK_REDUCE
        .get::<bf16>()
        .iter()
        .for_each(|l| add(l.kernel));
    g::SPLITK_REDUCE
        .get::<f16>()
        .iter()
        .for_each(|l| add(l.kernel));
    v
}

// ---- portable GEMM (gemmport) ----
/// Every portable-kernel variant with its name (for structural tests and inspection):
/// the 16-bit ones per dtype, config and B read, then the 8-bit ones per input type
/// (e4m3fn, e4m3fnuz, i8), output dtype, config and B read.
///
/// ```
/// // Per input type and output dtype: 5 variants of the two general configs, 2 direct-B ones.
/// assert_eq!(fly_gemm::portable_variants().len(), 2 * 7 + 3 * 2 * 7);
/// ```
pub fn portable_variants() -> Vec<(&'static str, &'static flydsl_rt::KernelVariants)> {
    use flydsl_rt::half::{bf16, f16};
    type Named = (&'static str, &'static flydsl_rt::KernelVariants);
    fn scaled<Q: QuantElement>(v: &mut Vec<Named>) {
        let t = Q::portable8();
        v.extend(t.get::<bf16>().iter().map(|l| (l.kernel.name, l.kernel)));
        v.extend(t.get::<f16>().iter().map(|l| (l.kernel.name, l.kernel)));
    }
    let g = &kernels::generated::PORTABLE;
    let mut v: Vec<Named> = g
        .get::<bf16>()
        .iter()
        .map(|l| (l.kernel.name, l.kernel))
        .collect();
    v.extend(g.get::<f16>().iter().map(|l| (l.kernel.name, l.kernel)));
    scaled::<flydsl_rt::F8E4M3FN>(&mut v);
    scaled::<flydsl_rt::F8E4M3FNUZ>(&mut v);
    scaled::<i8>(&mut v);
    v
}
// ---- end portable GEMM ----
