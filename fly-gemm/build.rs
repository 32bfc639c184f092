//! Builds the GEMM kernels (`src/table.rs`): the Hopper wgmma kernel for bf16 and f16 and
//! every epilogue, and the scaled 8-bit kernel for fp8 e4m3fn and int8 inputs, bf16 and f16
//! outputs and every epilogue, on sm90 (IR always embedded, for the Sim), with typed
//! dispatch tables per (output) dtype keyed by the epilogue (and the input type).

#[path = "src/table.rs"]
#[allow(dead_code)]
mod table;

#[path = "kernels/pipeline.rs"]
mod pipeline;

#[path = "kernels/wgmma.rs"]
mod wgmma;

#[path = "kernels/wgmma_scaled.rs"]
mod wgmma_scaled;

#[path = "kernels/splitk.rs"]
mod splitk;

// ---- portable GEMM (gemmport) ----
#[path = "kernels/portable.rs"]
mod portable;
// ---- end portable GEMM ----

use flydsl_build::glue::DispatchTable;
/// The one dtype and target enums of the workspace (`src/table.rs` imports them from the
/// crate root).
pub use flydsl_build::ir::{DType, Target};
use table::{
    kernel_name, key16, partial_kernel_name, reduce_kernel_name, scaled_kernel_name, scaled_key,
    scaled_partial_kernel_name, scaled_partial_key, Epilogue, Operands, Out, Quant, DTYPES,
    SCALED_OUT, TILES,
};

fn main() {
    for f in ["build.rs", "src/table.rs", "kernels"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut b = flydsl_build::Builder::from_env();
    let mut wg = DispatchTable::new("WGMMA", "WgmmaLaunchers");
    for d in DTYPES {
        for tile in TILES {
            for epi in Epilogue::ALL {
                let name = kernel_name(d, epi, tile);
                b = b.kernel_on(&name, &[Target::Sm90], move |t| {
                    wgmma::build(t, d, Out::C(epi), tile)
                });
                wg = wg.entry(&[d], format!("{}usize", key16(epi, tile)), &name);
            }
        }
    }
    // Split-K: the partial-sum kernels (16-bit per dtype, 8-bit under f32, the type they
    // write) keyed by tile (and input type), and the reduce per output dtype and epilogue.
    let mut part = DispatchTable::new("WGMMA_PARTIAL", "PartialLaunchers");
    let mut part8 = DispatchTable::new("WGMMA_SCALED_PARTIAL", "PartialLaunchers");
    for tile in TILES {
        for d in DTYPES {
            let name = partial_kernel_name(d, tile);
            b = b.kernel_on(&name, &[Target::Sm90], move |t| {
                wgmma::build(t, d, Out::Partial, tile)
            });
            part = part.entry(&[d], format!("{}usize", tile.index()), &name);
        }
        for q in Quant::WGMMA {
            let name = scaled_partial_kernel_name(q, tile);
            b = b.kernel_on(&name, &[Target::Sm90], move |t| {
                wgmma_scaled::build(t, q, DType::BF16, Out::Partial, tile)
            });
            let key = scaled_partial_key(q, tile);
            part8 = part8.entry(&[DType::F32], format!("{key}usize"), &name);
        }
    }
    let mut red = DispatchTable::new("SPLITK_REDUCE", "ReduceLaunchers");
    for out in SCALED_OUT {
        for epi in Epilogue::ALL {
            let name = reduce_kernel_name(out, epi);
            b = b.kernel_on(&name, &[Target::Sm90], move |t| splitk::build(t, out, epi));
            red = red.entry(&[out], format!("{}usize", epi.index()), &name);
        }
    }
    let mut sc = DispatchTable::new("WGMMA_SCALED", "ScaledLaunchers");
    for out in SCALED_OUT {
        for tile in TILES {
            for q in Quant::WGMMA {
                for epi in Epilogue::ALL {
                    let name = scaled_kernel_name(q, out, epi, tile);
                    b = b.kernel_on(&name, &[Target::Sm90], move |t| {
                        wgmma_scaled::build(t, q, out, Out::C(epi), tile)
                    });
                    let key = scaled_key(q, epi, tile);
                    sc = sc.entry(&[out], format!("{key}usize"), &name);
                }
            }
        }
    }
    // ---- portable GEMM (gemmport): every AMD target and sm90 (the fallback), per dtype,
    // config and B read; the epilogue is a run-time argument ----
    // The 16-bit table is keyed per dtype; the 8-bit ones (one per input type: their
    // launchers take differently typed A and B) per output dtype, on the targets whose
    // matrix instructions read the input type.
    let mut tables = vec![(
        DispatchTable::new("PORTABLE", "PortableLaunchers"),
        DTYPES.map(Operands::Half).to_vec(),
    )];
    for (q, ty) in [
        (Quant::Fp8, "F8E4M3FN"),
        (Quant::Fp8Fnuz, "F8E4M3FNUZ"),
        (Quant::Int8, "i8"),
    ] {
        let path = if ty == "i8" {
            ty.to_string()
        } else {
            format!("::flydsl_rt::{ty}")
        };
        let table = DispatchTable::new(
            &format!("PORTABLE8_{}", q.name().to_uppercase()),
            &format!("Portable8Launchers<{path}>"),
        );
        tables.push((table, SCALED_OUT.map(|o| Operands::Scaled(q, o)).to_vec()));
    }
    for (mut table, ops) in tables {
        for op in ops {
            for (ci, cfg) in op.configs().into_iter().enumerate() {
                for br in table::BRead::ALL {
                    if !table::has_variant(ci, br) {
                        continue;
                    }
                    let name = table::portable_name(op, cfg, br);
                    let direct_only = table::DIRECT_B_CONFIGS.contains(&ci);
                    let targets: Vec<Target> = op
                        .targets()
                        .into_iter()
                        .filter(|&t| !direct_only || portable::has_direct_b(t, op, cfg))
                        .collect();
                    b = b.kernel_on(&name, &targets, move |t| portable::build(t, op, cfg, br));
                    let key = table::portable_key(ci, br);
                    table = table.entry(&[op.out()], format!("{key}usize"), &name);
                }
            }
        }
        b = b.table(table);
    }
    // ---- end portable GEMM ----
    b.table(wg)
        .table(sc)
        .table(part)
        .table(part8)
        .table(red)
        .run_or_exit();
}
