//! The one error type of the runtime.

use crate::types::{Backend, DeviceLabel};
use flydsl_ir::Target;

/// Result alias used throughout the runtime.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the runtime. Each message names the offending value and says
/// how to fix it.
///
/// ```
/// use flydsl_rt::{Backend, Error};
/// let e = Error::BackendUnavailable { backend: Backend::Hip, reason: "no libamdhip64".into() };
/// assert!(e.to_string().contains("FLYDSL_BACKEND"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The backend's driver library could not be loaded or initialised.
    #[error(
        "the {backend} backend is unavailable: {reason}; install its driver or pick another \
         backend with FLYDSL_BACKEND=hip|cuda|sim"
    )]
    BackendUnavailable {
        /// The backend.
        backend: Backend,
        /// Why (library path tried, driver error, ...).
        reason: String,
    },
    /// `FLYDSL_BACKEND` holds a value that is not a backend name.
    #[error("FLYDSL_BACKEND=`{0}` is not a backend: use `hip`, `cuda` or `sim` (or unset it)")]
    UnknownBackend(String),
    /// `FLYDSL_SIM_TARGET` (or a requested Sim target) is not a flydsl target.
    #[error(
        "FLYDSL_SIM_TARGET=`{0}` is not a flydsl target: use gfx942, gfx950, gfx1201, gfx1250 \
         or sm90 (or unset it for gfx942)"
    )]
    UnknownSimTarget(String),
    /// A device ordinal past the number of devices of a backend.
    #[error("{backend} device {ordinal} does not exist: the backend has {count} device(s)")]
    NoSuchDevice {
        /// The backend.
        backend: Backend,
        /// The requested ordinal.
        ordinal: usize,
        /// How many devices exist.
        count: usize,
    },
    /// The GPU is present but not one flydsl builds code for.
    #[error("{backend} device {ordinal} (`{name}`) is not supported: {reason}")]
    UnsupportedDevice {
        /// The backend.
        backend: Backend,
        /// Device ordinal.
        ordinal: usize,
        /// Device name as the driver reports it.
        name: String,
        /// What is unsupported and what to do.
        reason: String,
    },
    /// A driver call failed.
    #[error("{backend} call {call} failed with error {code} ({message})")]
    Driver {
        /// The backend.
        backend: Backend,
        /// The driver function.
        call: &'static str,
        /// The driver's numeric error code.
        code: i64,
        /// The driver's description of the code.
        message: String,
    },
    /// The kernel was not built for the device's target.
    #[error(
        "kernel `{kernel}` has no code object for {target}: this build has [{}]; enable it with \
         `{crate_name} = {{ features = [\"{}\"] }}` in Cargo.toml (or FLYDSL_TARGETS={})",
        built.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
        target.feature(),
        target.name()
    )]
    MissingVariant {
        /// Kernel name.
        kernel: String,
        /// The kernel crate.
        crate_name: String,
        /// The device's target.
        target: Target,
        /// Targets whose code object is present.
        built: Vec<Target>,
    },
    /// The embedded IR does not decode or does not belong to the variant it is embedded in.
    #[error("kernel `{kernel}`: {reason}; rebuild the kernel crate with the same flydsl version")]
    BadVariant {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// The launch geometry is invalid for the kernel or the device.
    #[error(
        "kernel `{kernel}`: invalid launch configuration grid={grid:?} block={block:?}: {reason}"
    )]
    InvalidLaunch {
        /// Kernel name.
        kernel: String,
        /// The grid.
        grid: [u32; 3],
        /// The block.
        block: [u32; 3],
        /// What is wrong and the allowed range.
        reason: String,
    },
    /// An argument of a library call is invalid (a shape, a length, a parameter value).
    #[error("{op}: {reason}")]
    InvalidArgument {
        /// The call (e.g. `fly_norm::rms_norm`).
        op: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The packed kernel arguments do not match the kernel's kernarg layout.
    #[error("kernel `{kernel}`: kernel arguments do not match its signature: {reason}")]
    KernelArgs {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A buffer passed to a launch lives on another device than the stream.
    ///
    /// ```
    /// use flydsl_rt::{Device, Error, Target};
    /// let (a, b) = (Device::new_sim(Target::Gfx942), Device::new_sim(Target::Gfx942));
    /// let e = Error::WrongDevice {
    ///     kernel: "vadd".into(),
    ///     argument: "x".into(),
    ///     buffer_device: a.label(),
    ///     stream_device: b.label(),
    /// };
    /// let msg = e.to_string();
    /// assert!(msg.contains("argument `x`") && msg.contains(&a.id().to_string()), "{msg}");
    /// ```
    #[error(
        "kernel `{kernel}`: argument `{argument}` is a buffer on {buffer_device} but the stream \
         is on {stream_device}; copy the buffer to the stream's device first (or launch on a \
         stream of the buffer's device)"
    )]
    WrongDevice {
        /// Kernel name.
        kernel: String,
        /// The kernel parameter the buffer was passed as.
        argument: String,
        /// The buffer's device.
        buffer_device: DeviceLabel,
        /// The stream's device.
        stream_device: DeviceLabel,
    },
    /// The kernel needs more LDS / shared memory than the device offers.
    #[error(
        "kernel `{kernel}` needs {bytes} bytes of LDS/shared memory ({dynamic} of them \
         dynamic, from LaunchConfig::dynamic_lds_bytes) but the device allows {limit} per \
         workgroup; use a smaller tile configuration or fewer dynamic bytes"
    )]
    LdsTooLarge {
        /// Kernel name.
        kernel: String,
        /// Requested bytes (static and dynamic).
        bytes: u64,
        /// The launch's dynamic bytes among them.
        dynamic: u32,
        /// Device limit.
        limit: u64,
    },
    /// The code object's own kernel metadata disagrees with the kernel IR's argument layout.
    #[error(
        "kernel `{kernel}` ({target}): the code object's kernarg metadata disagrees with the \
         IR: {reason}; the code object and the launcher come from different builds, rebuild"
    )]
    CodeObjectMismatch {
        /// Kernel name.
        kernel: String,
        /// The target.
        target: Target,
        /// What differs.
        reason: String,
    },
    /// A size computation overflowed (`len` elements of `elem_bytes` each).
    #[error("a buffer of {len} elements of {elem_bytes} bytes overflows the address space")]
    SizeOverflow {
        /// Element count.
        len: u64,
        /// Element size.
        elem_bytes: u64,
    },
    /// Host and device lengths differ in a copy.
    #[error("copy length mismatch: the device buffer has {device} elements, the host side {host}; pass a slice of exactly {device} elements")]
    LengthMismatch {
        /// Device buffer length.
        device: usize,
        /// Host length.
        host: usize,
    },
    /// An array shape does not match the buffer.
    #[error("cannot view {len} elements as shape {shape:?}: the shape's product must equal the buffer length")]
    ShapeMismatch {
        /// Buffer length.
        len: usize,
        /// Requested shape.
        shape: Vec<usize>,
    },
    /// An event was used before it was recorded.
    #[error("event was never recorded: call `event.record(&stream)` before `{0}`")]
    EventNotRecorded(&'static str),
    /// Two handles of different devices were combined (events of two devices, ...).
    #[error("{what} belong to different devices ({a} and {b}); use handles of one device")]
    DeviceMismatch {
        /// The call and what was combined (`Event::record: the event and the stream`).
        what: &'static str,
        /// One device.
        a: DeviceLabel,
        /// The other.
        b: DeviceLabel,
    },
    /// The simulator reported a failure (out-of-bounds access, LDS race, ...).
    #[cfg(feature = "sim")]
    #[error("kernel `{kernel}` failed in the simulator: {source}")]
    Sim {
        /// Kernel name (empty for memory operations).
        kernel: String,
        /// The simulator's report (boxed: it carries a detailed trace).
        #[source]
        source: Box<flydsl_sim::SimError>,
    },
}

impl Error {
    /// A Sim failure outside of a kernel (allocation, copy).
    #[cfg(feature = "sim")]
    pub(crate) fn sim_mem(source: flydsl_sim::SimError) -> Error {
        Error::Sim {
            kernel: String::from("<memory operation>"),
            source: Box::new(source),
        }
    }
}
