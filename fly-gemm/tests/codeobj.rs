//! Structural checks of the Hopper kernels' PTX (when sm90 is built): sm_90a at PTX ISA 8.4,
//! the flydsl_build layout check, TMA loads signalling mbarriers, mbarrier waits, wgmma with
//! its fence/commit/wait, no local memory and no calls (an external call would make ptxas
//! drop setmaxnreg and serialize wgmma); the split-K reduces: 128-bit workspace loads, no
//! local memory.

use flydsl_build::check::check_code_object;
use flydsl_ir::Target;

#[test]
fn hopper_kernels_have_the_tma_wgmma_pipeline() {
    let variants = fly_gemm::kernel_variants();
    assert_eq!(
        variants.len(),
        180,
        "(bf16, f16) x 5 tile configs x 5 epilogues, then (bf16, f16 out) x 5 tile configs x \
         (e4m3fn, i8 in) x 5 epilogues, the 20 split-K partial kernels and 10 reduces"
    );
    let mut seen = 0;
    for (name, k) in variants {
        assert_eq!(
            k.variants.iter().map(|v| v.target).collect::<Vec<_>>(),
            vec![Target::Sm90],
            "{name}: sm90 only"
        );
        for v in k.variants {
            let Some(code) = v.code else { continue };
            seen += 1;
            let ir = flydsl_ir::from_bytes(v.ir).unwrap();
            check_code_object(&ir, code).unwrap_or_else(|e| panic!("{name}: {e}"));
            let text = std::str::from_utf8(code).unwrap();
            assert!(text.contains(".target sm_90a"), "{name}: not sm_90a");
            assert!(text.contains(".version 8.4"), "{name}: not PTX ISA 8.4");
            if name.starts_with("gemm_splitk_reduce_") {
                let wide = ["ld.global.v4.", "ld.global.nc.v4."];
                assert!(
                    wide.iter().any(|l| text.contains(l)),
                    "{name}: no 128-bit loads"
                );
                assert!(!text.contains(".local"), "{name}: PTX contains `.local`");
                continue;
            }
            // The wgmma form and how many of them one K step (one pipeline stage) issues:
            // BK / 16 = 4 k16 wgmmas of 16-bit tiles, BK8 / 32 = 4 k32 wgmmas of 8-bit ones.
            // The tile configs other than the first end in `_{Tile::dims}` (the partial
            // kernels' names all do); `bn` is the wgmma's N (C's rows on a swapped tile).
            let bn = fly_gemm::table::TILES
                .iter()
                .find(|t| name.ends_with(&format!("_{}", t.dims())))
                .map_or(256, |t| t.bn);
            // fp8 on the 128 x 256 tile promotes in two chunks of 128 columns per stage; on
            // the narrower tiles its loop is unrolled twice and an odd last stage follows it
            // (3 stages of wgmmas in the PTX).
            let (mma, per_step) = if name.contains("_e4m3fn_") && bn == 256 {
                (
                    "m64n128k32.f32.e4m3.e4m3".to_string(),
                    2 * fly_gemm::table::BK8 / 32,
                )
            } else if name.contains("_e4m3fn_") {
                (
                    format!("m64n{bn}k32.f32.e4m3.e4m3"),
                    3 * fly_gemm::table::BK8 / 32,
                )
            } else if name.contains("_i8_") {
                (format!("m64n{bn}k32.s32.s8.s8"), fly_gemm::table::BK8 / 32)
            } else if name.contains("f16") && !name.contains("bf16") {
                (format!("m64n{bn}k16.f32.f16.f16"), fly_gemm::table::BK / 16)
            } else {
                (
                    format!("m64n{bn}k16.f32.bf16.bf16"),
                    fly_gemm::table::BK / 16,
                )
            };
            let mma = format!("wgmma.mma_async.sync.aligned.{mma} ");
            assert_eq!(
                text.matches(&mma).count(),
                per_step as usize,
                "{name}: `{mma}` per K step (the loop body is one stage)"
            );
            // The in-loop `wait_group 1` and the final `wait_group 0`; fp8 on the wide tile
            // instead waits for each chunk (`wait_group 0`) in the loop and has nothing left
            // at its end.
            let waits = if name.contains("_e4m3fn_") && bn == 256 {
                1
            } else {
                2
            };
            for (ins, at_least) in [
                ("cp.async.bulk.tensor.2d", 2),
                ("mbarrier.init", 1),
                ("mbarrier.arrive.expect_tx", 1),
                ("mbarrier.try_wait.parity", 1),
                ("fence.proxy.async", 1),
                ("wgmma.fence", 1),
                ("wgmma.commit_group", 1),
                ("wgmma.wait_group", waits),
            ] {
                let n = text.matches(ins).count();
                assert!(
                    n >= at_least,
                    "{name}: {ins}: {n} in the PTX, want >= {at_least}"
                );
            }
            for bad in [".local", "call.uni", "call "] {
                assert!(!text.contains(bad), "{name}: PTX contains `{bad}`");
            }
        }
    }
    if seen == 0 {
        println!("sm90 not built: only the IR is embedded, nothing to inspect");
        assert!(
            std::env::var_os("CI").is_none(),
            "CI builds every target: run with --all-features"
        );
    }
}
