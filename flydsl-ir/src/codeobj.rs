//! codeobj (stub).
