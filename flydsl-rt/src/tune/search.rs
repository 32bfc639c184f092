//! The search: run every candidate once, validate it against the default's output, time the
//! survivors with events and pick the fastest (the default within a tie margin).

use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::timing::Timer;

/// How a search measures.
///
/// ```
/// let o = flydsl_rt::tune::TuneOptions::default();
/// assert_eq!((o.warmup, o.reps, o.tie), (2, 10, 0.02));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuneOptions {
    /// Untimed runs per candidate before timing.
    pub warmup: u32,
    /// Timed runs per candidate (the median is ranked).
    pub reps: u32,
    /// Relative margin within which the default beats a faster candidate.
    pub tie: f64,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            warmup: 2,
            reps: 10,
            tie: 0.02,
        }
    }
}

/// One candidate's outcome in a search.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Median milliseconds over the timed runs.
    Timed(f64),
    /// Dropped before timing, with the reason (launch error or validation mismatch).
    Rejected(String),
}

/// The result of [`search`].
#[derive(Clone, Debug, PartialEq)]
pub struct SearchReport {
    /// The chosen candidate id.
    pub winner: String,
    /// Every candidate's outcome, in candidate order.
    pub outcomes: Vec<(String, Outcome)>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::INFINITY;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Measure `candidates` (the first is the default) on `stream` and pick the fastest valid one.
///
/// `run(id)` launches one candidate. `check(id, is_default)` is called after each candidate's
/// first run: for the default it captures the reference output and should return `Ok(Ok(()))`;
/// for the others it compares with the reference and returns `Ok(Err(reason))` on a mismatch.
/// Errors of the default's run or check are returned; other candidates' errors only reject
/// them.
///
/// ```
/// use flydsl_rt::tune::{search, TuneOptions, Outcome};
/// use flydsl_rt::{Device, Target};
/// let s = Device::sim(Target::Gfx942).stream().unwrap();
/// let opts = TuneOptions { warmup: 0, reps: 3, tie: 0.02 };
/// let r = search(&s, &["a", "b"], &opts, |_| Ok(()), |id, _| Ok(if id == "b" { Err("differs".into()) } else { Ok(()) })).unwrap();
/// assert_eq!(r.winner, "a");
/// assert_eq!(r.outcomes[1].1, Outcome::Rejected("differs".into()));
/// ```
pub fn search(
    stream: &Stream,
    candidates: &[&str],
    opts: &TuneOptions,
    mut run: impl FnMut(&str) -> Result<()>,
    mut check: impl FnMut(&str, bool) -> Result<std::result::Result<(), String>>,
) -> Result<SearchReport> {
    let Some(&default) = candidates.first() else {
        return Ok(SearchReport {
            winner: String::new(),
            outcomes: Vec::new(),
        });
    };
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    let mut valid: Vec<&str> = Vec::new();
    for (i, &id) in candidates.iter().enumerate() {
        let is_default = i == 0;
        let result = run(id)
            .and_then(|()| stream.synchronize())
            .and_then(|()| check(id, is_default));
        match result {
            Ok(Ok(())) => valid.push(id),
            Ok(Err(reason)) if !is_default => {
                outcomes.push((id.to_string(), Outcome::Rejected(reason)))
            }
            Err(e) if !is_default => {
                outcomes.push((id.to_string(), Outcome::Rejected(e.to_string())))
            }
            Ok(Err(reason)) => {
                return Err(Error::InvalidArgument {
                    op: format!("tuning candidate `{default}`"),
                    reason: format!(
                        "the tuner's validation rejected the default candidate: {reason}"
                    ),
                })
            }
            Err(e) => return Err(e),
        }
    }
    let mut timer = Timer::new(stream.device(), 0)?;
    let mut timed: Vec<(&str, f64)> = Vec::new();
    for &id in &valid {
        let mut times = Vec::with_capacity(opts.reps as usize);
        let mut failed = None;
        for _ in 0..opts.warmup {
            if let Err(e) = run(id) {
                failed = Some(e);
                break;
            }
        }
        for _ in 0..opts.reps.max(1) {
            if failed.is_some() {
                break;
            }
            match timer.once(stream, false, &mut || run(id)) {
                Ok(ms) => times.push(ms),
                Err(e) => failed = Some(e),
            }
        }
        match failed {
            Some(e) if id == default => return Err(e),
            Some(e) => outcomes.push((id.to_string(), Outcome::Rejected(e.to_string()))),
            None => {
                let med = median(times);
                timed.push((id, med));
                outcomes.push((id.to_string(), Outcome::Timed(med)));
            }
        }
    }
    let winner = pick(default, &timed, opts.tie);
    let order = |id: &str| {
        candidates
            .iter()
            .position(|c| *c == id)
            .unwrap_or(usize::MAX)
    };
    outcomes.sort_by_key(|(id, _)| order(id));
    Ok(SearchReport {
        winner: winner.to_string(),
        outcomes,
    })
}

/// The fastest of `timed`, unless the default is within `tie` of it.
fn pick<'a>(default: &'a str, timed: &[(&'a str, f64)], tie: f64) -> &'a str {
    let Some(&(best, best_t)) = timed.iter().min_by(|a, b| a.1.total_cmp(&b.1)) else {
        return default;
    };
    match timed.iter().find(|(id, _)| *id == default) {
        Some(&(_, t)) if t <= best_t * (1.0 + tie) => default,
        _ => best,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tie_goes_to_default() {
        assert_eq!(pick("d", &[("d", 1.015), ("x", 1.0)], 0.02), "d");
        assert_eq!(pick("d", &[("d", 1.05), ("x", 1.0)], 0.02), "x");
        assert_eq!(pick("d", &[("x", 1.0)], 0.02), "x");
        assert_eq!(pick("d", &[], 0.02), "d");
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
