//! `cargo xtask <command>`: project tasks (rust-analyzer style xtask).
//!
//! - `build-all`: build every kernel variant for every target; print a resource table.
//! - `verify`: run one family on one shape against the CPU reference.
//! - `bench`: time our kernels on the current device (GB/s, % of the measured copy ceiling).
//! - `device-bundle`: sm90 test/bench binaries + peer script + entry script in one folder.
//! - `wheel`: the `flydsl` Python wheel (abi3) with maturin.

mod bench;
mod bench_ctx;
mod bench_gemm;
mod bench_norm;
mod bench_softmax;
mod bench_sweep;
mod build_all;
mod bundle;
mod devsel;
mod elem;
mod timing;
mod verify;
mod verify_attn;
mod verify_gemm;
mod verify_norm;
mod verify_outcome;
mod wheel;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "flydsl-rs project tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build every kernel variant for every target and print VGPR/AGPR/SGPR, LDS, scratch,
    /// occupancy, code size and compile time. Fails on scratch or LDS over the limit.
    BuildAll(build_all::Args),
    /// Run one family on one shape against the CPU reference; PASS/FAIL.
    Verify(verify::Args),
    /// Time our kernels on the current device (events, L2 flush, medians).
    Bench(bench::Args),
    /// Build the sm90 test and bench binaries and the peer script into one folder with an
    /// entry script for the GPU machine.
    DeviceBundle(bundle::Args),
    /// Build the `flydsl` Python wheel (abi3, CPython >= 3.9) with maturin into a folder.
    Wheel(wheel::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::BuildAll(a) => build_all::run(a),
        Cmd::DeviceBundle(a) => bundle::run(a),
        Cmd::Verify(a) => verify::run(a),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Wheel(a) => wheel::run(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
