//! Builds the generator's proof kernels (vector add, block reduction, tiled matrix-atom
//! matmul) for the selected targets and embeds them with their launch glue.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut b = flydsl_build::Builder::from_env();
    for (name, gen) in flydsl_devtools::proof::ALL {
        b = b.kernel(name, gen);
    }
    for (name, on, gen) in flydsl_devtools::proof::ALL_ON {
        b = b.kernel_on(name, on, gen);
    }
    b.run_or_exit();
}
