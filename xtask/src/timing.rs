//! GPU timing: CUDA/HIP events around each rep, a 256 MB L2 flush before every rep,
//! warm-up, median — the same method as the torch peer script.

use flydsl_rt::{Device, DeviceBuffer, Event, Stream};

/// Times closures on one device.
pub struct Timer {
    flush: DeviceBuffer<u8>,
    start: Event,
    end: Event,
    /// Target measuring time per case, ms.
    pub rep_ms: f64,
}

impl Timer {
    /// A timer for `dev` (allocates the flush buffer).
    pub fn new(dev: &Device, rep_ms: f64) -> Result<Timer, String> {
        let e = |e: flydsl_rt::Error| e.to_string();
        Ok(Timer {
            flush: DeviceBuffer::zeroed(dev, 256 << 20).map_err(e)?,
            start: dev.event().map_err(e)?,
            end: dev.event().map_err(e)?,
            rep_ms,
        })
    }
    fn once(
        &mut self,
        s: &Stream,
        f: &mut dyn FnMut() -> Result<(), String>,
        flush: bool,
    ) -> Result<f64, String> {
        let e = |e: flydsl_rt::Error| e.to_string();
        if flush {
            self.flush.memset_zero().map_err(e)?;
        }
        self.start.record(s).map_err(e)?;
        f()?;
        self.end.record(s).map_err(e)?;
        self.end.synchronize().map_err(e)?;
        Ok(Event::elapsed_ms(&self.start, &self.end).map_err(e)? as f64)
    }
    /// Median ms of `f` over enough reps to fill `rep_ms` (10..=500 reps), after warm-up.
    pub fn median(
        &mut self,
        s: &Stream,
        f: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<f64, String> {
        let est = (0..3)
            .map(|_| self.once(s, f, false))
            .collect::<Result<Vec<_>, _>>()?;
        let est = est.iter().cloned().fold(f64::MAX, f64::min).max(1e-3);
        let reps = ((self.rep_ms / est) as usize).clamp(10, 500);
        for _ in 0..((20.0 / est) as usize).clamp(2, 100) {
            f()?;
        }
        let mut ts = (0..reps)
            .map(|_| self.once(s, f, true))
            .collect::<Result<Vec<_>, _>>()?;
        ts.sort_by(f64::total_cmp);
        Ok(ts[ts.len() / 2])
    }
}
