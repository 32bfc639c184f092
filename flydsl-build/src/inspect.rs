//! Inspection (stub).
