//! Typed device memory.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::repr::{as_bytes, as_bytes_mut, DeviceRepr};
use crate::residency::Residency;
use crate::types::{DeviceId, StreamId};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// `len` elements of `T` in one device's memory, freed on drop.
///
/// Sizes are `usize` elements and `u64` bytes throughout, so buffers past 4 GiB work. An empty
/// buffer allocates nothing and has device pointer 0.
///
/// Memory is stream-ordered. A buffer remembers the stream of its last use (a launch that got
/// it through [`KernelArgs::tensor`](crate::KernelArgs::tensor), an enqueued copy, or the
/// default stream for the blocking copies); a use on another stream first waits, device-side,
/// for that stream's queue. Dropping a buffer enqueues its free on that stream and returns at
/// once: `cuMemFreeAsync` on CUDA devices with memory pools (allocations come from the device's
/// default pool, `cuMemAllocAsync`), `hipFreeAsync` on HIP where the library has it, at once on
/// the Sim. So a temporary can be dropped while kernels that use it are still queued, and the
/// drop never waits for unrelated work. A free the driver refuses is printed and kept for
/// [`diag::drop_errors`](crate::diag::drop_errors). Without memory pools the drop waits for
/// the owning stream, then frees.
///
/// `DeviceBuffer` is `Send + Sync`: `&self` methods only read device memory (blocking copies
/// that the drivers allow from any thread), and every write takes `&mut self`.
///
/// Copies are blocking: they return once the data has arrived, and they are ordered after
/// kernels already submitted on the device's streams.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// let dev = Device::sim(Target::Gfx942);
/// let mut buf = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0, 3.0]).unwrap();
/// buf.copy_from_slice(&[4.0, 5.0, 6.0]).unwrap();
/// assert_eq!(buf.to_vec().unwrap(), vec![4.0, 5.0, 6.0]);
/// ```
pub struct DeviceBuffer<T: DeviceRepr> {
    ptr: u64,
    len: usize,
    device: Device,
    /// The stream whose queue covers the device work on the buffer (`residency.rs`).
    residency: Arc<Residency>,
    /// Allocated here (freed on drop) or borrowed memory of other code (`foreign.rs`).
    owned: bool,
    _elem: PhantomData<T>,
}

impl<T: DeviceRepr> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("elem", &T::SCALAR)
            .field("len", &self.len)
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("device", &self.device.id())
            .field("owned", &self.owned)
            .finish()
    }
}

pub(crate) fn byte_len<T>(len: usize) -> Result<u64> {
    let elem = std::mem::size_of::<T>() as u64;
    (len as u64)
        .checked_mul(elem)
        .filter(|&b| usize::try_from(b).is_ok())
        .ok_or(Error::SizeOverflow {
            len: len as u64,
            elem_bytes: elem,
        })
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Allocate `len` elements whose initial contents are unspecified (but valid `T` values).
    ///
    /// ```
    /// # use flydsl_rt::*;
    /// let b = DeviceBuffer::<half::bf16>::alloc(&Device::sim(Target::Gfx950), 10).unwrap();
    /// assert_eq!(b.len(), 10);
    /// ```
    pub fn alloc(device: &Device, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        let ptr = if bytes == 0 {
            0
        } else {
            device.inner.raw.alloc(bytes, None)?
        };
        // SAFETY: `ptr` is a fresh allocation of `len` elements on `device` (or 0, empty).
        Ok(unsafe { Self::from_parts(device, ptr, len, true) })
    }

    /// A buffer over `[ptr, ptr + len elements)` of `device`, freed on drop when `owned`.
    ///
    /// # Safety
    /// The range is device memory of `device` that stays valid for the buffer's life (and,
    /// when `owned`, was allocated by the device's `alloc` and is freed by nobody else).
    pub(crate) unsafe fn from_parts(device: &Device, ptr: u64, len: usize, owned: bool) -> Self {
        DeviceBuffer {
            ptr,
            len,
            device: device.clone(),
            residency: Arc::default(),
            owned,
            _elem: PhantomData,
        }
    }

    /// Allocate `len` zero-filled elements.
    ///
    /// ```
    /// # use flydsl_rt::*;
    /// let b = DeviceBuffer::<i32>::zeroed(&Device::sim(Target::Gfx942), 3).unwrap();
    /// assert_eq!(b.to_vec().unwrap(), vec![0, 0, 0]);
    /// ```
    pub fn zeroed(device: &Device, len: usize) -> Result<Self> {
        let mut b = Self::alloc(device, len)?;
        b.memset_zero()?;
        Ok(b)
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Self> {
        let mut b = Self::alloc(device, data.len())?;
        b.copy_from_slice(data)?;
        Ok(b)
    }

    /// Copy the contents to a new `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        // SAFETY: `T: DeviceRepr` accepts every bit pattern, including all-zero; the values
        // are overwritten by the copy, and no uninitialised memory is ever exposed.
        let zero = unsafe { std::mem::zeroed::<T>() };
        let mut out = vec![zero; self.len];
        self.copy_to_slice(&mut out)?;
        Ok(out)
    }

    /// Overwrite the whole buffer with `src` (`src.len()` must equal [`len`](Self::len)).
    pub fn copy_from_slice(&mut self, src: &[T]) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::LengthMismatch {
                device: self.len,
                host: src.len(),
            });
        }
        if self.len == 0 {
            return Ok(());
        }
        self.residency.acquire_default(&self.device.inner.raw)?;
        // SAFETY: the destination range is exactly this live allocation.
        unsafe { self.device.inner.raw.htod(self.ptr, as_bytes(src)) }
    }

    /// Copy the whole buffer into `dst` (`dst.len()` must equal [`len`](Self::len)).
    pub fn copy_to_slice(&self, dst: &mut [T]) -> Result<()> {
        if dst.len() != self.len {
            return Err(Error::LengthMismatch {
                device: self.len,
                host: dst.len(),
            });
        }
        if self.len == 0 {
            return Ok(());
        }
        self.residency.acquire_default(&self.device.inner.raw)?;
        // SAFETY: the source range is exactly this live allocation.
        unsafe { self.device.inner.raw.dtoh(self.ptr, as_bytes_mut(dst)) }
    }

    /// Set every byte of the buffer to zero.
    pub fn memset_zero(&mut self) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let bytes = self.size_bytes();
        self.residency.acquire_default(&self.device.inner.raw)?;
        // SAFETY: the range is exactly this live allocation.
        unsafe { self.device.inner.raw.memset_zero(self.ptr, bytes) }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of zero elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.len as u64 * std::mem::size_of::<T>() as u64
    }

    /// The device that owns the memory.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The owning device's id.
    pub fn device_id(&self) -> DeviceId {
        self.device.id()
    }

    /// The device address of element 0 (0 for an empty buffer). Valid for kernels of the
    /// owning device while the buffer lives.
    pub fn as_device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The stream whose queue covers all device work on the buffer so far: the last stream
    /// that used it, or `None` for the device's default stream (a new buffer, or after a
    /// blocking copy). Its drop enqueues the free there.
    ///
    /// ```
    /// # use flydsl_rt::*;
    /// let dev = Device::sim(Target::Gfx942);
    /// let (s, mut host) = (dev.stream().unwrap(), PinnedHostBuffer::<f32>::zeroed(&dev, 2).unwrap());
    /// let buf = DeviceBuffer::<f32>::zeroed(&dev, 2).unwrap();
    /// assert_eq!(buf.owner_stream(), None);
    /// s.copy_to_host(&buf, &mut host).unwrap();
    /// assert_eq!(buf.owner_stream(), Some(s.id()));
    /// ```
    pub fn owner_stream(&self) -> Option<StreamId> {
        self.residency.owner_id()
    }

    /// False for memory of other code wrapped with
    /// [`from_raw_parts`](Self::from_raw_parts) (never freed by us).
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// A borrowed view of all of `buf` whose uses also order `links` (each acquired with
    /// it), for memory a kernel reaches through `buf` (a tensor map's tensor).
    ///
    /// # Safety
    /// `buf` outlives the view.
    pub(crate) unsafe fn linked_view<U: DeviceRepr>(
        buf: &DeviceBuffer<U>,
        links: Vec<Arc<Residency>>,
    ) -> Self {
        let len = buf.size_bytes() as usize / std::mem::size_of::<T>().max(1);
        // SAFETY: forwarded to the caller.
        unsafe { Self::linked_range(buf, buf.ptr, len, links) }
    }

    /// A borrowed view of `len` elements at `ptr` inside `buf`, ordering `links` with it.
    ///
    /// # Safety
    /// The range lies inside `buf`, which outlives the view.
    pub(crate) unsafe fn linked_range<U: DeviceRepr>(
        buf: &DeviceBuffer<U>,
        ptr: u64,
        len: usize,
        links: Vec<Arc<Residency>>,
    ) -> Self {
        DeviceBuffer {
            ptr,
            len,
            device: buf.device.clone(),
            residency: Arc::new(Residency::linked(links)),
            owned: false,
            _elem: PhantomData,
        }
    }

    pub(crate) fn residency(&self) -> &Arc<Residency> {
        &self.residency
    }
}

/// A type-erased borrow of a [`DeviceBuffer`] (its device, address, size and stream-order
/// record), for [`Stream::external`](crate::Stream::external).
#[derive(Clone, Copy, Debug)]
pub struct RawBuffer<'a> {
    device: &'a Device,
    residency: &'a Arc<Residency>,
    ptr: u64,
    bytes: u64,
}

impl RawBuffer<'_> {
    /// The device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
    /// The size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.bytes
    }
    /// The buffer's device.
    pub fn device(&self) -> &Device {
        self.device
    }
    pub(crate) fn residency(&self) -> &Arc<Residency> {
        self.residency
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// This buffer as a [`RawBuffer`].
    ///
    /// ```
    /// let dev = flydsl_rt::Device::sim(flydsl_rt::Target::Sm90);
    /// let x = flydsl_rt::DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
    /// assert_eq!(x.as_raw_buffer().size_bytes(), 16);
    /// ```
    pub fn as_raw_buffer(&self) -> RawBuffer<'_> {
        RawBuffer {
            device: &self.device,
            residency: &self.residency,
            ptr: self.ptr,
            bytes: self.size_bytes(),
        }
    }
}

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 || !self.owned {
            return;
        }
        let owner = self.residency.take();
        // SAFETY: `ptr` is this buffer's live allocation on its device, freed once here; every
        // use of it was ordered before the current end of `owner` (`residency.rs`).
        let r = unsafe { self.device.inner.raw.free(self.ptr, owner.raw()) };
        if let Err(e) = r {
            crate::diag::report(format!(
                "dropping a DeviceBuffer of {} bytes at {:#x} on {}: {e}",
                self.size_bytes(),
                self.ptr,
                self.device.label()
            ));
        }
    }
}
