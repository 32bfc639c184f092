//! Structural checks of built code objects (placeholder until inspection lands).

use flydsl_ir::Kernel;

/// Resource usage read back from a code object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    /// Code object size in bytes.
    pub code_bytes: usize,
}

/// Check a code object against the kernel it was built from.
pub fn check_code_object(_ir: &Kernel, code: &[u8]) -> Result<Resources, String> {
    Ok(Resources { code_bytes: code.len() })
}
