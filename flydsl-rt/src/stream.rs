//! Streams (ordered queues of launches) and events (timestamps on a stream).

use crate::backend::{RawEvent, RawStream};
use crate::buffer::{byte_len, DeviceBuffer};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::args::KernelArgs;
use crate::launch::config::LaunchConfig;
use crate::repr::DeviceRepr;
use crate::types::StreamId;
use crate::variant::KernelVariants;
use std::sync::Arc;

// Streams and events are made by their device; the constructors live here, with the types
// they build, so that `device` does not depend on this module.
impl Device {
    /// A new stream on this device.
    ///
    /// ```
    /// let d = flydsl_rt::Device::sim(flydsl_rt::Target::Gfx942);
    /// d.stream().unwrap().synchronize().unwrap();
    /// ```
    pub fn stream(&self) -> Result<Stream> {
        Ok(Stream {
            device: self.clone(),
            raw: Arc::new(self.inner.raw.stream()?),
            id: StreamId::next(),
        })
    }

    /// A new (unrecorded) event on this device.
    ///
    /// ```
    /// let d = flydsl_rt::Device::sim(flydsl_rt::Target::Gfx942);
    /// let e = d.event().unwrap();
    /// assert!(flydsl_rt::Event::elapsed_ms(&e, &e).is_err()); // never recorded
    /// ```
    pub fn event(&self) -> Result<Event> {
        Ok(Event {
            device: self.clone(),
            raw: self.inner.raw.event()?,
        })
    }
}

/// An ordered queue of kernel launches on one device.
///
/// `Stream` is `Send + Sync`: HIP and CUDA streams may be used from any thread (their runtimes
/// serialise submissions), and Sim streams hold no state. Launches from several threads onto
/// one stream are ordered by whichever submits first.
///
/// Host copies ([`DeviceBuffer::to_vec`](crate::DeviceBuffer::to_vec) and friends) are
/// blocking and ordered after the work already submitted on the buffer (on any stream), so a
/// result can be read back without an explicit `synchronize`. Memory is stream-ordered: a
/// buffer remembers the stream of its last use and its drop enqueues the free there, without
/// waiting (see [`DeviceBuffer`](crate::DeviceBuffer)).
///
/// ```
/// use flydsl_rt::{Device, Target};
/// let s = Device::sim(Target::Gfx942).stream().unwrap();
/// assert_eq!(s.device().target(), Target::Gfx942);
/// s.synchronize().unwrap();
/// ```
#[derive(Debug)]
pub struct Stream {
    pub(crate) device: Device,
    /// Shared with the buffers it owns (`residency.rs`), which enqueue their frees on it.
    pub(crate) raw: Arc<RawStream>,
    pub(crate) id: StreamId,
}

impl Stream {
    /// This stream's process-unique id.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Wait until everything submitted to the stream has finished (Sim: returns at once, its
    /// launches are synchronous).
    pub fn synchronize(&self) -> Result<()> {
        self.raw.synchronize()
    }

    /// A buffer of `len` elements (contents unspecified, as [`DeviceBuffer::alloc`]'s)
    /// allocated in this stream's order and owned by it from the start: work on this stream
    /// uses it with no ordering against other streams, where `DeviceBuffer::alloc`'s
    /// buffers start on the device's default stream, which on CUDA and HIP waits for the
    /// earlier work of every blocking stream. For scratch memory of one stream's work (a
    /// split-K workspace); uses on other streams are ordered after this one's as usual.
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// let s = Device::sim(Target::Gfx950).stream().unwrap();
    /// let b = s.alloc::<f32>(10).unwrap();
    /// assert_eq!((b.len(), b.owner_stream()), (10, Some(s.id())));
    /// ```
    pub fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>(len)?;
        let ptr = if bytes == 0 {
            0
        } else {
            self.device.inner.raw.alloc(bytes, Some(&self.raw))?
        };
        // SAFETY: `ptr` is a fresh allocation of `len` elements on this stream's device (or
        // 0, empty).
        let b = unsafe { DeviceBuffer::from_parts(&self.device, ptr, len, true) };
        // The allocation is ordered on this stream: it owns the buffer, so the free at drop
        // is enqueued here and uses on other streams wait for it (`residency.rs`).
        b.residency().set_owner(self.id, &self.raw);
        Ok(b)
    }

    /// A new event recorded on this stream now.
    ///
    /// ```
    /// use flydsl_rt::{Device, Event, Target};
    /// let s = Device::sim(Target::Gfx942).stream().unwrap();
    /// let (a, b) = (s.record_event().unwrap(), s.record_event().unwrap());
    /// assert!(Event::elapsed_ms(&a, &b).unwrap() >= 0.0);
    /// ```
    pub fn record_event(&self) -> Result<Event> {
        let e = self.device.event()?;
        e.record(self)?;
        Ok(e)
    }

    /// Launch the variant of `kernel` for this stream's device.
    ///
    /// Before launching it checks: the device's target has a variant (else
    /// [`Error::MissingVariant`], naming the cargo feature to enable); the embedded IR decodes
    /// (cached per process); the block has 1..=`max_threads` (and at most 1024) threads; the
    /// grid is within the hardware limits; `args` has exactly the kernel's kernarg size and
    /// every argument was written with its kind and size; every buffer in `args` lives on this
    /// device; the kernel's LDS (static plus `cfg.dynamic_lds_bytes`, which only kernels with
    /// a dynamic LDS region may ask for) fits the device. A grid with a zero dimension then
    /// returns `Ok(())` without launching. The code object is loaded once per (device, kernel).
    ///
    /// Launches are asynchronous on GPUs and synchronous on the Sim.
    ///
    /// # Safety
    /// The kernel's own index arithmetic must stay inside the buffers (the Sim checks this;
    /// GPUs do not). Buffers pushed with [`KernelArgs::tensor`] may be dropped as soon as this
    /// returns (their free is ordered after the kernel); memory whose address reached `args`
    /// any other way must stay valid until the kernel has finished.
    pub unsafe fn launch(
        &self,
        kernel: &'static KernelVariants,
        cfg: LaunchConfig,
        args: &KernelArgs,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { crate::launch::launch(&self.device, &self.raw, self.id, kernel, cfg, args) }
    }
}

/// A point in a stream's work, for timing and waiting.
///
/// `Event` is `Send + Sync`: HIP and CUDA events are thread-safe driver objects and the Sim's
/// event time is behind a lock.
///
/// ```
/// use flydsl_rt::{Device, Event, Target};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream().unwrap();
/// let (start, end) = (dev.event().unwrap(), dev.event().unwrap());
/// start.record(&s).unwrap();
/// end.record(&s).unwrap();
/// end.synchronize().unwrap();
/// assert!(Event::elapsed_ms(&start, &end).unwrap() >= 0.0);
/// ```
#[derive(Debug)]
pub struct Event {
    device: Device,
    raw: RawEvent,
}

impl Event {
    /// Record the event at the current end of `stream` (re-recording moves it).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        if stream.device != self.device {
            return Err(Error::DeviceMismatch {
                what: "Event::record: the event and the stream",
                a: self.device.label(),
                b: stream.device.label(),
            });
        }
        self.raw.record(&stream.raw)
    }

    /// Wait until the work before the event has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.raw.synchronize()
    }

    /// Milliseconds between two recorded events of one device (`end` must have completed:
    /// synchronize it first on GPUs).
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        if start.device != end.device {
            return Err(Error::DeviceMismatch {
                what: "Event::elapsed_ms: `start` and `end`",
                a: start.device.label(),
                b: end.device.label(),
            });
        }
        start.raw.elapsed_ms(&end.raw)
    }
}
