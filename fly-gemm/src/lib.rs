//! fly-gemm: `C = epilogue(A * B^T)` for 16-bit inputs with f32 accumulation.
//!
//! A is `[m, k]` and B is `[n, k]`, both row-major (K contiguous: activations and a linear
//! layer's weight), C is `[m, n]` row-major, bias `[n]`; all in one dtype, bf16 or f16.
//! The epilogues ([`Epilogue`]) add the bias and apply ReLU, SiLU or tanh-GELU in f32 before
//! rounding.
//!
//! What exists so far: the NVIDIA Hopper kernel (sm_90a: TMA-fed multi-stage mbarrier
//! pipeline into wgmma, 128 x 256 x 64 tiles; `kernels/wgmma.rs`), which also runs on the
//! sm90 Sim, and its 8-bit form [`gemm_scaled`] (fp8 e4m3fn or int8 inputs with per-row
//! `scale_a` and per-column `scale_b`, bf16 or f16 output; 128 x 256 x 128 tiles of k32
//! wgmma; `kernels/wgmma_scaled.rs`) with the host quantization helpers
//! ([`quantize_rows`], [`dequantize_rows`]). The preshuffled B layout and the AMD targets
//! are not built yet: a call on a device without a kernel is a clear error.
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
//! gemm(&s, &a, &b, Some(&bias), &mut c, GemmArgs { m, n, k, epilogue: Epilogue::BiasRelu })?;
//! let c: Vec<f32> = c.to_vec()?.iter().map(|x| x.to_f32()).collect();
//! assert_eq!(c, [5.0, 4.0, 0.0, 5.0, 4.0, 0.0]);
//! # Ok::<(), flydsl_rt::Error>(())
//! ```

mod kernels;
mod quant;
mod scaled;
pub mod table;

pub use quant::{dequantize_rows, quantize_rows, quantize_rows_into, QuantElement};
pub use scaled::{gemm_scaled, gemm_scaled_with};
pub use table::{Epilogue, Quant, Tile};

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
    /// Columns of A and B (>= 1, a multiple of 8 for now).
    pub k: usize,
    /// The fused epilogue.
    pub epilogue: Epilogue,
}

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
/// The tile config comes from [`Tile::pick`]: 128 x 256 when that makes at least
/// [`table::FILL_TILES`] workgroups, else 128 x 128, else 64 x 64 (small M is memory-bound:
/// more, smaller workgroups read B with more SMs); [`gemm_with_tile`] pins one.
///
/// Errors (before anything is written): a length other than `m * k` (A), `n * k` (B),
/// `m * n` (C) or `n` (bias), a missing or unexpected bias, `n` or `k` of 0, `k` not a
/// multiple of 8 (TMA row strides are 16-byte multiples: pad K with zeros), a dimension past
/// [`MAX_DIM`], buffers on another device, a device this build has no kernel for.
pub fn gemm<T: Element>(
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    bias: Option<&DeviceBuffer<T>>,
    c: &mut DeviceBuffer<T>,
    args: GemmArgs,
) -> Result<()> {
    let tile = Tile::pick(args.m, args.n);
    gemm_run("fly_gemm::gemm", stream, a, b, bias, c, args, tile)
}

/// [`gemm`] with a pinned tile config (one of [`table::TILES`]) instead of the
/// dispatcher's ([`Tile::pick`]): for benchmarks and callers who tune their own shapes.
/// Every config is correct at every shape [`gemm`] accepts.
///
/// Errors: those of [`gemm`], and a `tile` that is not in [`table::TILES`].
///
/// ```
/// use flydsl_rt::{half::bf16, Device, DeviceBuffer, Target};
/// use fly_gemm::{gemm_with_tile, table::TILES, Epilogue, GemmArgs};
/// let dev = Device::sim(Target::Sm90);
/// let s = dev.stream()?;
/// let (m, n, k) = (2, 16, 8);
/// let a = DeviceBuffer::from_slice(&dev, &vec![bf16::ONE; m * k])?;
/// let b = DeviceBuffer::from_slice(&dev, &vec![bf16::from_f32(0.5); n * k])?;
/// let mut c = DeviceBuffer::<bf16>::zeroed(&dev, m * n)?;
/// let args = GemmArgs { m, n, k, epilogue: Epilogue::None };
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
    let op = "fly_gemm::gemm_with_tile";
    if !table::TILES.contains(&tile) {
        return Err(Call::new(op).error(
            "tile",
            format_args!("{tile:?}"),
            "not one of the built tile configs",
            format_args!("pass one of fly_gemm::table::TILES: {:?}", table::TILES),
        ));
    }
    gemm_run(op, stream, a, b, bias, c, args, tile)
}

#[allow(clippy::too_many_arguments)]
fn gemm_run<T: Element>(
    op: &'static str,
    stream: &Stream,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
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
    if !k.is_multiple_of(8) {
        return Err(call.error(
            "k",
            k,
            "k must be a multiple of 8 (TMA reads rows whose byte strides are multiples of 16)",
            "pad A and B with zero columns up to the next multiple of 8",
        ));
    }
    let mk = call.product(m, k)?;
    let nk = call.product(n, k)?;
    let mn = call.product(m, n)?;
    call.buffer("a", a, stream, mk, "m * k")?;
    call.buffer("b", b, stream, nk, "n * k")?;
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
    let launcher = match kernels::wgmma::<T>(table::key16(epilogue, tile)) {
        Some(l) if target == Target::Sm90 => l,
        _ => {
            return Err(call.error(
                "stream",
                format_args!("a {target} device with {} data", T::DTYPE),
                "fly-gemm has kernels for bf16 and f16 on sm90 (and the sm90 Sim) only so far",
                "run on an H100/H200 or on Device::sim(Target::Sm90)",
            ))
        }
    };
    call.kernel(stream, launcher.kernel)?;
    if m == 0 {
        return Ok(());
    }
    let (m64, n64, k64) = (m as u64, n as u64, k as u64);
    let (bk, bm, bn) = (table::BK, tile.bm, tile.bn);
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
    // Without a bias the kernel never reads it: pass C's buffer (any T buffer will do).
    let bias_buf: &DeviceBuffer<T> = match bias {
        Some(b) => b,
        None => a,
    };
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

/// Every kernel of this crate with its name (for structural tests and inspection): the
/// 16-bit kernels (bf16, f16 x 3 tile configs x 5 epilogues), then the 8-bit ones (bf16,
/// f16 output x 3 tile configs x e4m3fn, i8 input x 5 epilogues).
///
/// ```
/// assert_eq!(fly_gemm::kernel_variants().len(), 90);
/// ```
pub fn kernel_variants() -> Vec<(&'static str, &'static flydsl_rt::KernelVariants)> {
    let mut v = Vec::new();
    for l in kernels::generated::WGMMA
        .get::<flydsl_rt::half::bf16>()
        .iter()
    {
        v.push((l.kernel.name, l.kernel));
    }
    for l in kernels::generated::WGMMA
        .get::<flydsl_rt::half::f16>()
        .iter()
    {
        v.push((l.kernel.name, l.kernel));
    }
    for l in kernels::generated::WGMMA_SCALED
        .get::<flydsl_rt::half::bf16>()
        .iter()
    {
        v.push((l.kernel.name, l.kernel));
    }
    for l in kernels::generated::WGMMA_SCALED
        .get::<flydsl_rt::half::f16>()
        .iter()
    {
        v.push((l.kernel.name, l.kernel));
    }
    v
}
