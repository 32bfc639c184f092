//! Argument checks for the public functions of kernel crates. Every error is an
//! [`Error::InvalidArgument`] naming the public function the user called, the argument, its
//! value, the rule it breaks and the fix; a device mismatch names both devices by backend,
//! ordinal, name and id. A public function runs all its checks before its first launch, so a
//! call that fails leaves every output unchanged.

use crate::{Backend, DeviceBuffer, DeviceRepr, Error, KernelVariants, Result, Stream};
use std::fmt::Display;

/// The checks of one call of the public function `op` (its full path, e.g.
/// `fly_norm::rms_norm_add`).
///
/// ```
/// use flydsl_rt::{validate::Call, Device, DeviceBuffer, Target};
/// let dev = Device::sim(Target::Gfx942);
/// let s = dev.stream().unwrap();
/// let x = DeviceBuffer::<f32>::zeroed(&dev, 6).unwrap();
/// let call = Call::new("my_crate::scale");
/// assert!(call.buffer("x", &x, &s, 6, "m * n").is_ok());
/// let e = call.buffer("x", &x, &s, 8, "m * n").unwrap_err().to_string();
/// assert!(e.starts_with("my_crate::scale: `x` has 6 elements"), "{e}");
/// let other = Device::new_sim(Target::Gfx942);
/// let y = DeviceBuffer::<f32>::zeroed(&other, 6).unwrap();
/// assert!(call.device("y", &y, &s).unwrap_err().to_string().contains("copy it to the stream's device"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call<'a> {
    op: &'a str,
}

impl<'a> Call<'a> {
    /// The checks of a call of `op`.
    pub const fn new(op: &'a str) -> Call<'a> {
        Call { op }
    }

    /// The public function's name.
    pub fn op(&self) -> &'a str {
        self.op
    }

    /// An error of this call with a free-form reason (prefer [`Call::error`]).
    pub fn fail(&self, reason: impl Into<String>) -> Error {
        Error::InvalidArgument {
            op: self.op.to_string(),
            reason: reason.into(),
        }
    }

    /// The error "`arg` = value: rule; fix".
    ///
    /// ```
    /// let e = flydsl_rt::validate::Call::new("k::f").error("n", 0, "n must be >= 1", "pass n >= 1");
    /// assert_eq!(e.to_string(), "k::f: `n` = 0: n must be >= 1; pass n >= 1");
    /// ```
    pub fn error(
        &self,
        arg: &str,
        value: impl Display,
        rule: impl Display,
        fix: impl Display,
    ) -> Error {
        self.fail(format!("`{arg}` = {value}: {rule}; {fix}"))
    }

    /// `value <= max`, else the error "`arg` = value: arg must be at most max; fix".
    ///
    /// ```
    /// let c = flydsl_rt::validate::Call::new("k::f");
    /// assert!(c.at_most("m", 4, 4, "split the rows").is_ok());
    /// assert!(c.at_most("m", 5, 4, "split the rows").unwrap_err().to_string().contains("at most 4"));
    /// ```
    pub fn at_most(&self, arg: &str, value: usize, max: usize, fix: impl Display) -> Result<()> {
        if value <= max {
            Ok(())
        } else {
            Err(self.error(arg, value, format_args!("{arg} must be at most {max}"), fix))
        }
    }

    /// `m * n`, or the error that it overflows `usize`.
    ///
    /// ```
    /// let c = flydsl_rt::validate::Call::new("k::f");
    /// assert_eq!(c.product(3, 4).unwrap(), 12);
    /// assert!(c.product(usize::MAX, 2).is_err());
    /// ```
    pub fn product(&self, m: usize, n: usize) -> Result<usize> {
        m.checked_mul(n).ok_or_else(|| {
            self.fail(format!(
                "m * n = {m} * {n} overflows usize; pass a smaller shape"
            ))
        })
    }

    /// `buf` holds exactly `want` elements (`what` says where `want` comes from, e.g.
    /// `"m * n"`).
    pub fn len<T: DeviceRepr>(
        &self,
        arg: &str,
        buf: &DeviceBuffer<T>,
        want: usize,
        what: &str,
    ) -> Result<()> {
        if buf.len() == want {
            Ok(())
        } else {
            Err(self.fail(format!(
                "`{arg}` has {} elements, but it must have {what} = {want}; pass a buffer of \
                 exactly {want} elements",
                buf.len()
            )))
        }
    }

    /// `buf` lives on the stream's device.
    pub fn device<T: DeviceRepr>(
        &self,
        arg: &str,
        buf: &DeviceBuffer<T>,
        stream: &Stream,
    ) -> Result<()> {
        let (have, want) = (buf.device(), stream.device());
        if have == want {
            Ok(())
        } else {
            Err(self.fail(format!(
                "`{arg}` lives on {}, but the stream is on {}; every buffer must be on the \
                 stream's device: copy it to the stream's device first",
                have.label(),
                want.label()
            )))
        }
    }

    /// [`Call::device`] and [`Call::len`].
    pub fn buffer<T: DeviceRepr>(
        &self,
        arg: &str,
        buf: &DeviceBuffer<T>,
        stream: &Stream,
        want: usize,
        what: &str,
    ) -> Result<()> {
        self.device(arg, buf, stream)?;
        self.len(arg, buf, want, what)
    }

    /// `buf` starts at a multiple of `bytes` (a kernel's vector width), else the error
    /// naming `arg`, its address offset and the element multiple that fixes it.
    ///
    /// ```
    /// use flydsl_rt::{half, validate::Call, Device, DeviceBuffer, Target};
    /// let dev = Device::sim(Target::Sm90);
    /// let b = DeviceBuffer::<half::bf16>::zeroed(&dev, 16).unwrap();
    /// let c = Call::new("k::f");
    /// assert!(c.aligned("x", &b, 16).is_ok());
    /// let e = c.aligned("x", &b.slice(1..9).unwrap(), 16).unwrap_err().to_string();
    /// assert!(e.contains("`x`") && e.contains("multiple of 8 elements"), "{e}");
    /// ```
    pub fn aligned<T: DeviceRepr>(
        &self,
        arg: &str,
        buf: &DeviceBuffer<T>,
        bytes: u64,
    ) -> Result<()> {
        let off = buf.as_device_ptr() % bytes.max(1);
        if off == 0 {
            return Ok(());
        }
        let elems = (bytes / std::mem::size_of::<T>().max(1) as u64).max(1);
        Err(self.error(
            arg,
            format_args!("a buffer {off} bytes past a {bytes}-byte boundary"),
            format_args!("the kernels access it in {bytes}-byte vectors"),
            format_args!(
                "pass a buffer (or slice) that starts at a multiple of {elems} elements of an \
                 allocation"
            ),
        ))
    }

    /// The stream's device can run `kernel` (its IR on the Sim; its code object on a GPU), else
    /// the runtime's [`Error::MissingVariant`], naming the cargo feature to enable.
    ///
    /// ```
    /// use flydsl_rt::{validate::Call, Device, KernelVariants, Target};
    /// static NONE: KernelVariants = KernelVariants { name: "k", crate_name: "doc", variants: &[] };
    /// let s = Device::sim(Target::Sm90).stream().unwrap();
    /// assert!(Call::new("doc::f").kernel(&s, &NONE).is_err());
    /// ```
    pub fn kernel(&self, stream: &Stream, kernel: &'static KernelVariants) -> Result<()> {
        let dev = stream.device();
        let runs = kernel
            .for_target(dev.target())
            .is_some_and(|v| dev.backend() == Backend::Sim || v.code.is_some());
        if runs {
            Ok(())
        } else {
            Err(Error::MissingVariant {
                kernel: kernel.name.to_string(),
                crate_name: kernel.crate_name.to_string(),
                target: dev.target(),
                built: kernel.built_targets().collect(),
            })
        }
    }
}
