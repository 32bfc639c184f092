//! `parse_ptx` on PTX from `llc-22 -mcpu=sm_90a`, the PTX layout check, and malformed text.

#![cfg(feature = "codeobj")]

mod codeobj_support;

use codeobj_support::{data, tools};
use flydsl_ir::codeobj::{check_kernarg_layout_ptx, parse_ptx};
use flydsl_ir::{KernargLayout, KernargSlot, Param, ParamKind, ScalarType};

fn norm_layout(n: ScalarType) -> KernargLayout {
    KernargLayout::of(&[
        Param {
            name: "x".into(),
            kind: ParamKind::Tensor {
                elem: ScalarType::F32,
                writable: false,
            },
        },
        Param {
            name: "n".into(),
            kind: ParamKind::Scalar(n),
        },
        Param {
            name: "eps".into(),
            kind: ParamKind::Scalar(ScalarType::F32),
        },
        Param {
            name: "y".into(),
            kind: ParamKind::Tensor {
                elem: ScalarType::F32,
                writable: true,
            },
        },
    ])
}

/// The `.param` lines of an entry, read independently: (type words, name).
fn param_lines(ptx: &str, entry: &str) -> Vec<String> {
    let start = ptx.find(&format!(".entry {entry}(")).unwrap();
    let end = start + ptx[start..].find(')').unwrap();
    ptx[start..end]
        .lines()
        .filter(|l| l.trim_start().starts_with(".param"))
        .map(String::from)
        .collect()
}

#[test]
fn vadd_ptx() {
    let Some(t) = tools() else { return };
    let ptx = t.ptx(&data("vadd_nvptx.ll"));
    let m = parse_ptx(&ptx).unwrap();
    assert_eq!(m.version, "8.4");
    assert_eq!(
        m.target,
        vec![flydsl_ir::Target::Sm90.ptx_target().unwrap().to_string()]
    );
    assert_eq!(m.address_size, Some(64));
    m.check_target(flydsl_ir::Target::Sm90).unwrap();
    assert!(m.check_target(flydsl_ir::Target::Gfx1201).is_err());
    assert_eq!(m.entries.len(), 1);
    let e = m.entry("vadd").unwrap();
    let lines = param_lines(&ptx, "vadd");
    assert_eq!(e.params.len(), lines.len());
    for (p, line) in e.params.iter().zip(&lines) {
        assert!(line.trim_end_matches(',').ends_with(&p.name), "{line}");
        assert_eq!(p.is_pointer, line.contains(".ptr"), "{line}");
    }
    let offs: Vec<(u32, u32)> = e.params.iter().map(|p| (p.offset, p.size)).collect();
    assert_eq!(offs, vec![(0, 8), (8, 8), (16, 8), (24, 4)]);
    assert_eq!(e.params[0].state_space.as_deref(), Some(".global"));
    assert_eq!(e.params[0].pointee_align, Some(1));
    assert_eq!(e.params[0].align, 8);
    assert_eq!(e.maxntid, None);
    assert_eq!(m.static_shared_bytes(e), 0);

    // vadd(a, b, c: pointers, n: i32) as a hand-made layout.
    let slot = |name: &str, offset, size, is_pointer, scalar| KernargSlot {
        param: 0,
        name: name.into(),
        offset,
        size,
        is_pointer,
        scalar,
    };
    let mut layout = KernargLayout {
        slots: vec![
            slot("a", 0, 8, true, ScalarType::I64),
            slot("b", 8, 8, true, ScalarType::I64),
            slot("c", 16, 8, true, ScalarType::I64),
            slot("n", 24, 4, false, ScalarType::I32),
        ],
        size: 32,
        align: 8,
    };
    assert_eq!(check_kernarg_layout_ptx(e, &layout), Ok(()));
    layout.slots[3].is_pointer = true;
    let msg = check_kernarg_layout_ptx(e, &layout).unwrap_err();
    assert!(msg.contains("parameter 3") && msg.contains(".u32"), "{msg}");
}

#[test]
fn params_shared_and_maxntid() {
    let Some(t) = tools() else { return };
    let ptx = t.ptx(&data("codeobj_args_nvptx.ll"));
    let m = parse_ptx(&ptx).unwrap();
    let names: Vec<&str> = m.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["norm", "mixed"]);

    let norm = m.entry("norm").unwrap();
    assert_eq!(
        check_kernarg_layout_ptx(norm, &norm_layout(ScalarType::I32)),
        Ok(())
    );
    let msg = check_kernarg_layout_ptx(norm, &norm_layout(ScalarType::I64)).unwrap_err();
    assert!(
        msg.contains("parameter 2") && msg.contains("`n`") && msg.contains("size 8"),
        "{msg}"
    );
    assert_eq!(norm.maxntid, None);
    assert!(norm.shared.is_empty());

    let mixed = m.entry("mixed").unwrap();
    assert_eq!(param_lines(&ptx, "mixed").len(), mixed.params.len());
    let got: Vec<(&str, Option<u32>, u32, u32, u32)> = mixed
        .params
        .iter()
        .map(|p| (p.ty.as_str(), p.array_len, p.size, p.align, p.offset))
        .collect();
    assert_eq!(
        got,
        vec![
            (".u64", None, 8, 8, 0),
            (".f32", None, 4, 4, 8),
            (".u16", None, 2, 2, 12),
            (".b8", Some(16), 16, 8, 16),
            (".u8", None, 1, 1, 32),
            (".f64", None, 8, 8, 40),
        ]
    );
    assert_eq!(mixed.param_bytes(), 48);
    assert_eq!(mixed.maxntid, Some([128, 1, 1]));
    let shared: Vec<(&str, u64, u32)> = mixed
        .shared
        .iter()
        .map(|s| (s.name.as_str(), s.size, s.align))
        .collect();
    assert_eq!(shared, vec![("sh", 400, 16), ("sh2", 24, 8)]);
    assert_eq!(m.static_shared_bytes(mixed), 424);
}

const HAND: &str = r#"
//
// hand-written: module-scope shared, dynamic shared, a .func, comments, directives
//
.version 8.4
.target sm_90a, texmode_independent
.address_size 64
.file 1 "k.cu"
.extern .shared .align 16 .b8 dyn[];
.shared .align 4 .u32 counter;
.global .align 4 .b32 table[4] = {1, 2, 3, 4};
.func (.param .b32 r) helper(.param .b32 a) { ret; }
.extern .func ext(.param .b64 p);
/* a block
   comment with .entry fake( */
.visible .entry k2(.param .v2 .f32 v, .param .align 16 .b8 big[3][4])
.reqntid 64, 2
.maxnreg 128
.minnctapersm 2
{
    .shared .align 8 .v4 .f32 tile[8];
    .reg .b32 %r<2>;
    { .reg .pred %p; }
    st.shared.u32 [counter], %r1;
    ret;
}
.entry empty() { }
"#;

#[test]
fn hand_written_ptx() {
    let m = parse_ptx(HAND).unwrap();
    assert_eq!(m.version, "8.4");
    assert_eq!(
        m.target,
        vec!["sm_90a".to_string(), "texmode_independent".to_string()]
    );
    let names: Vec<&str> = m.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["k2", "empty"]);
    let module: Vec<(&str, u64, u32, bool)> = m
        .shared
        .iter()
        .map(|s| (s.name.as_str(), s.size, s.align, s.is_extern))
        .collect();
    assert_eq!(module, vec![("dyn", 0, 16, true), ("counter", 4, 4, false)]);
    let k2 = &m.entries[0];
    assert_eq!(k2.reqntid, Some([64, 2, 1]));
    assert_eq!(k2.maxnreg, Some(128));
    assert_eq!(
        (
            k2.params[0].ty.as_str(),
            k2.params[0].size,
            k2.params[0].align
        ),
        (".v2 .f32", 8, 8)
    );
    assert_eq!(
        (k2.params[1].size, k2.params[1].align, k2.params[1].offset),
        (12, 16, 16)
    );
    assert_eq!(k2.shared[0].size, 128);
    // counter (4 at 0), then tile aligned to 8: 8 + 128.
    assert_eq!(m.static_shared_bytes(k2), 136);
    assert!(m.entries[1].params.is_empty());
}

#[test]
fn malformed_ptx_is_an_error() {
    let cases = [
        ("", "no `.version`"),
        (".version 8.0\n", "no `.target`"),
        (
            ".version 8.0\n.target sm_90\n.entry k(.param .u64 a {",
            "expected `,`",
        ),
        (
            ".version 8.0\n.target sm_90\n.entry k() {\n ret;\n",
            "not closed",
        ),
        (
            ".version 8.0\n.target sm_90\n.entry k(.param .q32 a) {}",
            ".q32",
        ),
        (
            ".version 8.0\n.target sm_90\n.entry k(.param .u32) {}",
            "parameter name",
        ),
        (
            ".version 8.0\n.target sm_90\n.entry k(.param .b8 a[x]) {}",
            "array length",
        ),
        (
            ".version 8.0\n.target sm_90\n.entry k() .maxntid {}",
            ".maxntid",
        ),
        (".version 8.0\n.target sm_90\n/* open", "comment"),
        (".version 8.0\n.target sm_90\n.file 1 \"open", "string"),
    ];
    for (text, want) in cases {
        let err = parse_ptx(text).unwrap_err();
        assert!(err.to_string().contains(want), "{text:?}: {err}");
    }
}

#[test]
fn every_prefix_of_real_ptx_parses_or_errors() {
    let Some(t) = tools() else { return };
    let ptx = t.ptx(&data("codeobj_args_nvptx.ll"));
    let full = parse_ptx(&ptx).unwrap();
    let mut errors = 0;
    for (i, _) in ptx.char_indices() {
        match parse_ptx(&ptx[..i]) {
            Ok(m) => assert!(m.entries.len() <= full.entries.len()),
            Err(_) => errors += 1,
        }
    }
    assert!(errors > 0);
}
