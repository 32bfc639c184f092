//! Builds the attention kernels (`src/table.rs`): the portable forward kernel for bf16, f16
//! and fp8 e4m3fn inputs (bf16 out) and every head-dimension tile, and the split-K combine
//! kernel, on every target (IR
//! always embedded, for the Sim); the split-KV decode kernel for bf16 and f16, every head
//! tile and row block, on every target; the Hopper wgmma + TMA kernel for bf16 and f16, every
//! Hopper head dim and both masks on sm90 only; with typed dispatch tables per dtype.

#[path = "src/table.rs"]
#[allow(dead_code)]
mod table;

#[path = "kernels/fwd.rs"]
mod fwd;

#[path = "kernels/wgmma.rs"]
mod wgmma;

#[path = "kernels/decode.rs"]
mod decode;

use flydsl_build::glue::DispatchTable;
/// The one dtype enum of the workspace (`src/table.rs` imports it from the crate root).
pub use flydsl_build::ir::DType;
/// The target enum (`src/table.rs` imports it from the crate root).
pub use flydsl_build::ir::Target;
use table::{
    combine_name, decode_key, decode_name, fwd_fp8_name, fwd_name, hopper_key, hopper_name,
    COMBINE_THREADS, DECODE_ROW_BLOCKS, DTYPES, HEAD_TILES, HOPPER_HEAD_DIMS,
};

fn main() {
    for f in ["build.rs", "src/table.rs", "kernels"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut b = flydsl_build::Builder::from_env();
    let mut fwd_t = DispatchTable::new("FORWARD", "ForwardLaunchers");
    let mut comb_t = DispatchTable::new("COMBINE", "CombineLaunchers");
    let mut hop_t = DispatchTable::new("HOPPER", "HopperLaunchers");
    let mut dec_t = DispatchTable::new("DECODE", "DecodeLaunchers");
    // fp8 e4m3fn inputs: keyed by head tile under the output dtype (bf16). The e4m3fn ->
    // bf16 conversion exists on every target (hardware unpack or integer decode), so every
    // target has them.
    let mut fp8_t = DispatchTable::new("FORWARD_FP8", "Fp8ForwardLaunchers");
    for dp in HEAD_TILES {
        let name = fwd_fp8_name(dp);
        let n2 = name.clone();
        b = b.kernel(&name, move |t| fwd::build(t, fwd::Inputs::Fp8, dp, &n2));
        fp8_t = fp8_t.entry(&[DType::BF16], format!("{dp}usize"), &name);
    }
    for d in DTYPES {
        for dp in HEAD_TILES {
            let name = fwd_name(d, dp);
            let n2 = name.clone();
            b = b.kernel(&name, move |t| fwd::build(t, fwd::Inputs::Half(d), dp, &n2));
            fwd_t = fwd_t.entry(&[d], format!("{dp}usize"), &name);
        }
        for dp in HEAD_TILES {
            for rb in DECODE_ROW_BLOCKS {
                let name = decode_name(d, dp, rb);
                let n2 = name.clone();
                b = b.kernel(&name, move |t| decode::build(t, d, dp, rb, &n2));
                dec_t = dec_t.entry(&[d], format!("{}usize", decode_key(dp, rb)), &name);
            }
        }
        let name = combine_name(d);
        let n2 = name.clone();
        b = b.kernel(&name, move |t| fwd::combine(t, d, COMBINE_THREADS, &n2));
        comb_t = comb_t.entry(&[d], "0usize", &name);
        for hd in HOPPER_HEAD_DIMS {
            for causal in [false, true] {
                let name = hopper_name(d, hd, causal);
                let n2 = name.clone();
                b = b.kernel_on(&name, &[Target::Sm90], move |t| {
                    wgmma::build(t, d, hd, causal, &n2)
                });
                hop_t = hop_t.entry(&[d], format!("{}usize", hopper_key(hd, causal)), &name);
            }
        }
    }
    b.table(fwd_t)
        .table(fp8_t)
        .table(comb_t)
        .table(hop_t)
        .table(dec_t)
        .run_or_exit();
}
