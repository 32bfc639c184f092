//! The compiled kernel configurations: one table shared by `build.rs` (which builds one kernel
//! per entry and dtype) and the run-time dispatcher (which picks among them).
//!
//! This file is `include`d by the build script through `#[path]`, so it depends on nothing but
//! `core` and the crate root's `DType` (`flydsl_rt::DType` here, `flydsl_build::ir::DType` in
//! the build script: the same enum).
//!
//! Geometry of every register-resident configuration: a block of `threads` threads handles
//! `threads / group` rows at once; the `group` threads of a row each hold `ept` elements of it
//! (in tiles of one 128-bit vector, or of one element on the scalar path), so a row of up to
//! `class = group * ept` elements stays in registers. `group <= wave` reduces with shuffles
//! only; a larger group (a multiple of the wave) adds one LDS exchange per reduction.

/// What a kernel computes: forward or backward (the word means the same in every kernel
/// crate; fly-norm's `Kind` adds its quant forward).
///
/// ```
/// use fly_softmax::table::{Kind, CONFIGS};
/// assert!(CONFIGS.iter().any(|c| c.kind == Kind::Backward));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `y = softmax(x)` row-wise.
    Forward,
    /// `dx = y * (dy - sum(dy * y))` row-wise.
    Backward,
}

/// How a kernel walks a row: its code path (the word means the same in every kernel crate;
/// the dispatcher picks it from `n` and the dtype, then a [`Config`] of it).
///
/// ```
/// use fly_softmax::table::Path;
/// assert!(Path::LoopVector.is_vector() && Path::LoopVector.is_loop());
/// assert!(Path::Ragged.is_vector() && !Path::Ragged.is_loop());
/// assert_eq!(Path::Scalar.tag(), "s");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// Register-resident row, 128-bit buffer loads; needs `n % vector width == 0` and
    /// `n <= class`.
    Vector,
    /// Register-resident row, one element per access, masked; any `n <= class`.
    Scalar,
    /// Register-resident ragged row (any `n <= class`, meant for `n` not a multiple of the
    /// vector width): each row's unaligned head (the elements before its first 16-byte
    /// boundary: row `r` starts at element `r * n`, not 16-byte aligned for odd `n`) and its
    /// tail (after the last whole vector) are one element per lane on the first lanes of the
    /// row; the body between them is aligned 128-bit vectors, as on [`Path::Vector`].
    Ragged,
    /// Looped over the row with 128-bit loads (rows too long for registers); needs
    /// `n % vector width == 0`.
    LoopVector,
    /// Looped over the row one element at a time; any `n`.
    LoopScalar,
    /// Looped over the row's aligned body with 128-bit loads, head and tail as on
    /// [`Path::Ragged`]; any `n`.
    LoopRagged,
    /// Split rows (any `n`; for few long rows): each row is cut into chunks worked on by
    /// separate blocks, in two kernels (partial statistics into an f32 workspace, then the
    /// output); rows are walked as on [`Path::LoopRagged`]. See `kernels/split.rs`.
    Split,
}

impl Path {
    /// Short tag used in kernel names and tuner shape classes.
    pub const fn tag(self) -> &'static str {
        match self {
            Path::Vector => "v",
            Path::Scalar => "s",
            Path::Ragged => "r",
            Path::LoopVector => "lv",
            Path::LoopScalar => "ls",
            Path::LoopRagged => "lr",
            Path::Split => "sp",
        }
    }
    /// Whether the path uses 128-bit vectors (for all of a row, or for its body).
    pub const fn is_vector(self) -> bool {
        !matches!(self, Path::Scalar | Path::LoopScalar)
    }
    /// Whether the path needs `n` to be a multiple of the vector width.
    ///
    /// ```
    /// use fly_softmax::table::Path;
    /// assert!(Path::Vector.needs_whole_vectors() && !Path::Ragged.needs_whole_vectors());
    /// ```
    pub const fn needs_whole_vectors(self) -> bool {
        matches!(self, Path::Vector | Path::LoopVector)
    }
    /// Whether the path peels an unaligned head and a tail off each row.
    pub const fn is_ragged(self) -> bool {
        matches!(self, Path::Ragged | Path::LoopRagged | Path::Split)
    }
    /// Whether the path loops over the row (no register residency, any length).
    pub const fn is_loop(self) -> bool {
        matches!(
            self,
            Path::LoopVector | Path::LoopScalar | Path::LoopRagged | Path::Split
        )
    }
    /// The looped path with the same row walk (itself for a looped path).
    ///
    /// ```
    /// use fly_softmax::table::Path;
    /// assert_eq!(Path::Ragged.looped(), Path::LoopRagged);
    /// assert_eq!(Path::LoopScalar.looped(), Path::LoopScalar);
    /// ```
    pub const fn looped(self) -> Path {
        match self {
            Path::Vector | Path::LoopVector => Path::LoopVector,
            Path::Scalar | Path::LoopScalar => Path::LoopScalar,
            Path::Ragged | Path::LoopRagged => Path::LoopRagged,
            Path::Split => Path::Split,
        }
    }
}

/// One compiled configuration (built for every dtype).
///
/// ```
/// use fly_softmax::table::{Kind, Path, CONFIGS};
/// let fast = CONFIGS.iter().find(|c| c.kind == Kind::Forward && c.path == Path::Vector
///     && c.class == 8192 && c.default).unwrap();
/// assert_eq!((fast.threads, fast.ept, fast.rows_per_block()), (256, 32, 1));
/// assert!(!fast.amd_only());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// Forward or backward.
    pub kind: Kind,
    /// Row walk.
    pub path: Path,
    /// Largest row this configuration holds in registers (`group * ept`); `u32::MAX` for the
    /// looped paths.
    pub class: u32,
    /// Threads per block.
    pub threads: u32,
    /// Threads per row (`threads` for one row per block; looped paths always use `threads`).
    pub group: u32,
    /// Elements per thread (register-resident paths; 0 for looped paths).
    pub ept: u32,
    /// AMD waves-per-EU hint (0 = none); such configurations exist on AMD targets only.
    pub wpe: u32,
    /// The configuration the dispatcher uses for its class when nothing is tuned.
    pub default: bool,
}

impl Config {
    /// Rows handled by one block at a time.
    pub const fn rows_per_block(&self) -> u32 {
        self.threads / self.group
    }
    /// Whether this configuration exists only on AMD targets.
    pub const fn amd_only(&self) -> bool {
        self.wpe != 0
    }
    /// Whether this configuration serves rows of `dtype`: a register-resident row holds at
    /// most [`RESIDENT_MAX_ROW_BYTES`] per operand, half that on the backward ragged path's
    /// y-only tier (classes above [`BWD_BOTH_RESIDENT_MAX`]: at 128 KiB its head and tail
    /// registers make ptxas spill f32 on sm_90); looped paths serve every dtype. The kernel of
    /// a configuration that does not serve a dtype is still built (as the looped kernel of the
    /// same block size) but never dispatched.
    ///
    /// ```
    /// use fly_softmax::table::{DType, Kind, Path, CONFIGS};
    /// let big = CONFIGS.iter().find(|c| c.class == 65536).unwrap();
    /// assert!(big.serves(DType::BF16) && big.serves(DType::F16) && !big.serves(DType::F32));
    /// let r = CONFIGS.iter().find(|c| c.kind == Kind::Backward && c.path == Path::Ragged
    ///     && c.class == 32768).unwrap();
    /// assert!(r.serves(DType::BF16) && !r.serves(DType::F32));
    /// ```
    pub const fn serves(&self, dtype: DType) -> bool {
        let y_only_ragged = matches!(self.kind, Kind::Backward)
            && matches!(self.path, Path::Ragged)
            && self.class > BWD_BOTH_RESIDENT_MAX;
        let limit = if y_only_ragged {
            RESIDENT_MAX_ROW_BYTES / 2
        } else {
            RESIDENT_MAX_ROW_BYTES
        };
        self.path.is_loop() || self.class as u64 * dtype.bytes() as u64 <= limit
    }
}

/// The most bytes of one operand's row a register-resident configuration holds (a 128 KiB row
/// fills half the register file of a 1024-thread block on every target).
pub const RESIDENT_MAX_ROW_BYTES: u64 = 128 * 1024;

const LOOP: u32 = u32::MAX;

const fn c(
    kind: Kind,
    path: Path,
    class: u32,
    threads: u32,
    group: u32,
    ept: u32,
    wpe: u32,
    default: bool,
) -> Config {
    Config {
        kind,
        path,
        class,
        threads,
        group,
        ept,
        wpe,
        default,
    }
}

use Kind::{Backward as B, Forward as F};
use Path::{
    LoopRagged as LR, LoopScalar as LS, LoopVector as LV, Ragged as R, Scalar as S, Split as SP,
    Vector as V,
};

/// Every compiled configuration. Within one `(kind, path, class)` exactly one is the default;
/// the others are the autotuner's alternatives for that class.
///
/// The subset of the reference's space (block threads {64,128,256,512} x waves-per-EU
/// {none,1,2,4} x threads per row {8,16,32,64}) that is compiled, and why:
/// - block threads: at a fixed class, fewer threads means more elements per thread; 128..512
///   threads (16..64 elements per thread) are compiled for the classes the performance goals
///   name (2048..16384); 64 threads would need 128 f32 registers per thread at 8192 and is not;
/// - waves-per-EU: these kernels need fewer VGPRs than the budget of a 1- or 2-wave hint
///   (their counts: `bench/resources.txt`), so those hints compile to identical code; only 2
///   and 4 at class 8192 and 4 at 16384 are
///   kept (AMD only: NVIDIA has no such hint);
/// - threads per row: the short-row classes (64..2048) compile 8..128 threads per row with
///   several rows per block;
/// - n = 64 and n = 128 (many short rows) have their own classes forward and backward: 8 and
///   16 threads per row with one 128-bit access each for 16-bit dtypes (a larger class would
///   leave lanes of every row idle), with alternatives of half the threads per row (two
///   accesses in flight per thread) and, at 128, of 512 threads;
/// - the ragged paths (odd `n`) mirror the vector classes' defaults, and replace the masked
///   scalar path in dispatch; the masked scalar configurations stay as the tuner's
///   alternatives for odd `n` (see `plan::candidates`);
/// - the masked scalar and looped paths are fallbacks with one configuration per class
///   (plus a 512-thread looped alternative).
pub const CONFIGS: &[Config] = &[
    // ---- forward, vector path ------------------------------------------------------------
    c(F, V, 64, 256, 8, 8, 0, true),
    c(F, V, 64, 256, 4, 16, 0, false),
    c(F, V, 128, 256, 16, 8, 0, true),
    c(F, V, 128, 256, 8, 16, 0, false),
    c(F, V, 128, 512, 16, 8, 0, false),
    c(F, V, 256, 256, 32, 8, 0, true),
    c(F, V, 256, 256, 16, 16, 0, false),
    c(F, V, 512, 256, 64, 8, 0, true),
    c(F, V, 512, 256, 32, 16, 0, false),
    c(F, V, 1024, 256, 64, 16, 0, true),
    c(F, V, 1024, 256, 32, 32, 0, false),
    c(F, V, 1024, 256, 128, 8, 0, false),
    c(F, V, 2048, 256, 256, 8, 0, true),
    c(F, V, 2048, 128, 128, 16, 0, false),
    c(F, V, 2048, 256, 64, 32, 0, false),
    c(F, V, 4096, 256, 256, 16, 0, true),
    c(F, V, 4096, 128, 128, 32, 0, false),
    c(F, V, 4096, 512, 512, 8, 0, false),
    c(F, V, 8192, 256, 256, 32, 0, true),
    c(F, V, 8192, 512, 512, 16, 0, false),
    c(F, V, 8192, 128, 128, 64, 0, false),
    c(F, V, 8192, 256, 256, 32, 2, false),
    c(F, V, 8192, 256, 256, 32, 4, false),
    c(F, V, 16384, 512, 512, 32, 0, true),
    c(F, V, 16384, 256, 256, 64, 0, false),
    c(F, V, 16384, 512, 512, 32, 4, false),
    c(F, V, 32768, 512, 512, 64, 0, true),
    // ---- forward, masked scalar path --------------------------------------------------------
    c(F, S, 128, 256, 32, 4, 0, true),
    c(F, S, 512, 256, 64, 8, 0, true),
    c(F, S, 2048, 256, 256, 8, 0, true),
    c(F, S, 8192, 512, 512, 16, 0, true),
    c(F, S, 16384, 512, 512, 32, 0, true),
    // ---- forward, ragged path (n not a multiple of the vector width) ------------------------
    c(F, R, 64, 256, 8, 8, 0, true),
    c(F, R, 128, 256, 16, 8, 0, true),
    c(F, R, 256, 256, 32, 8, 0, true),
    c(F, R, 512, 256, 64, 8, 0, true),
    c(F, R, 1024, 256, 64, 16, 0, true),
    c(F, R, 2048, 256, 256, 8, 0, true),
    c(F, R, 4096, 256, 256, 16, 0, true),
    c(F, R, 8192, 256, 256, 32, 0, true),
    c(F, R, 8192, 512, 512, 16, 0, false),
    c(F, R, 16384, 512, 512, 32, 0, true),
    c(F, R, 32768, 512, 512, 64, 0, true),
    // ---- forward, looped --------------------------------------------------------------------
    c(F, LV, LOOP, 256, 256, 0, 0, true),
    c(F, LV, LOOP, 512, 512, 0, 0, false),
    c(F, LS, LOOP, 256, 256, 0, 0, true),
    c(F, LR, LOOP, 256, 256, 0, 0, true),
    c(F, LR, LOOP, 512, 512, 0, 0, false),
    // ---- forward, split rows (few long rows; `src/split.rs` decides) ------------------------
    c(F, SP, LOOP, 256, 256, 0, 0, true),
    // ---- backward, vector path (<= 16384: y and dy resident; 32768: only y; 65536: packed) ---
    c(B, V, 64, 256, 8, 8, 0, true),
    c(B, V, 128, 256, 16, 8, 0, true),
    c(B, V, 256, 256, 32, 8, 0, true),
    c(B, V, 1024, 256, 64, 16, 0, true),
    c(B, V, 2048, 256, 256, 8, 0, true),
    c(B, V, 4096, 256, 256, 16, 0, true),
    c(B, V, 8192, 256, 256, 32, 0, true),
    c(B, V, 8192, 512, 512, 16, 0, false),
    c(B, V, 8192, 256, 256, 32, 2, false),
    c(B, V, 16384, 512, 512, 32, 0, true),
    c(B, V, 32768, 512, 512, 64, 0, true),
    c(B, V, 65536, 1024, 1024, 64, 0, true),
    // ---- backward, masked scalar path -------------------------------------------------------
    c(B, S, 512, 256, 64, 8, 0, true),
    c(B, S, 4096, 256, 256, 16, 0, true),
    c(B, S, 16384, 512, 512, 32, 0, true),
    // ---- backward, ragged path (<= 16384: y and dy resident; 32768: only y) -----------------
    c(B, R, 64, 256, 8, 8, 0, true),
    c(B, R, 128, 256, 16, 8, 0, true),
    c(B, R, 256, 256, 32, 8, 0, true),
    c(B, R, 1024, 256, 64, 16, 0, true),
    c(B, R, 2048, 256, 256, 8, 0, true),
    c(B, R, 4096, 256, 256, 16, 0, true),
    c(B, R, 8192, 256, 256, 32, 0, true),
    c(B, R, 16384, 512, 512, 32, 0, true),
    c(B, R, 32768, 512, 512, 64, 0, true),
    // ---- backward, looped (neither operand resident) ----------------------------------------
    c(B, LV, LOOP, 256, 256, 0, 0, true),
    c(B, LV, LOOP, 512, 512, 0, 0, false),
    c(B, LS, LOOP, 256, 256, 0, 0, true),
    c(B, LR, LOOP, 256, 256, 0, 0, true),
    // ---- backward, split rows ---------------------------------------------------------------
    c(B, SP, LOOP, 256, 256, 0, 0, true),
];

/// The split kernels' loop unroll: each thread keeps this many 128-bit loads in flight (one
/// block stride apart), and a chunk is a multiple of this many strides.
///
/// ```
/// assert_eq!(fly_softmax::table::SPLIT_UNROLL, 4);
/// ```
pub const SPLIT_UNROLL: u32 = 4;

/// Backward classes up to this size keep both `y` and `dy` in registers (3 units of traffic);
/// larger resident classes keep only `y` (4 units, the second `dy` read mostly from L2);
/// looped paths keep neither (5 units). From [`BWD_PACKED_MIN`] on, `y` is kept in the
/// element dtype (half the registers of f32) and widened at each use.
///
/// ```
/// use fly_softmax::table::{Kind, BWD_BOTH_RESIDENT_MAX, CONFIGS};
/// let y_only = |c: &&fly_softmax::table::Config| c.class > BWD_BOTH_RESIDENT_MAX && c.class != u32::MAX;
/// assert!(CONFIGS.iter().filter(|c| c.kind == Kind::Backward).any(|c| y_only(&c)));
/// ```
pub const BWD_BOTH_RESIDENT_MAX: u32 = 16384;

/// Backward classes from this size on keep the resident row in the element dtype (see
/// [`BWD_BOTH_RESIDENT_MAX`]).
pub const BWD_PACKED_MIN: u32 = 65536;

/// The element dtypes every configuration is built for: the workspace's one dtype enum
/// (`flydsl_rt::DType`, which is `flydsl_ir::DType`; the including crate root imports it).
///
/// ```
/// use fly_softmax::table::DType;
/// assert_eq!((DType::BF16.vec(), DType::F32.vec(), DType::F16.bytes()), (8, 4, 2));
/// ```
pub use crate::DType;

/// The name of the second (finish) kernel of a [`Path::Split`] configuration (its first, the
/// stats kernel, has the [`kernel_name`]).
///
/// ```
/// use fly_softmax::table::{finish_name, DType, Path, CONFIGS};
/// let sp = CONFIGS.iter().find(|c| c.path == Path::Split).unwrap();
/// assert_eq!(finish_name(sp, DType::F32), "softmax_fwd_f32_sp_t256_g256_e0_w0_fin");
/// ```
pub fn finish_name(cfg: &Config, dtype: DType) -> String {
    format!("{}_fin", kernel_name(cfg, dtype))
}

/// The kernel name of configuration `cfg` for `dtype` (also the name of its launcher).
///
/// ```
/// use fly_softmax::table::{kernel_name, DType, CONFIGS};
/// assert_eq!(kernel_name(&CONFIGS[0], DType::F16), "softmax_fwd_f16_v64_t256_g8_e8_w0");
/// ```
pub fn kernel_name(cfg: &Config, dtype: DType) -> String {
    let kind = match cfg.kind {
        Kind::Forward => "fwd",
        Kind::Backward => "bwd",
    };
    let class = if cfg.path.is_loop() {
        String::new()
    } else {
        cfg.class.to_string()
    };
    format!(
        "softmax_{kind}_{}_{}{class}_t{}_g{}_e{}_w{}",
        dtype.name(),
        cfg.path.tag(),
        cfg.threads,
        cfg.group,
        cfg.ept,
        cfg.wpe
    )
}
