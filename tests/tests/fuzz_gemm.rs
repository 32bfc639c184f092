//! Property tests (issue 12, item 9) of every public function of fly-gemm on the Sim: the
//! 16-bit GEMM (`gemm`, `gemm_with` with every config of `PORTABLE_CONFIGS` and one outside
//! it, `gemm_with_tile` with every tile of `table::TILES` and one outside it; plain and
//! preshuffled B) on a wave64 (gfx942) and two wave32 (gfx1201, sm_90) targets; the 8-bit GEMM
//! (`gemm_scaled`, `gemm_scaled_with`, `gemm_scaled_with_config`; each target's fp8 format
//! (e4m3fnuz on gfx942, e4m3fn elsewhere) and i8 inputs, plain and preshuffled B, bf16 and f16
//! output; the other fp8 format must be the documented error naming `Q`) on the same targets; the host
//! helpers `preshuffle_b`, `unpreshuffle_b`, their `_array` forms and `preshuffle::index`
//! (round trips, and byte-exactness against the documented formula for element sizes 1 to 16
//! bytes), `quantize_rows`, `quantize_rows_into`, `dequantize_rows` and
//! `QuantElement::quantize` / `dequantize` (bit-exact against the documented formulas and an
//! independent round-to-nearest-even); and the dispatch helpers `default_config`,
//! `Tile::pick`, `Tile::tiles`, `table::split_k` / `split_stages`, `TileConfig::index`,
//! `Epilogue::index` / `has_bias`. The pinned split-K entries (`gemm_with_split`,
//! `gemm_scaled_with_split`) run with every tile and 0 to 5 splits (0 and counts past the K
//! stages must be errors).
//!
//! Generated: shapes (0 where legal, 1, odd, primes, both sides of 16, 64, 128 and 256), dtypes
//! (bf16, f16, and f32, which has no kernel), every epilogue, argument mistakes (a wrong length
//! or another device for any one buffer, a missing or unexpected bias, n or k of 0, a dimension
//! past `MAX_DIM`, preshuffled B of a shape the layout cannot hold, k not a multiple of 8 (tile
//! pinned) or 16 (8-bit tile pinned), a config or tile outside the tables, a target without the
//! pinned kernel, scales of the wrong length) and value distributions (exact halves, normal at several
//! scales, large, tiny and subnormal magnitudes, NaN / inf mixes).
//!
//! Asserted: no panic; an error (naming the function called) exactly when the arguments are
//! invalid; on error every output bit-identical to its sentinel; otherwise every element of
//! C written (it starts as a signalling-NaN sentinel) and within
//! `flydsl_testutil::gemm::elem_tolerance` of the f64 reference (bit-exact where the f32 sums
//! are exact), an overflowing element infinite, and a NaN or infinity in A, B or the bias
//! giving a non-finite element exactly where the reference is non-finite (IEEE arithmetic;
//! `max(NaN, 0)` and the limits `silu(-inf)` / `gelu(-inf)` may also be 0).
//!
//! Seed and case count: printed at the start of each test; `FUZZ_SEED`, `FUZZ_CASES`.

mod fuzz_common;

use fly_gemm::table::{Tile, TILES};
use fly_gemm::{
    BLayout, Epilogue, GemmArgs, QuantElement, TileConfig, MAX_DIM, PORTABLE_CONFIGS,
    PORTABLE_CONFIGS8,
};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, DeviceBuffer, DeviceRepr, Target, F8E4M3FN, F8E4M3FNUZ};
use flydsl_testutil::gemm::{elem_tolerance, gemm_ref, gemm_scaled_ref, Act};
use flydsl_testutil::rng::Rng;
use fuzz_common::*;
use proptest::prelude::*;
use proptest::sample::select;

/// Most multiply-adds (`m * n * k`) of one case: the Sim runs a GEMM of 10^6 in about 20 ms,
/// the debug-build reference about as fast.
const WORK: usize = 300_000;

// ---- shapes -----------------------------------------------------------------------------------

/// m: 0 (a no-op), 1, odd, primes, both sides of 16, 64 and 128, or anything up to 130.
fn m_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => select(vec![0usize, 1, 2, 3, 5, 7, 13, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129]),
        2 => 1usize..=130,
    ]
}

/// n: 0 (an error), 1, odd, primes, both sides of 16, 64, 128 and 256, or anything up to 260.
fn n_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(0usize),
        12 => select(vec![
            1usize, 2, 3, 5, 7, 8, 13, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 97, 127, 128,
            129, 255, 256, 257
        ]),
        6 => 1usize..=260,
    ]
}

/// k: 0 (an error), 1, odd, primes, multiples of 8 and 32, both sides of 64, 128 and 256.
fn k_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(0usize),
        12 => select(vec![
            1usize, 2, 3, 5, 7, 8, 9, 13, 15, 16, 17, 24, 31, 32, 33, 63, 64, 65, 96, 127, 128,
            129, 255, 256, 257
        ]),
        6 => 1usize..=260,
    ]
}

/// Fit `m` to [`WORK`] (keeping 0 and at least one row).
fn fit(m: usize, n: usize, k: usize) -> usize {
    if m == 0 {
        0
    } else {
        m.min((WORK / (n * k).max(1)).max(1))
    }
}

// ---- values -----------------------------------------------------------------------------------

/// How the values of a 16-bit operand are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
enum GDist {
    /// Multiples of 1/2 in [-1, 1]: every f32 partial sum of K <= 1032 is exact.
    Exact,
    /// `10^log_scale * N(0, 1)` (f16 products of 10^3 overflow the f16 output: infinities).
    Normal { log_scale: i8 },
    /// Large finite magnitudes: about 1e16 (bf16, products near 1e32: still finite in f32) or
    /// 30..300 (f16: sums past its largest value 65504).
    Large,
    /// Tiny magnitudes: about 1e-18 (bf16: products near the smallest normal f32) or 1e-3 (f16).
    Tiny,
    /// Subnormal values of the dtype (bf16: f32 subnormals, which a target may flush).
    Subnormal,
    /// Normal values with NaN (0), +inf (1), -inf (2) or a mix (3) at a few places.
    NonFinite { kind: u8 },
}

fn gdist_strategy() -> impl Strategy<Value = GDist> {
    prop_oneof![
        3 => Just(GDist::Exact),
        5 => (-3i8..=3).prop_map(|log_scale| GDist::Normal { log_scale }),
        1 => Just(GDist::Large),
        1 => Just(GDist::Tiny),
        1 => Just(GDist::Subnormal),
        1 => (0u8..4).prop_map(|kind| GDist::NonFinite { kind }),
    ]
}

/// `len` values of `T` from `dist`.
fn gvalues<T: Elem>(dist: GDist, rng: &mut Rng, len: usize) -> Vec<T> {
    let f16_like = T::MAX < 1e5;
    let mut v: Vec<T> = (0..len)
        .map(|_| {
            let z = rng.normal();
            let x = match dist {
                GDist::Exact => ((rng.next_u64() % 5) as f64 - 2.0) / 2.0,
                GDist::Normal { log_scale } => z * 10f64.powi(log_scale.into()),
                GDist::Large if f16_like => z * 10f64.powf(1.5 + rng.uniform()),
                GDist::Large => z * 10f64.powf(15.5 + rng.uniform()),
                GDist::Tiny if f16_like => z * 1e-3,
                GDist::Tiny => z * 1e-18,
                GDist::Subnormal => (rng.uniform() * 2.0 - 1.0) * T::MIN_NORMAL * 0.999,
                GDist::NonFinite { .. } => z,
            };
            T::from_f64(x)
        })
        .collect();
    if let GDist::NonFinite { kind } = dist {
        let count = if len == 0 {
            0
        } else {
            1 + (rng.next_u64() % 3) as usize
        };
        for c in 0..count {
            let i = rng.next_u64() as usize % len;
            let k = if kind == 3 { c as u8 % 3 } else { kind };
            v[i] = T::from_f64(match k {
                0 => f64::NAN,
                1 => f64::INFINITY,
                _ => f64::NEG_INFINITY,
            });
        }
    }
    v
}

fn act(e: Epilogue) -> Act {
    match e {
        Epilogue::None | Epilogue::Bias => Act::None,
        Epilogue::BiasRelu => Act::Relu,
        Epilogue::BiasSilu => Act::Silu,
        Epilogue::BiasGelu => Act::Gelu,
    }
}

/// The smallest magnitude that rounds to infinity in `T` (its largest value plus half an ulp).
fn overflow_threshold<T: Elem>() -> f64 {
    match T::NAME {
        "f16" => 65520.0,
        "bf16" => T::MAX + 2f64.powi(119),
        _ => f64::from(f32::MAX) + 2f64.powi(103),
    }
}

/// The inputs of one output element, for its check.
struct Elem3 {
    /// Reference before the activation.
    pre: f64,
    /// Reference after it.
    want: f64,
    /// What the f32 arithmetic adds up (see `elem_tolerance`).
    mag: f64,
    /// Further allowed error before the activation (flushable subnormal products).
    extra: f64,
}

/// Check one output element `got` of a GEMM with output `T` (see the module docs).
fn check_elem<T: Elem>(got: f64, e: &Elem3, k: usize, act: Act, exact: bool) -> Result<(), String> {
    let (pre, want) = (e.pre, e.want);
    let limit_zero = got == 0.0
        && ((act == Act::Relu && pre.is_nan())
            || (matches!(act, Act::Silu | Act::Gelu) && pre == f64::NEG_INFINITY));
    if !want.is_finite() || (act == Act::Relu && pre.is_nan()) {
        // A NaN or infinity in the element's inputs (or a sum past f32): non-finite, never
        // the opposite infinity (or a documented-limit zero).
        let opposite = got.is_infinite() && got == -want;
        let ok = limit_zero || !(got.is_finite() || opposite);
        return if ok {
            Ok(())
        } else {
            Err(format!(
                "got {got:e}, want {want:e} (a non-finite reference: pre-activation {pre:e})"
            ))
        };
    }
    if exact {
        let w = T::from_f64(want).f64();
        return if got == w {
            Ok(())
        } else {
            Err(format!("got {got:e}, want exactly {w:e} (exact f32 sums)"))
        };
    }
    let tol = elem_tolerance(T::NAME, k, e.mag, e.extra, pre, want, act);
    let thr = overflow_threshold::<T>();
    let ok = if got.is_finite() {
        (got - want).abs() <= tol
    } else if got == f64::INFINITY {
        want + tol >= thr
    } else if got == f64::NEG_INFINITY {
        want - tol <= -thr
    } else {
        false
    };
    if ok && got.is_finite() && (want - tol >= thr || want + tol <= -thr) {
        return Err(format!(
            "got {got:e}, want an infinity (reference {want:e} overflows)"
        ));
    }
    if ok {
        Ok(())
    } else {
        Err(format!(
            "got {got:e}, want {want:e} (tolerance {tol:e}, pre-activation {pre:e}, magnitude \
             {:e})",
            e.mag
        ))
    }
}

/// The references of every element of `act(A * B^T * sa[i] * sb[j] + bias)` (no scales for the
/// 16-bit GEMM), from the exact input values `a` [m, k], `b` [n, k].
fn references(
    a: &[f32],
    b: &[f32],
    scales: Option<(&[f32], &[f32])>,
    bias: Option<&[f32]>,
    flushable: Option<(&[bool], &[bool])>,
    m: usize,
    n: usize,
    k: usize,
    act: Act,
) -> Vec<Elem3> {
    let want = match scales {
        None => gemm_ref(a, b, bias, m, n, k, act),
        Some((sa, sb)) => gemm_scaled_ref(a, b, sa, sb, bias, m, n, k, act),
    };
    let pre = match scales {
        None => gemm_ref(a, b, bias, m, n, k, Act::None),
        Some((sa, sb)) => gemm_scaled_ref(a, b, sa, sb, bias, m, n, k, Act::None),
    };
    // Magnitudes over the finite inputs (an element with a non-finite input has a non-finite
    // reference and takes the non-finite rule).
    let fin = |v: &[f32]| -> Vec<f32> {
        v.iter()
            .map(|x| if x.is_finite() { x.abs() } else { 0.0 })
            .collect()
    };
    let (aa, ba) = (fin(a), fin(b));
    let mut mag = gemm_ref(&aa, &ba, None, m, n, k, Act::None);
    let extra = match flushable {
        Some((fa, fb)) if fa.iter().chain(fb).any(|&f| f) => {
            let only = |v: &[f32], f: &[bool]| -> Vec<f32> {
                v.iter()
                    .zip(f)
                    .map(|(x, &f)| if f { *x } else { 0.0 })
                    .collect()
            };
            let x = gemm_ref(&only(&aa, fa), &ba, None, m, n, k, Act::None);
            let y = gemm_ref(&aa, &only(&ba, fb), None, m, n, k, Act::None);
            x.iter().zip(&y).map(|(p, q)| p + q).collect()
        }
        _ => vec![0.0; m * n],
    };
    for i in 0..m {
        for j in 0..n {
            let s = scales.map_or(1.0, |(sa, sb)| f64::from(sa[i] * sb[j]).abs());
            let s = if s.is_finite() { s } else { 0.0 };
            mag[i * n + j] = mag[i * n + j] * s + bias.map_or(0.0, |bv| f64::from(bv[j]).abs());
        }
    }
    (0..m * n)
        .map(|x| {
            let s = scales.map_or(1.0, |(sa, sb)| {
                f64::from(sa[x / n.max(1)]).abs() * f64::from(sb[x % n.max(1)]).abs()
            });
            Elem3 {
                pre: pre[x],
                want: want[x],
                mag: mag[x],
                extra: extra[x] * s,
            }
        })
        .collect()
}

/// Compare C (row-major [m, n]) with the references.
fn check_c<T: Elem>(
    got: &[T],
    refs: &[Elem3],
    n: usize,
    k: usize,
    act: Act,
    exact: bool,
) -> Result<(), String> {
    for (x, (g, e)) in got.iter().zip(refs).enumerate() {
        check_elem::<T>(g.f64(), e, k, act, exact)
            .map_err(|why| format!("C[{}][{}]: {why}", x / n, x % n))?;
    }
    Ok(())
}

// ---- mistakes -----------------------------------------------------------------------------------

/// An argument mistake (applied to a buffer only when the call uses it).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mistake {
    None,
    /// Buffer `slot` one element longer or shorter.
    Len {
        slot: u8,
        longer: bool,
    },
    /// Buffer `slot` on another device.
    Device {
        slot: u8,
    },
    /// The bias passed when the epilogue has none, or not passed when it has one.
    Bias,
    /// m (0), n (1) or k (2) of the arguments replaced by `value` (buffers for the real shape).
    Dim {
        which: u8,
        value: usize,
    },
}

fn mistake_strategy(slots: u8) -> impl Strategy<Value = Mistake> {
    prop_oneof![
        16 => Just(Mistake::None),
        2 => (0..slots, any::<bool>()).prop_map(|(slot, longer)| Mistake::Len { slot, longer }),
        2 => (0..slots).prop_map(|slot| Mistake::Device { slot }),
        1 => Just(Mistake::Bias),
        1 => (
            0u8..3,
            select(vec![MAX_DIM + 1, i32::MAX as usize, 1usize << 40, usize::MAX])
        )
            .prop_map(|(which, value)| Mistake::Dim { which, value }),
    ]
}

/// Where a case's mistake puts buffer `slot` and how long it makes it.
struct Place<'a> {
    mistake: Mistake,
    dev: &'a Device,
    other: &'a Device,
}

impl Place<'_> {
    fn len(&self, slot: u8, len: usize) -> usize {
        match self.mistake {
            Mistake::Len { slot: s, longer } if s == slot => {
                if longer || len == 0 {
                    len + 1
                } else {
                    len - 1
                }
            }
            _ => len,
        }
    }
    fn dev(&self, slot: u8) -> &Device {
        match self.mistake {
            Mistake::Device { slot: s } if s == slot => self.other,
            _ => self.dev,
        }
    }
    /// Whether a length or device mistake hits one of the `used` buffers.
    fn hits(&self, used: &[u8]) -> bool {
        match self.mistake {
            Mistake::Len { slot, .. } | Mistake::Device { slot } => used.contains(&slot),
            _ => false,
        }
    }
    fn input<T: DeviceRepr + Copy + Default>(&self, slot: u8, v: &[T]) -> DeviceBuffer<T> {
        let mut v = v.to_vec();
        v.resize(self.len(slot, v.len()), T::default());
        up(self.dev(slot), &v)
    }
    fn output<T: DeviceRepr + Float>(&self, slot: u8, len: usize) -> Out<T> {
        Out::nan(
            self.dev(slot),
            self.len(slot, len),
            0x6E33 + u32::from(slot),
        )
    }
    /// The arguments with the mistake's dimension.
    fn args(&self, args: GemmArgs) -> GemmArgs {
        match self.mistake {
            Mistake::Dim { which: 0, value } => GemmArgs { m: value, ..args },
            Mistake::Dim { which: 1, value } => GemmArgs { n: value, ..args },
            Mistake::Dim { value, .. } => GemmArgs { k: value, ..args },
            _ => args,
        }
    }
}

/// The outcome of a call against its expected validity: `Ok(true)` to go on comparing.
/// An error must name the function called (`op`) and leave the outputs untouched.
fn outcome(
    r: flydsl_rt::Result<()>,
    op: &str,
    invalid: Option<String>,
    untouched: &[Result<(), String>],
) -> Result<bool, String> {
    match (r, invalid) {
        (Ok(()), None) => Ok(true),
        (Ok(()), Some(why)) => Err(format!("invalid arguments were accepted: {why}")),
        (Err(e), None) => Err(format!("valid arguments were rejected: {e}")),
        (Err(e), Some(_)) => {
            match &e {
                flydsl_rt::Error::InvalidArgument { op: o, .. } if o == op => {}
                _ => return Err(format!("the error does not name {op}: {e}")),
            }
            for u in untouched {
                u.clone()?;
            }
            Ok(false)
        }
    }
}

// ---- the 16-bit GEMM --------------------------------------------------------------------------

/// Which 16-bit entry a case calls.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry16 {
    /// `gemm`.
    Gemm,
    /// `gemm_with(PORTABLE_CONFIGS[i % len])`.
    With(u8),
    /// `gemm_with` with a config outside the table.
    WithBadConfig,
    /// `gemm_with_tile(TILES[i % len])`.
    WithTile(u8),
    /// `gemm_with_tile` with a tile outside the table.
    WithBadTile,
    /// `gemm_with_split(TILES[i % len], splits)` (splits 0 and past the K stages: errors).
    WithSplit(u8, u8),
}

#[derive(Clone, Debug)]
struct Case16 {
    target: usize,
    /// 0 bf16, 1 f16, 2 f32 (no kernel).
    dt: u8,
    entry: Entry16,
    epi: Epilogue,
    preshuffled: bool,
    m: usize,
    n: usize,
    k: usize,
    a_dist: GDist,
    b_dist: GDist,
    bias_dist: GDist,
    mistake: Mistake,
    seed: u64,
}

// Buffer slots.
const A: u8 = 0;
const B: u8 = 1;
const BIAS: u8 = 2;
const C: u8 = 3;
const SA: u8 = 4;
const SB: u8 = 5;

fn epi_strategy() -> impl Strategy<Value = Epilogue> {
    (0..Epilogue::ALL.len()).prop_map(|i| Epilogue::ALL[i])
}

fn case16_strategy() -> impl Strategy<Value = Case16> {
    let kind = (
        0..TARGETS.len(),
        prop_oneof![9 => 0u8..2, 1 => Just(2u8)],
        prop_oneof![
            4 => Just(Entry16::Gemm),
            4 => any::<u8>().prop_map(Entry16::With),
            1 => Just(Entry16::WithBadConfig),
            3 => any::<u8>().prop_map(Entry16::WithTile),
            1 => Just(Entry16::WithBadTile),
            2 => (any::<u8>(), 0u8..6).prop_map(|(t, sp)| Entry16::WithSplit(t, sp)),
        ],
        epi_strategy(),
        prop_oneof![3 => Just(false), 1 => Just(true)],
        // Preshuffled B: usually a shape the layout holds.
        prop_oneof![3 => Just(true), 1 => Just(false)],
    );
    // Pinned tiles: mostly on sm_90 with plain B and k % 8 == 0 (what they serve); k a
    // multiple of 8 half the time elsewhere too (sm_90's gemm takes the wgmma kernel then).
    let steer = (
        any::<bool>(),
        prop_oneof![3 => Just(true), 1 => Just(false)],
    );
    let shape = (m_strategy(), n_strategy(), k_strategy());
    let values = (
        gdist_strategy(),
        gdist_strategy(),
        prop_oneof![3 => Just(GDist::Exact), 2 => (-1i8..=1).prop_map(|log_scale| GDist::Normal { log_scale }), 1 => (0u8..4).prop_map(|kind| GDist::NonFinite { kind })],
        mistake_strategy(4),
        any::<u64>(),
    );
    (kind, steer, shape, values).prop_map(
        |(
            (target, dt, entry, epi, preshuffled, fit_layout),
            (k8, to_sm90),
            (m, n, k),
            (a_dist, b_dist, bias_dist, mistake, seed),
        )| {
            let (mut target, mut preshuffled, mut n, mut k) = (target, preshuffled, n, k);
            if k8 {
                k = k.div_ceil(8) * 8;
            }
            if matches!(entry, Entry16::WithTile(_) | Entry16::WithSplit(..)) && to_sm90 {
                target = TARGETS
                    .iter()
                    .position(|&t| t == Target::Sm90)
                    .expect("sm90");
                preshuffled = false;
                k = k.div_ceil(8) * 8;
            }
            if preshuffled && fit_layout {
                n = n.div_ceil(16).max(1) * 16;
                k = k.div_ceil(32).max(1) * 32;
            }
            Case16 {
                target,
                dt,
                entry,
                epi,
                preshuffled,
                m: fit(m, n, k),
                n,
                k,
                a_dist,
                b_dist,
                bias_dist,
                mistake,
                seed,
            }
        },
    )
}

/// A config that is not in `PORTABLE_CONFIGS`, a tile that is not in `TILES`.
const BAD_CONFIG: TileConfig = TileConfig {
    tile_m: 32,
    tile_n: 128,
    tile_k: 64,
    lds_stage: 2,
};
const BAD_TILE: Tile = Tile {
    bm: 64,
    bn: 128,
    swap_ab: false,
};

fn op16(e: Entry16) -> &'static str {
    match e {
        Entry16::Gemm => "fly_gemm::gemm",
        Entry16::With(_) | Entry16::WithBadConfig => "fly_gemm::gemm_with",
        Entry16::WithTile(_) | Entry16::WithBadTile => "fly_gemm::gemm_with_tile",
        Entry16::WithSplit(..) => "fly_gemm::gemm_with_split",
    }
}

/// Why the case's call must fail, per the docs of its entry (`None`: it must succeed).
fn invalid16(c: &Case16, target: Target, place: &Place<'_>) -> Option<String> {
    let (m, n, k) = (c.m, c.n, c.k);
    let _ = m;
    let has_bias = c.epi.has_bias();
    let passes_bias = has_bias != (c.mistake == Mistake::Bias);
    let mut used = vec![A, B, C];
    if passes_bias {
        used.push(BIAS);
    }
    let tile = matches!(
        c.entry,
        Entry16::WithTile(_) | Entry16::WithBadTile | Entry16::WithSplit(..)
    );
    let bad_split = match c.entry {
        Entry16::WithSplit(_, sp) => sp == 0 || sp as usize > k.div_ceil(64),
        _ => false,
    };
    if c.dt == 2 {
        Some("f32 has no kernel".into())
    } else if c.entry == Entry16::WithBadConfig {
        Some("a config outside PORTABLE_CONFIGS".into())
    } else if c.entry == Entry16::WithBadTile {
        Some("a tile outside TILES".into())
    } else if let Mistake::Dim { which, value } = c.mistake {
        Some(format!("dimension {which} = {value}"))
    } else if n == 0 || k == 0 {
        Some("n or k of 0".into())
    } else if c.preshuffled && (n % 16 != 0 || k % 32 != 0) {
        Some("preshuffled B needs n % 16 == 0 and k * 2 % 64 == 0".into())
    } else if place.hits(&used) {
        Some(format!("{:?}", c.mistake))
    } else if c.mistake == Mistake::Bias {
        Some("a missing or unexpected bias".into())
    } else if tile && target != Target::Sm90 {
        Some("gemm_with_tile off sm90".into())
    } else if tile && c.preshuffled {
        Some("gemm_with_tile with preshuffled B".into())
    } else if tile && k % 8 != 0 {
        Some("gemm_with_tile with k % 8 != 0".into())
    } else if bad_split {
        Some("a split count outside 1..=stages".into())
    } else {
        None
    }
}

/// Whether bf16 `v` is an f32 subnormal (which a target may flush).
fn flushable<T: Elem>(v: &[T]) -> Vec<bool> {
    let tiny = f64::from(f32::MIN_POSITIVE);
    v.iter()
        .map(|x| T::NAME == "bf16" && x.f64() != 0.0 && x.f64().abs() < tiny)
        .collect()
}

fn one16<T: Elem + Float>(c: &Case16, d: &Devs) -> Result<(), String> {
    let (m, n, k) = (c.m, c.n, c.k);
    let target = d.dev.target();
    let mut rng = Rng::new(c.seed);
    let a: Vec<T> = gvalues(c.a_dist, &mut rng, m * k);
    let b: Vec<T> = gvalues(c.b_dist, &mut rng, n * k);
    let bias: Vec<T> = gvalues(c.bias_dist, &mut rng, n);
    let place = Place {
        mistake: c.mistake,
        dev: &d.dev,
        other: &d.other,
    };
    let invalid = invalid16(c, target, &place);
    let layout_ok = n % 16 == 0 && k % 32 == 0 && T::NAME != "f32";
    let b_dev = if c.preshuffled && layout_ok {
        fly_gemm::preshuffle_b(&b, n, k).map_err(|e| format!("preshuffle_b: {e}"))?
    } else {
        b.clone()
    };
    let args = place.args(GemmArgs {
        m,
        n,
        k,
        epilogue: c.epi,
        b_layout: if c.preshuffled {
            BLayout::Preshuffled
        } else {
            BLayout::Plain
        },
    });
    let ad = place.input(A, &a);
    let bd = place.input(B, &b_dev);
    let biasd = place.input(BIAS, &bias);
    let mut out = place.output::<T>(C, m * n);
    let passes_bias = c.epi.has_bias() != (c.mistake == Mistake::Bias);
    let bias_arg = passes_bias.then_some(&biasd);
    let s = &d.stream;
    let r = match c.entry {
        Entry16::Gemm => fly_gemm::gemm(s, &ad, &bd, bias_arg, &mut out.buf, args),
        Entry16::With(i) => {
            let cfg = PORTABLE_CONFIGS[i as usize % PORTABLE_CONFIGS.len()];
            fly_gemm::gemm_with(s, &ad, &bd, bias_arg, &mut out.buf, args, cfg)
        }
        Entry16::WithBadConfig => {
            fly_gemm::gemm_with(s, &ad, &bd, bias_arg, &mut out.buf, args, BAD_CONFIG)
        }
        Entry16::WithTile(i) => {
            let tile = TILES[i as usize % TILES.len()];
            fly_gemm::gemm_with_tile(s, &ad, &bd, bias_arg, &mut out.buf, args, tile)
        }
        Entry16::WithBadTile => {
            fly_gemm::gemm_with_tile(s, &ad, &bd, bias_arg, &mut out.buf, args, BAD_TILE)
        }
        Entry16::WithSplit(i, sp) => {
            let tile = TILES[i as usize % TILES.len()];
            let sp = sp as usize;
            fly_gemm::gemm_with_split(s, &ad, &bd, bias_arg, &mut out.buf, args, tile, sp)
        }
    };
    if !outcome(r, op16(c.entry), invalid, &[out.untouched("c")])? {
        return Ok(());
    }
    let got = out.read();
    written("c", &got, &out.before)?;
    let f = |v: &[T]| v.iter().map(|x| x.f64() as f32).collect::<Vec<f32>>();
    let (af, bf, biasf) = (f(&a), f(&b), f(&bias));
    let (fa, fb) = (flushable(&a), flushable(&b));
    let refs = references(
        &af,
        &bf,
        None,
        c.epi.has_bias().then_some(&biasf[..]),
        Some((&fa, &fb)),
        m,
        n,
        k,
        act(c.epi),
    );
    let exact = c.a_dist == GDist::Exact
        && c.b_dist == GDist::Exact
        && (!c.epi.has_bias() || c.bias_dist == GDist::Exact)
        && matches!(act(c.epi), Act::None | Act::Relu);
    check_c::<T>(&got, &refs, n, k, act(c.epi), exact)
}

#[test]
fn fuzz_gemm_16bit() {
    let devs = devices();
    run("fuzz_gemm_16bit", 300, case16_strategy(), |c| {
        let d = &devs[c.target];
        match c.dt {
            0 => one16::<bf16>(&c, d),
            1 => one16::<f16>(&c, d),
            _ => one16::<f32>(&c, d),
        }
    });
}

// ---- the 8-bit GEMM -------------------------------------------------------------------------------

/// How the values of an 8-bit operand are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
enum QDist {
    /// `quantize_rows` of `10^log_scale * N(0, 1)` rows (each row reaches the type's max).
    Quantized { log_scale: i8 },
    /// Uniformly random codes (no fp8 NaN).
    Codes,
    /// The largest magnitudes, the smallest subnormals and zeros.
    Extremes,
    /// Random codes with a few fp8 NaNs (0x7F, 0xFF); i8 has none.
    NonFinite,
}

fn qdist_strategy() -> impl Strategy<Value = QDist> {
    prop_oneof![
        4 => (-2i8..=2).prop_map(|log_scale| QDist::Quantized { log_scale }),
        2 => Just(QDist::Codes),
        1 => Just(QDist::Extremes),
        1 => Just(QDist::NonFinite),
    ]
}

/// An 8-bit input type with what the suite needs.
trait Q8: QuantElement + Copy + Default + std::fmt::Debug {
    const NAME: &'static str;
    /// Codes of the largest, smallest and special finite values.
    const EXTREMES: &'static [u8];
    /// Codes of NaN (and infinities): empty for int8.
    const NON_FINITE: &'static [u8];
    fn from_code(c: u8) -> Self;
    fn code(self) -> u8;
}
impl Q8 for F8E4M3FN {
    const NAME: &'static str = "e4m3fn";
    const EXTREMES: &'static [u8] = &[0x7E, 0xFE, 0x01, 0x81, 0x00, 0x80, 0x08, 0x77];
    const NON_FINITE: &'static [u8] = &[0x7F, 0xFF];
    fn from_code(c: u8) -> Self {
        F8E4M3FN(c)
    }
    fn code(self) -> u8 {
        self.0
    }
}
impl Q8 for F8E4M3FNUZ {
    const NAME: &'static str = "e4m3fnuz";
    // 0x7F / 0xFF are +-240, 0x80 the only NaN (no infinities, no negative zero).
    const EXTREMES: &'static [u8] = &[0x7F, 0xFF, 0x01, 0x81, 0x00, 0x08, 0x77];
    const NON_FINITE: &'static [u8] = &[0x80];
    fn from_code(c: u8) -> Self {
        F8E4M3FNUZ(c)
    }
    fn code(self) -> u8 {
        self.0
    }
}
impl Q8 for i8 {
    const NAME: &'static str = "i8";
    const EXTREMES: &'static [u8] = &[0x7F, 0x81, 0x80, 0x01, 0xFF, 0x00];
    const NON_FINITE: &'static [u8] = &[];
    fn from_code(c: u8) -> Self {
        c as i8
    }
    fn code(self) -> u8 {
        self as u8
    }
}

fn is_fp8_nan(code: u8) -> bool {
    code & 0x7F == 0x7F
}

/// `rows x cols` codes of `Q` from `dist`.
fn qvalues<Q: Q8>(dist: QDist, rng: &mut Rng, rows: usize, cols: usize) -> Vec<Q> {
    let fp8 = !Q::NON_FINITE.is_empty();
    let random = |rng: &mut Rng| loop {
        let c = rng.next_u64() as u8;
        if !Q::NON_FINITE.contains(&c) {
            return c;
        }
    };
    match dist {
        QDist::Quantized { log_scale } => {
            let x: Vec<f32> = (0..rows * cols)
                .map(|_| (rng.normal() * 10f64.powi(log_scale.into())) as f32)
                .collect();
            fly_gemm::quantize_rows::<Q>(&x, rows, cols)
                .expect("finite")
                .0
        }
        QDist::Codes => (0..rows * cols)
            .map(|_| Q::from_code(random(rng)))
            .collect(),
        QDist::Extremes => {
            let pick = Q::EXTREMES;
            (0..rows * cols)
                .map(|_| Q::from_code(pick[rng.next_u64() as usize % pick.len()]))
                .collect()
        }
        QDist::NonFinite => {
            let mut v: Vec<Q> = (0..rows * cols)
                .map(|_| Q::from_code(random(rng)))
                .collect();
            if fp8 && !v.is_empty() {
                for _ in 0..1 + rng.next_u64() % 3 {
                    let i = rng.next_u64() as usize % v.len();
                    let nf = Q::NON_FINITE;
                    v[i] = Q::from_code(nf[rng.next_u64() as usize % nf.len()]);
                }
            }
            v
        }
    }
}

/// How the scales are drawn: positive log-uniform in 10^[-4, 2] (0), with zeros and negative
/// values mixed in (1), all 1 (2).
fn scales(kind: u8, rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let s = 10f64.powf(rng.uniform() * 6.0 - 4.0) as f32;
            match kind {
                0 => s,
                1 => match rng.next_u64() % 4 {
                    0 => 0.0,
                    1 => -s,
                    _ => s,
                },
                _ => 1.0,
            }
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry8 {
    /// `gemm_scaled`.
    Scaled,
    /// `gemm_scaled_with(TILES[i % len])`.
    With(u8),
    /// `gemm_scaled_with` with a tile outside the table.
    WithBadTile,
    /// `gemm_scaled_with_config(PORTABLE_CONFIGS8[i % len])`.
    Config(u8),
    /// `gemm_scaled_with_config` with a config outside the table.
    ConfigBad,
    /// `gemm_scaled_with_split(TILES[i % len], splits)` (splits 0 and past the K stages:
    /// errors).
    WithSplit(u8, u8),
}

#[derive(Clone, Debug)]
struct Case8 {
    target: usize,
    /// 0 the target's fp8 format (e4m3fnuz on gfx942, e4m3fn elsewhere), 1 i8, 2 the other
    /// fp8 format (an error).
    q: u8,
    /// Output: 0 bf16, 1 f16, 2 f32 (no kernel).
    out: u8,
    entry: Entry8,
    epi: Epilogue,
    /// Pass `BLayout::Preshuffled` (needs `n % 16 == 0`, `k % 64 == 0`; the wgmma kernel
    /// pinned reads plain B only).
    preshuffled: bool,
    m: usize,
    n: usize,
    k: usize,
    a_dist: QDist,
    b_dist: QDist,
    scale_kind: u8,
    bias_dist: GDist,
    mistake: Mistake,
    seed: u64,
}

fn case8_strategy() -> impl Strategy<Value = Case8> {
    let sm90 = TARGETS
        .iter()
        .position(|&t| t == Target::Sm90)
        .expect("sm90");
    let kind = (
        prop_oneof![2 => Just(sm90), 3 => 0..TARGETS.len()],
        prop_oneof![6 => 0u8..2, 1 => Just(2u8)],
        prop_oneof![9 => 0u8..2, 1 => Just(2u8)],
        prop_oneof![
            4 => Just(Entry8::Scaled),
            2 => any::<u8>().prop_map(Entry8::With),
            1 => Just(Entry8::WithBadTile),
            2 => any::<u8>().prop_map(Entry8::Config),
            1 => Just(Entry8::ConfigBad),
            2 => (any::<u8>(), 0u8..4).prop_map(|(t, sp)| Entry8::WithSplit(t, sp)),
        ],
        epi_strategy(),
        prop_oneof![3 => Just(false), 1 => Just(true)],
    );
    let k = prop_oneof![
        1 => Just(0usize),
        6 => select(vec![16usize, 32, 48, 64, 80, 112, 128, 144, 240, 256, 272]),
        2 => (1usize..=17).prop_map(|x| x * 16),
        2 => 1usize..=280,
    ];
    let shape = (m_strategy(), n_strategy(), k);
    let values = (
        qdist_strategy(),
        qdist_strategy(),
        0u8..3,
        prop_oneof![3 => (-1i8..=1).prop_map(|log_scale| GDist::Normal { log_scale }), 1 => Just(GDist::Exact)],
        mistake_strategy(6),
        any::<u64>(),
    );
    (kind, shape, values).prop_map(
        |(
            (target, q, out, entry, epi, preshuffled),
            (m, n, k),
            (a_dist, b_dist, scale_kind, bias_dist, mistake, seed),
        )| {
            // Preshuffled B: mostly a shape the layout holds.
            let (n, k) = if preshuffled && seed % 4 != 0 {
                (n.div_ceil(16).max(1) * 16, k.div_ceil(64).max(1) * 64)
            } else {
                (n, k)
            };
            Case8 {
                target,
                q,
                out,
                entry,
                epi,
                preshuffled,
                m: fit(m, n, k),
                n,
                k,
                a_dist,
                b_dist,
                scale_kind,
                bias_dist,
                mistake,
                seed,
            }
        },
    )
}

fn op8(e: Entry8) -> &'static str {
    match e {
        Entry8::Scaled => "fly_gemm::gemm_scaled",
        Entry8::Config(_) | Entry8::ConfigBad => "fly_gemm::gemm_scaled_with_config",
        Entry8::WithSplit(..) => "fly_gemm::gemm_scaled_with_split",
        _ => "fly_gemm::gemm_scaled_with",
    }
}

const BAD_CONFIG8: TileConfig = TileConfig {
    tile_m: 32,
    tile_n: 128,
    tile_k: 64,
    lds_stage: 2,
};

/// Why the case's call must fail (`None`: it must succeed). `Some((why, true))`: only because
/// the input is the fp8 format the target does not read.
fn invalid8(c: &Case8, target: Target, place: &Place<'_>) -> Option<(String, bool)> {
    let (n, k) = (c.n, c.k);
    let passes_bias = c.epi.has_bias() != (c.mistake == Mistake::Bias);
    let mut used = vec![A, B, C, SA, SB];
    if passes_bias {
        used.push(BIAS);
    }
    let wgmma = matches!(c.entry, Entry8::With(_) | Entry8::WithSplit(..));
    let bad_split = match c.entry {
        Entry8::WithSplit(_, sp) => sp == 0 || sp as usize > k.div_ceil(128),
        _ => false,
    };
    let why = if c.entry == Entry8::WithBadTile {
        "a tile outside TILES".into()
    } else if c.entry == Entry8::ConfigBad {
        "a config outside PORTABLE_CONFIGS8".into()
    } else if let Mistake::Dim { which, value } = c.mistake {
        format!("dimension {which} = {value}")
    } else if n == 0 || k == 0 {
        "n or k of 0".into()
    } else if c.preshuffled && (n % 16 != 0 || k % 64 != 0) {
        "preshuffled B of a shape the layout cannot hold".into()
    } else if place.hits(&used) {
        format!("{:?}", c.mistake)
    } else if c.mistake == Mistake::Bias {
        "a missing or unexpected bias".into()
    } else if c.q == 2 {
        return Some(("the other fp8 format".into(), true));
    } else if wgmma && target != Target::Sm90 {
        "the wgmma kernel pinned off sm90".into()
    } else if wgmma && c.preshuffled {
        "the wgmma kernel pinned with preshuffled B".into()
    } else if wgmma && k % 16 != 0 {
        "the wgmma kernel pinned with k % 16 != 0".into()
    } else if bad_split {
        "a split count outside 1..=stages".into()
    } else if c.out == 2 {
        "f32 output".into()
    } else {
        return None;
    };
    Some((why, false))
}

fn one8<Q: Q8, T: Elem + Float>(c: &Case8, d: &Devs) -> Result<(), String> {
    let (m, n, k) = (c.m, c.n, c.k);
    let target = d.dev.target();
    let mut rng = Rng::new(c.seed);
    let a: Vec<Q> = qvalues(c.a_dist, &mut rng, m, k);
    let b: Vec<Q> = qvalues(c.b_dist, &mut rng, n, k);
    let sa = scales(c.scale_kind, &mut rng, m);
    let sb = scales(c.scale_kind, &mut rng, n);
    let bias: Vec<T> = gvalues(c.bias_dist, &mut rng, n);
    let place = Place {
        mistake: c.mistake,
        dev: &d.dev,
        other: &d.other,
    };
    let invalid = invalid8(c, target, &place);
    let args = place.args(GemmArgs {
        m,
        n,
        k,
        epilogue: c.epi,
        b_layout: if c.preshuffled {
            BLayout::Preshuffled
        } else {
            BLayout::Plain
        },
    });
    let layout_ok = n % 16 == 0 && k % 64 == 0;
    let b_dev = if c.preshuffled && layout_ok {
        fly_gemm::preshuffle_b(&b, n, k).map_err(|e| format!("preshuffle_b: {e}"))?
    } else {
        b.clone()
    };
    let ad = place.input(A, &a);
    let bd = place.input(B, &b_dev);
    let sad = place.input(SA, &sa);
    let sbd = place.input(SB, &sb);
    let biasd = place.input(BIAS, &bias);
    let mut out = place.output::<T>(C, m * n);
    let passes_bias = c.epi.has_bias() != (c.mistake == Mistake::Bias);
    let bias_arg = passes_bias.then_some(&biasd);
    let s = &d.stream;
    let r = match c.entry {
        Entry8::Scaled => {
            fly_gemm::gemm_scaled(s, &ad, &bd, &sad, &sbd, bias_arg, &mut out.buf, args)
        }
        Entry8::With(i) => {
            let tile = TILES[i as usize % TILES.len()];
            fly_gemm::gemm_scaled_with(s, &ad, &bd, &sad, &sbd, bias_arg, &mut out.buf, args, tile)
        }
        Entry8::WithBadTile => fly_gemm::gemm_scaled_with(
            s,
            &ad,
            &bd,
            &sad,
            &sbd,
            bias_arg,
            &mut out.buf,
            args,
            BAD_TILE,
        ),
        Entry8::WithSplit(i, sp) => fly_gemm::gemm_scaled_with_split(
            s,
            &ad,
            &bd,
            &sad,
            &sbd,
            bias_arg,
            &mut out.buf,
            args,
            TILES[i as usize % TILES.len()],
            sp as usize,
        ),
        Entry8::Config(i) => {
            let cfg = PORTABLE_CONFIGS8[i as usize % PORTABLE_CONFIGS8.len()];
            fly_gemm::gemm_scaled_with_config(
                s,
                &ad,
                &bd,
                &sad,
                &sbd,
                bias_arg,
                &mut out.buf,
                args,
                cfg,
            )
        }
        Entry8::ConfigBad => fly_gemm::gemm_scaled_with_config(
            s,
            &ad,
            &bd,
            &sad,
            &sbd,
            bias_arg,
            &mut out.buf,
            args,
            BAD_CONFIG8,
        ),
    };
    // The fp8 format the target does not read: the documented error naming `Q` and the
    // type to quantize with.
    if let (Err(e), Some((_, true))) = (&r, &invalid) {
        let msg = e.to_string();
        if !(msg.contains("`Q`") && msg.contains("quantize with flydsl_rt::F8E4M3FN")) {
            return Err(format!("not the documented fp8-format error: {msg}"));
        }
    }
    let invalid = invalid.map(|x| x.0);
    if !outcome(r, op8(c.entry), invalid, &[out.untouched("c")])? {
        return Ok(());
    }
    let got = out.read();
    written("c", &got, &out.before)?;
    let deq = |v: &[Q]| v.iter().map(|x| x.dequantize()).collect::<Vec<f32>>();
    let biasf: Vec<f32> = bias.iter().map(|x| x.f64() as f32).collect();
    let mut refs = references(
        &deq(&a),
        &deq(&b),
        Some((&sa, &sb)),
        c.epi.has_bias().then_some(&biasf[..]),
        None,
        m,
        n,
        k,
        act(c.epi),
    );
    // fp8 on sm90 keeps fewer bits of its sums (`HOPPER_FP8_SUM_ERR`), of the products'
    // magnitude (not the bias's).
    if Q::QUANT == fly_gemm::Quant::Fp8 && target == Target::Sm90 {
        let bias_mag = |x: usize| {
            if c.epi.has_bias() {
                f64::from(biasf[x % n.max(1)]).abs()
            } else {
                0.0
            }
        };
        for (x, e) in refs.iter_mut().enumerate() {
            e.extra += flydsl_testutil::gemm::HOPPER_FP8_SUM_ERR * (e.mag - bias_mag(x)).max(0.0);
        }
    }
    check_c::<T>(&got, &refs, n, k, act(c.epi), false)
}

#[test]
fn fuzz_gemm_8bit() {
    let devs = devices();
    run("fuzz_gemm_8bit", 200, case8_strategy(), |c| {
        let d = &devs[c.target];
        // q 0: the target's fp8 format, 2: the other one.
        let fnuz = (d.dev.target() == Target::Gfx942) == (c.q == 0);
        match (c.q, fnuz, c.out) {
            (1, _, 0) => one8::<i8, bf16>(&c, d),
            (1, _, 1) => one8::<i8, f16>(&c, d),
            (1, _, _) => one8::<i8, f32>(&c, d),
            (_, true, 0) => one8::<F8E4M3FNUZ, bf16>(&c, d),
            (_, true, 1) => one8::<F8E4M3FNUZ, f16>(&c, d),
            (_, true, _) => one8::<F8E4M3FNUZ, f32>(&c, d),
            (_, false, 0) => one8::<F8E4M3FN, bf16>(&c, d),
            (_, false, 1) => one8::<F8E4M3FN, f16>(&c, d),
            (_, false, _) => one8::<F8E4M3FN, f32>(&c, d),
        }
    });
}

// ---- preshuffle -----------------------------------------------------------------------------

/// A host element for the shuffles: random bits, compared by bits.
trait Raw: Copy + std::fmt::Debug {
    fn rand(rng: &mut Rng) -> Self;
    fn same(&self, o: &Self) -> bool;
}
macro_rules! raw_int {
    ($($t:ty),*) => {$(
        impl Raw for $t {
            fn rand(rng: &mut Rng) -> Self {
                rng.next_u64() as $t
            }
            fn same(&self, o: &Self) -> bool {
                self == o
            }
        }
    )*};
}
raw_int!(u8, u64);
impl Raw for bf16 {
    fn rand(rng: &mut Rng) -> Self {
        bf16::from_bits(rng.next_u64() as u16)
    }
    fn same(&self, o: &Self) -> bool {
        self.to_bits() == o.to_bits()
    }
}
impl Raw for f32 {
    fn rand(rng: &mut Rng) -> Self {
        f32::from_bits(rng.next_u64() as u32)
    }
    fn same(&self, o: &Self) -> bool {
        self.to_bits() == o.to_bits()
    }
}
impl<const N: usize> Raw for [u8; N] {
    fn rand(rng: &mut Rng) -> Self {
        std::array::from_fn(|_| rng.next_u64() as u8)
    }
    fn same(&self, o: &Self) -> bool {
        self == o
    }
}
impl Raw for () {
    fn rand(_: &mut Rng) -> Self {}
    fn same(&self, _: &Self) -> bool {
        true
    }
}

#[derive(Clone, Debug)]
struct PsCase {
    /// 0 u8, 1 bf16, 2 f32, 3 u64, 4 [u8; 16]; 5 [u8; 3], 6 [u8; 32], 7 () (no 16-byte chunks).
    ty: u8,
    n: usize,
    k: usize,
    /// Elements added to (or, negative, removed from) B.
    len_delta: i8,
    /// The ndarray's memory order: row-major (0), column-major (1), a strided view (2).
    order: u8,
    seed: u64,
}

fn ps_strategy() -> impl Strategy<Value = PsCase> {
    (
        prop_oneof![9 => 0u8..5, 1 => 5u8..8],
        prop_oneof![
            4 => (0usize..=5).prop_map(|g| 16 * g),
            1 => select(vec![1usize, 8, 15, 17, 31, 33]),
        ],
        // k: whole 64-byte rows of the element (0 ..= 6 of them), or anything.
        prop_oneof![4 => (0usize..=6).prop_map(Ok), 1 => (1usize..=70).prop_map(Err)],
        prop_oneof![8 => Just(0i8), 1 => Just(1i8), 1 => Just(-1i8)],
        0u8..3,
        any::<u64>(),
    )
        .prop_map(|(ty, n, k, len_delta, order, seed)| {
            let eb = [1usize, 2, 4, 8, 16, 3, 32, 1][ty as usize];
            let k = match k {
                Ok(rows) => rows * 64usize.div_ceil(eb),
                Err(k) => k,
            };
            PsCase {
                ty,
                n,
                k,
                len_delta,
                order,
                seed,
            }
        })
}

/// The documented layout: `shuffled[n0][c][nl][kp] = B[16 n0 + nl][c KPACK + kp]`, as the
/// element index of B[row][col] in the shuffled buffer.
fn formula(row: usize, col: usize, k: usize, eb: usize) -> usize {
    let kpack = 16 / eb;
    let (n0, nl) = (row / 16, row % 16);
    let (c, kp) = (col / kpack, col % kpack);
    ((n0 * (k / kpack) + c) * 16 + nl) * kpack + kp
}

fn ps_one<T: Raw>(c: &PsCase) -> Result<(), String> {
    let (n, k) = (c.n, c.k);
    let eb = std::mem::size_of::<T>();
    let mut rng = Rng::new(c.seed);
    let len = (n * k) as i64 + i64::from(c.len_delta);
    let b: Vec<T> = (0..len.max(0)).map(|_| T::rand(&mut rng)).collect();
    let layout_ok = eb > 0 && 16 % eb == 0 && n % 16 == 0 && (k * eb).is_multiple_of(64);
    let valid = layout_ok && b.len() == n * k;
    let same = |x: &[T], y: &[T]| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.same(q));
    let expect =
        |r: flydsl_rt::Result<Vec<T>>, op: &str, valid: bool| -> Result<Option<Vec<T>>, String> {
            match (r, valid) {
                (Ok(v), true) => Ok(Some(v)),
                (Ok(_), false) => Err(format!("{op}: invalid arguments were accepted")),
                (Err(e), true) => Err(format!("{op}: valid arguments were rejected: {e}")),
                (Err(e), false) => match &e {
                    flydsl_rt::Error::InvalidArgument { op: o, .. } if o == op => Ok(None),
                    _ => Err(format!("the error does not name {op}: {e}")),
                },
            }
        };
    let fwd = expect(
        fly_gemm::preshuffle_b(&b, n, k),
        "fly_gemm::preshuffle_b",
        valid,
    )?;
    let back = expect(
        fly_gemm::unpreshuffle_b(&b, n, k),
        "fly_gemm::unpreshuffle_b",
        valid,
    )?;
    let (Some(s), Some(u)) = (fwd, back) else {
        return Ok(());
    };
    if s.len() != n * k || u.len() != n * k {
        return Err(format!("lengths {} / {}, want {}", s.len(), u.len(), n * k));
    }
    for row in 0..n {
        for col in 0..k {
            let at = formula(row, col, k, eb);
            if fly_gemm::preshuffle::index(row, col, k, eb) != at {
                return Err(format!(
                    "preshuffle::index({row}, {col}, {k}, {eb}) != {at}"
                ));
            }
            if !s[at].same(&b[row * k + col]) {
                return Err(format!(
                    "preshuffle_b: B[{row}][{col}] is not at {at} (element size {eb})"
                ));
            }
            if !u[row * k + col].same(&b[at]) {
                return Err(format!(
                    "unpreshuffle_b: shuffled[{at}] is not at B[{row}][{col}]"
                ));
            }
        }
    }
    let round = fly_gemm::unpreshuffle_b(&s, n, k).map_err(|e| e.to_string())?;
    if !same(&round, &b) {
        return Err("unpreshuffle_b(preshuffle_b(B)) != B".into());
    }
    // The ndarray forms, from a view of the requested memory order.
    let logical = ndarray::Array2::from_shape_vec((n, k), b.clone()).map_err(|e| e.to_string())?;
    let storage;
    let view = match c.order {
        0 => logical.view(),
        1 => {
            storage = ndarray::Array2::from_shape_fn(ndarray::ShapeBuilder::f((n, k)), |(r, q)| {
                logical[[r, q]]
            });
            storage.view()
        }
        _ => {
            storage = ndarray::Array2::from_shape_fn((n, 2 * k), |(r, q)| {
                if q % 2 == 0 {
                    logical[[r, q / 2]]
                } else {
                    T::rand(&mut Rng::new(q as u64))
                }
            });
            storage.slice(ndarray::s![.., ..;2])
        }
    };
    let sa = fly_gemm::preshuffle_b_array(view).map_err(|e| format!("preshuffle_b_array: {e}"))?;
    if sa.dim() != (n, k) || !sa.is_standard_layout() {
        return Err(format!("preshuffle_b_array: shape {:?}", sa.dim()));
    }
    if !same(sa.as_slice().expect("standard"), &s) {
        return Err("preshuffle_b_array differs from preshuffle_b".into());
    }
    let ua = fly_gemm::unpreshuffle_b_array(sa.view()).map_err(|e| e.to_string())?;
    if !same(&ua.iter().copied().collect::<Vec<T>>(), &b) {
        return Err("unpreshuffle_b_array(preshuffle_b_array(B)) != B".into());
    }
    Ok(())
}

#[test]
fn fuzz_gemm_preshuffle() {
    run("fuzz_gemm_preshuffle", 300, ps_strategy(), |c| match c.ty {
        0 => ps_one::<u8>(&c),
        1 => ps_one::<bf16>(&c),
        2 => ps_one::<f32>(&c),
        3 => ps_one::<u64>(&c),
        4 => ps_one::<[u8; 16]>(&c),
        5 => ps_one::<[u8; 3]>(&c),
        6 => ps_one::<[u8; 32]>(&c),
        _ => ps_one::<()>(&c),
    });
}

// ---- quantization -------------------------------------------------------------------------

/// The e4m3fn value of a code, from the format (sign, 4 exponent bits of bias 7, 3 mantissa
/// bits; exponent 0 subnormal; S.1111.111 NaN, no infinities).
fn e4m3fn_value(code: u8) -> f64 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (i32::from((code >> 3) & 0xF), f64::from(code & 7));
    if e == 15 && m == 7.0 {
        f64::NAN
    } else if e == 0 {
        sign * m / 8.0 * 2f64.powi(-6)
    } else {
        sign * (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

/// The nearest e4m3fn code to `x` by search over every finite code: ties to the even
/// mantissa, saturating at ±448, NaN to a NaN (independent of the crate's conversion).
fn e4m3fn_nearest(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7F;
    }
    if x.abs() >= 448.0 {
        return if x < 0.0 { 0xFE } else { 0x7E };
    }
    let x = f64::from(x);
    let mut best = 0u8;
    let mut best_d = f64::INFINITY;
    for code in 0..=255u8 {
        let v = e4m3fn_value(code);
        // Only codes of x's sign (the nearest never has the other; zeros keep their sign).
        if v.is_nan() || (code & 0x80 != 0) != x.is_sign_negative() {
            continue;
        }
        let d = (v - x).abs();
        if d < best_d || (d == best_d && code & 1 == 0) {
            best = code;
            best_d = d;
        }
    }
    best
}

/// The nearest i8 to `x` in the symmetric range: ties to even, saturating at ±127, NaN 0.
fn i8_nearest(x: f32) -> i8 {
    if x.is_nan() {
        return 0;
    }
    let x = f64::from(x).clamp(-127.0, 127.0);
    let r = x.round();
    let r = if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    };
    r as i8
}

/// The suite's reference of `Q::quantize`.
fn quantize_ref<Q: Q8>(x: f32) -> u8 {
    if Q::NAME == "e4m3fn" {
        e4m3fn_nearest(x)
    } else {
        i8_nearest(x) as u8
    }
}

fn same_code<Q: Q8>(got: Q, want: u8) -> bool {
    let g = got.code();
    g == want || (Q::NAME == "e4m3fn" && is_fp8_nan(g) && is_fp8_nan(want))
}

/// How the rows of a quantization case are drawn. Every row's largest magnitude is at least
/// 448 times the smallest normal f32 (about 5e-36), so that its scale `amax / MAX` is a normal
/// f32: below that the scale is subnormal and loses precision (|q| saturates short of
/// `amax`'s value by up to a third of it when the scale is a few ulps of 2^-149); fly-gemm
/// clamps such scales to the smallest normal (`quantize_rows_of_a_row_below_the_smallest_scale`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum XDist {
    /// `10^log_scale * N(0, 1)`.
    Normal { log_scale: i8 },
    /// Each row's magnitudes spread over 10^-30 .. 10^30 (subnormal f32 values included).
    Spread,
    /// All-zero rows and rows with one non-zero value.
    Sparse,
    /// Equal values per row.
    Constant,
    /// Row maxima just above the smallest that keeps the scale normal (about 1e-34).
    NearScaleUnderflow,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum QMistake {
    None,
    /// `x` one element longer.
    XLen,
    /// `q` (quantize_rows_into, dequantize_rows) one element shorter.
    QLen,
    /// `scales` one element longer.
    ScalesLen,
    /// A NaN (0), +inf (1) or -inf (2) in `x`.
    NonFinite(u8),
    /// `rows` huge (the product with `cols` overflows, or mismatches).
    HugeRows,
}

#[derive(Clone, Debug)]
struct QCase {
    /// 0 e4m3fn, 1 i8.
    q: u8,
    rows: usize,
    cols: usize,
    dist: XDist,
    mistake: QMistake,
    seed: u64,
}

fn q_strategy() -> impl Strategy<Value = QCase> {
    (
        0u8..2,
        select(vec![0usize, 1, 2, 3, 5, 8, 17]),
        select(vec![0usize, 1, 2, 3, 7, 16, 33, 64, 100]),
        prop_oneof![
            4 => (-30i8..=30).prop_map(|log_scale| XDist::Normal { log_scale }),
            1 => Just(XDist::Spread),
            1 => Just(XDist::Sparse),
            1 => Just(XDist::Constant),
            1 => Just(XDist::NearScaleUnderflow),
        ],
        prop_oneof![
            8 => Just(QMistake::None),
            1 => Just(QMistake::XLen),
            1 => Just(QMistake::QLen),
            1 => Just(QMistake::ScalesLen),
            1 => (0u8..3).prop_map(QMistake::NonFinite),
            1 => Just(QMistake::HugeRows),
        ],
        any::<u64>(),
    )
        .prop_map(|(q, rows, cols, dist, mistake, seed)| QCase {
            q,
            rows,
            cols,
            dist,
            mistake,
            seed,
        })
}

fn xvalues(dist: XDist, rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * cols);
    for _ in 0..rows {
        let c0 = (rng.normal() * 3.0) as f32;
        let hot = rng.next_u64() as usize % cols.max(1);
        let zero_row = rng.uniform() < 0.5;
        for j in 0..cols {
            let z = rng.normal();
            out.push(match dist {
                XDist::Normal { log_scale } => (z * 10f64.powi(log_scale.into())) as f32,
                XDist::Spread => (z * 10f64.powf(rng.uniform() * 60.0 - 30.0)) as f32,
                XDist::Sparse if zero_row || j != hot => 0.0,
                XDist::Sparse => z as f32,
                XDist::Constant => c0,
                XDist::NearScaleUnderflow => (z * 2e-34) as f32,
            });
        }
    }
    // Keep every row's scale a normal f32 (see XDist).
    for r in 0..rows {
        let row = &mut out[r * cols..(r + 1) * cols];
        let amax = row.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        if amax != 0.0 && amax < 448.0 * f32::MIN_POSITIVE {
            row[0] = if row[0] < 0.0 { -1e-34 } else { 1e-34 };
        }
    }
    out
}

fn q_one<Q: Q8>(c: &QCase) -> Result<(), String> {
    let (rows, cols) = (c.rows, c.cols);
    let mut rng = Rng::new(c.seed);
    let mut x = xvalues(c.dist, &mut rng, rows, cols);
    // (With cols = 0 any rows is valid but cannot be allocated: an error, see
    // `quantize_rows_of_absurdly_many_empty_rows`.)
    let arg_rows = if c.mistake == QMistake::HugeRows && cols > 0 {
        usize::MAX / 2 + 1
    } else {
        rows
    };
    match c.mistake {
        QMistake::XLen => x.push(1.0),
        QMistake::NonFinite(k) if !x.is_empty() => {
            let i = rng.next_u64() as usize % x.len();
            x[i] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][k as usize];
        }
        _ => {}
    }
    let x_ok =
        arg_rows.checked_mul(cols).is_some_and(|l| l == x.len()) && x.iter().all(|v| v.is_finite());

    // quantize_rows.
    let r = fly_gemm::quantize_rows::<Q>(&x, arg_rows, cols);
    let (q, s) = match (r, x_ok) {
        (Ok(v), true) => v,
        (Ok(_), false) => return Err("quantize_rows: invalid arguments were accepted".into()),
        (Err(e), true) => return Err(format!("quantize_rows: valid arguments were rejected: {e}")),
        (Err(_), false) => (vec![], vec![]),
    };
    if x_ok {
        if q.len() != rows * cols || s.len() != rows {
            return Err(format!(
                "quantize_rows: {} codes, {} scales",
                q.len(),
                s.len()
            ));
        }
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let amax = row.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let want_s = if amax == 0.0 { 1.0 } else { amax / Q::MAX };
            if s[r].to_bits() != want_s.to_bits() {
                return Err(format!(
                    "scale[{r}] = {:e}, want amax / MAX = {want_s:e}",
                    s[r]
                ));
            }
            let mut top = 0.0f32;
            for (j, &xj) in row.iter().enumerate() {
                let i = r * cols + j;
                let want = quantize_ref::<Q>(xj / s[r]);
                if !same_code(q[i], want) {
                    return Err(format!(
                        "q[{r}][{j}] = {:#04x}, want {want:#04x} (x = {:e}, scale {:e})",
                        q[i].code(),
                        xj,
                        s[r]
                    ));
                }
                let v = q[i].dequantize();
                if v.is_nan() {
                    return Err(format!("q[{r}][{j}] is NaN for x = {:e}", xj));
                }
                top = top.max(v.abs());
                // x ~ q * scale within half a step: of 1 (int8), or 2^-4 relative / half the
                // smallest subnormal 2^-10 (e4m3fn).
                let back = f64::from(v) * f64::from(s[r]);
                let step = if Q::NAME == "i8" {
                    0.5 * f64::from(s[r])
                } else {
                    (f64::from(xj).abs() / 16.0).max(f64::from(s[r]) * 2f64.powi(-10))
                };
                if (back - f64::from(xj)).abs() > step * 1.0001 {
                    return Err(format!(
                        "x[{r}][{j}] = {:e} dequantizes to {back:e} (scale {:e})",
                        xj, s[r]
                    ));
                }
            }
            if amax != 0.0 && top != Q::MAX {
                return Err(format!("row {r}: largest |q| is {top}, not {}", Q::MAX));
            }
        }
    }

    // quantize_rows_into: the same, or (on error) nothing written.
    let q_len = rows * cols - usize::from(c.mistake == QMistake::QLen && rows * cols > 0);
    let s_len = rows + usize::from(c.mistake == QMistake::ScalesLen);
    let q_sent: Vec<Q> = (0..q_len)
        .map(|_| Q::from_code(rng.next_u64() as u8))
        .collect();
    let s_sent: Vec<f32> = sentinel(s_len, 0x51);
    let (mut qi, mut si) = (q_sent.clone(), s_sent.clone());
    let into_ok = x_ok && q_len == rows * cols && s_len == rows;
    let r = fly_gemm::quantize_rows_into::<Q>(&x, arg_rows, cols, &mut qi, &mut si);
    match (r, into_ok) {
        (Ok(()), true) => {
            let same_q = qi.iter().zip(&q).all(|(a, b)| a.code() == b.code());
            let same_s = si.iter().zip(&s).all(|(a, b)| a.to_bits() == b.to_bits());
            if !(same_q && same_s) {
                return Err("quantize_rows_into differs from quantize_rows".into());
            }
        }
        (Ok(()), false) => return Err("quantize_rows_into: invalid arguments were accepted".into()),
        (Err(e), true) => {
            return Err(format!(
                "quantize_rows_into: valid arguments were rejected: {e}"
            ))
        }
        (Err(_), false) => {
            let same_q = qi.iter().zip(&q_sent).all(|(a, b)| a.code() == b.code());
            let same_s = si
                .iter()
                .zip(&s_sent)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            if !(same_q && same_s) {
                return Err("quantize_rows_into wrote its outputs on an error".into());
            }
        }
    }

    // dequantize_rows of random codes and scales: q * scale, in f32.
    let codes: Vec<Q> = (0..q_len)
        .map(|_| Q::from_code(rng.next_u64() as u8))
        .collect();
    let sc: Vec<f32> = (0..s_len)
        .map(|_| (rng.normal() * 10f64.powi((rng.next_u64() % 9) as i32 - 4)) as f32)
        .collect();
    let deq_ok = arg_rows == rows && q_len == rows * cols && s_len == rows;
    match (
        fly_gemm::dequantize_rows(&codes, &sc, arg_rows, cols),
        deq_ok,
    ) {
        (Ok(v), true) => {
            if v.len() != rows * cols {
                return Err(format!("dequantize_rows: {} values", v.len()));
            }
            for (i, (got, code)) in v.iter().zip(&codes).enumerate() {
                let dv = code.dequantize();
                let want_v = if Q::NAME == "i8" {
                    f64::from(code.code() as i8)
                } else {
                    e4m3fn_value(code.code())
                };
                if !(f64::from(dv) == want_v || (dv.is_nan() && want_v.is_nan())) {
                    return Err(format!(
                        "dequantize({:#04x}) = {dv:e}, want {want_v:e}",
                        code.code()
                    ));
                }
                let want = dv * sc[i / cols];
                if !(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())) {
                    return Err(format!("dequantize_rows[{i}] = {got:e}, want {want:e}"));
                }
            }
        }
        (Ok(_), false) => return Err("dequantize_rows: invalid arguments were accepted".into()),
        (Err(e), true) => {
            return Err(format!(
                "dequantize_rows: valid arguments were rejected: {e}"
            ))
        }
        (Err(_), false) => {}
    }

    // QuantElement::quantize of random f32 bit patterns (NaN, infinities, subnormals).
    for _ in 0..64 {
        let v = match rng.next_u64() % 4 {
            0 => f32::from_bits(rng.next_u64() as u32),
            1 => (rng.normal() * f64::from(Q::MAX)) as f32,
            2 => ((rng.next_u64() % 1024) as f32 - 512.0) / 2.0, // ties
            _ => (rng.normal() * 1e-2) as f32,
        };
        let want = quantize_ref::<Q>(v);
        if !same_code(Q::quantize(v), want) {
            return Err(format!(
                "{}::quantize({v:e}) = {:#04x}, want {want:#04x}",
                Q::NAME,
                Q::quantize(v).code()
            ));
        }
    }
    Ok(())
}

#[test]
fn fuzz_gemm_quant() {
    run("fuzz_gemm_quant", 300, q_strategy(), |c| match c.q {
        0 => q_one::<F8E4M3FN>(&c),
        _ => q_one::<i8>(&c),
    });
}

/// A row whose largest magnitude is below `Q::MAX * 2^-150` (about 3e-43 for e4m3fn): `amax /
/// MAX` underflows to 0, which made NaN codes from finite input (`0 / 0`) before fly-gemm
/// clamped the scale to the smallest normal f32 (found by this suite).
#[test]
fn quantize_rows_of_a_row_below_the_smallest_scale() {
    let x = [1e-45f32, 0.0];
    let (q, s) = fly_gemm::quantize_rows::<F8E4M3FN>(&x, 1, 2).unwrap();
    assert!(s[0] > 0.0, "scale {:e} of the row [1e-45, 0]", s[0]);
    assert!(
        q.iter().all(|v| !v.dequantize().is_nan()),
        "NaN codes {:?} for a finite row",
        q
    );
    let back = fly_gemm::dequantize_rows(&q, &s, 1, 2).unwrap();
    assert!(back.iter().all(|v| v.is_finite()), "{back:?}");
}

/// `quantize_rows(&[], rows, 0)` for a `rows` whose scales cannot be allocated: an error, not
/// a "capacity overflow" panic or an allocation abort (found by this suite).
#[test]
fn quantize_rows_of_absurdly_many_empty_rows() {
    let r = std::panic::catch_unwind(|| {
        fly_gemm::quantize_rows::<i8>(&[], usize::MAX / 2 + 1, 0).map(|(q, s)| (q.len(), s.len()))
    });
    let r = r.unwrap_or_else(|_| panic!("quantize_rows(&[], usize::MAX / 2 + 1, 0) panicked"));
    let e = r.expect_err("usize::MAX / 2 + 1 scales cannot be allocated");
    assert!(e.to_string().contains("`rows`"), "{e}");
}

/// The element check is not vacuous: the exact rule demands bit equality, the tolerance is
/// tight enough to catch a bf16 element a few ulps off, a NaN for a finite reference fails, an
/// infinity must keep its sign, and an overflowing f16 element must be infinite.
#[test]
fn the_checks_catch_a_wrong_element() {
    let e = Elem3 {
        pre: 3.0,
        want: 3.0,
        mag: 4.0,
        extra: 0.0,
    };
    assert!(check_elem::<bf16>(3.0, &e, 4, Act::None, true).is_ok());
    assert!(check_elem::<bf16>(3.015625, &e, 4, Act::None, true).is_err());
    assert!(check_elem::<bf16>(3.05, &e, 4, Act::None, false).is_err());
    assert!(check_elem::<bf16>(f64::NAN, &e, 4, Act::None, false).is_err());
    let inf = Elem3 {
        pre: f64::INFINITY,
        want: f64::INFINITY,
        mag: 0.0,
        extra: 0.0,
    };
    assert!(check_elem::<f16>(f64::NEG_INFINITY, &inf, 4, Act::None, false).is_err());
    assert!(check_elem::<f16>(1.0, &inf, 4, Act::None, false).is_err());
    let big = Elem3 {
        pre: 1e6,
        want: 1e6,
        mag: 1e6,
        extra: 0.0,
    };
    assert!(check_elem::<f16>(f64::INFINITY, &big, 4, Act::None, false).is_ok());
    assert!(check_elem::<f16>(65504.0, &big, 4, Act::None, false).is_err());
}

/// `default_config`, `Tile::pick`, `Tile::tiles`, `TileConfig::index` and `Epilogue`'s helpers
/// against their docs: the 16-row config for `m <= 16`, the 64 x 128 one otherwise; 128 x
/// 256 with at least 90% of `FILL_TILES` workgroups, else 128 x 128 for `m > 128` (or
/// `m > 64` with at least `FILL_TILES` of them), else 128 x 64 for `m > 64`, else the
/// swapped small-M tile; `ceil(m / rows) * ceil(n / cols)` workgroups (C's rows and
/// columns per tile: `bm` and `bn`, exchanged when swapped).
#[test]
fn fuzz_gemm_dispatch() {
    use fly_gemm::table::FILL_TILES;
    let shape = (
        prop_oneof![
            select(vec![0usize, 1, 15, 16, 17, 64, 128, 129, 4096]),
            0usize..=20_000
        ],
        prop_oneof![
            select(vec![0usize, 1, 63, 64, 65, 255, 256, 257, 8192]),
            0usize..=40_000
        ],
        0usize..=5000,
    );
    run("fuzz_gemm_dispatch", 400, shape, |(m, n, k)| {
        let cfg = fly_gemm::default_config(m, n, k);
        let want = PORTABLE_CONFIGS[usize::from(m > 16)];
        if cfg != want || cfg.index() != Some(usize::from(m > 16)) {
            return Err(format!("default_config({m}, {n}, {k}) = {cfg:?}"));
        }
        for t in TILES {
            let (rows, cols) = if t.swap_ab {
                (t.bn, t.bm)
            } else {
                (t.bm, t.bn)
            };
            if (t.c_rows(), t.c_cols()) != (rows, cols) {
                return Err(format!(
                    "{t:?}: C rows, columns {:?}",
                    (t.c_rows(), t.c_cols())
                ));
            }
            let want = m.div_ceil(rows as usize) * n.div_ceil(cols as usize);
            if t.tiles(m, n) != want {
                return Err(format!("{t:?}.tiles({m}, {n}) = {}", t.tiles(m, n)));
            }
        }
        let pick = Tile::pick(m, n);
        let i = TILES
            .iter()
            .position(|&t| t == pick)
            .ok_or("not in TILES")?;
        // The fewest 64 x 96 tiles the rule takes: half the device at M <= 64, else 3/4.
        let narrow_floor = if m > 64 {
            FILL_TILES * 3 / 4
        } else {
            FILL_TILES / 2
        };
        let want = if 10 * TILES[0].tiles(m, n) >= 9 * FILL_TILES {
            0
        } else if m > 128 || (m > 64 && TILES[1].tiles(m, n) >= FILL_TILES) {
            1
        } else if (narrow_floor..=FILL_TILES).contains(&(m.div_ceil(64) * n.div_ceil(96))) {
            4
        } else if m > 64 {
            3
        } else {
            2
        };
        if i != want || pick.index() != i {
            return Err(format!(
                "Tile::pick({m}, {n}) = {pick:?}, want {:?}",
                TILES[want]
            ));
        }
        // split_k: 1 when the tiles fill half the device; else tiles * splits <= FILL_TILES
        // and each split at least MIN_SPLIT_STAGES stages, at most MAX_SPLITS splits; with
        // one row of unswapped tiles, no split past the one that puts SATURATING_ROWS rows
        // of B in flight.
        // split_stages: the splits cover the stages, none empty.
        use fly_gemm::table::{
            split_k, split_stages, MAX_SPLITS, MIN_SPLIT_STAGES, SATURATING_ROWS,
        };
        for t in TILES {
            for bk in [64usize, 128] {
                let sp = split_k(t, m, n, k, bk);
                let (tiles, stages) = (t.tiles(m, n), k.div_ceil(bk));
                let ok = if 2 * tiles.max(1) > FILL_TILES {
                    sp == 1
                } else {
                    (1..=MAX_SPLITS).contains(&sp)
                        && (sp == 1
                            || (tiles * sp <= FILL_TILES
                                && stages / sp >= MIN_SPLIT_STAGES
                                && (m > t.c_rows() as usize
                                    || t.swap_ab
                                    || (sp - 1) * tiles * (t.c_cols() as usize) < SATURATING_ROWS)))
                };
                if !ok {
                    return Err(format!("split_k({t:?}, {m}, {n}, {k}, {bk}) = {sp}"));
                }
                if stages > 0 {
                    let (kps, used) = split_stages(stages, sp);
                    if used == 0 || used > sp || (used - 1) * kps >= stages || used * kps < stages {
                        return Err(format!("split_stages({stages}, {sp}) = ({kps}, {used})"));
                    }
                }
            }
        }
        if BAD_CONFIG.index().is_some() {
            return Err("BAD_CONFIG is in the table".into());
        }
        for (j, e) in Epilogue::ALL.into_iter().enumerate() {
            if e.index() != j || e.has_bias() != (e != Epilogue::None) {
                return Err(format!("{e:?}"));
            }
        }
        Ok(())
    });
}
