//! The kernel-argument layout: derived once from the parameters and used by both the IR
//! lowering (argument order and types) and the host launchers (byte packing).

use crate::{Kernel, Param, ParamKind, ScalarType};
use serde::{Deserialize, Serialize};

/// One kernel argument in the packed kernarg buffer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernargSlot {
    /// Index of the user parameter it belongs to.
    pub param: usize,
    /// Argument name (`x`, or `x.len` for a tensor's extent).
    pub name: String,
    /// Byte offset in the buffer.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// True for a global pointer, false for a by-value scalar.
    pub is_pointer: bool,
    /// Scalar type of a by-value argument (`I64` for pointers).
    pub scalar: ScalarType,
}

/// The complete kernarg layout.
///
/// ```
/// use flydsl_ir::*;
/// let params = vec![
///     Param { name: "x".into(), kind: ParamKind::Tensor { elem: ScalarType::F32, writable: false } },
///     Param { name: "n".into(), kind: ParamKind::Scalar(ScalarType::I32) },
///     Param { name: "eps".into(), kind: ParamKind::Scalar(ScalarType::F32) },
///     Param { name: "y".into(), kind: ParamKind::Tensor { elem: ScalarType::F32, writable: true } },
/// ];
/// let l = KernargLayout::of(&params);
/// let offs: Vec<u32> = l.slots.iter().map(|s| s.offset).collect();
/// assert_eq!(offs, vec![0, 8, 16, 20, 24, 32]);
/// assert_eq!(l.size, 40);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernargLayout {
    /// Slots in argument order.
    pub slots: Vec<KernargSlot>,
    /// Total size in bytes, rounded up to `align`.
    pub size: u32,
    /// Alignment of the buffer (8).
    pub align: u32,
}

impl KernargLayout {
    /// Lay out `params` at natural alignment, in order.
    pub fn of(params: &[Param]) -> KernargLayout {
        let mut slots = Vec::new();
        let mut off = 0u32;
        let mut push = |param: usize, name: String, size: u32, is_pointer: bool, scalar| {
            off = off.next_multiple_of(size.max(1));
            slots.push(KernargSlot {
                param,
                name,
                offset: off,
                size,
                is_pointer,
                scalar,
            });
            off += size;
        };
        for (i, p) in params.iter().enumerate() {
            match p.kind {
                ParamKind::Tensor { .. } => {
                    push(i, p.name.clone(), 8, true, ScalarType::I64);
                    push(i, format!("{}.len", p.name), 8, false, ScalarType::I64);
                }
                ParamKind::Scalar(s) => {
                    // i1 scalars travel as one byte.
                    push(i, p.name.clone(), s.size_bytes(), false, s);
                }
            }
        }
        let align = 8;
        KernargLayout {
            slots,
            size: off.next_multiple_of(align),
            align,
        }
    }
}

impl Kernel {
    /// The kernel-argument layout derived from the parameters (one source of truth for the
    /// generated IR's arguments and the host-side packing).
    pub fn kernarg_layout(&self) -> KernargLayout {
        KernargLayout::of(&self.params)
    }
}
