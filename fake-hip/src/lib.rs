//! Fake libamdhip64 (stub, being implemented).
