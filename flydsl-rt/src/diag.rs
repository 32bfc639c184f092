//! Errors that no caller can receive: a failed free or stream destroy in a `Drop`. Each is
//! printed on stderr (`warning: flydsl-rt: ...`, the form the tuner's warnings use) and kept,
//! the last [`KEPT`] of them, for [`drop_errors`].

use std::sync::Mutex;

/// How many reports [`drop_errors`] keeps (the oldest go first).
pub const KEPT: usize = 64;

static REPORTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Print `msg` on stderr and keep it.
pub(crate) fn report(msg: String) {
    eprintln!("warning: flydsl-rt: {msg}");
    let mut r = REPORTS.lock().unwrap_or_else(|e| e.into_inner());
    if r.len() == KEPT {
        r.remove(0);
    }
    r.push(msg);
}

/// The errors reported from drops so far in this process (the last [`KEPT`]): frees of
/// [`DeviceBuffer`](crate::DeviceBuffer)s and [`PinnedHostBuffer`](crate::PinnedHostBuffer)s
/// and stream destroys that the driver refused. A drop cannot return an error; this is where
/// it goes (it is also printed on stderr).
///
/// ```
/// let dev = flydsl_rt::Device::sim(flydsl_rt::Target::Gfx942);
/// drop(flydsl_rt::DeviceBuffer::<f32>::zeroed(&dev, 8).unwrap());
/// assert!(flydsl_rt::diag::drop_errors().is_empty());
/// ```
pub fn drop_errors() -> Vec<String> {
    REPORTS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
