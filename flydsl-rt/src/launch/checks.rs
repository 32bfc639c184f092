//! The checks [`Stream::launch`](crate::Stream::launch) runs before every launch: the
//! embedded IR belongs to the variant, the geometry fits the kernel and the hardware, the
//! arguments match the kernarg layout and live on the stream's device, the LDS fits.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::args::KernelArgs;
use crate::launch::config::LaunchConfig;
use crate::launch::decode::Decoded;
use crate::variant::KernelVariants;
use flydsl_ir::Target;

/// Check a launch of `kernel` (decoded as `d`) on `device` with `cfg` and `args`.
pub(crate) fn check(
    device: &Device,
    kernel: &KernelVariants,
    d: &Decoded,
    cfg: &LaunchConfig,
    args: &KernelArgs,
) -> Result<()> {
    let target = device.target();
    if d.kernel.target != target || d.kernel.name != kernel.name {
        return Err(Error::BadVariant {
            kernel: kernel.name.to_string(),
            reason: format!(
                "the {target} variant embeds IR of kernel `{}` for {}",
                d.kernel.name, d.kernel.target
            ),
        });
    }
    let invalid = |reason: String| Error::InvalidLaunch {
        kernel: kernel.name.to_string(),
        grid: cfg.grid,
        block: cfg.block,
        reason,
    };
    let threads = cfg.threads_per_block();
    let max = u64::from(d.kernel.attrs.max_threads.min(1024));
    if threads == 0 || threads > max {
        return Err(invalid(format!(
            "{threads} threads per workgroup; this kernel allows 1..={max} (its max_threads \
             attribute, at most 1024)"
        )));
    }
    if let Some(reason) = grid_limit(target, cfg) {
        return Err(invalid(reason));
    }
    args.check(&d.layout).map_err(|reason| Error::KernelArgs {
        kernel: kernel.name.to_string(),
        reason,
    })?;
    if let Some((offset, other)) = args.foreign_tensor(device) {
        // `check` passed: every pushed offset is the start of a slot.
        let argument = d
            .layout
            .slots
            .iter()
            .find(|s| s.offset as usize == offset)
            .map_or_else(|| format!("at offset {offset}"), |s| s.name.clone());
        return Err(Error::WrongDevice {
            kernel: kernel.name.to_string(),
            argument,
            buffer_device: other.label(),
            stream_device: device.label(),
        });
    }
    let lds_bytes = match &d.kernel.dynamic_lds {
        Some(_) => u64::from(d.kernel.dynamic_lds_offset()) + u64::from(cfg.dynamic_lds_bytes),
        None if cfg.dynamic_lds_bytes > 0 => {
            return Err(invalid(format!(
                "dynamic_lds_bytes is {} but the kernel declares no dynamic LDS region; \
                 launch it with 0",
                cfg.dynamic_lds_bytes
            )))
        }
        None => d.lds_bytes,
    };
    if lds_bytes > device.max_lds_bytes() {
        return Err(Error::LdsTooLarge {
            kernel: kernel.name.to_string(),
            bytes: lds_bytes,
            dynamic: cfg.dynamic_lds_bytes,
            limit: device.max_lds_bytes(),
        });
    }
    Ok(())
}

/// The hardware's grid limits: AMD counts grid size in threads (at most 2^32 - 1 per
/// dimension); NVIDIA allows 2^31 - 1 blocks in x and 65535 in y and z.
fn grid_limit(target: Target, cfg: &LaunchConfig) -> Option<String> {
    if target.is_amd() {
        (0..3).find_map(|i| {
            let threads = u64::from(cfg.grid[i]) * u64::from(cfg.block[i]);
            (threads > u64::from(u32::MAX)).then(|| {
                format!(
                    "dimension {i} has {threads} threads in total; AMD GPUs allow at most \
                     {} per dimension",
                    u32::MAX
                )
            })
        })
    } else {
        let max = [i32::MAX as u32, 65535, 65535];
        (0..3).find_map(|i| {
            (cfg.grid[i] > max[i]).then(|| {
                format!(
                    "grid dimension {i} is {}; NVIDIA GPUs allow at most {}",
                    cfg.grid[i], max[i]
                )
            })
        })
    }
}
