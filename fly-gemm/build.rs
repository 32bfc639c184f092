//! Builds the GEMM kernels (`src/table.rs`): the Hopper wgmma kernel for bf16 and f16 and
//! every epilogue, on sm90 (IR always embedded, for the Sim), with a typed dispatch table
//! per dtype keyed by the epilogue.

#[path = "src/table.rs"]
#[allow(dead_code)]
mod table;

#[path = "kernels/wgmma.rs"]
mod wgmma;

// ---- portable GEMM (gemmport) ----
#[path = "kernels/portable.rs"]
mod portable;
// ---- end portable GEMM ----

use flydsl_build::glue::DispatchTable;
/// The one dtype enum of the workspace (`src/table.rs` imports it from the crate root).
pub use flydsl_build::ir::DType;
use flydsl_build::ir::Target;
use table::{kernel_name, Epilogue, DTYPES};

fn main() {
    for f in ["build.rs", "src/table.rs", "kernels"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut b = flydsl_build::Builder::from_env();
    let mut wg = DispatchTable::new("WGMMA", "WgmmaLaunchers");
    for d in DTYPES {
        for epi in Epilogue::ALL {
            let name = kernel_name(d, epi);
            b = b.kernel_on(&name, &[Target::Sm90], move |t| wgmma::build(t, d, epi));
            wg = wg.entry(&[d], format!("{}usize", epi.index()), &name);
        }
    }
    // ---- portable GEMM (gemmport): every AMD target and sm90 (the fallback), per dtype,
    // config and B read; the epilogue is a run-time argument ----
    let mut tile = DispatchTable::new("PORTABLE", "PortableLaunchers");
    for d in DTYPES {
        for (ci, cfg) in table::PORTABLE_CONFIGS.into_iter().enumerate() {
            for br in table::BRead::ALL {
                if !table::has_variant(ci, br) {
                    continue;
                }
                let name = table::portable_name(d, cfg, br);
                b = b.kernel(&name, move |t| portable::build(t, d, cfg, br));
                let key = table::portable_key(ci, br);
                tile = tile.entry(&[d], format!("{key}usize"), &name);
            }
        }
    }
    b = b.table(tile);
    // ---- end portable GEMM ----
    b.table(wg).run_or_exit();
}
