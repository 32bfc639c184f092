//! [`PtxError`]: a PTX parse error with its line.

/// A PTX syntax problem, with the 1-based line it was found on.
///
/// ```
/// use flydsl_ir::codeobj::parse_ptx;
/// let err = parse_ptx(".version 8.0\n.target sm_90\n.visible .entry k(\n.param .u99 p\n) {}")
///     .unwrap_err();
/// assert_eq!(err.line, 4);
/// assert!(err.message.contains(".u99"), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("PTX line {line}: {message}")]
pub struct PtxError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}
