//! Picking the device a command runs on.

use flydsl_rt::{Backend, Device, Target};

/// `--backend` / `--target` as given on the command line.
#[derive(clap::Args, Clone, Debug)]
pub struct DeviceArgs {
    /// Backend: `sim`, `cuda`, `hip`, or `best` (HIP, then CUDA, then Sim).
    #[arg(long, default_value = "best")]
    pub backend: String,
    /// Target the Sim emulates (with `--backend sim`).
    #[arg(long, default_value = "gfx942")]
    pub target: String,
}

/// The device the arguments name.
pub fn pick(a: &DeviceArgs) -> Result<Device, String> {
    if a.backend == "best" {
        return Device::best().map_err(|e| e.to_string());
    }
    let b: Backend = a
        .backend
        .parse()
        .map_err(|e: flydsl_rt::Error| e.to_string())?;
    match b {
        Backend::Sim => {
            let t: Target = a
                .target
                .parse()
                .map_err(|e: flydsl_ir::target::UnknownTarget| e.to_string())?;
            Ok(Device::new_sim(t))
        }
        _ => Device::new(b, 0).map_err(|e| e.to_string()),
    }
}
