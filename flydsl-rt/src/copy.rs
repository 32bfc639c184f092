//! Copies enqueued on a stream: host <-> device through a [`PinnedHostBuffer`], and device
//! to device. They return once the copy is queued; the buffers' stream ordering
//! (`residency.rs`) orders them with kernels and other copies, and the pinned buffer waits for
//! its copy before its elements are read or written again.

use crate::buffer::DeviceBuffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::pinned::{length_error, PinnedHostBuffer};
use crate::repr::DeviceRepr;
use crate::stream::{Event, Stream};

fn same_device(what: &'static str, stream: &Device, other: &Device) -> Result<()> {
    if stream == other {
        return Ok(());
    }
    Err(Error::DeviceMismatch {
        what,
        a: stream.label(),
        b: other.label(),
    })
}

impl Stream {
    /// An event after a just-enqueued copy with a pinned buffer. If none can be recorded, the
    /// host waits for the stream instead, so the pinned memory is never released or touched
    /// while the copy may still run.
    fn copy_done(&self) -> Result<Event> {
        self.record_event().inspect_err(|_| {
            let _ = self.synchronize();
        })
    }

    /// Enqueue a copy of `src` (page-locked host memory) into `dst` on this stream and return;
    /// the copy runs after the work queued on `dst` so far, on any stream. Lengths must match
    /// and both buffers belong to this stream's device. `src` is read by the copy: writing it
    /// again ([`PinnedHostBuffer::as_mut_slice`]) waits for the copy.
    ///
    /// ```
    /// use flydsl_rt::{Device, DeviceBuffer, PinnedHostBuffer, Target};
    /// let dev = Device::sim(Target::Gfx942);
    /// let s = dev.stream().unwrap();
    /// let src = PinnedHostBuffer::from_slice(&dev, &[1i32, 2]).unwrap();
    /// let mut dst = DeviceBuffer::<i32>::alloc(&dev, 2).unwrap();
    /// s.copy_to_device(&src, &mut dst).unwrap();
    /// assert_eq!(dst.to_vec().unwrap(), vec![1, 2]);
    /// let mut short = DeviceBuffer::<i32>::alloc(&dev, 1).unwrap();
    /// assert!(s.copy_to_device(&src, &mut short).is_err());
    /// ```
    pub fn copy_to_device<T: DeviceRepr>(
        &self,
        src: &PinnedHostBuffer<T>,
        dst: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        const OP: &str = "Stream::copy_to_device";
        same_device(
            "Stream::copy_to_device: the stream and `src`",
            &self.device,
            src.device(),
        )?;
        same_device(
            "Stream::copy_to_device: the stream and `dst`",
            &self.device,
            dst.device(),
        )?;
        if src.len() != dst.len() {
            return Err(length_error(OP, "`src` and `dst`", src.len(), dst.len()));
        }
        if dst.is_empty() {
            return Ok(());
        }
        src.before_copy(self.id)?;
        let raw = &self.device.inner.raw;
        dst.residency().acquire(raw, self.id, &self.raw)?;
        let (host, bytes) = src.raw_parts();
        // SAFETY: `dst` is a live allocation of `bytes` bytes on this device; `src` holds
        // `bytes` bytes that stay valid and unchanged until the copy has run: its writers and
        // its drop wait for the event recorded below.
        unsafe { raw.htod_async(dst.as_device_ptr(), host, bytes, &self.raw) }?;
        dst.residency().release(raw, self.id, &self.raw)?;
        src.set_pending(self.id, self.copy_done()?);
        Ok(())
    }

    /// Enqueue a copy of `src` into `dst` (page-locked host memory) on this stream and
    /// return; the copy runs after the work queued on `src` so far, on any stream. Reading
    /// `dst` ([`PinnedHostBuffer::as_slice`]) waits for the copy.
    pub fn copy_to_host<T: DeviceRepr>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut PinnedHostBuffer<T>,
    ) -> Result<()> {
        const OP: &str = "Stream::copy_to_host";
        same_device(
            "Stream::copy_to_host: the stream and `src`",
            &self.device,
            src.device(),
        )?;
        same_device(
            "Stream::copy_to_host: the stream and `dst`",
            &self.device,
            dst.device(),
        )?;
        if src.len() != dst.len() {
            return Err(length_error(OP, "`src` and `dst`", src.len(), dst.len()));
        }
        if src.is_empty() {
            return Ok(());
        }
        dst.before_copy(self.id)?;
        let raw = &self.device.inner.raw;
        src.residency().acquire(raw, self.id, &self.raw)?;
        let (host, bytes) = dst.raw_parts();
        // SAFETY: `src` is a live allocation of `bytes` bytes on this device; `dst` holds
        // `bytes` bytes that nothing reads or writes until the copy has run: every access and
        // the drop wait for the event recorded below, and `&mut` excludes slices handed out
        // before.
        unsafe { raw.dtoh_async(host, src.as_device_ptr(), bytes, &self.raw) }?;
        src.residency().release(raw, self.id, &self.raw)?;
        dst.set_pending(self.id, self.copy_done()?);
        Ok(())
    }

    /// Enqueue a copy of `src` into `dst` (both device buffers of this stream's device) on
    /// this stream and return; it runs after the work queued on either buffer so far.
    ///
    /// ```
    /// use flydsl_rt::{Device, DeviceBuffer, Target};
    /// let dev = Device::sim(Target::Gfx950);
    /// let s = dev.stream().unwrap();
    /// let a = DeviceBuffer::from_slice(&dev, &[7u8, 8, 9]).unwrap();
    /// let mut b = DeviceBuffer::<u8>::zeroed(&dev, 3).unwrap();
    /// s.copy_device(&a, &mut b).unwrap();
    /// assert_eq!(b.to_vec().unwrap(), vec![7, 8, 9]);
    /// ```
    pub fn copy_device<T: DeviceRepr>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        const OP: &str = "Stream::copy_device";
        same_device(
            "Stream::copy_device: the stream and `src`",
            &self.device,
            src.device(),
        )?;
        same_device(
            "Stream::copy_device: the stream and `dst`",
            &self.device,
            dst.device(),
        )?;
        if src.len() != dst.len() {
            return Err(length_error(OP, "`src` and `dst`", src.len(), dst.len()));
        }
        if src.is_empty() {
            return Ok(());
        }
        let raw = &self.device.inner.raw;
        src.residency().acquire(raw, self.id, &self.raw)?;
        dst.residency().acquire(raw, self.id, &self.raw)?;
        let bytes = usize::try_from(src.size_bytes()).map_err(|_| Error::SizeOverflow {
            len: src.len() as u64,
            elem_bytes: std::mem::size_of::<T>() as u64,
        })?;
        // SAFETY: both are live allocations of `bytes` bytes on this device; `&mut dst` and
        // `&src` cannot be the same buffer. Wrapped foreign buffers may overlap, which
        // `from_raw_parts`'s contract excludes for a `&mut`.
        unsafe { raw.dtod_async(dst.as_device_ptr(), src.as_device_ptr(), bytes, &self.raw) }?;
        src.residency().release(raw, self.id, &self.raw)?;
        dst.residency().release(raw, self.id, &self.raw)
    }
}
