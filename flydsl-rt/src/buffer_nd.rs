//! ndarray conveniences of [`DeviceBuffer`] (cargo feature `ndarray`).

use crate::buffer::DeviceBuffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::repr::DeviceRepr;
use ndarray::{Array, ArrayView, Dimension, ShapeBuilder};

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// A buffer holding the elements of `view` in logical (row-major) order. A view in
    /// standard layout is copied directly; any other view is first gathered on the host.
    ///
    /// ```
    /// # use flydsl_rt::*;
    /// let a = ndarray::arr2(&[[1i32, 2], [3, 4]]);
    /// let b = DeviceBuffer::from_array(&Device::sim(Target::Gfx942), a.t()).unwrap();
    /// assert_eq!(b.to_vec().unwrap(), vec![1, 3, 2, 4]);
    /// ```
    pub fn from_array<D: Dimension>(device: &Device, view: ArrayView<'_, T, D>) -> Result<Self> {
        match view.as_slice() {
            Some(s) => Self::from_slice(device, s),
            None => Self::from_slice(device, &view.iter().copied().collect::<Vec<T>>()),
        }
    }

    /// Overwrite the buffer with `view`'s elements in logical order (lengths must match).
    pub fn copy_from_array<D: Dimension>(&mut self, view: ArrayView<'_, T, D>) -> Result<()> {
        match view.as_slice() {
            Some(s) => self.copy_from_slice(s),
            None => self.copy_from_slice(&view.iter().copied().collect::<Vec<T>>()),
        }
    }

    /// The contents as an array of `shape` (row-major); the shape's product must equal
    /// [`len`](Self::len).
    ///
    /// ```
    /// # use flydsl_rt::*;
    /// let b = DeviceBuffer::from_slice(&Device::sim(Target::Gfx942), &[1u8, 2, 3, 4, 5, 6]).unwrap();
    /// let a = b.to_array((2, 3)).unwrap();
    /// assert_eq!(a[[1, 0]], 4);
    /// assert!(b.to_array((4, 2)).is_err());
    /// ```
    pub fn to_array<Sh: ShapeBuilder>(&self, shape: Sh) -> Result<Array<T, Sh::Dim>> {
        let shape = shape.into_shape_with_order();
        let dims = shape.raw_dim().slice().to_vec();
        if dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(self.len()) {
            return Err(Error::ShapeMismatch {
                len: self.len(),
                shape: dims,
            });
        }
        let data = self.to_vec()?;
        Array::from_shape_vec(shape, data).map_err(|_| Error::ShapeMismatch {
            len: self.len(),
            shape: dims,
        })
    }
}
