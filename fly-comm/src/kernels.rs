//! The kernels the build script generated and the lookup of one by its [`Spec`].

use crate::config::{Kind, Spec};
use crate::DType;
use flydsl_rt::KernelVariants;

/// Generated variant tables (`COMM_ALLREDUCE_...`) and launchers (unused: `launch.rs` packs
/// the peer pointers, which are no `DeviceBuffer`s, itself).
#[allow(missing_docs, dead_code, clippy::all, unused_imports)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/flydsl_kernels.rs"));
}

include!(concat!(env!("OUT_DIR"), "/comm_table.rs"));

/// The variant table of `spec` (every spec of `config::specs()` is built).
pub(crate) fn variants(spec: Spec) -> Option<&'static KernelVariants> {
    TABLE.iter().find(|(s, _)| *s == spec).map(|(_, k)| *k)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_spec_has_a_table_entry() {
        for s in crate::config::specs() {
            let k = super::variants(s).expect("built");
            assert_eq!(k.name, s.name());
        }
    }
}
