//! Checking a code object's kernel arguments against the launcher's [`KernargLayout`].

use super::meta::{KernelArg, KernelMeta, ValueKind};
use crate::{KernargLayout, KernargSlot};

/// The explicit (non-hidden) arguments of a kernel, in order.
///
/// ```
/// use flydsl_ir::codeobj::{explicit_args, KernelArg, KernelMeta, ValueKind};
/// let k = KernelMeta { args: vec![
///     KernelArg { offset: 0, size: 8, value_kind: ValueKind::GlobalBuffer, ..Default::default() },
///     KernelArg { offset: 8, size: 4, value_kind: ValueKind::Hidden("hidden_block_count_x".into()),
///                 ..Default::default() },
/// ], ..Default::default() };
/// assert_eq!(explicit_args(&k).count(), 1);
/// ```
pub fn explicit_args(meta: &KernelMeta) -> impl Iterator<Item = &KernelArg> + '_ {
    meta.args.iter().filter(|a| !a.value_kind.is_hidden())
}

fn describe_arg(a: &KernelArg) -> String {
    format!(
        "`{}` ({} at offset {}, size {})",
        a.name.as_deref().unwrap_or("<unnamed>"),
        a.value_kind.name(),
        a.offset,
        a.size
    )
}

fn describe_slot(s: &KernargSlot) -> String {
    let kind = if s.is_pointer {
        "global_buffer"
    } else {
        "by_value"
    };
    format!(
        "`{}` ({kind} at offset {}, size {})",
        s.name, s.offset, s.size
    )
}

/// Check that the explicit arguments of `meta` are exactly the slots of `layout`: same count,
/// and for each index the same offset and size, with `global_buffer` for pointer slots and
/// `by_value` for the others. Also checks that `.kernarg_segment_size` covers the layout.
///
/// The error names the first mismatch: argument index, both names, expected vs found.
///
/// ```
/// use flydsl_ir::*;
/// use flydsl_ir::codeobj::{check_kernarg_layout, KernelArg, KernelMeta, ValueKind};
/// let layout = KernargLayout::of(&[
///     Param { name: "n".into(), kind: ParamKind::Scalar(ScalarType::I32) },
/// ]);
/// let arg = |size| KernelArg { name: Some("n".into()), offset: 0, size,
///                              value_kind: ValueKind::ByValue, ..Default::default() };
/// let good = KernelMeta { name: "k".into(), kernarg_segment_size: 8, args: vec![arg(4)],
///                         ..Default::default() };
/// assert_eq!(check_kernarg_layout(&good, &layout), Ok(()));
/// let bad = KernelMeta { args: vec![arg(8)], ..good };
/// let msg = check_kernarg_layout(&bad, &layout).unwrap_err();
/// assert!(msg.contains("argument 0") && msg.contains("size 4") && msg.contains("size 8"), "{msg}");
/// ```
pub fn check_kernarg_layout(meta: &KernelMeta, layout: &KernargLayout) -> Result<(), String> {
    let explicit: Vec<&KernelArg> = explicit_args(meta).collect();
    let kernel = &meta.name;
    for i in 0..explicit.len().max(layout.slots.len()) {
        let (arg, slot) = match (explicit.get(i), layout.slots.get(i)) {
            (Some(a), Some(s)) => (*a, s),
            (None, Some(s)) => {
                return Err(format!(
                    "kernel `{kernel}` argument {i}: the layout expects {} but the code object \
                     has only {} explicit arguments",
                    describe_slot(s),
                    explicit.len()
                ))
            }
            (Some(a), None) => {
                return Err(format!(
                    "kernel `{kernel}` argument {i}: the code object has {} but the layout has \
                     only {} slots",
                    describe_arg(a),
                    layout.slots.len()
                ))
            }
            (None, None) => break,
        };
        let want_kind = if slot.is_pointer {
            ValueKind::GlobalBuffer
        } else {
            ValueKind::ByValue
        };
        if arg.offset != slot.offset || arg.size != slot.size || arg.value_kind != want_kind {
            return Err(format!(
                "kernel `{kernel}` argument {i}: expected {} from the layout, found {} in the \
                 code object",
                describe_slot(slot),
                describe_arg(arg)
            ));
        }
    }
    let end = layout
        .slots
        .iter()
        .map(|s| s.offset + s.size)
        .max()
        .unwrap_or(0);
    if meta.kernarg_segment_size < end {
        return Err(format!(
            "kernel `{kernel}`: .kernarg_segment_size {} is smaller than the layout's explicit \
             arguments ({end} bytes)",
            meta.kernarg_segment_size
        ));
    }
    Ok(())
}
