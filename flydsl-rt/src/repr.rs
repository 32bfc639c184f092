//! Element types that can live in device memory, including the fp8 storage newtypes.

use flydsl_ir::ScalarType;

/// An element type of [`DeviceBuffer`](crate::DeviceBuffer)s and a by-value kernel argument.
///
/// # Safety
///
/// Implementors must be plain old data: `size_of::<Self>() == Self::SCALAR.size_bytes()`, no
/// padding, no pointers or references, and every bit pattern of that size is a valid value (the
/// runtime copies raw device bytes into values of this type).
///
/// ```
/// use flydsl_rt::{DeviceRepr, F8E4M3FNUZ};
/// use flydsl_ir::ScalarType;
/// assert_eq!(<half::bf16 as DeviceRepr>::SCALAR, ScalarType::BF16);
/// assert_eq!(F8E4M3FNUZ::SCALAR, ScalarType::F8E4M3FNUZ);
/// ```
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {
    /// The IR scalar type stored (signedness is not part of IR types: `u32` maps to `I32`).
    const SCALAR: ScalarType;
}

macro_rules! device_repr {
    ($($t:ty => $s:ident),* $(,)?) => {$(
        // SAFETY: a primitive numeric type: no padding, every bit pattern valid, and its size
        // equals the IR scalar's storage size.
        unsafe impl DeviceRepr for $t {
            const SCALAR: ScalarType = ScalarType::$s;
        }
    )*};
}

device_repr! {
    f32 => F32,
    half::f16 => F16,
    half::bf16 => BF16,
    i8 => I8,
    u8 => I8,
    i32 => I32,
    u32 => I32,
    i64 => I64,
    u64 => I64,
}

macro_rules! fp8 {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name(pub u8);

        impl $name {
            /// The value with the given bit pattern.
            pub const fn from_bits(bits: u8) -> Self {
                $name(bits)
            }
            /// The bit pattern.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
        }

        // SAFETY: `repr(transparent)` over `u8`: one byte, every bit pattern valid.
        unsafe impl DeviceRepr for $name {
            const SCALAR: ScalarType = ScalarType::$name;
        }
    )*};
}

fp8! {
    /// OCP fp8 E4M3FN (bias 7, max 448, no infinities), stored as its bit pattern.
    ///
    /// ```
    /// use flydsl_rt::F8E4M3FN;
    /// assert_eq!(F8E4M3FN::from_bits(0x38).to_bits(), 0x38); // 1.0
    /// ```
    F8E4M3FN,
    /// AMD gfx942 fp8 E4M3FNUZ (bias 8, max 240, 0x80 is NaN), stored as its bit pattern.
    ///
    /// ```
    /// use flydsl_rt::F8E4M3FNUZ;
    /// assert_eq!(F8E4M3FNUZ(0x40).0, 0x40); // 1.0
    /// ```
    F8E4M3FNUZ,
    /// OCP fp8 E5M2 (bias 15, with infinities), stored as its bit pattern.
    ///
    /// ```
    /// use flydsl_rt::F8E5M2;
    /// assert_eq!(F8E5M2(0x3c).to_bits(), 0x3c); // 1.0
    /// ```
    F8E5M2,
    /// AMD gfx942 bf8 E5M2FNUZ (bias 16, 0x80 is NaN), stored as its bit pattern.
    ///
    /// ```
    /// use flydsl_rt::F8E5M2FNUZ;
    /// assert_eq!(F8E5M2FNUZ::default().to_bits(), 0);
    /// ```
    F8E5M2FNUZ,
}

/// The bytes of a slice of device-representable values.
pub(crate) fn as_bytes<T: DeviceRepr>(s: &[T]) -> &[u8] {
    // SAFETY: `T: DeviceRepr` is plain old data without padding, so its memory is `size_of_val`
    // initialised bytes; the returned slice borrows `s`.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of device-representable values.
pub(crate) fn as_bytes_mut<T: DeviceRepr>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; in addition every bit pattern is a valid `T`, so any bytes
    // written through the returned slice leave valid values behind.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: DeviceRepr>() {
        assert_eq!(std::mem::size_of::<T>() as u32, T::SCALAR.size_bytes());
    }

    #[test]
    fn sizes_match_ir_types() {
        check::<f32>();
        check::<half::f16>();
        check::<half::bf16>();
        check::<i8>();
        check::<u8>();
        check::<i32>();
        check::<u32>();
        check::<i64>();
        check::<u64>();
        check::<F8E4M3FN>();
        check::<F8E4M3FNUZ>();
        check::<F8E5M2>();
        check::<F8E5M2FNUZ>();
    }

    #[test]
    fn byte_views() {
        let mut v = [1.0f32, -2.0];
        assert_eq!(as_bytes(&v), &[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
        as_bytes_mut(&mut v)[3] = 0x40;
        assert_eq!(v[0], 4.0);
    }
}
