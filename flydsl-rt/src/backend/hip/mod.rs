//! The HIP backend (AMD GPUs): `libamdhip64` loaded at run time.
//!
//! Layers: [`sys`] (raw entry points), [`result`] (one `Result` wrapper per call, with its own
//! error type), and the handle types here, which own their HIP objects, release them on drop
//! and turn [`result::HipError`] into [`Error::Driver`].
//!
//! Every call that depends on the current device runs after `hipSetDevice(ordinal)` on the
//! calling thread, so handles can move between threads freely.

mod mem;
pub(crate) mod result;
pub(crate) mod sys;

use crate::error::{Error, Result};
use crate::launch::config::LaunchConfig;
use crate::launch::decode::Decoded;
use crate::types::{Backend, DeviceInfo};
use flydsl_ir::Target;
use result::HipError;
use std::ffi::{c_int, CString};
use sys::HipLib;

impl From<HipError> for Error {
    fn from(e: HipError) -> Error {
        Error::Driver {
            backend: Backend::Hip,
            call: e.call,
            code: e.code.into(),
            message: e.message,
        }
    }
}

/// One HIP device.
#[derive(Debug)]
pub(crate) struct HipDevice {
    lib: &'static HipLib,
    ordinal: c_int,
}

/// Load the library and list its devices with their properties. Devices whose architecture is
/// not a flydsl target are returned as errors in place.
pub(crate) fn enumerate() -> Result<Vec<Result<(HipDevice, DeviceInfo)>>> {
    let unavailable = |reason: String| Error::BackendUnavailable {
        backend: Backend::Hip,
        reason,
    };
    let lib = sys::load().map_err(unavailable)?;
    result::init(lib).map_err(|e| unavailable(format!("hipInit failed: {e}")))?;
    let count = result::device_count(lib).map_err(|e| unavailable(e.to_string()))?;
    Ok((0..count).map(|i| probe(lib, i)).collect())
}

fn probe(lib: &'static HipLib, ordinal: usize) -> Result<(HipDevice, DeviceInfo)> {
    let o = ordinal as c_int;
    let name = result::device_name(lib, o)?;
    let arch = result::arch_name(lib, o)?;
    let base = arch.split(':').next().unwrap_or("");
    let target = match base.parse::<Target>() {
        Ok(t) if t.is_amd() && base.starts_with("gfx") => t,
        _ => {
            return Err(Error::UnsupportedDevice {
                backend: Backend::Hip,
                ordinal,
                name,
                reason: format!(
                    "architecture `{arch}` is not a flydsl target (gfx942, gfx950, gfx1201, \
                     gfx1250); use another GPU or FLYDSL_BACKEND=sim"
                ),
            })
        }
    };
    let attr = |a| result::attribute(lib, a, o);
    let info = DeviceInfo {
        name: name.into(),
        arch,
        target,
        wave_size: attr(sys::ATTR_WARP_SIZE)?.max(1) as u32,
        max_lds_bytes: attr(sys::ATTR_MAX_SHARED_MEMORY_PER_BLOCK)?.max(0) as u64,
        compute_units: attr(sys::ATTR_MULTIPROCESSOR_COUNT)?.max(0) as u32,
    };
    Ok((HipDevice { lib, ordinal: o }, info))
}

impl HipDevice {
    fn current(&self) -> Result<&'static HipLib> {
        result::set_device(self.lib, self.ordinal)?;
        Ok(self.lib)
    }

    /// # Safety
    /// The device range must lie inside a live allocation of this device.
    pub(crate) unsafe fn htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        let lib = self.current()?;
        // SAFETY: guaranteed by the caller.
        Ok(unsafe { result::memcpy_htod(lib, dst, src) }?)
    }

    /// # Safety
    /// The device range must lie inside a live allocation of this device.
    pub(crate) unsafe fn dtoh(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        let lib = self.current()?;
        // SAFETY: guaranteed by the caller.
        Ok(unsafe { result::memcpy_dtoh(lib, dst, src) }?)
    }

    /// # Safety
    /// The device range must lie inside a live allocation of this device.
    pub(crate) unsafe fn memset_zero(&self, dst: u64, bytes: u64) -> Result<()> {
        let lib = self.current()?;
        let bytes = usize::try_from(bytes).map_err(|_| Error::SizeOverflow {
            len: bytes,
            elem_bytes: 1,
        })?;
        // SAFETY: guaranteed by the caller.
        Ok(unsafe { result::memset_d8(lib, dst, 0, bytes) }?)
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        Ok(result::device_synchronize(self.current()?)?)
    }

    pub(crate) fn stream(&self) -> Result<HipStream> {
        let lib = self.current()?;
        Ok(HipStream {
            lib,
            raw: result::stream_create(lib)?,
            owned: true,
            blocking: true,
        })
    }

    pub(crate) fn event(&self) -> Result<HipEvent> {
        let lib = self.current()?;
        Ok(HipEvent {
            lib,
            raw: result::event_create(lib)?,
        })
    }

    /// Load `code` (an HSACO) after checking its metadata against the IR's kernarg layout.
    pub(crate) fn load(&self, code: &[u8], decoded: &Decoded) -> Result<HipFunction> {
        let kernel = &decoded.kernel;
        let mismatch = |reason: String| Error::CodeObjectMismatch {
            kernel: kernel.name.clone(),
            target: kernel.target,
            reason,
        };
        let co = flydsl_ir::codeobj::parse_hsaco(code).map_err(|e| mismatch(e.to_string()))?;
        let meta = co.kernel(&kernel.name).ok_or_else(|| {
            let names: Vec<&str> = co.kernels.iter().map(|k| k.name.as_str()).collect();
            mismatch(format!(
                "no kernel named `{}` in the code object (it has {names:?})",
                kernel.name
            ))
        })?;
        flydsl_ir::codeobj::check_kernarg_layout(meta, &decoded.layout).map_err(mismatch)?;
        let lib = self.current()?;
        let cname = CString::new(kernel.name.as_str()).map_err(|_| Error::BadVariant {
            kernel: kernel.name.clone(),
            reason: "kernel symbol contains a NUL byte".into(),
        })?;
        let module = result::module_load_data(lib, code)?;
        // SAFETY: `module` was just loaded by this library.
        match unsafe { result::module_get_function(lib, module, &cname) } {
            Ok(function) => Ok(HipFunction {
                lib,
                module,
                function,
            }),
            Err(e) => {
                // SAFETY: `module` is live and no function of it escapes.
                let _ = unsafe { result::module_unload(lib, module) };
                Err(e.into())
            }
        }
    }

    /// # Safety
    /// `stream` and `f` must belong to this device; `args` must match the kernel and every
    /// access the kernel makes through them must stay in bounds.
    pub(crate) unsafe fn launch(
        &self,
        stream: &HipStream,
        f: &HipFunction,
        _decoded: &Decoded,
        cfg: &LaunchConfig,
        args: &[u8],
    ) -> Result<()> {
        let lib = self.current()?;
        // SAFETY: guaranteed by the caller; both handles are live while borrowed.
        unsafe {
            result::module_launch_kernel(
                lib,
                f.function,
                cfg.grid,
                cfg.block,
                cfg.dynamic_lds_bytes,
                stream.raw,
                args,
            )
        }
        .map_err(Error::from)
    }
}

/// A HIP stream (created with default flags: it synchronises with the null stream, so the
/// blocking `hipMemcpy*` copies are ordered after kernels already enqueued).
#[derive(Debug)]
pub(crate) struct HipStream {
    lib: &'static HipLib,
    pub(crate) raw: sys::hipStream_t,
    /// Created here (destroyed on drop) or borrowed from other code (never destroyed).
    owned: bool,
    /// Known not to be non-blocking: the null stream and this one order each other by HIP's
    /// default-stream semantics (streams of other code are assumed non-blocking).
    blocking: bool,
}

// SAFETY: a hipStream_t is an opaque handle that HIP allows to be used from any thread; the
// HIP runtime serialises operations on it internally.
unsafe impl Send for HipStream {}
// SAFETY: as above, HIP's stream API is thread-safe.
unsafe impl Sync for HipStream {}

impl HipStream {
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is live for as long as `self`.
        Ok(unsafe { result::stream_synchronize(self.lib, self.raw) }?)
    }
}

impl Drop for HipStream {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: `raw` is live and dropped exactly once.
            if let Err(e) = unsafe { result::stream_destroy(self.lib, self.raw) } {
                crate::diag::report(e.to_string());
            }
        }
    }
}

/// A HIP event (timing enabled).
#[derive(Debug)]
pub(crate) struct HipEvent {
    lib: &'static HipLib,
    raw: sys::hipEvent_t,
}

// SAFETY: opaque handle, HIP's event API is thread-safe.
unsafe impl Send for HipEvent {}
// SAFETY: as above.
unsafe impl Sync for HipEvent {}

impl HipEvent {
    pub(crate) fn record(&self, stream: &HipStream) -> Result<()> {
        // SAFETY: both handles are live while borrowed.
        Ok(unsafe { result::event_record(self.lib, self.raw, stream.raw) }?)
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is live.
        Ok(unsafe { result::event_synchronize(self.lib, self.raw) }?)
    }

    pub(crate) fn elapsed_ms(&self, end: &HipEvent) -> Result<f32> {
        // SAFETY: both handles are live while borrowed.
        Ok(unsafe { result::event_elapsed(self.lib, self.raw, end.raw) }?)
    }
}

impl Drop for HipEvent {
    fn drop(&mut self) {
        // SAFETY: `raw` is live and dropped exactly once.
        let _ = unsafe { result::event_destroy(self.lib, self.raw) };
    }
}

/// A loaded module and the kernel function in it.
#[derive(Debug)]
pub(crate) struct HipFunction {
    lib: &'static HipLib,
    module: sys::hipModule_t,
    function: sys::hipFunction_t,
}

// SAFETY: module and function handles are immutable after loading and usable from any thread.
unsafe impl Send for HipFunction {}
// SAFETY: as above.
unsafe impl Sync for HipFunction {}

impl Drop for HipFunction {
    fn drop(&mut self) {
        // SAFETY: `module` is live and dropped exactly once; `function` dies with it.
        let _ = unsafe { result::module_unload(self.lib, self.module) };
    }
}
