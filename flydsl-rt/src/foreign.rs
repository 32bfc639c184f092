//! Memory and streams of other code (a framework's tensors, an engine's arena, its stream),
//! borrowed: wrapped in a [`DeviceBuffer`] that never frees it and a [`Stream`] that never
//! destroys it, so kernels can run on them. Also the device that holds a raw pointer.

use crate::backend::{RawDevice, RawStream};
use crate::buffer::{byte_len, DeviceBuffer};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::repr::DeviceRepr;
use crate::stream::Stream;
use crate::types::{Backend, StreamId};
use std::ffi::c_void;
use std::sync::Arc;

fn invalid(op: &str, reason: String) -> Error {
    Error::InvalidArgument {
        op: op.to_string(),
        reason,
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Wrap `len` elements of `T` at device address `ptr`, memory that other code allocated
    /// and frees: the buffer never frees it. The buffer starts owned by `stream` (the stream
    /// whose queue covers the work other code did on the memory so far; see
    /// [`owner_stream`](Self::owner_stream)), so the first kernel or copy on it is ordered
    /// after that work.
    ///
    /// Checked before anything else: `ptr` is non-null and aligned for `T` (unless `len` is
    /// 0, which wraps nothing), the byte length fits the address space, and where the backend
    /// can tell, that the range lies inside one allocation of `stream`'s device (CUDA:
    /// `cuPointerGetAttribute`; the Sim: its allocation table; HIP: not checked).
    ///
    /// # Safety
    /// - `[ptr, ptr + len * size_of::<T>())` is device memory of `stream`'s device holding
    ///   valid `T` values, and stays allocated until every kernel and copy this crate enqueues
    ///   on the buffer has run (the buffer records the last stream that used it:
    ///   [`owner_stream`](Self::owner_stream); keep the memory until that stream has passed
    ///   that point, e.g. free it on that stream).
    /// - The other code's work on the memory is ordered before the end of `stream`'s queue
    ///   when this is called (it ran on `stream`, or has completed).
    /// - While the buffer lives, no other code writes the memory, and nothing else reads it
    ///   while this buffer is written through `&mut` (kernel outputs, copies into it); the
    ///   same holds for two buffers wrapping overlapping memory.
    ///
    /// ```
    /// use flydsl_rt::{Device, DeviceBuffer, Target};
    /// let dev = Device::sim(Target::Gfx942);
    /// let s = dev.stream().unwrap();
    /// let owner = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    /// // SAFETY: rows 1..3 of `owner`, which outlives the view and is not written meanwhile.
    /// let view = unsafe { DeviceBuffer::<f32>::from_raw_parts(&s, owner.as_device_ptr() + 4, 2) }.unwrap();
    /// assert_eq!(view.to_vec().unwrap(), vec![2.0, 3.0]);
    /// assert!(!view.is_owned());
    /// // Past the allocation's end: refused.
    /// assert!(unsafe { DeviceBuffer::<f32>::from_raw_parts(&s, owner.as_device_ptr() + 4, 4) }.is_err());
    /// ```
    pub unsafe fn from_raw_parts(stream: &Stream, ptr: u64, len: usize) -> Result<Self> {
        const OP: &str = "DeviceBuffer::from_raw_parts";
        let device = stream.device();
        let bytes = byte_len::<T>(len)?;
        if len == 0 {
            // SAFETY: an empty buffer touches no memory.
            return Ok(unsafe { Self::from_parts(device, 0, 0, false) });
        }
        if ptr == 0 {
            return Err(invalid(
                OP,
                format!("`ptr` is null for {len} elements; pass the memory's device address"),
            ));
        }
        let align = std::mem::align_of::<T>() as u64;
        if !ptr.is_multiple_of(align) {
            return Err(invalid(
                OP,
                format!(
                    "`ptr` {ptr:#x} is not aligned to {align} bytes, the alignment of {:?}; pass \
                     an address of an element",
                    T::SCALAR
                ),
            ));
        }
        let Some(end) = ptr.checked_add(bytes) else {
            return Err(invalid(
                OP,
                format!(
                    "`ptr` {ptr:#x} + {bytes} bytes ({len} elements) overflows the address space"
                ),
            ));
        };
        check_range(OP, device, ptr, end)?;
        // SAFETY: the caller's contract (above) makes the range valid memory of `device` for
        // the buffer's life; it is borrowed, never freed.
        let buf = unsafe { Self::from_parts(device, ptr, len, false) };
        buf.residency()
            .acquire(&device.inner.raw, stream.id, &stream.raw)?;
        Ok(buf)
    }
}

/// Check `[ptr, end)` against the backend's view of the device's allocations.
fn check_range(op: &str, device: &Device, ptr: u64, end: u64) -> Result<()> {
    let outside = |start: u64, size: u64| {
        invalid(
            op,
            format!(
                "[{ptr:#x}, {end:#x}) is not inside one allocation of {} (the allocation at \
                 `ptr` is [{start:#x}, {:#x})); pass a range of one allocation",
                device.label(),
                start.saturating_add(size)
            ),
        )
    };
    match &device.inner.raw {
        RawDevice::Sim(d) => {
            let Some((size, off)) = d.allocation_of(ptr) else {
                return Err(invalid(
                    op,
                    format!(
                        "`ptr` {ptr:#x} is not in any live allocation of {}; pass memory of \
                         this device",
                        device.label()
                    ),
                ));
            };
            let start = ptr - off;
            if end - start > size {
                return Err(outside(start, size));
            }
            Ok(())
        }
        RawDevice::Cuda(d) => {
            let (ordinal, start, size) = d.pointer_info(ptr).map_err(|e| {
                invalid(
                    op,
                    format!("the CUDA driver does not know `ptr` {ptr:#x} as device memory ({e})"),
                )
            })?;
            if usize::try_from(ordinal).ok() != Some(device.ordinal()) {
                return Err(invalid(
                    op,
                    format!(
                        "`ptr` {ptr:#x} is memory of CUDA device {ordinal}, not of {}; wrap it \
                         with a stream of that device (Device::of_cuda_pointer finds it)",
                        device.label()
                    ),
                ));
            }
            if ptr < start || end - start > size {
                return Err(outside(start, size));
            }
            Ok(())
        }
        // HIP's pointer attributes are a versioned struct; not checked (documented).
        RawDevice::Hip(_) => Ok(()),
    }
}

impl Stream {
    /// Wrap a `CUstream` of other code (or null, the default stream) on the CUDA `device`:
    /// launches and copies on the returned stream are queued on it, and dropping the stream
    /// never destroys it.
    ///
    /// # Safety
    /// `raw` is a live stream of `device`'s primary context (the context that CUDA's runtime
    /// API, PyTorch and cudarc use) that stays alive until every buffer that used the
    /// returned stream has been dropped and the work queued on it has been enqueued (frees
    /// are enqueued on it at drop).
    pub unsafe fn from_raw_cuda(device: &Device, raw: *mut c_void) -> Result<Stream> {
        let RawDevice::Cuda(d) = &device.inner.raw else {
            return Err(wrong_backend(
                "Stream::from_raw_cuda",
                device,
                Backend::Cuda,
            ));
        };
        // SAFETY: guaranteed by the caller.
        let s = unsafe { d.borrowed_stream(raw) }?;
        Ok(wrap(device, RawStream::Cuda(s)))
    }

    /// Wrap a `hipStream_t` of other code (or null, the null stream) on the HIP `device`;
    /// dropping the stream never destroys it.
    ///
    /// # Safety
    /// As for [`from_raw_cuda`](Self::from_raw_cuda): `raw` is a live stream of `device` that
    /// outlives every use the returned stream and the buffers that used it make of it.
    pub unsafe fn from_raw_hip(device: &Device, raw: *mut c_void) -> Result<Stream> {
        let RawDevice::Hip(d) = &device.inner.raw else {
            return Err(wrong_backend("Stream::from_raw_hip", device, Backend::Hip));
        };
        // SAFETY: guaranteed by the caller.
        let s = unsafe { d.borrowed_stream(raw) }?;
        Ok(wrap(device, RawStream::Hip(s)))
    }
}

impl Stream {
    /// The backend's stream handle (`CUstream` on CUDA, `hipStream_t` on HIP; `None` on the
    /// Sim), for handing to other code such as a vendor collective library. Use it inside
    /// [`external`](Self::external), which keeps the buffers' stream order.
    pub fn raw_handle(&self) -> Option<*mut c_void> {
        match &*self.raw {
            RawStream::Sim => None,
            #[cfg(feature = "cuda")]
            RawStream::Cuda(s) => Some(s.raw.cast()),
            #[cfg(not(feature = "cuda"))]
            RawStream::Cuda(s) => match *s {},
            #[cfg(feature = "hip")]
            RawStream::Hip(s) => Some(s.raw),
            #[cfg(not(feature = "hip"))]
            RawStream::Hip(s) => match *s {},
        }
    }

    /// Run `enqueue`, which enqueues other code's work on this stream's raw handle (see
    /// [`raw_handle`](Self::raw_handle)) that uses `buffers`, in this crate's stream order:
    /// before it the stream waits for the buffers' earlier work and becomes their owner,
    /// after it later uses and frees are ordered after that work (as for a launch).
    ///
    /// ```
    /// use flydsl_rt::{Device, DeviceBuffer, Target};
    /// let dev = Device::sim(Target::Sm90);
    /// let s = dev.stream().unwrap();
    /// let x = DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
    /// let r = s.external(&[x.as_raw_buffer()], |raw| raw.is_none()).unwrap();
    /// assert!(r); // the Sim has no raw stream
    /// ```
    pub fn external<R>(
        &self,
        buffers: &[crate::buffer::RawBuffer<'_>],
        enqueue: impl FnOnce(Option<*mut c_void>) -> R,
    ) -> Result<R> {
        let raw = &self.device.inner.raw;
        for b in buffers {
            if b.device() != &self.device {
                return Err(invalid(
                    "Stream::external",
                    format!(
                        "a buffer lives on {}, the stream on {}; pass buffers of the \
                         stream's device",
                        b.device().label(),
                        self.device.label()
                    ),
                ));
            }
            b.residency().acquire(raw, self.id, &self.raw)?;
        }
        let r = enqueue(self.raw_handle());
        for b in buffers {
            b.residency().release(raw, self.id, &self.raw)?;
        }
        Ok(r)
    }
}

impl Device {
    /// The CUDA device whose memory holds `ptr` (`cuPointerGetAttribute`), or an error naming
    /// why not (no CUDA driver, not device memory, an unsupported device).
    pub fn of_cuda_pointer(ptr: u64) -> Result<Device> {
        let devices = Device::enumerate(Backend::Cuda)?;
        let bad = |reason: String| invalid("Device::of_cuda_pointer", reason);
        let Some(first) = devices.first() else {
            return Err(bad("there is no usable CUDA device".into()));
        };
        let RawDevice::Cuda(d) = &first.inner.raw else {
            return Err(bad(
                "the CUDA backend returned a device of another backend".into()
            ));
        };
        let (ordinal, _, _) = d.pointer_info(ptr).map_err(|e| {
            bad(format!(
                "the CUDA driver does not know {ptr:#x} as device memory ({e})"
            ))
        })?;
        devices
            .into_iter()
            .find(|dev| usize::try_from(ordinal).ok() == Some(dev.ordinal()))
            .ok_or_else(|| {
                bad(format!(
                    "{ptr:#x} is memory of CUDA device {ordinal}, which flydsl does not support \
                     (see Device::enumerate)"
                ))
            })
    }
}

fn wrong_backend(op: &str, device: &Device, want: Backend) -> Error {
    invalid(
        op,
        format!(
            "{} is a {} device; this wraps {want} streams: pass a {want} device",
            device.label(),
            device.backend()
        ),
    )
}

fn wrap(device: &Device, raw: RawStream) -> Stream {
    Stream {
        device: device.clone(),
        raw: Arc::new(raw),
        id: StreamId::next(),
    }
}
