//! Run-time switches for the kernels' memory hints.
//!
//! Kernel families decide per launch whether to read their large inputs with the keep-in-L2
//! hint (`flydsl_ir::MemFlags::keep_l2`; it changes speed, never results) from the size of
//! the data, by a threshold measured on the H200. `FLYDSL_KEEP_L2` overrides that decision
//! for every launch of the process: `1` turns the hint on, `0` off (for A/B benchmarks, or
//! a GPU whose cache behaves differently); unset or anything else keeps each family's rule.

use std::sync::OnceLock;

/// The size rule's threshold, shared by the kernel families: inputs of more than this many
/// bytes are read with the hint. Chosen from the H200 A/B bench of the hint
/// (`FLYDSL_KEEP_L2=0` against the rule, same run, L2 flushed before each launch): the hint
/// pays off only above this size. The measurements are in `bench/h200-table.md` (section
/// "keep-in-L2 hint A/B").
///
/// ```
/// assert_eq!(flydsl_rt::hints::KEEP_L2_MIN_BYTES, 128 << 20);
/// ```
pub const KEEP_L2_MIN_BYTES: usize = 128 << 20;

/// The `FLYDSL_KEEP_L2` override: `Some(true)` for `1`, `Some(false)` for `0`, else `None`
/// (read once per process).
///
/// ```
/// // Unset in the doc-test environment: each family's size rule applies.
/// if std::env::var_os("FLYDSL_KEEP_L2").is_none() {
///     assert_eq!(flydsl_rt::hints::keep_l2_override(), None);
/// }
/// ```
pub fn keep_l2_override() -> Option<bool> {
    static V: OnceLock<Option<bool>> = OnceLock::new();
    *V.get_or_init(|| parse(std::env::var("FLYDSL_KEEP_L2").ok().as_deref()))
}

/// Whether to read `bytes` of input with the keep-in-L2 hint: the override when set, else
/// `bytes > min_bytes`.
///
/// ```
/// if flydsl_rt::hints::keep_l2_override().is_none() {
///     assert!(flydsl_rt::hints::keep_l2(256 << 20, 128 << 20));
///     assert!(!flydsl_rt::hints::keep_l2(128 << 20, 128 << 20));
/// }
/// ```
pub fn keep_l2(bytes: usize, min_bytes: usize) -> bool {
    keep_l2_override().unwrap_or(bytes > min_bytes)
}

fn parse(v: Option<&str>) -> Option<bool> {
    match v.map(str::trim) {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn values() {
        assert_eq!(parse(Some("1")), Some(true));
        assert_eq!(parse(Some(" 0 ")), Some(false));
        assert_eq!(parse(Some("yes")), None);
        assert_eq!(parse(None), None);
    }
}
