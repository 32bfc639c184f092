//! Lowering (stub).
