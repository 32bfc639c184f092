//! Choosing the configuration of one call: a named variant, the class default, or the tuner
//! (cached winner, or a validated search when autotuning is on).

use crate::plan::{candidates_for, shape_class, variant_by_name, Variant};
use crate::table::{Kind, CONFIGS};
use flydsl_rt::tune::{TuneKey, Tuner};
use flydsl_rt::validate::Call;
use flydsl_rt::{Element, Result, Stream};

/// How a call picks its kernel configuration.
///
/// ```
/// use fly_softmax::Dispatch;
/// let d = Dispatch::Variant("softmax_fwd_f32_v64_t256_g8_e8_w0");
/// assert!(matches!(d, Dispatch::Variant(_)));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Dispatch<'a> {
    /// The tuner's cached winner for the shape class, else the default; when the tuner
    /// autotunes (`FLYDSL_AUTOTUNE=1` for [`Tuner::global`]) and the class is not cached, the
    /// candidates are searched first (validated against the default's output, timed with
    /// events) and the winner is persisted.
    Tuned(&'a Tuner),
    /// The class default; ignores any cache.
    Default,
    /// A configuration by kernel name (see [`crate::plan::all`]); it must be of the right
    /// kind and dtype and support `n`.
    Variant(&'a str),
}

/// The kernel kind names used in tuner keys (stable: the tune cache is keyed by them).
pub(crate) fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Forward => "softmax_fwd",
        Kind::Backward => "softmax_bwd",
    }
}

/// Resolve a non-tuned dispatch, or return the candidates for a tuned one.
pub(crate) enum Resolved {
    /// Launch this one.
    Fixed(Variant),
    /// Ask the tuner among these (default first).
    Tune(Vec<Variant>),
}

pub(crate) fn resolve<T: Element>(
    call: Call<'_>,
    kind: Kind,
    stream: &Stream,
    m: usize,
    n: usize,
    dispatch: &Dispatch<'_>,
) -> Result<Resolved> {
    match dispatch {
        Dispatch::Variant(name) => {
            let v = variant_by_name::<T>(name).ok_or_else(|| {
                call.error(
                    "dispatch",
                    format_args!("Dispatch::Variant({name:?})"),
                    format_args!(
                        "the name must be a {} configuration of this build",
                        T::DTYPE
                    ),
                    "list them with fly_softmax::plan::all, or pass Dispatch::Default",
                )
            })?;
            if v.config.kind != kind {
                let word = |k: Kind| {
                    if k == Kind::Forward {
                        "forward"
                    } else {
                        "backward"
                    }
                };
                return Err(call.error(
                    "dispatch",
                    format_args!("Dispatch::Variant({name:?})"),
                    format_args!("`{name}` is a {} kernel", word(v.config.kind)),
                    format_args!("pass a {} configuration", word(kind)),
                ));
            }
            if !v.supports::<T>(n) {
                return Err(call.error(
                    "dispatch",
                    format_args!("Dispatch::Variant({name:?})"),
                    format_args!(
                        "`{name}` cannot handle rows of n = {n} (it needs n <= {} and, on a \
                         vector path (`_v`/`_lv` names), n a multiple of {})",
                        v.config.class,
                        T::DTYPE.vec()
                    ),
                    "pick another variant or Dispatch::Default",
                ));
            }
            Ok(Resolved::Fixed(v))
        }
        Dispatch::Default => Ok(Resolved::Fixed(
            candidates_for::<T>(kind, stream.device(), m, n)[0],
        )),
        Dispatch::Tuned(_) => {
            let c = candidates_for::<T>(kind, stream.device(), m, n);
            if c.len() == 1 {
                Ok(Resolved::Fixed(c[0]))
            } else {
                Ok(Resolved::Tune(c))
            }
        }
    }
}

/// Ask `tuner` to choose among `cands` for `(m, n)`. `run(v)` launches a candidate and
/// `output()` reads the output buffer back; each searched candidate is validated against the
/// default's output with [`agree`].
pub(crate) fn tuned<T: Element>(
    kind: Kind,
    tuner: &Tuner,
    stream: &Stream,
    cands: &[Variant],
    m: usize,
    n: usize,
    mut run: impl FnMut(&Variant) -> Result<()>,
    mut output: impl FnMut() -> Result<Vec<T>>,
) -> Result<Variant> {
    let names: Vec<String> = cands.iter().map(|v| v.name::<T>()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let key = TuneKey::for_device(
        stream.device(),
        kind_name(kind),
        T::DTYPE.name(),
        &shape_class(&cands[0], m, n),
    );
    let find = |id: &str| cands[refs.iter().position(|r| *r == id).unwrap_or(0)];
    let mut reference: Option<Vec<T>> = None;
    let chosen = tuner.select(
        stream,
        &key,
        &refs,
        |id| run(&find(id)),
        |_, is_default| {
            let out = output()?;
            if is_default {
                reference = Some(out);
                return Ok(Ok(()));
            }
            Ok(match &reference {
                Some(r) => agree(kind, &out, r),
                None => Err("no reference output".to_string()),
            })
        },
    )?;
    Ok(find(chosen))
}

/// Whether a candidate's output matches the default's within the contract's tolerances:
/// forward max abs (f32 1e-5, f16 1e-2, bf16 2e-2), backward max error relative to the largest
/// magnitude (f32 1e-5, f16 2e-3, bf16 1e-2); NaNs must be in the same places.
///
/// ```
/// use fly_softmax::table::Kind;
/// assert!(fly_softmax::select::agree(Kind::Forward, &[0.5f32, 0.5], &[0.5, 0.5]).is_ok());
/// assert!(fly_softmax::select::agree(Kind::Forward, &[0.6f32, 0.4], &[0.5, 0.5]).is_err());
/// assert!(fly_softmax::select::agree(Kind::Forward, &[f32::NAN], &[0.0]).is_err());
/// ```
pub fn agree<T: Element>(kind: Kind, got: &[T], want: &[T]) -> std::result::Result<(), String> {
    use crate::table::DType;
    if got.len() != want.len() {
        return Err(format!("{} elements instead of {}", got.len(), want.len()));
    }
    let (fwd, bwd) = match T::DTYPE {
        DType::F32 => (1e-5, 1e-5),
        DType::F16 => (1e-2, 2e-3),
        DType::BF16 => (2e-2, 1e-2),
    };
    let scale = match kind {
        Kind::Forward => 1.0,
        Kind::Backward => want
            .iter()
            .map(|v| f64::from(v.to_f32()).abs())
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max)
            .max(f64::MIN_POSITIVE),
    };
    let tol = match kind {
        Kind::Forward => fwd,
        Kind::Backward => bwd,
    } * scale;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (f64::from(g.to_f32()), f64::from(w.to_f32()));
        let same = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol;
        if !same {
            return Err(format!(
                "element {i} is {g}, the default gives {w} (tolerance {tol:e})"
            ));
        }
    }
    Ok(())
}

/// The number of configurations compiled per dtype (forward and backward).
///
/// ```
/// assert!(fly_softmax::select::compiled_per_dtype() > 10);
/// ```
pub fn compiled_per_dtype() -> usize {
    CONFIGS.len()
}
