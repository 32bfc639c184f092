//! The kernel declarations of every family, for tools that build them outside a build
//! script (the same declarations the crates' build scripts use).

use flydsl_build::Builder;

/// Families `build-all` knows.
pub const FAMILIES: &[&str] = &["proof"];

/// Register the kernels of `family` (or of all families for `all`).
pub fn register(b: Builder, family: &str) -> Result<Builder, String> {
    match family {
        "proof" => Ok(flydsl_build::proof::register(b)),
        "all" => FAMILIES.iter().try_fold(b, |b, f| register(b, f)),
        _ => Err(format!(
            "unknown family `{family}`: expected one of {FAMILIES:?} or `all`"
        )),
    }
}
