//! GPU timing for the benches: `flydsl_rt::timing::Timer` (events, a 256 MiB L2 flush before
//! every timed rep, median: the method of the torch peer script), with the rep count chosen
//! to fill a time budget.

use flydsl_rt::{Device, Stream};

/// An error message of a bench closure, or of the timer itself.
struct Msg(String);

impl From<flydsl_rt::Error> for Msg {
    fn from(e: flydsl_rt::Error) -> Msg {
        Msg(e.to_string())
    }
}

/// Times closures on one device.
pub struct Timer {
    inner: flydsl_rt::timing::Timer,
    /// Target measuring time per case, ms.
    pub rep_ms: f64,
}

impl Timer {
    /// A timer for `dev` (allocates the flush buffer).
    pub fn new(dev: &Device, rep_ms: f64) -> Result<Timer, String> {
        Ok(Timer {
            inner: flydsl_rt::timing::Timer::new(dev, 256 << 20).map_err(|e| e.to_string())?,
            rep_ms,
        })
    }
    /// Median ms of `f` over enough reps to fill `rep_ms` (10..=500 reps), after warm-up.
    pub fn median(
        &mut self,
        s: &Stream,
        f: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<f64, String> {
        let mut g = || f().map_err(Msg);
        let mut est = f64::MAX;
        for _ in 0..3 {
            est = est.min(self.inner.once(s, false, &mut g).map_err(|m| m.0)?);
        }
        let est = est.max(1e-3);
        let reps = ((self.rep_ms / est) as usize).clamp(10, 500);
        let warmup = ((20.0 / est) as usize).clamp(2, 100);
        self.inner.median(s, warmup, reps, &mut g).map_err(|m| m.0)
    }
}
