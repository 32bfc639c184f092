//! Shared machinery of the property-test (fuzz) suites `fuzz_norm`, `fuzz_softmax`,
//! `fuzz_gemm` and `fuzz_attn`: the one place that names the kernel crates' dtype types, the
//! seeded runner (seed and case count printed, overridable from the environment), devices,
//! value distributions, output sentinels (arbitrary bits, or signalling NaNs that show an
//! element left unwritten) and the comparison rule for rows with non-finite values.
//!
//! Environment: `FUZZ_SEED` (or `PROPTEST_RNG_SEED`) sets the seed (decimal or 0x-hex),
//! `FUZZ_CASES` (or `PROPTEST_CASES`) the number of cases of every fuzz test.

#![allow(dead_code)] // each suite uses its own subset

use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, DeviceBuffer, DeviceRepr, Stream, Target};
use flydsl_testutil::rng::Rng;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use std::io::Write;

// ---- API names: the only place that spells the kernel crates' dtype and element types ------

/// fly-norm's dtype enum (the one all kernel crates share).
pub type NormDtype = flydsl_rt::DType;
/// fly-softmax's dtype enum (the same one).
pub type SoftmaxDtype = flydsl_rt::DType;

/// An activation / weight element type of both kernel crates, with the host-side helpers the
/// suites need.
pub trait Elem:
    flydsl_rt::Element
    + flydsl_testutil::norm::NormDtype
    + flydsl_testutil::compare::Storage
    + DeviceRepr
    + Bits
    + Copy
    + Default
    + std::fmt::Debug
{
    /// `"f32"`, `"f16"` or `"bf16"`.
    const NAME: &'static str;
    /// Largest finite value.
    const MAX: f64;
    /// Smallest positive normal value.
    const MIN_NORMAL: f64;
    /// Absolute error allowed on any output stored in this type: its smallest subnormal
    /// (f16), or the smallest normal f32 (f32, bf16: GPUs flush f32 subnormals).
    const TINY: f64;
    /// fly-norm's dtype of this type.
    fn norm_dtype() -> NormDtype {
        <Self as flydsl_rt::Element>::DTYPE
    }
    /// fly-softmax's dtype of this type.
    fn softmax_dtype() -> SoftmaxDtype {
        <Self as flydsl_rt::Element>::DTYPE
    }
    /// Round an f64 to this type (through f32, round to nearest even).
    fn from_f64(v: f64) -> Self {
        <Self as flydsl_testutil::compare::Storage>::from_f32(v as f32)
    }
    /// The exact value as f64.
    fn f64(self) -> f64 {
        <Self as flydsl_testutil::compare::Storage>::to_f64(self)
    }
}

impl Elem for f32 {
    const NAME: &'static str = "f32";
    const MAX: f64 = f32::MAX as f64;
    const MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;
    const TINY: f64 = f32::MIN_POSITIVE as f64;
}
impl Elem for f16 {
    const NAME: &'static str = "f16";
    const MAX: f64 = 65504.0;
    const MIN_NORMAL: f64 = 6.103_515_625e-5;
    const TINY: f64 = 5.960_464_477_539_063e-8;
}
impl Elem for bf16 {
    const NAME: &'static str = "bf16";
    const MAX: f64 = 3.389_531_389_251_535_5e38;
    const MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;
    const TINY: f64 = f32::MIN_POSITIVE as f64;
}

/// The smallest eps the norms must accept: the smallest normal f32 (issue 12, item 4).
pub const MIN_EPS: f32 = f32::MIN_POSITIVE;

// ---- bit patterns ---------------------------------------------------------------------------

/// The raw bits of a device element (for "untouched" checks).
pub trait Bits: Copy {
    /// The bits, zero-extended.
    fn bits(self) -> u32;
    /// A value with these bits (truncated to the type's width).
    fn from_bits32(b: u32) -> Self;
}
impl Bits for f32 {
    fn bits(self) -> u32 {
        self.to_bits()
    }
    fn from_bits32(b: u32) -> Self {
        f32::from_bits(b)
    }
}
impl Bits for f16 {
    fn bits(self) -> u32 {
        u32::from(self.to_bits())
    }
    fn from_bits32(b: u32) -> Self {
        f16::from_bits(b as u16)
    }
}
impl Bits for bf16 {
    fn bits(self) -> u32 {
        u32::from(self.to_bits())
    }
    fn from_bits32(b: u32) -> Self {
        bf16::from_bits(b as u16)
    }
}
impl Bits for i8 {
    fn bits(self) -> u32 {
        u32::from(self as u8)
    }
    fn from_bits32(b: u32) -> Self {
        b as u8 as i8
    }
}

/// A sentinel pattern of `len` elements: arbitrary bits (finite, NaN and inf patterns
/// included) that no kernel writes by chance.
pub fn sentinel<T: Bits>(len: usize, salt: u32) -> Vec<T> {
    (0..len as u32)
        .map(|i| {
            let h = (i ^ salt.rotate_left(7))
                .wrapping_mul(0x9E37_79B1)
                .wrapping_add(salt);
            T::from_bits32(h ^ (h >> 15))
        })
        .collect()
}

/// A float type with signalling NaNs: the bit layout [`nan_sentinel`] needs.
pub trait Float: Bits {
    /// The exponent field (all ones in a NaN).
    const EXP: u32;
    /// The quiet bit (the top mantissa bit).
    const QUIET: u32;
    /// The sign bit.
    const SIGN: u32;
}
impl Float for f32 {
    const EXP: u32 = 0x7F80_0000;
    const QUIET: u32 = 0x0040_0000;
    const SIGN: u32 = 0x8000_0000;
}
impl Float for f16 {
    const EXP: u32 = 0x7C00;
    const QUIET: u32 = 0x0200;
    const SIGN: u32 = 0x8000;
}
impl Float for bf16 {
    const EXP: u32 = 0x7F80;
    const QUIET: u32 = 0x0040;
    const SIGN: u32 = 0x8000;
}

/// A NaN sentinel of `len` elements: signalling NaNs (quiet bit clear, non-zero payload,
/// either sign), a different one per element. IEEE arithmetic never produces a signalling
/// NaN (it quiets them) and the suites' inputs hold none, so an element that still holds its
/// sentinel after a successful call was not written, whatever its reference (NaN included).
pub fn nan_sentinel<T: Float>(len: usize, salt: u32) -> Vec<T> {
    (0..len as u32)
        .map(|i| {
            let h = (i ^ salt.rotate_left(11))
                .wrapping_mul(0x85EB_CA6B)
                .wrapping_add(salt);
            let h = h ^ (h >> 13);
            let payload = (h % (T::QUIET - 1)) + 1;
            let sign = if h & 0x1_0000 != 0 { T::SIGN } else { 0 };
            T::from_bits32(sign | T::EXP | payload)
        })
        .collect()
}

/// An output buffer filled with a sentinel pattern, and that pattern's bits.
pub struct Out<T: DeviceRepr + Bits> {
    /// The buffer.
    pub buf: DeviceBuffer<T>,
    /// The bits it was filled with.
    pub before: Vec<u32>,
}

impl<T: DeviceRepr + Bits> Out<T> {
    /// A buffer of `len` elements on `dev` holding the sentinel of `salt`.
    pub fn new(dev: &Device, len: usize, salt: u32) -> Out<T> {
        let host = sentinel::<T>(len, salt);
        let buf = DeviceBuffer::from_slice(dev, &host).expect("upload");
        Out {
            buf,
            before: host.iter().map(|v| v.bits()).collect(),
        }
    }
    /// A buffer of `len` elements on `dev` holding the NaN sentinel of `salt`
    /// ([`nan_sentinel`]).
    pub fn nan(dev: &Device, len: usize, salt: u32) -> Out<T>
    where
        T: Float,
    {
        let host = nan_sentinel::<T>(len, salt);
        let buf = DeviceBuffer::from_slice(dev, &host).expect("upload");
        Out {
            buf,
            before: host.iter().map(|v| v.bits()).collect(),
        }
    }
    /// The buffer's contents.
    pub fn read(&self) -> Vec<T> {
        self.buf.to_vec().expect("download")
    }
    /// `Err` naming the first changed element unless the buffer still holds its sentinel.
    pub fn untouched(&self, name: &str) -> Result<(), String> {
        let now: Vec<u32> = self.read().iter().map(|v| v.bits()).collect();
        match now.iter().zip(&self.before).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(i) => Err(format!(
                "output `{name}` was modified by a failing call: element {i} is {:#x}, was {:#x}",
                now[i], self.before[i]
            )),
        }
    }
}

/// `Err` naming the first element of `got` (read after a successful call) that still holds its
/// sentinel bits `before`: every element of an output must be written.
pub fn written<T: Bits>(name: &str, got: &[T], before: &[u32]) -> Result<(), String> {
    match got.iter().zip(before).position(|(a, b)| a.bits() == *b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "output `{name}`: element {i} of {} was not written (still {:#x})",
            got.len(),
            before[i]
        )),
    }
}

/// Upload a host slice.
pub fn up<T: DeviceRepr>(dev: &Device, v: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_slice(dev, v).expect("upload")
}

// ---- devices -------------------------------------------------------------------------------

/// The targets fuzzed: wave64 (gfx942) and wave32 (gfx1201, sm_90).
pub const TARGETS: [Target; 3] = [Target::Gfx942, Target::Gfx1201, Target::Sm90];

/// The activations as the kernels of `target` see them: AMD kernels run with f32 denormals
/// flushed (flush-in, flush-out; bf16 arithmetic is f32 there), so a subnormal f32 or bf16
/// input counts as a zero of the same sign; NVIDIA keeps f32 denormals. f16 is never
/// flushed. (The rule is the Sim's and the hardware's: `flydsl-sim/src/fpmode.rs`.)
pub fn as_seen_by<T: Elem>(target: Target, x: Vec<f64>) -> Vec<f64> {
    if !target.is_amd() || T::NAME == "f16" {
        return x;
    }
    let tiny = f64::from(f32::MIN_POSITIVE);
    x.into_iter()
        .map(|v| {
            if v != 0.0 && v.abs() < tiny {
                0.0 * v.signum()
            } else {
                v
            }
        })
        .collect()
}

/// The process-wide Sim device of a target, a stream on it, and a second, distinct Sim device
/// of the same target (for device-mismatch cases).
pub struct Devs {
    /// The device the calls run on.
    pub dev: Device,
    /// A stream of `dev`.
    pub stream: Stream,
    /// Another device.
    pub other: Device,
}

/// One [`Devs`] per entry of [`TARGETS`].
pub fn devices() -> Vec<Devs> {
    TARGETS
        .iter()
        .map(|&t| {
            let dev = Device::sim(t);
            Devs {
                stream: dev.stream().expect("stream"),
                other: Device::new_sim(t),
                dev,
            }
        })
        .collect()
}

// ---- seeded runner ---------------------------------------------------------------------------

/// The default seed (fixed, so that CI runs are reproducible).
pub const DEFAULT_SEED: u64 = 0x0F1D_5EED_2026_0012;

fn env_u64(names: &[&str]) -> Option<u64> {
    names.iter().find_map(|n| {
        let v = std::env::var(n).ok()?;
        let v = v.trim();
        match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        }
    })
}

/// Run `test` on `cases` values of `strategy` (overridable by `FUZZ_CASES` /
/// `PROPTEST_CASES`) from the seed (`FUZZ_SEED` / `PROPTEST_RNG_SEED`, else
/// [`DEFAULT_SEED`] mixed with the test name), printing both to stderr first (not captured by
/// the test harness, so CI logs show them). A failing case is shrunk a little and reported
/// with the seed that reproduces it.
pub fn run<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), String>,
) where
    S::Value: std::fmt::Debug,
{
    let seed = env_u64(&["FUZZ_SEED", "PROPTEST_RNG_SEED"]).unwrap_or_else(|| {
        let h = name.bytes().fold(DEFAULT_SEED, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        h
    });
    let cases = env_u64(&["FUZZ_CASES", "PROPTEST_CASES"]).map_or(cases, |c| c as u32);
    let _ = writeln!(
        std::io::stderr(),
        "fuzz {name}: seed {seed:#x} (FUZZ_SEED), {cases} cases (FUZZ_CASES)"
    );
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 64,
        max_shrink_time: 60_000,
        ..Config::default()
    };
    let keep_going = std::env::var("FUZZ_KEEP_GOING").is_ok_and(|v| !v.is_empty() && v != "0");
    let failures: std::sync::Mutex<Vec<(String, String)>> = Default::default();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |v| {
        let what = format!("{v:?}");
        let t0 = std::time::Instant::now();
        let r = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(v))) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(format!("PANIC: {msg}"))
            }
        };
        if std::env::var("FUZZ_TIMES").is_ok() {
            let _ = writeln!(
                std::io::stderr(),
                "{:8.3}s {what}",
                t0.elapsed().as_secs_f64()
            );
        }
        match r {
            Ok(()) => Ok(()),
            Err(e) if keep_going => {
                if std::env::var("FUZZ_VERBOSE").is_ok() {
                    let _ = writeln!(std::io::stderr(), "FAIL {e}\n  in {what}");
                }
                failures.lock().unwrap().push((e, what));
                Ok(())
            }
            Err(e) => Err(TestCaseError::fail(e)),
        }
    });
    let failures = failures.into_inner().unwrap();
    if !failures.is_empty() {
        // FUZZ_KEEP_GOING: every failing case, grouped by the kind of failure.
        let mut kinds: std::collections::BTreeMap<String, Vec<&(String, String)>> =
            Default::default();
        for f in &failures {
            kinds.entry(failure_kind(&f.0)).or_default().push(f);
        }
        let mut report = format!(
            "fuzz {name} (seed {seed:#x}): {} of {cases} cases failed\n",
            failures.len()
        );
        for (k, fs) in &kinds {
            report += &format!(
                "  {} x {k}\n    e.g. {}\n    in {}\n",
                fs.len(),
                fs[0].0,
                fs[0].1
            );
        }
        let _ = writeln!(std::io::stderr(), "{report}");
        panic!("{report}");
    }
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, case)) => panic!(
            "fuzz {name} (seed {seed:#x}): {why}\nminimal failing case: {case:#?}\n\
             reproduce: FUZZ_SEED={seed:#x} cargo test -p flydsl-tests --test <suite> {name}\n\
             (FUZZ_KEEP_GOING=1 lists every failing case instead)"
        ),
        Err(e) => panic!("fuzz {name} (seed {seed:#x}): {e}"),
    }
}

/// The kind of a failure message: the text before its first `:`, digits dropped.
fn failure_kind(msg: &str) -> String {
    let head = msg.split(':').next().unwrap_or(msg);
    let head: String = head.chars().filter(|c| !c.is_ascii_digit()).collect();
    if msg.starts_with("valid arguments were rejected")
        || msg.starts_with("invalid arguments were accepted")
        || msg.starts_with("PANIC")
    {
        // Name the error's operation too.
        msg.chars()
            .take(90)
            .filter(|c| !c.is_ascii_digit())
            .collect()
    } else {
        head
    }
}

// ---- value distributions ---------------------------------------------------------------------

/// How the values of a tensor are drawn (per row where it matters).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// `scale * N(0, 1)`.
    Normal {
        /// 10-exponent of the scale.
        log_scale: i8,
    },
    /// Huge finite magnitudes: about 1e30 (f32, bf16) or 1e4 (f16), random signs.
    Huge,
    /// Tiny normal magnitudes: about 1e-30 (f32, bf16) or 1e-3 (f16).
    Tiny,
    /// Subnormal values of the dtype (and zeros).
    Subnormal,
    /// Rows `mean + std * N(0, 1)` with `|mean| / std = 10^log_ratio` (per-row sign), std
    /// chosen so that the row fits the dtype.
    LargeMean {
        /// 10-exponent of `|mean| / std` times 10 (0..=40: ratio 1 ..= 1e4).
        log_ratio_x10: u8,
    },
    /// Normal values with NaN, +inf and -inf mixed in: each row independently is clean, holds
    /// one non-finite value, several, or only -inf (`-inf` rows) at rates set by `kind`.
    NonFinite {
        /// 0: NaNs, 1: +inf, 2: -inf, 3: a mix, 4: whole rows of -inf.
        kind: u8,
    },
    /// Every element equal (per row): zero variance.
    Constant,
}

/// Draw `m * n` values of `T` from `dist` (row-wise), exact in `T`.
pub fn values<T: Elem>(dist: Dist, rng: &mut Rng, m: usize, n: usize) -> Vec<T> {
    let f16_like = T::MAX < 1e5;
    let mut out = Vec::with_capacity(m * n);
    for _ in 0..m {
        let row_sign = if rng.uniform() < 0.5 { -1.0 } else { 1.0 };
        let row_scale = rng.uniform() + 0.5;
        let mut nonfinite_row = false;
        for _ in 0..n {
            let z = rng.normal();
            let v = match dist {
                Dist::Normal { log_scale } => z * 10f64.powi(log_scale.into()),
                Dist::Huge => {
                    let e = if f16_like {
                        3.0
                    } else {
                        29.0 + rng.uniform() * 1.5
                    };
                    z * 10f64.powf(e) * row_scale
                }
                Dist::Tiny => {
                    let e = if f16_like { -3.0 } else { -30.0 };
                    z * 10f64.powf(e) * row_scale
                }
                Dist::Subnormal => {
                    // A uniform fraction of the smallest normal: subnormal (or 0) in T.
                    (rng.uniform() * 2.0 - 1.0) * T::MIN_NORMAL * 0.999
                }
                Dist::LargeMean { log_ratio_x10 } => {
                    let ratio = 10f64.powf(f64::from(log_ratio_x10) / 10.0);
                    // Keep |mean| + 6 std well inside the dtype (f16: below 3e4).
                    let std = if f16_like { 2.0 } else { row_scale };
                    row_sign * ratio * std + z * std
                }
                Dist::NonFinite { .. } | Dist::Constant => z,
            };
            out.push(T::from_f64(v));
        }
        let row = out.len() - n..out.len();
        match dist {
            Dist::Constant => {
                let c = T::from_f64(row_sign * row_scale * 3.0);
                out[row].iter_mut().for_each(|v| *v = c);
            }
            Dist::NonFinite { kind } => {
                let r = rng.uniform();
                if kind == 4 && r < 0.5 {
                    out[row]
                        .iter_mut()
                        .for_each(|v| *v = T::from_f64(f64::NEG_INFINITY));
                } else if r < 0.6 && n > 0 {
                    let count = 1 + (rng.next_u64() % 3) as usize;
                    for c in 0..count {
                        let j = row.start + (rng.next_u64() as usize % n);
                        let k = if kind == 3 { c as u8 % 3 } else { kind.min(2) };
                        out[j] = T::from_f64(match k {
                            0 => f64::NAN,
                            1 => f64::INFINITY,
                            _ => f64::NEG_INFINITY,
                        });
                    }
                    nonfinite_row = true;
                }
            }
            _ => {}
        }
        let _ = nonfinite_row;
    }
    out
}

/// Widen to f64.
pub fn wide<T: Elem>(v: &[T]) -> Vec<f64> {
    v.iter().map(|&x| x.f64()).collect()
}

// ---- comparison ------------------------------------------------------------------------------

/// Compare `got` with the f64 reference `want`, `rows` rows of `cols` (a vector is one row):
/// - in a row whose reference is all finite, every element must be finite and within
///   `tol(i, j, want)` of the reference;
/// - in a row whose reference (or `bad_row(i)`) holds a non-finite value, every element whose
///   reference is non-finite must be non-finite (NaN or inf: never a silently finite value),
///   and every other element either non-finite or within tolerance.
pub fn check_rows(
    what: &str,
    got: &[f64],
    want: &[f64],
    rows: usize,
    cols: usize,
    bad_row: impl Fn(usize) -> bool,
    tol: impl Fn(usize, usize, f64) -> f64,
) -> Result<(), String> {
    if got.len() != rows * cols || want.len() != rows * cols {
        return Err(format!(
            "{what}: {} / {} elements, expected {rows} x {cols}",
            got.len(),
            want.len()
        ));
    }
    for i in 0..rows {
        let (g, w) = (
            &got[i * cols..(i + 1) * cols],
            &want[i * cols..(i + 1) * cols],
        );
        let bad = bad_row(i) || w.iter().any(|v| !v.is_finite());
        for j in 0..cols {
            let (a, b) = (g[j], w[j]);
            let ok = if !b.is_finite() {
                !a.is_finite()
            } else if !a.is_finite() {
                bad
            } else {
                (a - b).abs() <= tol(i, j, b)
            };
            if !ok {
                return Err(format!(
                    "{what}: row {i} col {j}: got {a:e}, want {b:e} (tolerance {:e}, row {}finite)",
                    tol(i, j, b),
                    if bad { "non-" } else { "" }
                ));
            }
        }
    }
    Ok(())
}

/// Whether row `i` of a row-major `[_, n]` slice holds a non-finite value.
pub fn row_nonfinite(v: &[f64], n: usize, i: usize) -> bool {
    v[i * n..(i + 1) * n].iter().any(|x| !x.is_finite())
}

/// The reference value as stored in `T`: well beyond `T`'s largest finite value it rounds to
/// an infinity (so an output that overflows `T` is expected to be infinite); just beyond it
/// (within 0.5%, where rounding decides), the largest finite value.
pub fn sat<T: Elem>(w: f64) -> f64 {
    if w.is_finite() && w.abs() > T::MAX * 1.005 {
        w.signum() * f64::INFINITY
    } else if w.is_finite() && w.abs() > T::MAX {
        w.signum() * T::MAX
    } else {
        w
    }
}

/// f32 unit roundoff (2^-24).
pub const U32: f64 = 1.0 / 16_777_216.0;
