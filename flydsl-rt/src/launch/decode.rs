//! The IR decode cache: each variant's embedded kernel IR is decoded once per process.

use crate::error::{Error, Result};
use crate::variant::KernelVariants;
use flydsl_ir::{KernargLayout, Kernel};
use std::collections::BTreeMap;
use std::sync::RwLock;

/// A kernel's decoded IR and what the launcher needs from it.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub kernel: Kernel,
    pub layout: KernargLayout,
    pub lds_bytes: u64,
}

/// Decode a variant's IR once per process (keyed by the address of the static IR bytes). The
/// decoded IR lives for the rest of the process, like the static bytes it comes from.
pub(crate) fn decoded(kernel: &KernelVariants, ir: &'static [u8]) -> Result<&'static Decoded> {
    static CACHE: RwLock<BTreeMap<usize, &'static Decoded>> = RwLock::new(BTreeMap::new());
    let key = ir.as_ptr() as usize;
    if let Some(d) = CACHE.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(d);
    }
    let ir_kernel = flydsl_ir::from_bytes(ir).map_err(|e| Error::BadVariant {
        kernel: kernel.name.to_string(),
        reason: e.to_string(),
    })?;
    let d = Decoded {
        layout: ir_kernel.kernarg_layout(),
        lds_bytes: u64::from(ir_kernel.lds_bytes()),
        kernel: ir_kernel,
    };
    let mut cache = CACHE.write().unwrap_or_else(|e| e.into_inner());
    // Another thread may have decoded the same IR meanwhile: keep the first.
    Ok(*cache.entry(key).or_insert_with(|| Box::leak(Box::new(d))))
}
