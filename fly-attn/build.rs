//! Builds the attention kernels (`src/table.rs`): the portable forward kernel for bf16 and
//! f16 and every head-dimension tile, and the split-K combine kernel, on every target (IR
//! always embedded, for the Sim), with typed dispatch tables per dtype.

#[path = "src/table.rs"]
#[allow(dead_code)]
mod table;

#[path = "kernels/fwd.rs"]
mod fwd;

use flydsl_build::glue::DispatchTable;
/// The one dtype enum of the workspace (`src/table.rs` imports it from the crate root).
pub use flydsl_build::ir::DType;
/// The target enum (`src/table.rs` imports it from the crate root).
pub use flydsl_build::ir::Target;
use table::{combine_name, fwd_name, COMBINE_THREADS, DTYPES, HEAD_TILES};

fn main() {
    for f in ["build.rs", "src/table.rs", "kernels"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut b = flydsl_build::Builder::from_env();
    let mut fwd_t = DispatchTable::new("FORWARD", "ForwardLaunchers");
    let mut comb_t = DispatchTable::new("COMBINE", "CombineLaunchers");
    for d in DTYPES {
        for dp in HEAD_TILES {
            let name = fwd_name(d, dp);
            let n2 = name.clone();
            b = b.kernel(&name, move |t| fwd::build(t, d, dp, &n2));
            fwd_t = fwd_t.entry(&[d], format!("{dp}usize"), &name);
        }
        let name = combine_name(d);
        let n2 = name.clone();
        b = b.kernel(&name, move |t| fwd::combine(t, d, COMBINE_THREADS, &n2));
        comb_t = comb_t.entry(&[d], "0usize", &name);
    }
    b.table(fwd_t).table(comb_t).run_or_exit();
}
