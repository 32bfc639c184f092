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

#[path = "kernels/split.rs"]
mod split;

use flydsl_build::glue::DispatchTable;
/// The one dtype enum of the workspace (`src/table.rs` imports it from the crate root).
pub use flydsl_build::ir::DType;
use flydsl_build::ir::Target;
use table::{finish_name, kernel_name, Kind, Path, CONFIGS};

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
    // Split configurations: two kernels each, in their own tables (other parameters).
    let mut fwd_stats = DispatchTable::new("FORWARD_SPLIT_STATS", "ForwardStatsLaunchers");
    let mut fwd_fin = DispatchTable::new("FORWARD_SPLIT_FINISH", "ForwardFinishLaunchers");
    let mut bwd_stats = DispatchTable::new("BACKWARD_SPLIT_STATS", "BackwardStatsLaunchers");
    let mut bwd_fin = DispatchTable::new("BACKWARD_SPLIT_FINISH", "BackwardFinishLaunchers");
    for d in DType::ALL {
        for (index, cfg) in CONFIGS.iter().enumerate() {
            let name = kernel_name(cfg, d);
            let targets: &[Target] = if cfg.amd_only() { &AMD } else { &Target::ALL };
            let key = format!("{index}usize");
            if cfg.path == Path::Split {
                let fin = finish_name(cfg, d);
                b = b
                    .kernel_on(&name, targets, move |t| split::build_stats(t, d, cfg))
                    .kernel_on(&fin, targets, move |t| split::build_finish(t, d, cfg));
                match cfg.kind {
                    Kind::Forward => {
                        fwd_stats = fwd_stats.entry(&[d], key.clone(), &name);
                        fwd_fin = fwd_fin.entry(&[d], key, &fin);
                    }
                    Kind::Backward => {
                        bwd_stats = bwd_stats.entry(&[d], key.clone(), &name);
                        bwd_fin = bwd_fin.entry(&[d], key, &fin);
                    }
                }
                continue;
            }
            b = b.kernel_on(&name, targets, move |t| match cfg.kind {
                Kind::Forward => forward::build(t, d, cfg),
                Kind::Backward => backward::build(t, d, cfg),
            });
            match cfg.kind {
                Kind::Forward => fwd = fwd.entry(&[d], key, &name),
                Kind::Backward => bwd = bwd.entry(&[d], key, &name),
            }
        }
    }
    b.table(fwd)
        .table(bwd)
        .table(fwd_stats)
        .table(fwd_fin)
        .table(bwd_stats)
        .table(bwd_fin)
        .run_or_exit();
}
