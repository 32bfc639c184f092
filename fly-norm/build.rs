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

use config::{
    bwd_fast_spill_free, bwd_kernel_name, families, reduce_name, Family, Kind, Norm, Path,
};
use flydsl_build::glue::DispatchTable;
/// The one dtype enum of the workspace (`config.rs` imports it from the crate root).
pub use flydsl_build::ir::DType;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=kernels");
    let mut b = flydsl_build::Builder::from_env();
    // Typed launcher tables (see `src/kernels.rs`): per (activation, weight) dtype pair, the
    // (norm, path) -> launcher entries of each kind; per weight dtype, the column sum.
    let mut tables = vec![
        DispatchTable::new("FORWARD", "ForwardLaunchers"),
        DispatchTable::new("FORWARD_QUANT", "ForwardQuantLaunchers"),
        DispatchTable::new("BACKWARD", "BackwardLaunchers"),
    ];
    let mut ragged = DispatchTable::new("BACKWARD_RAGGED", "BackwardLaunchers");
    for fam in families() {
        let t = match fam.kind {
            Kind::Forward => 0,
            Kind::ForwardQuant => 1,
            Kind::Backward => 2,
        };
        for path in fam.paths() {
            let name = fam.kernel_name(path);
            b = b.kernel(&name, move |t| match fam.kind {
                Kind::Backward => bwd::build(fam, path, false, t),
                _ => fwd::build(fam, path, t),
            });
            tables[t] = tables[t]
                .clone()
                .entry(&[fam.dt, fam.wdt], key(fam, path), &name);
            // The backward fast path's kernels for ragged rows (see `kernels/bwd.rs`).
            let ragged_built = |t| bwd_fast_spill_free(fam.norm, fam.dt, t, true);
            if fam.kind == Kind::Backward && matches!(path, Path::Fast(t) if ragged_built(t)) {
                let name = bwd_kernel_name(fam, path, true);
                b = b.kernel(&name, move |t| bwd::build(fam, path, true, t));
                ragged = ragged.entry(&[fam.dt, fam.wdt], key(fam, path), &name);
            }
        }
    }
    tables.push(ragged);
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
