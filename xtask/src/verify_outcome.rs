//! The outcome of one `verify` run, shared by its families.

/// The outcome of one verification.
pub struct Outcome {
    pub max_abs: f64,
    pub max_rel: f64,
    pub tolerance: String,
    pub pass: Result<(), String>,
}

pub type R<T> = Result<T, String>;
