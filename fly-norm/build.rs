//! Builds fly-norm's kernels (every family of `kernels/config.rs` on every path) for the
//! selected GPU targets and embeds them with their launch glue and typed dispatch tables
//! (`flydsl_kernels.rs`, which `src/kernels.rs` includes).

#[path = "kernels/bwd.rs"]
mod bwd;
#[path = "kernels/colsum.rs"]
mod colsum;
#[path = "kernels/common.rs"]
mod common;
#[path = "kernels/config.rs"]
mod config;
#[path = "kernels/fwd.rs"]
mod fwd;
#[path = "kernels/ragged.rs"]
mod ragged;

use config::{families, reduce_name, Family, Kind, Norm, Path};
use flydsl_build::glue::DispatchTable;
/// The one dtype enum of the workspace (`config.rs` imports it from the crate root).
pub use flydsl_build::ir::DType;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=kernels");
    let mut b = flydsl_build::Builder::from_env();
    // Typed launcher tables (see `src/kernels.rs`): per (activation, weight) dtype pair, the
    // (norm, path) -> launcher entries of each kind; per weight dtype, the column sum.
    let mut tables = [
        DispatchTable::new("FORWARD", "ForwardLaunchers"),
        DispatchTable::new("FORWARD_QUANT", "ForwardQuantLaunchers"),
        DispatchTable::new("BACKWARD", "BackwardLaunchers"),
    ];
    for fam in families() {
        let t = match fam.kind {
            Kind::Forward => 0,
            Kind::ForwardQuant => 1,
            Kind::Backward => 2,
        };
        for path in fam.paths() {
            let name = fam.kernel_name(path);
            b = b.kernel(&name, move |t| match fam.kind {
                Kind::Backward => bwd::build(fam, path, t),
                _ => fwd::build(fam, path, t),
            });
            tables[t] = tables[t]
                .clone()
                .entry(&[fam.dt, fam.wdt], key(fam, path), &name);
        }
    }
    let mut colsum = DispatchTable::new("COLSUM", "ColsumLaunchers");
    for w in DType::ALL {
        b = b.kernel(&reduce_name(w), move |t| colsum::build(w, t));
        colsum = colsum.entry(&[w], "()", &reduce_name(w));
    }
    for t in tables {
        b = b.table(t);
    }
    b.table(colsum).run_or_exit();
}

/// The dispatcher's key of a family's kernel on `path`: `(Norm, Path)` as Rust source.
fn key(f: Family, p: Path) -> String {
    let norm = match f.norm {
        Norm::Layer => "Norm::Layer",
        Norm::Rms => "Norm::Rms",
    };
    let path = match p {
        Path::Fast(t) => format!("Path::Fast({t})"),
        Path::Rows(t) => format!("Path::Rows({t})"),
        Path::Generic => "Path::Generic".into(),
        Path::FastRagged(t) => format!("Path::FastRagged({t})"),
        Path::RowsRagged(t) => format!("Path::RowsRagged({t})"),
    };
    format!("({norm}, {path})")
}
