//! Builds every softmax kernel configuration (`src/table.rs`) for f32, f16 and bf16 on the
//! selected targets (IR for all targets, for the Sim), with typed dispatch tables that map
//! each configuration to its variant table and generated launcher.

#[path = "src/table.rs"]
#[allow(dead_code)]
mod table;

#[path = "kernels/common.rs"]
#[allow(dead_code)]
mod common;

#[path = "kernels/forward.rs"]
mod forward;

#[path = "kernels/backward.rs"]
mod backward;

use flydsl_build::glue::DispatchTable;
/// The one dtype enum of the workspace (`src/table.rs` imports it from the crate root).
pub use flydsl_build::ir::DType;
use flydsl_build::ir::Target;
use table::{kernel_name, Kind, CONFIGS};

const AMD: [Target; 4] = [
    Target::Gfx942,
    Target::Gfx950,
    Target::Gfx1201,
    Target::Gfx1250,
];

fn main() {
    for f in ["build.rs", "src/table.rs", "kernels"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut b = flydsl_build::Builder::from_env();
    // Typed launcher tables (see `src/kernels.rs`): per dtype and kind, configuration index ->
    // launcher.
    let mut fwd = DispatchTable::new("FORWARD", "ForwardLaunchers");
    let mut bwd = DispatchTable::new("BACKWARD", "BackwardLaunchers");
    for d in DType::ALL {
        for (index, cfg) in CONFIGS.iter().enumerate() {
            let name = kernel_name(cfg, d);
            let targets: &[Target] = if cfg.amd_only() { &AMD } else { &Target::ALL };
            b = b.kernel_on(&name, targets, move |t| match cfg.kind {
                Kind::Forward => forward::build(t, d, cfg),
                Kind::Backward => backward::build(t, d, cfg),
            });
            let key = format!("{index}usize");
            match cfg.kind {
                Kind::Forward => fwd = fwd.entry(&[d], key, &name),
                Kind::Backward => bwd = bwd.entry(&[d], key, &name),
            }
        }
    }
    b.table(fwd).table(bwd).run_or_exit();
}
