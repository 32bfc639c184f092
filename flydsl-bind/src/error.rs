//! The binding's error: a message that names the public function, the argument, its value
//! and the fix, and a kind that says which Python exception it becomes.

use std::fmt;

/// Which Python exception an error becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bad value (shape, contiguity, alignment, overlap, option): `ValueError`.
    Value,
    /// A tensor of the wrong dtype or an argument of the wrong type: `TypeError`.
    Type,
    /// The device or driver failed, or this build has no kernel for the device:
    /// `RuntimeError`.
    Runtime,
}

/// An error of a binding call.
///
/// ```
/// use flydsl_bind::{BindError, ErrorKind};
/// let e = BindError::new(ErrorKind::Value, "flydsl.softmax: `x` ...");
/// assert_eq!(e.to_string(), "flydsl.softmax: `x` ...");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindError {
    /// The exception kind.
    pub kind: ErrorKind,
    /// The whole message.
    pub message: String,
}

impl BindError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> BindError {
        BindError {
            kind,
            message: message.into(),
        }
    }

    /// A runtime error of the public function `op` from the runtime's error `e` (an invalid
    /// argument the kernel crate found becomes a `Value` error).
    pub fn from_rt(op: &str, e: flydsl_rt::Error) -> BindError {
        let kind = match e {
            flydsl_rt::Error::InvalidArgument { .. } => ErrorKind::Value,
            _ => ErrorKind::Runtime,
        };
        BindError::new(kind, format!("{op}: {e}"))
    }
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BindError {}

/// Result alias of the binding.
pub type Result<T, E = BindError> = std::result::Result<T, E>;
