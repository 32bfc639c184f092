//! Kernel timing with events: one rep is `record(start)`, the work, `record(end)`, wait,
//! `elapsed_ms`; optionally preceded by zeroing a flush buffer, so that every rep starts with
//! a cold L2 (the method of the benches and of the torch peer script). The tuner, `cargo
//! xtask bench` and the fly-norm plan sweep all time through this.

use crate::{Device, DeviceBuffer, Event, Result, Stream};

/// Events on one device and an optional L2 flush buffer.
///
/// ```
/// use flydsl_rt::{timing::Timer, Device, Target};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream().unwrap();
/// let mut t = Timer::new(&dev, 1 << 10).unwrap();
/// let ms = t.median(&s, 1, 5, &mut || Ok::<(), flydsl_rt::Error>(())).unwrap();
/// assert!(ms >= 0.0);
/// ```
#[derive(Debug)]
pub struct Timer {
    flush: Option<DeviceBuffer<u8>>,
    start: Event,
    end: Event,
}

impl Timer {
    /// A timer on `dev` whose flushed reps first zero `flush_bytes` of device memory (0: no
    /// buffer, flushed reps are plain reps). The benches use 256 MiB, beyond the L2 of every
    /// supported GPU.
    pub fn new(dev: &Device, flush_bytes: usize) -> Result<Timer> {
        Ok(Timer {
            flush: match flush_bytes {
                0 => None,
                b => Some(DeviceBuffer::zeroed(dev, b)?),
            },
            start: dev.event()?,
            end: dev.event()?,
        })
    }

    /// Milliseconds of one rep of `f` on `s` (after flushing L2 when `flush`).
    pub fn once<E: From<crate::Error>>(
        &mut self,
        s: &Stream,
        flush: bool,
        f: &mut dyn FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<f64, E> {
        if let (true, Some(b)) = (flush, self.flush.as_mut()) {
            b.memset_zero()?;
        }
        self.start.record(s)?;
        f()?;
        self.end.record(s)?;
        self.end.synchronize()?;
        Ok(f64::from(Event::elapsed_ms(&self.start, &self.end)?))
    }

    /// The median of `reps` (at least 1) flushed reps of `f`, after `warmup` untimed runs.
    pub fn median<E: From<crate::Error>>(
        &mut self,
        s: &Stream,
        warmup: usize,
        reps: usize,
        f: &mut dyn FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<f64, E> {
        for _ in 0..warmup {
            f()?;
        }
        let mut ts = (0..reps.max(1))
            .map(|_| self.once(s, true, f))
            .collect::<std::result::Result<Vec<_>, E>>()?;
        ts.sort_by(f64::total_cmp);
        Ok(ts[ts.len() / 2])
    }
}
