//! Dispatch: which path, size class and candidate configurations serve a shape on a device,
//! and the launch geometry of a configuration.

use crate::table::{kernel_name, Config, DType, Kind, Path, CONFIGS};
use flydsl_rt::{Backend, Device, Element, LaunchConfig};

/// Most workgroups launched; blocks stride over the remaining row blocks (keeps every grid
/// within AMD's 2^32-thread and NVIDIA's 2^31-block limits).
///
/// ```
/// let v = fly_softmax::plan::variant_by_name::<f32>("softmax_fwd_f32_lv_t256_g256_e0_w0").unwrap();
/// assert_eq!(v.launch_config(1 << 24).1 as u32, fly_softmax::plan::MAX_GRID);
/// ```
pub const MAX_GRID: u32 = 1 << 20;

/// One configuration of the table (for every dtype).
///
/// ```
/// let v = fly_softmax::plan::all(fly_softmax::table::Kind::Forward)[0];
/// assert_eq!(v.index, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// Index in [`CONFIGS`].
    pub index: usize,
    /// The configuration.
    pub config: &'static Config,
}

impl Variant {
    /// The kernel name of this configuration for `T`.
    ///
    /// ```
    /// use fly_softmax::plan::{candidates, Variant};
    /// use fly_softmax::table::Kind;
    /// use flydsl_rt::{Device, Target};
    /// let c = candidates::<f32>(Kind::Forward, &Device::sim(Target::Gfx942), 8192);
    /// assert!(c[0].name::<f32>().starts_with("softmax_fwd_f32_v8192_"));
    /// ```
    pub fn name<T: Element>(&self) -> String {
        kernel_name(self.config, T::DTYPE)
    }

    /// Whether this configuration computes rows of `n` elements of `T` correctly.
    ///
    /// ```
    /// use fly_softmax::plan::variant_by_name;
    /// let v = variant_by_name::<f32>("softmax_fwd_f32_v64_t256_g8_e8_w0").unwrap();
    /// assert!(v.supports::<f32>(64) && !v.supports::<f32>(65) && !v.supports::<f32>(68));
    /// ```
    pub fn supports<T: Element>(&self, n: usize) -> bool {
        let c = self.config;
        let vec_ok = !c.path.needs_whole_vectors() || multiple_of(n, T::DTYPE.vec() as usize);
        let fits = c.path.is_loop() || n <= c.class as usize;
        n >= 1 && vec_ok && fits && c.serves(T::DTYPE)
    }

    /// The kernel's variant table for `T` (IR for every target, code objects for the built
    /// ones); for a [`Path::Split`] configuration, its first (stats) kernel's.
    ///
    /// ```
    /// use fly_softmax::plan::variant_by_name;
    /// let v = variant_by_name::<f32>("softmax_fwd_f32_ls_t256_g256_e0_w0").unwrap();
    /// assert_eq!(v.kernel::<f32>().name, "softmax_fwd_f32_ls_t256_g256_e0_w0");
    /// ```
    pub fn kernel<T: Element>(&self) -> &'static flydsl_rt::KernelVariants {
        self.kernels::<T>()[0]
    }

    /// Every kernel the configuration launches (two for a [`Path::Split`] one: stats, then
    /// finish), as variant tables for `T`.
    ///
    /// ```
    /// use fly_softmax::plan::variant_by_name;
    /// let v = variant_by_name::<f32>("softmax_bwd_f32_sp_t256_g256_e0_w0").unwrap();
    /// assert_eq!(v.kernels::<f32>()[1].name, "softmax_bwd_f32_sp_t256_g256_e0_w0_fin");
    /// ```
    pub fn kernels<T: Element>(&self) -> Vec<&'static flydsl_rt::KernelVariants> {
        crate::kernels::variants::<T>(self.index)
    }

    /// Whether `device` can run it (its IR exists for the target; on GPUs also its code object).
    ///
    /// ```
    /// use fly_softmax::plan::variant_by_name;
    /// use flydsl_rt::{Device, Target};
    /// let wpe = variant_by_name::<f32>("softmax_fwd_f32_v8192_t256_g256_e32_w2").unwrap();
    /// assert!(wpe.available::<f32>(&Device::sim(Target::Gfx942)));
    /// assert!(!wpe.available::<f32>(&Device::sim(Target::Sm90))); // AMD-only hint
    /// ```
    pub fn available<T: Element>(&self, device: &Device) -> bool {
        self.kernels::<T>()
            .iter()
            .all(|k| match k.for_target(device.target()) {
                Some(var) => device.backend() == Backend::Sim || var.code.is_some(),
                None => false,
            })
    }

    /// Grid and block for `m` rows, and the `nblocks` kernel argument (a [`Path::Split`]
    /// configuration launches its two kernels over `m * chunks` blocks instead: see
    /// `SplitPlan` in `src/split.rs`).
    ///
    /// ```
    /// use fly_softmax::plan::variant_by_name;
    /// let v = variant_by_name::<f32>("softmax_fwd_f32_v256_t256_g32_e8_w0").unwrap();
    /// let (cfg, nblocks) = v.launch_config(17); // 8 rows per block
    /// assert_eq!((cfg.grid[0], cfg.block[0], nblocks), (3, 256, 3));
    /// ```
    pub fn launch_config(&self, m: usize) -> (LaunchConfig, i32) {
        let rows = self.config.rows_per_block() as usize;
        let blocks = m.div_ceil(rows).min(MAX_GRID as usize) as u32;
        (
            LaunchConfig::linear(blocks, self.config.threads),
            blocks as i32,
        )
    }
}

/// The configuration named `name` (a kernel name of dtype `T`), if any.
///
/// ```
/// use fly_softmax::plan::variant_by_name;
/// assert!(variant_by_name::<half::f16>("softmax_bwd_f16_ls_t256_g256_e0_w0").is_some());
/// assert!(variant_by_name::<f32>("softmax_bwd_f16_ls_t256_g256_e0_w0").is_none());
/// ```
pub fn variant_by_name<T: Element>(name: &str) -> Option<Variant> {
    CONFIGS
        .iter()
        .enumerate()
        .find(|(_, c)| kernel_name(c, T::DTYPE) == name)
        .map(|(index, config)| Variant { index, config })
}

/// Every configuration of `kind`, as variants.
///
/// ```
/// use fly_softmax::{plan::all, table::Kind};
/// assert!(all(Kind::Backward).iter().all(|v| v.config.kind == Kind::Backward));
/// ```
pub fn all(kind: Kind) -> Vec<Variant> {
    CONFIGS
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == kind)
        .map(|(index, config)| Variant { index, config })
        .collect()
}

/// `n % d == 0` (`usize::is_multiple_of` needs Rust 1.87; the workspace's MSRV is 1.85).
#[allow(clippy::manual_is_multiple_of)]
fn multiple_of(n: usize, d: usize) -> bool {
    n % d == 0
}

fn max_class(kind: Kind, path: Path, dtype: DType) -> u32 {
    CONFIGS
        .iter()
        .filter(|c| c.kind == kind && c.path == path && c.serves(dtype))
        .map(|c| c.class)
        .max()
        .unwrap_or(0)
}

/// The path that serves rows of `n` elements of `T`. The dispatcher's rules, in order:
/// 1. `n` a multiple of the 128-bit vector width: [`Path::Vector`] when the row fits the
///    largest vector class of the dtype (one read, one write, every access a whole aligned
///    vector), else [`Path::LoopVector`].
/// 2. Other `n` (rows start off the 16-byte grid): [`Path::Ragged`] when the row fits its
///    largest class, else [`Path::LoopRagged`]: each row's unaligned head and its tail are
///    one element per lane and the body is aligned vectors, so all but at most
///    `2 * (width - 1)` elements of a row move in 128-bit accesses, where the masked scalar
///    path moves every element alone (31-60% of copy bandwidth on the H200 at odd `n`). The
///    masked scalar paths stay the tuner's alternatives ([`candidates`]).
///
/// ```
/// use fly_softmax::{plan::path_for, table::{Kind, Path}};
/// assert_eq!(path_for::<half::bf16>(Kind::Forward, 8192), Path::Vector);
/// assert_eq!(path_for::<half::bf16>(Kind::Forward, 1021), Path::Ragged);
/// assert_eq!(path_for::<f32>(Kind::Forward, 1 << 20), Path::LoopVector);
/// assert_eq!(path_for::<f32>(Kind::Forward, 150_001), Path::LoopRagged);
/// assert_eq!(path_for::<f32>(Kind::Backward, 65537), Path::LoopRagged);
/// assert_eq!(path_for::<half::bf16>(Kind::Backward, 65536), Path::Vector);
/// assert_eq!(path_for::<f32>(Kind::Backward, 65536), Path::LoopVector);
/// ```
pub fn path_for<T: Element>(kind: Kind, n: usize) -> Path {
    let resident = if multiple_of(n, T::DTYPE.vec() as usize) {
        Path::Vector
    } else {
        Path::Ragged
    };
    if n <= max_class(kind, resident, T::DTYPE) as usize {
        resident
    } else {
        resident.looped()
    }
}

/// The masked scalar path the tuner also tries where `path` (a ragged path) is the default.
fn scalar_alternative(path: Path) -> Option<Path> {
    match path {
        Path::Ragged => Some(Path::Scalar),
        Path::LoopRagged => Some(Path::LoopScalar),
        _ => None,
    }
}

/// The configurations of `path`'s smallest class that holds rows of `n` elements of `T`,
/// default first (empty when no class of `path` holds them).
fn class_configs<T: Element>(kind: Kind, path: Path, n: usize) -> Vec<Variant> {
    let Some(class) = CONFIGS
        .iter()
        .filter(|c| c.kind == kind && c.path == path && c.class as usize >= n)
        .filter(|c| c.serves(T::DTYPE))
        .map(|c| c.class)
        .min()
    else {
        return Vec::new();
    };
    let mut same: Vec<Variant> = CONFIGS
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == kind && c.path == path && c.class == class)
        .filter(|(_, c)| c.serves(T::DTYPE))
        .map(|(index, config)| Variant { index, config })
        .collect();
    same.sort_by_key(|v| !v.config.default);
    same
}

/// The candidates for rows of `n` elements of `T` on `device`: the configurations of the
/// smallest class of the chosen path ([`path_for`]) that holds `n`, then, for a ragged path,
/// those of the masked scalar path's smallest class that holds `n` (when one does), available
/// on the device, the default first. Never empty for `n >= 1`: when nothing is available the
/// default is still returned (its launch then reports the missing variant).
///
/// ```
/// use fly_softmax::{plan::candidates, table::{Kind, Path}};
/// use flydsl_rt::{Device, Target};
/// let c = candidates::<half::bf16>(Kind::Forward, &Device::sim(Target::Gfx950), 8000);
/// assert!(c.len() > 1 && c[0].config.default && c[0].config.class == 8192);
/// let odd = candidates::<f32>(Kind::Forward, &Device::sim(Target::Sm90), 1021);
/// assert_eq!((odd[0].config.path, odd[0].config.class), (Path::Ragged, 1024));
/// assert!(odd.iter().any(|v| v.config.path == Path::Scalar));
/// ```
pub fn candidates<T: Element>(kind: Kind, device: &Device, n: usize) -> Vec<Variant> {
    let path = path_for::<T>(kind, n);
    let mut same = class_configs::<T>(kind, path, n);
    if let Some(alt) = scalar_alternative(path) {
        same.extend(class_configs::<T>(kind, alt, n));
    }
    let default = same[0];
    let mut avail: Vec<Variant> = same
        .into_iter()
        .filter(|v| v.available::<T>(device))
        .collect();
    if avail.first() != Some(&default) {
        avail.retain(|v| *v != default);
        avail.insert(0, default);
    }
    avail
}

/// The dispatcher splits rows when there are fewer than this many rows per compute unit
/// (`m < 2 * compute units`: 264 rows on the H200) and a row holds at least two chunks of
/// [`MIN_CHUNK`]. Below it, one block per row leaves most of the device idle: a row-looping
/// block keeps one 128-bit load in flight per thread, and on the H200 such shapes reached
/// 31-62% of copy bandwidth.
///
/// ```
/// assert_eq!(fly_softmax::plan::SPLIT_ROWS_PER_CU, 2);
/// ```
pub const SPLIT_ROWS_PER_CU: usize = 2;

/// The shortest chunk, in elements (one loop step of a 256-thread block of 128-bit bf16
/// accesses: [`crate::table::SPLIT_UNROLL`] strides): shorter chunks spend more on the
/// per-chunk statistics than they gain.
pub const MIN_CHUNK: usize = 8192;

/// The split configuration of `kind` (the default one).
///
/// ```
/// use fly_softmax::{plan::split_variant, table::{Kind, Path}};
/// assert_eq!(split_variant(Kind::Backward).config.path, Path::Split);
/// ```
pub fn split_variant(kind: Kind) -> Variant {
    CONFIGS
        .iter()
        .enumerate()
        .find(|(_, c)| c.kind == kind && c.path == Path::Split && c.default)
        .map(|(index, config)| Variant { index, config })
        .expect("the table has a default split configuration per kind")
}

/// Whether `m` rows are few enough on `device` to split ([`SPLIT_ROWS_PER_CU`]) and rows of
/// `n` long enough to make two chunks.
///
/// ```
/// use fly_softmax::plan::few_long_rows;
/// use flydsl_rt::{Device, Target};
/// let h200 = Device::sim(Target::Sm90); // 132 compute units
/// assert!(few_long_rows(&h200, 263, 16384) && !few_long_rows(&h200, 264, 16384));
/// assert!(!few_long_rows(&h200, 1, 16383));
/// ```
pub fn few_long_rows(device: &Device, m: usize, n: usize) -> bool {
    m < SPLIT_ROWS_PER_CU * device.compute_units().max(1) as usize && n >= 2 * MIN_CHUNK
}

/// Whether the split configuration is the dispatcher's default for `m` rows of `n` elements
/// of `T` on `device`: rows too long for registers (the looped paths, which also read the
/// input twice, so splitting costs no extra traffic) and [`few_long_rows`]. For few rows that
/// fit in registers splitting trades the resident path's single read for parallelism, which
/// needs a measurement: there it is only a tuner candidate.
///
/// ```
/// use fly_softmax::{plan::split_by_default, table::Kind};
/// use flydsl_rt::{Device, Target};
/// let h200 = Device::sim(Target::Sm90);
/// assert!(split_by_default::<half::bf16>(Kind::Forward, &h200, 4, 150_001));
/// assert!(!split_by_default::<half::bf16>(Kind::Forward, &h200, 4, 32_768));
/// assert!(!split_by_default::<half::bf16>(Kind::Forward, &h200, 4096, 150_001));
/// ```
pub fn split_by_default<T: Element>(kind: Kind, device: &Device, m: usize, n: usize) -> bool {
    path_for::<T>(kind, n).is_loop() && few_long_rows(device, m, n)
}

/// The candidates for `m` rows of `n` elements of `T` on `device`: [`candidates`], with the
/// split configuration (`src/split.rs`) first where it is the default
/// ([`split_by_default`]: few rows too long for registers) and last where it
/// is only an alternative (few long rows that fit in registers), when the device can run it.
///
/// ```
/// use fly_softmax::{plan::candidates_for, table::{Kind, Path}};
/// use flydsl_rt::{Device, Target};
/// let h200 = Device::sim(Target::Sm90);
/// let c = candidates_for::<half::bf16>(Kind::Forward, &h200, 2, 150_001);
/// assert_eq!(c[0].config.path, Path::Split);
/// assert_eq!(c[1].config.path, Path::LoopRagged);
/// let c = candidates_for::<half::bf16>(Kind::Forward, &h200, 2, 32_768);
/// assert_eq!((c[0].config.path, c.last().unwrap().config.path), (Path::Vector, Path::Split));
/// assert!(candidates_for::<f32>(Kind::Forward, &h200, 4096, 150_001)
///     .iter().all(|v| v.config.path != Path::Split));
/// ```
pub fn candidates_for<T: Element>(kind: Kind, device: &Device, m: usize, n: usize) -> Vec<Variant> {
    let mut c = candidates::<T>(kind, device, n);
    let sp = split_variant(kind);
    if few_long_rows(device, m, n) && sp.available::<T>(device) {
        if split_by_default::<T>(kind, device, m, n) {
            c.insert(0, sp);
        } else {
            c.push(sp);
        }
    }
    c
}

/// The tuner's shape class: path, class, exact `n`, and `m` bucketed to powers of 4.
///
/// ```
/// use fly_softmax::{plan::{candidates, shape_class}};
/// use fly_softmax::table::Kind;
/// let v = candidates::<f32>(Kind::Forward, &flydsl_rt::Device::sim(flydsl_rt::Target::Sm90), 8192)[0];
/// assert_eq!(shape_class(&v, 4096, 8192), "v8192/n8192/m<=2^12");
/// ```
pub fn shape_class(v: &Variant, m: usize, n: usize) -> String {
    let c = v.config;
    let class = if c.path.is_loop() {
        String::new()
    } else {
        c.class.to_string()
    };
    let bits = usize::BITS - m.saturating_sub(1).leading_zeros();
    let bucket = bits.div_ceil(2) * 2;
    format!("{}{class}/n{n}/m<=2^{bucket}", c.path.tag())
}
