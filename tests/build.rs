//! Builds the generator's proof kernels (vector add, block reduction, tiled matrix-atom
//! matmul) for the selected targets and embeds them with their launch glue.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    flydsl_build::proof::register(flydsl_build::Builder::from_env()).run_or_exit();
}
