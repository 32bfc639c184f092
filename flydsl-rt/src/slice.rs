//! Read-only views of a sub-range of a buffer: [`DeviceSlice`].

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::repr::DeviceRepr;
use std::marker::PhantomData;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// Elements `range` of a [`DeviceBuffer`], usable wherever a `&DeviceBuffer<T>` is (kernel
/// inputs, copies out, `to_vec`) without copying: a block of rows of a larger tensor, say.
///
/// The slice borrows its buffer, so the buffer can be neither written nor dropped while it
/// lives. Its uses are stream-ordered like the buffer's own: a launch or enqueued copy that
/// reads the slice also moves the buffer's owner stream, so the buffer's free waits for it.
///
/// Read-only by design: a writable slice cannot hand out `&mut DeviceBuffer<T>` (that could be
/// `std::mem::swap`ped with another buffer, moving memory the slice borrows out of its
/// lifetime), so writing a sub-range needs kernel APIs that take a slice type; until then,
/// wrap the rows with [`DeviceBuffer::from_raw_parts`] under its safety contract.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target};
/// let dev = Device::sim(Target::Gfx942);
/// let m = DeviceBuffer::from_slice(&dev, &[0i32, 1, 2, 3, 4, 5]).unwrap();
/// let rows = m.slice(2..5).unwrap();
/// assert_eq!(rows.len(), 3);
/// assert_eq!(rows.to_vec().unwrap(), vec![2, 3, 4]);
/// assert_eq!(rows.as_device_ptr(), m.as_device_ptr() + 8);
/// assert!(m.slice(4..7).is_err());
/// ```
#[derive(Debug)]
pub struct DeviceSlice<'a, T: DeviceRepr> {
    view: DeviceBuffer<T>,
    _buf: PhantomData<&'a DeviceBuffer<T>>,
}

impl<T: DeviceRepr> Deref for DeviceSlice<'_, T> {
    type Target = DeviceBuffer<T>;
    fn deref(&self) -> &DeviceBuffer<T> {
        &self.view
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// A read-only view of elements `range` (see [`DeviceSlice`]). An empty range gives an
    /// empty slice; a range past [`len`](Self::len) or reversed is an error naming it.
    pub fn slice(&self, range: Range<usize>) -> Result<DeviceSlice<'_, T>> {
        if range.start > range.end || range.end > self.len() {
            return Err(Error::InvalidArgument {
                op: "DeviceBuffer::slice".into(),
                reason: format!(
                    "range {}..{} is not inside the buffer's {} elements; pass start <= end <= {}",
                    range.start,
                    range.end,
                    self.len(),
                    self.len()
                ),
            });
        }
        let len = range.end - range.start;
        let ptr = if len == 0 {
            0
        } else {
            self.as_device_ptr() + (range.start as u64) * std::mem::size_of::<T>() as u64
        };
        // SAFETY: `[ptr, ptr + len)` lies inside this live buffer, which the returned slice
        // borrows (so it outlives the view and is not written meanwhile); the view never
        // frees, and its uses acquire this buffer's owner record (linked).
        let view = unsafe {
            DeviceBuffer::linked_range(self, ptr, len, vec![Arc::clone(self.residency())])
        };
        Ok(DeviceSlice {
            view,
            _buf: PhantomData,
        })
    }
}
