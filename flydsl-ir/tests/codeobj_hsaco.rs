//! `parse_hsaco` on real code objects from `llc-22` + `rust-lld` for every gfx target,
//! cross-checked field by field against `llvm-readelf-22`, plus malformed inputs.

#![cfg(feature = "codeobj")]

mod codeobj_support;

use codeobj_support::{data, tools, with_v5_flag, Tools};
use flydsl_ir::codeobj::{
    check_kernarg_layout, explicit_args, parse_hsaco, CodeObject, CodeObjectError, KernelMeta,
    TargetFeature, ValueKind,
};
use flydsl_ir::{KernargLayout, Param, ParamKind, ScalarType, Target};
use std::collections::BTreeMap;
use std::path::Path;

const GFX: [&str; 4] = ["gfx942", "gfx950", "gfx1201", "gfx1250"];

// ---------------------------------------------------------------------------------------
// An independent reader of `llvm-readelf-22 -h` and `--notes` text.

type Fields = BTreeMap<String, String>;

#[derive(Default, Debug)]
struct YamlKernel {
    fields: Fields,
    args: Vec<Fields>,
}

#[derive(Default, Debug)]
struct YamlMeta {
    kernels: Vec<YamlKernel>,
    target: Option<String>,
    version: Vec<String>,
}

fn unquote(s: &str) -> String {
    s.trim().trim_matches('\'').trim_matches('"').to_string()
}

/// Parse the YAML that `llvm-readelf --notes` prints for NT_AMDGPU_METADATA, by indentation.
fn parse_notes_yaml(text: &str) -> YamlMeta {
    let mut m = YamlMeta::default();
    let mut section = String::new();
    let body = text
        .split_once("---")
        .expect("no YAML document in readelf --notes")
        .1;
    for raw in body.lines() {
        if raw.trim() == "..." {
            break;
        }
        if raw.trim().is_empty() {
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        let mut content = raw.trim_start();
        let mut eff = indent;
        let mut dash = false;
        if let Some(rest) = content.strip_prefix("- ") {
            content = rest;
            eff = indent + 2;
            dash = true;
        }
        if indent == 0 {
            let (k, v) = content.split_once(':').unwrap();
            section = k.to_string();
            if k == "amdhsa.target" {
                m.target = Some(unquote(v));
            }
            continue;
        }
        if section == "amdhsa.version" {
            m.version.push(content.trim().to_string());
            continue;
        }
        if section != "amdhsa.kernels" {
            continue;
        }
        let (k, v) = content.split_once(':').unwrap();
        let (k, v) = (k.trim().to_string(), unquote(v));
        match (eff, dash) {
            (4, true) => m.kernels.push(YamlKernel::default()),
            (8, true) => m.kernels.last_mut().unwrap().args.push(Fields::new()),
            _ => {}
        }
        let kern = m.kernels.last_mut().unwrap();
        match eff {
            4 if !v.is_empty() => {
                kern.fields.insert(k, v);
            }
            8 => {
                kern.args.last_mut().unwrap().insert(k, v);
            }
            _ => {}
        }
    }
    m
}

/// `Flags: 0x54c, gfx942, xnack, sramecc` -> (0x54c, ["gfx942", "xnack", "sramecc"]).
fn readelf_flags(header: &str) -> (u32, Vec<String>) {
    let line = header
        .lines()
        .find(|l| l.trim_start().starts_with("Flags:"))
        .unwrap();
    let mut parts = line
        .split_once(':')
        .unwrap()
        .1
        .split(',')
        .map(|s| s.trim().to_string());
    let hex = parts.next().unwrap();
    (
        u32::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap(),
        parts.collect(),
    )
}

fn readelf_field(header: &str, key: &str) -> String {
    let line = header
        .lines()
        .find(|l| l.trim_start().starts_with(key))
        .unwrap();
    line.split_once(':').unwrap().1.trim().to_string()
}

/// Our kernel, spelled the way the metadata spells it.
fn our_fields(k: &KernelMeta) -> Fields {
    let mut f = Fields::new();
    let mut put = |key: &str, v: String| {
        f.insert(key.to_string(), v);
    };
    put(".name", k.name.clone());
    put(".symbol", k.symbol.clone());
    put(".kernarg_segment_size", k.kernarg_segment_size.to_string());
    put(
        ".kernarg_segment_align",
        k.kernarg_segment_align.to_string(),
    );
    put(
        ".group_segment_fixed_size",
        k.group_segment_fixed_size.to_string(),
    );
    put(
        ".private_segment_fixed_size",
        k.private_segment_fixed_size.to_string(),
    );
    put(".vgpr_count", k.vgpr_count.to_string());
    put(".sgpr_count", k.sgpr_count.to_string());
    put(".wavefront_size", k.wavefront_size.to_string());
    put(
        ".max_flat_workgroup_size",
        k.max_flat_workgroup_size.to_string(),
    );
    put(".uses_dynamic_stack", k.uses_dynamic_stack.to_string());
    for (key, v) in [
        (".agpr_count", k.agpr_count),
        (".vgpr_spill_count", k.vgpr_spill_count),
        (".sgpr_spill_count", k.sgpr_spill_count),
    ] {
        if let Some(v) = v {
            put(key, v.to_string());
        }
    }
    f
}

fn our_arg_fields(a: &flydsl_ir::codeobj::KernelArg) -> Fields {
    let mut f = Fields::new();
    if let Some(n) = &a.name {
        f.insert(".name".into(), n.clone());
    }
    f.insert(".offset".into(), a.offset.to_string());
    f.insert(".size".into(), a.size.to_string());
    f.insert(".value_kind".into(), a.value_kind.name().to_string());
    let space = |s: &flydsl_ir::codeobj::AddressSpace| format!("{s:?}").to_lowercase();
    let access = |s: &flydsl_ir::codeobj::Access| match s {
        flydsl_ir::codeobj::Access::ReadOnly => "read_only".to_string(),
        flydsl_ir::codeobj::Access::WriteOnly => "write_only".to_string(),
        flydsl_ir::codeobj::Access::ReadWrite => "read_write".to_string(),
        flydsl_ir::codeobj::Access::Other(o) => o.clone(),
    };
    if let Some(s) = &a.address_space {
        f.insert(".address_space".into(), space(s));
    }
    if let Some(s) = &a.access {
        f.insert(".access".into(), access(s));
    }
    if let Some(s) = &a.actual_access {
        f.insert(".actual_access".into(), access(s));
    }
    f
}

/// Every field we model equals readelf's, and every modelled field readelf shows we have.
fn cross_check(t: &Tools, file: &Path, co: &CodeObject) {
    let notes = parse_notes_yaml(&t.readelf(&["--notes"], file));
    assert_eq!(co.target_id, notes.target, "amdhsa.target");
    let version: Vec<String> = co
        .metadata_version
        .map(|(a, b)| vec![a.to_string(), b.to_string()])
        .unwrap_or_default();
    assert_eq!(version, notes.version, "amdhsa.version");
    assert_eq!(co.kernels.len(), notes.kernels.len());
    for (ours, theirs) in co.kernels.iter().zip(&notes.kernels) {
        let mine = our_fields(ours);
        let modelled: Fields = theirs
            .fields
            .iter()
            .filter(|(k, _)| mine.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for key in [".agpr_count", ".vgpr_spill_count", ".sgpr_spill_count"] {
            assert_eq!(
                theirs.fields.contains_key(key),
                mine.contains_key(key),
                "kernel {} optional field {key}",
                ours.name
            );
        }
        assert_eq!(mine, modelled, "kernel {} fields vs readelf", ours.name);
        assert_eq!(
            ours.args.len(),
            theirs.args.len(),
            "kernel {} arg count",
            ours.name
        );
        for (i, (a, b)) in ours.args.iter().zip(&theirs.args).enumerate() {
            let mine = our_arg_fields(a);
            let theirs: Fields = b
                .iter()
                .filter(|(k, _)| {
                    [
                        ".name",
                        ".offset",
                        ".size",
                        ".value_kind",
                        ".address_space",
                        ".access",
                        ".actual_access",
                    ]
                    .contains(&k.as_str())
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(mine, theirs, "kernel {} arg {i}", ours.name);
        }
    }
    // ELF header.
    let header = t.readelf(&["-h"], file);
    let (flags, words) = readelf_flags(&header);
    assert_eq!(co.e_flags, flags);
    assert_eq!(co.arch.name(), words[0].as_str());
    for (feature, setting) in [("xnack", co.xnack), ("sramecc", co.sramecc)] {
        let shown = words
            .iter()
            .find(|w| w.starts_with(feature))
            .map(String::as_str);
        let expect = match setting {
            TargetFeature::Unsupported => None,
            TargetFeature::Any => Some(feature.to_string()),
            TargetFeature::On => Some(format!("{feature}+")),
            TargetFeature::Off => Some(format!("{feature}-")),
        };
        assert_eq!(shown, expect.as_deref(), "{feature} in {words:?}");
    }
    assert_eq!(
        readelf_field(&header, "ABI Version:"),
        co.abi_version.to_string()
    );
    // .text size and per-kernel code size from the section and symbol tables.
    let sections = t.readelf(&["-S", "-W"], file);
    let text = sections
        .lines()
        .find(|l| l.contains(" .text "))
        .expect(".text in readelf -S");
    let cols: Vec<&str> = text.split(']').nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        co.text_size,
        u64::from_str_radix(cols[4], 16).unwrap(),
        "{text}"
    );
    let symbols = t.readelf(&["-s", "-W"], file);
    for k in &co.kernels {
        let line = symbols
            .lines()
            .find(|l| l.contains(" FUNC ") && l.split_whitespace().last() == Some(k.name.as_str()))
            .expect("kernel symbol");
        let size: u64 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert_eq!(k.code_size, Some(size), "{line}");
    }
}

// ---------------------------------------------------------------------------------------

#[test]
fn vadd_all_targets_match_readelf() {
    let Some(t) = tools() else { return };
    for (mcpu, wave, mach) in [
        ("gfx942", 64, 0x4c),
        ("gfx950", 64, 0x4f),
        ("gfx1201", 32, 0x4e),
        ("gfx1250", 32, 0x49),
    ] {
        let built = t.build_amd(&data("vadd_amdgpu.ll"), mcpu);
        let co = parse_hsaco(&built.bytes()).unwrap_or_else(|e| panic!("{mcpu}: {e}"));
        cross_check(&t, &built.hsaco, &co);
        assert_eq!(co.arch.mach, mach, "{mcpu}");
        assert_eq!(co.target(), Some(mcpu.parse::<Target>().unwrap()));
        assert_eq!(co.code_object_version, 6, "LLVM 22 defaults to v6");
        assert_eq!(
            co.target_id.as_deref(),
            Some(format!("amdgcn-amd-amdhsa--{mcpu}").as_str())
        );
        let k = co.kernel("vadd").expect("vadd kernel");
        assert_eq!(k.symbol, "vadd.kd");
        assert_eq!(k.wavefront_size, wave);
        assert_eq!(k.max_flat_workgroup_size, 256);
        assert!(!k.uses_scratch());
        let explicit: Vec<_> = explicit_args(k).collect();
        assert_eq!(explicit.len(), 4);
        assert_eq!(explicit[3].value_kind, ValueKind::ByValue);
        assert!(k.args.len() > 4 && k.args[4..].iter().all(|a| a.value_kind.is_hidden()));
        assert!(co.text_size >= k.code_size.unwrap() && k.code_size.unwrap() > 0);
        // The relocatable object from llc parses too and agrees on the metadata.
        let obj = parse_hsaco(&std::fs::read(&built.obj).unwrap()).unwrap();
        assert_eq!(obj.kernels[0].args, k.args);
        assert_eq!(obj.arch, co.arch);
    }
}

#[test]
fn module_flag_gives_code_object_v5() {
    let Some(t) = tools() else { return };
    for mcpu in GFX {
        let built = t.build_amd(&with_v5_flag(&data("vadd_amdgpu.ll")), mcpu);
        let co = parse_hsaco(&built.bytes()).unwrap();
        assert_eq!((co.code_object_version, co.abi_version), (5, 3), "{mcpu}");
        cross_check(&t, &built.hsaco, &co);
    }
}

#[test]
fn xnack_and_sramecc_settings() {
    let Some(t) = tools() else { return };
    let dir = codeobj_support::scratch("xnack");
    let src = dir.join("k.ll");
    std::fs::write(&src, data("vadd_amdgpu.ll")).unwrap();
    let obj = dir.join("k.o");
    let st = std::process::Command::new(&t.llc)
        .args([
            "-O3",
            "-mtriple=amdgcn-amd-amdhsa",
            "-mcpu=gfx942",
            "-mattr=+xnack,-sramecc",
        ])
        .args(["-filetype=obj", "-o"])
        .arg(&obj)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let co = parse_hsaco(&std::fs::read(&obj).unwrap()).unwrap();
    assert_eq!(
        (co.xnack, co.sramecc),
        (TargetFeature::On, TargetFeature::Off)
    );
    assert_eq!(
        co.target_id.as_deref(),
        Some("amdgcn-amd-amdhsa--gfx942:sramecc-:xnack+")
    );
    cross_check(&t, &obj, &co);
    // gfx1201 supports neither.
    let co = parse_hsaco(&t.build_amd(&data("vadd_amdgpu.ll"), "gfx1201").bytes()).unwrap();
    assert_eq!(
        (co.xnack, co.sramecc),
        (TargetFeature::Unsupported, TargetFeature::Unsupported)
    );
}

#[test]
fn mfma_kernel_reports_agprs() {
    let Some(t) = tools() else { return };
    let built = t.build_amd(&data("mfma942.ll"), "gfx942");
    let co = parse_hsaco(&built.bytes()).unwrap();
    cross_check(&t, &built.hsaco, &co);
    assert!(co.kernels[0].agpr_count.unwrap() > 0, "{:?}", co.kernels[0]);
}

fn norm_params(n: ScalarType) -> Vec<Param> {
    vec![
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
    ]
}

#[test]
fn kernarg_layout_check_on_real_objects() {
    let Some(t) = tools() else { return };
    let good = KernargLayout::of(&norm_params(ScalarType::I32));
    for mcpu in GFX {
        let built = t.build_amd(&data("codeobj_args.ll"), mcpu);
        let co = parse_hsaco(&built.bytes()).unwrap();
        cross_check(&t, &built.hsaco, &co);
        let k = co.kernel("norm").unwrap();
        assert_eq!(
            k.group_segment_fixed_size, 1024,
            "{mcpu}: 256 floats of LDS"
        );
        assert_eq!(k.max_flat_workgroup_size, 256);
        assert_eq!(check_kernarg_layout(k, &good), Ok(()), "{mcpu}");

        // n as i64 moves everything after it: the first mismatch is argument 2 (n).
        let wide = KernargLayout::of(&norm_params(ScalarType::I64));
        let msg = check_kernarg_layout(k, &wide).unwrap_err();
        assert!(
            msg.contains("argument 2")
                && msg.contains("`n`")
                && msg.contains("size 8")
                && msg.contains("size 4"),
            "{msg}"
        );
        // A pointer slot where the object has a by-value argument.
        let mut swapped = good.clone();
        swapped.slots[1].is_pointer = true;
        let msg = check_kernarg_layout(k, &swapped).unwrap_err();
        assert!(
            msg.contains("argument 1") && msg.contains("x.len") && msg.contains("global_buffer"),
            "{msg}"
        );
        // One slot too few / too many.
        let mut short = good.clone();
        short.slots.pop();
        assert!(check_kernarg_layout(k, &short)
            .unwrap_err()
            .contains("argument 5"));
        let mut long = good.clone();
        let mut extra = long.slots[5].clone();
        extra.offset = 40;
        extra.name = "z".into();
        long.slots.push(extra);
        let msg = check_kernarg_layout(k, &long).unwrap_err();
        assert!(msg.contains("argument 6") && msg.contains("`z`"), "{msg}");
    }
}

// ---------------------------------------------------------------------------------------
// Malformed input: errors, never panics.

fn vadd_bytes(t: &Tools) -> Vec<u8> {
    t.build_amd(&data("vadd_amdgpu.ll"), "gfx942").bytes()
}

#[test]
fn truncated_elf_is_an_error() {
    let Some(t) = tools() else { return };
    let bytes = vadd_bytes(&t);
    assert!(parse_hsaco(&bytes).is_ok());
    for len in [0, 3, 15, 16, 63, 64, 200, bytes.len() / 2, bytes.len() - 1] {
        let r = parse_hsaco(&bytes[..len]);
        assert!(
            matches!(r, Err(CodeObjectError::Elf(_))),
            "len {len}: {r:?}"
        );
    }
}

#[test]
fn corrupted_bytes_never_panic() {
    let Some(t) = tools() else { return };
    let bytes = vadd_bytes(&t);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut errors = 0;
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..(1 + rnd() % 4) {
            let i = (rnd() as usize) % b.len();
            b[i] = rnd() as u8;
        }
        if parse_hsaco(&b).is_err() {
            errors += 1;
        }
    }
    assert!(errors > 0, "some corruptions must be detected");
}

#[test]
fn non_amdgpu_elf_is_rejected() {
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    match parse_hsaco(&exe) {
        Err(CodeObjectError::NotAmdgpu { machine }) => assert_ne!(machine, 224),
        other => panic!("{other:?}"),
    }
    let mut elf32 = exe[..64].to_vec();
    elf32[4] = 1;
    let err = parse_hsaco(&elf32).unwrap_err();
    assert!(err.to_string().contains("ELFCLASS64"), "{err}");
    assert!(matches!(
        parse_hsaco(b"MZ\x90\x00 not elf at all"),
        Err(CodeObjectError::Elf(_))
    ));
}

/// Offset of the NT_AMDGPU_METADATA note header (namesz = 7, type = 32, name "AMDGPU\0").
fn note_header(bytes: &[u8]) -> usize {
    bytes
        .windows(20)
        .position(|w| {
            w[..4] == 7u32.to_le_bytes()
                && w[8..12] == 32u32.to_le_bytes()
                && &w[12..19] == b"AMDGPU\0"
        })
        .expect("metadata note")
}

#[test]
fn missing_or_bad_metadata_note() {
    let Some(t) = tools() else { return };
    let bytes = vadd_bytes(&t);
    let at = note_header(&bytes);

    let mut other_type = bytes.clone();
    other_type[at + 8] = 33;
    assert_eq!(
        parse_hsaco(&other_type).unwrap_err(),
        CodeObjectError::NoMetadata
    );

    let mut other_owner = bytes.clone();
    other_owner[at + 12] = b'X';
    assert_eq!(
        parse_hsaco(&other_owner).unwrap_err(),
        CodeObjectError::NoMetadata
    );

    // A map32 marker: the next 4 bytes become a huge entry count that runs off the note.
    let mut bad_msgpack = bytes.clone();
    bad_msgpack[at + 20] = 0xdf;
    let r = parse_hsaco(&bad_msgpack);
    assert!(matches!(r, Err(CodeObjectError::Msgpack(_))), "{r:?}");

    // The never-used marker 0xc1 decodes as nil: not a map.
    let mut not_map = bytes.clone();
    not_map[at + 20] = 0xc1;
    match parse_hsaco(&not_map) {
        Err(CodeObjectError::Metadata { at, what }) => {
            assert_eq!(at, "metadata");
            assert!(what.contains("expected a map"), "{what}");
        }
        other => panic!("{other:?}"),
    }

    // The top-level map's first key `amdhsa.kernels` renamed: no kernels, still valid.
    let mut renamed = bytes.clone();
    let key = renamed
        .windows(14)
        .position(|w| w == b"amdhsa.kernels")
        .unwrap();
    renamed[key] = b'X';
    assert!(parse_hsaco(&renamed).unwrap().kernels.is_empty());

    // A required kernel field renamed: the error names the kernel and the field.
    let mut no_vgpr = bytes.clone();
    let key = no_vgpr
        .windows(11)
        .position(|w| w == b".vgpr_count")
        .unwrap();
    no_vgpr[key + 1] = b'X';
    match parse_hsaco(&no_vgpr) {
        Err(CodeObjectError::Metadata { at, what }) => {
            assert!(
                at.contains("vadd") && at.contains("vgpr_count"),
                "{at}: {what}"
            );
        }
        other => panic!("{other:?}"),
    }

    let mut not_hsa = bytes.clone();
    not_hsa[7] = 0;
    assert_eq!(
        parse_hsaco(&not_hsa).unwrap_err(),
        CodeObjectError::NotHsa { os_abi: 0 }
    );
}
