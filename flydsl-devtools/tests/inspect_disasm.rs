//! `disassemble` + `count_instructions` on code objects from `llc-22` for every gfx target,
//! cross-checked against `llc`'s own assembly listing; PTX counts; error cases.

mod inspect_support;

use flydsl_devtools::inspect::{
    count_instructions, count_ptx_instructions, disassemble, disassemble_with, find_objdump,
    mnemonics, parse_hsaco, parse_ptx, InspectError,
};
use inspect_support::{data, tools};

/// Count in `llc -filetype=asm` output: instruction lines are indented, directives start
/// with `.`, comments with `;`.
fn asm_count(asm: &str, prefix: &str) -> usize {
    asm.lines()
        .filter(|l| l.starts_with([' ', '\t']))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| !w.starts_with(['.', ';']) && w.starts_with(prefix))
        .count()
}

/// (IR file, mcpu, [(mnemonic prefix, expected count: at least n, or exactly 0)]).
type Case = (&'static str, &'static str, &'static [(&'static str, usize)]);

#[test]
fn instruction_classes_per_target() {
    let Some(t) = tools() else { return };
    let cases: [Case; 6] = [
        (
            "mfma942.ll",
            "gfx942",
            &[("v_mfma", 6), ("v_mfma_f32_32x32x8", 2), ("s_endpgm", 1)],
        ),
        (
            "mfma950.ll",
            "gfx950",
            &[
                ("v_mfma_f32_16x16x32", 2),
                ("v_mfma_scale_f32_16x16x128_f8f6f4", 1),
            ],
        ),
        (
            "wmma12.ll",
            "gfx1201",
            &[("v_wmma_f32_16x16x16_f16", 1), ("v_mfma", 0)],
        ),
        ("wmma1250.ll", "gfx1250", &[("v_wmma_f32_16x16x32_bf16", 1)]),
        (
            "rsrc.ll",
            "gfx942",
            &[("buffer_load_dword", 1), ("global_store_dword", 1)],
        ),
        (
            "vadd_amdgpu.ll",
            "gfx950",
            &[
                ("global_load_dword", 2),
                ("global_store_dword", 1),
                ("s_barrier", 0),
            ],
        ),
    ];
    for (file, mcpu, expect) in cases {
        let ll = data(file);
        let so = t.hsaco(&ll, mcpu);
        let text = disassemble(&so, mcpu).unwrap();
        let asm = t.asm(&ll, mcpu);
        for &(prefix, at_least) in expect {
            let n = count_instructions(&text, prefix);
            assert_eq!(
                n,
                asm_count(&asm, prefix),
                "{file} {mcpu} {prefix}: objdump vs llc asm"
            );
            if at_least == 0 {
                assert_eq!(n, 0, "{file} {mcpu} {prefix}");
            } else {
                assert!(
                    n >= at_least,
                    "{file} {mcpu} {prefix}: {n} < {at_least}\n{text}"
                );
            }
        }
        // Every instruction of the kernel: the two listings agree mnemonic by mnemonic
        // (objdump also shows the s_nop / s_code_end padding after s_endpgm).
        let ours: Vec<&str> = mnemonics(&text).collect();
        let end = ours.iter().rposition(|m| *m == "s_endpgm").unwrap();
        let theirs: Vec<&str> = asm
            .lines()
            .filter(|l| l.starts_with([' ', '\t']))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| !w.starts_with(['.', ';']) && !w.ends_with(':'))
            .collect();
        let their_end = theirs.iter().position(|m| *m == "s_endpgm").unwrap();
        assert_eq!(&ours[..=end], &theirs[..=their_end], "{file} {mcpu}");
        // The code object parses and names the right processor.
        let co = parse_hsaco(&std::fs::read(&so).unwrap()).unwrap();
        assert_eq!(co.arch.name(), mcpu);
    }
}

#[test]
fn bytes_and_path_give_the_same_listing() {
    let Some(t) = tools() else { return };
    let so = t.hsaco(&data("mfma942.ll"), "gfx942");
    let bytes = std::fs::read(&so).unwrap();
    let from_path = disassemble(&so, "gfx942").unwrap();
    let from_bytes = disassemble(&bytes, "gfx942").unwrap();
    let body = |s: &str| {
        s.lines()
            .skip_while(|l| !l.starts_with("Disassembly"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(!body(&from_path).is_empty());
    assert_eq!(body(&from_path), body(&from_bytes));
    assert_eq!(
        count_instructions(&from_bytes, "v_mfma"),
        count_instructions(&from_path, "v_mfma")
    );
}

#[test]
fn objdump_errors() {
    let Some(_) = tools() else { return };
    let tool = find_objdump().unwrap();
    match disassemble_with(&tool, &b"not an object"[..], "gfx942") {
        Err(InspectError::ToolFailed { stderr, .. }) => assert!(!stderr.is_empty()),
        other => panic!("{other:?}"),
    }
    let t = tools().unwrap();
    let so = t.hsaco(&data("vadd_amdgpu.ll"), "gfx942");
    match disassemble_with(&tool, &so, "gfx9999") {
        Err(InspectError::UnknownCpu { mcpu, .. }) => assert_eq!(mcpu, "gfx9999"),
        other => panic!("{other:?}"),
    }
    let missing = std::path::Path::new("/nonexistent/llvm-objdump");
    let err = disassemble_with(missing, &so, "gfx942").unwrap_err();
    assert!(matches!(err, InspectError::Io { .. }), "{err}");
}

/// Independent PTX count: lines whose first word (after a predicate) starts with `prefix`.
fn naive_ptx_count(ptx: &str, prefix: &str) -> usize {
    ptx.lines()
        .map(|l| l.trim())
        .map(|l| {
            if l.starts_with('@') {
                l.split_once(' ').map_or("", |x| x.1).trim()
            } else {
                l
            }
        })
        .filter(|l| l.starts_with(prefix))
        .count()
}

#[test]
fn ptx_counts() {
    let Some(t) = tools() else { return };
    let ptx = t.ptx(&data("vadd_nvptx.ll"));
    for (prefix, n) in [
        ("ld.global", 2),
        ("st.global", 1),
        ("ld.param", 4),
        ("add.rn.f32", 1),
        ("bra", 1),
        ("ret", 1),
        ("mma.sync", 0),
        ("shfl.sync", 0),
    ] {
        assert_eq!(count_ptx_instructions(&ptx, prefix), n, "{prefix}\n{ptx}");
        assert_eq!(naive_ptx_count(&ptx, prefix), n, "{prefix}");
    }
    // Re-exported PTX parsing works through the inspect module.
    assert_eq!(parse_ptx(&ptx).unwrap().entries[0].name, "vadd");
}
