//! Builds the GEMM kernels (`src/table.rs`): the Hopper wgmma kernel for bf16 and f16 and
//! every epilogue, and the scaled 8-bit kernel for fp8 e4m3fn and int8 inputs, bf16 and f16
//! outputs and every epilogue, on sm90 (IR always embedded, for the Sim), with typed
//! dispatch tables per (output) dtype keyed by the epilogue (and the input type).

#[path = "src/table.rs"]
#[allow(dead_code)]
mod table;

#[path = "kernels/wgmma.rs"]
mod wgmma;

#[path = "kernels/wgmma_scaled.rs"]
mod wgmma_scaled;

use flydsl_build::glue::DispatchTable;
/// The one dtype enum of the workspace (`src/table.rs` imports it from the crate root).
pub use flydsl_build::ir::DType;
use flydsl_build::ir::Target;
use table::{
    kernel_name, key16, scaled_kernel_name, scaled_key, Epilogue, Quant, DTYPES, SCALED_OUT, TILES,
};

fn main() {
    for f in ["build.rs", "src/table.rs", "kernels"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut b = flydsl_build::Builder::from_env();
    let mut wg = DispatchTable::new("WGMMA", "WgmmaLaunchers");
    for d in DTYPES {
        for tile in TILES {
            for epi in Epilogue::ALL {
                let name = kernel_name(d, epi, tile);
                b = b.kernel_on(&name, &[Target::Sm90], move |t| {
                    wgmma::build(t, d, epi, tile)
                });
                wg = wg.entry(&[d], format!("{}usize", key16(epi, tile)), &name);
            }
        }
    }
    let mut sc = DispatchTable::new("WGMMA_SCALED", "ScaledLaunchers");
    for out in SCALED_OUT {
        for tile in TILES {
            for q in Quant::ALL {
                for epi in Epilogue::ALL {
                    let name = scaled_kernel_name(q, out, epi, tile);
                    b = b.kernel_on(&name, &[Target::Sm90], move |t| {
                        wgmma_scaled::build(t, q, out, epi, tile)
                    });
                    let key = scaled_key(q, epi, tile);
                    sc = sc.entry(&[out], format!("{key}usize"), &name);
                }
            }
        }
    }
    b.table(wg).table(sc).run_or_exit();
}
