//! Page-locked host memory: [`PinnedHostBuffer`], the host side of the copies a stream
//! enqueues (`copy.rs`).

use crate::buffer::byte_len;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::repr::DeviceRepr;
use crate::stream::Event;
use crate::types::StreamId;
use std::fmt;
use std::sync::Mutex;

/// `len` elements of `T` in page-locked host memory of one device's driver (`cuMemHostAlloc`,
/// `hipHostMalloc`; heap memory on the Sim), zero-filled: the host side of
/// [`Stream::copy_to_device`](crate::Stream::copy_to_device) and
/// [`Stream::copy_to_host`](crate::Stream::copy_to_host), which return before the copy has run.
///
/// The buffer remembers its last enqueued copy. Reading the elements
/// ([`as_slice`](Self::as_slice)) first waits for it (a copy into the buffer may still be
/// writing them); writing them ([`as_mut_slice`](Self::as_mut_slice)) first waits too (a copy
/// out of the buffer may still be reading them); a copy into the buffer takes `&mut self`, so
/// no slice handed out earlier can see it happen. Dropping waits for that copy only, then frees.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, PinnedHostBuffer, Target};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream().unwrap();
/// let mut host = PinnedHostBuffer::<f32>::zeroed(&dev, 3).unwrap();
/// host.as_mut_slice().unwrap().copy_from_slice(&[1.0, 2.0, 3.0]);
/// let mut dev_buf = DeviceBuffer::<f32>::alloc(&dev, 3).unwrap();
/// s.copy_to_device(&host, &mut dev_buf).unwrap();     // enqueued, returns at once
/// let mut back = PinnedHostBuffer::<f32>::zeroed(&dev, 3).unwrap();
/// s.copy_to_host(&dev_buf, &mut back).unwrap();
/// assert_eq!(back.as_slice().unwrap(), &[1.0, 2.0, 3.0]); // waits for the copy
/// ```
pub struct PinnedHostBuffer<T: DeviceRepr> {
    ptr: *mut T,
    len: usize,
    device: Device,
    /// Recorded after the last copy enqueued with this buffer, and that copy's stream (whose
    /// queue then covers every copy enqueued with the buffer so far: see `before_copy`).
    pending: Mutex<Option<(StreamId, Event)>>,
}

// SAFETY: the buffer owns its memory like a `Box<[T]>`; `T: DeviceRepr` is plain data, and
// the elements are only reached through `&self` (shared reads) or `&mut self`.
unsafe impl<T: DeviceRepr> Send for PinnedHostBuffer<T> {}
// SAFETY: as above; `pending` is behind a lock.
unsafe impl<T: DeviceRepr> Sync for PinnedHostBuffer<T> {}

impl<T: DeviceRepr> fmt::Debug for PinnedHostBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedHostBuffer")
            .field("elem", &T::SCALAR)
            .field("len", &self.len)
            .field("device", &self.device.id())
            .finish()
    }
}

impl<T: DeviceRepr> PinnedHostBuffer<T> {
    /// `len` zero-filled elements of page-locked memory for copies on `device`'s streams.
    ///
    /// ```
    /// let dev = flydsl_rt::Device::sim(flydsl_rt::Target::Gfx942);
    /// let b = flydsl_rt::PinnedHostBuffer::<i32>::zeroed(&dev, 4).unwrap();
    /// assert_eq!(b.as_slice().unwrap(), &[0, 0, 0, 0]);
    /// ```
    pub fn zeroed(device: &Device, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)? as usize;
        let ptr = if bytes == 0 {
            std::ptr::NonNull::<T>::dangling().as_ptr()
        } else {
            let p = device.inner.raw.host_alloc(bytes)?;
            debug_assert_eq!(p as usize % std::mem::align_of::<T>(), 0);
            p.cast::<T>()
        };
        Ok(PinnedHostBuffer {
            ptr,
            len,
            device: device.clone(),
            pending: Mutex::new(None),
        })
    }

    /// A page-locked copy of `data`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Self> {
        let mut b = Self::zeroed(device, data.len())?;
        b.as_mut_slice()?.copy_from_slice(data);
        Ok(b)
    }

    /// Wait for the last copy enqueued with this buffer.
    fn settle(&self) -> Result<()> {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, e)) = p.as_ref() {
            e.synchronize()?;
        }
        *p = None;
        Ok(())
    }

    /// The elements, once the last copy enqueued with this buffer has run.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.settle()?;
        // SAFETY: `ptr` holds `len` initialised elements (zeroed, `T` accepts every bit
        // pattern); no copy is pending, and one can only be enqueued into the buffer through
        // `&mut self`, which this borrow excludes.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The elements for writing, once the last copy enqueued with this buffer has run.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.settle()?;
        // SAFETY: as in `as_slice`, and `&mut self` excludes every other access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of zero elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device whose streams copy with it.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The host address and byte length, for a copy that the caller then records with
    /// [`set_pending`](Self::set_pending).
    pub(crate) fn raw_parts(&self) -> (*mut u8, usize) {
        (self.ptr.cast::<u8>(), self.len * std::mem::size_of::<T>())
    }

    /// Remember `event`, recorded on `stream` after a copy that uses the buffer.
    pub(crate) fn set_pending(&self, stream: StreamId, event: Event) {
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some((stream, event));
    }

    /// Before a copy on `stream`: a pending copy on another stream is waited for first, so
    /// that the one pending event always covers every copy still running (rare: the host
    /// waits only for that earlier copy).
    pub(crate) fn before_copy(&self, stream: StreamId) -> Result<()> {
        let other = matches!(
            &*self.pending.lock().unwrap_or_else(|e| e.into_inner()),
            Some((s, _)) if *s != stream
        );
        if other {
            self.settle()?;
        }
        Ok(())
    }
}

impl<T: DeviceRepr> Drop for PinnedHostBuffer<T> {
    fn drop(&mut self) {
        if self.len == 0 || std::mem::size_of::<T>() == 0 {
            return;
        }
        let (ptr, bytes) = self.raw_parts();
        if let Err(e) = self.settle() {
            // The copy's state is unknown: leaking the memory is the only sound choice.
            crate::diag::report(format!(
                "dropping a PinnedHostBuffer of {bytes} bytes on {}: waiting for its last \
                 copy failed ({e}); its memory is leaked",
                self.device.label()
            ));
            return;
        }
        // SAFETY: `ptr` came from `host_alloc` of this device with `bytes`; no copy is pending.
        if let Err(e) = unsafe { self.device.inner.raw.host_free(ptr, bytes) } {
            crate::diag::report(format!(
                "dropping a PinnedHostBuffer of {bytes} bytes on {}: {e}",
                self.device.label()
            ));
        }
    }
}

/// The error of a copy whose sides have different lengths.
pub(crate) fn length_error(op: &str, what: &str, a: usize, b: usize) -> Error {
    Error::InvalidArgument {
        op: op.to_string(),
        reason: format!(
            "{what} have {a} and {b} elements; copies move whole buffers, so pass buffers of \
             one length"
        ),
    }
}
