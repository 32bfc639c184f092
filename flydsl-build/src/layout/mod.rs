//! Layout algebra (stub).
