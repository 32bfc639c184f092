//! The launch contract used by generated launchers: [`LaunchConfig`], [`KernelArgs`], and the
//! launch itself, which [`Stream::launch`](crate::Stream::launch) runs.
//!
//! One job per module: `config` (geometry), `args` (the packed argument buffer), `decode`
//! (the per-process IR decode cache), `lookup` (which variant runs on a device), `checks`
//! (the validation before every launch).

pub(crate) mod args;
pub(crate) mod checks;
pub(crate) mod config;
pub(crate) mod decode;
pub(crate) mod lookup;

pub use args::KernelArgs;
pub use config::LaunchConfig;

use crate::backend::RawStream;
use crate::device::Device;
use crate::error::Result;
use crate::types::StreamId;
use crate::variant::KernelVariants;
use std::sync::Arc;

/// Validate and launch (the body of [`Stream::launch`](crate::Stream::launch)).
///
/// # Safety
/// See `Stream::launch`.
pub(crate) unsafe fn launch(
    device: &Device,
    raw_stream: &Arc<RawStream>,
    stream_id: StreamId,
    kernel: &'static KernelVariants,
    cfg: LaunchConfig,
    args: &KernelArgs,
) -> Result<()> {
    let (variant, code) = lookup::variant_for(device, kernel)?;
    let d = decode::decoded(kernel, variant.ir)?;
    checks::check(device, kernel, d, &cfg, args)?;
    if cfg.is_empty() {
        return Ok(());
    }
    let f = device.module(lookup::module_key(variant), code, d)?;
    // Order the launch after earlier work on its buffers, on any stream (`residency.rs`).
    for r in args.residencies() {
        r.acquire(&device.inner.raw, stream_id, raw_stream)?;
    }
    // SAFETY: the stream and function belong to `device`, the argument buffer matches the
    // layout (checked above) and holds pointers of live buffers of this device; in-bounds
    // accesses are the caller's obligation.
    unsafe {
        device
            .inner
            .raw
            .launch(raw_stream, &f, d, &cfg, args.bytes())
    }?;
    for r in args.residencies() {
        r.release(&device.inner.raw, stream_id, raw_stream)?;
    }
    Ok(())
}
