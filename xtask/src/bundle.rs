//! `cargo xtask device-bundle` (filled in below).

use std::process::ExitCode;

/// Arguments of `device-bundle`.
#[derive(clap::Args)]
pub struct Args {
    /// Output folder.
    #[arg(long, default_value = ".device")]
    out: std::path::PathBuf,
}

pub fn run(a: Args) -> Result<ExitCode, String> {
    Err(format!("device-bundle into {} is not implemented yet", a.out.display()))
}
