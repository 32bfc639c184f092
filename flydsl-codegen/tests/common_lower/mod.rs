//! Shared helpers for the lowering tests: a tiny hand builder for kernel IR and a driver for
//! `llc-22` / `rust-lld` / `llvm-objdump-22` / `llvm-readelf-22`.
#![allow(dead_code)]

use flydsl_ir::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds a kernel by hand: allocates value ids and pushes ops into the open block.
pub struct KB {
    /// The kernel under construction.
    pub k: Kernel,
    stack: Vec<Block>,
}

impl KB {
    /// A new kernel with an empty body.
    pub fn new(name: &str, target: Target) -> KB {
        KB {
            k: Kernel::empty(name, target),
            stack: vec![Block::default()],
        }
    }
    /// A fresh value of type `t`.
    pub fn val(&mut self, t: Type) -> ValueId {
        self.k.values.push(t);
        ValueId(self.k.values.len() as u32 - 1)
    }
    /// A tensor parameter: (pointer, extent).
    pub fn tensor(&mut self, name: &str, elem: ScalarType, writable: bool) -> (ValueId, ValueId) {
        let p = self.val(Type::Ptr(AddrSpace::Global, elem));
        let n = self.val(Type::s(ScalarType::I64));
        self.k.params.push(Param {
            name: name.into(),
            kind: ParamKind::Tensor { elem, writable },
        });
        self.k.param_values.push(vec![p, n]);
        (p, n)
    }
    /// A scalar parameter.
    pub fn scalar(&mut self, name: &str, s: ScalarType) -> ValueId {
        let v = self.val(Type::s(s));
        self.k.params.push(Param {
            name: name.into(),
            kind: ParamKind::Scalar(s),
        });
        self.k.param_values.push(vec![v]);
        v
    }
    /// An LDS array; returns its id.
    pub fn lds(&mut self, name: &str, elem: ScalarType, len: u32, align: u32) -> u32 {
        let offset = self.k.lds_bytes().next_multiple_of(align);
        self.k.lds.push(LdsArray {
            name: name.into(),
            elem,
            len,
            offset,
            align,
        });
        self.k.lds.len() as u32 - 1
    }
    /// Push an op with the given result types.
    pub fn op_n(&mut self, kind: OpKind, results: &[Type]) -> Vec<ValueId> {
        let rs: Vec<ValueId> = results.iter().map(|&t| self.val(t)).collect();
        self.stack.last_mut().unwrap().ops.push(Op {
            results: rs.clone(),
            kind,
        });
        rs
    }
    /// Push an op with one result.
    pub fn op(&mut self, kind: OpKind, t: Type) -> ValueId {
        self.op_n(kind, &[t])[0]
    }
    /// Push an op without results.
    pub fn op0(&mut self, kind: OpKind) {
        self.op_n(kind, &[]);
    }
    /// An i32 constant.
    pub fn i32(&mut self, v: i64) -> ValueId {
        self.op(OpKind::Const(Const::Int(v)), Type::s(ScalarType::I32))
    }
    /// A float constant of type `t`.
    pub fn fc(&mut self, v: f64, t: Type) -> ValueId {
        self.op(OpKind::Const(Const::Float(v)), t)
    }
    /// Thread id x.
    pub fn tid(&mut self) -> ValueId {
        self.op(
            OpKind::Special(Special::ThreadId(Dim::X)),
            Type::s(ScalarType::I32),
        )
    }
    /// Open a region whose block has arguments of the given types.
    pub fn begin(&mut self, args: &[Type]) -> Vec<ValueId> {
        let a: Vec<ValueId> = args.iter().map(|&t| self.val(t)).collect();
        self.stack.push(Block {
            args: a.clone(),
            ops: vec![],
        });
        a
    }
    /// Close the innermost region.
    pub fn end(&mut self) -> Block {
        self.stack.pop().unwrap()
    }
    /// `if cond { then } else { else }` with results, each region built by a closure that
    /// returns its yielded values.
    pub fn if_(
        &mut self,
        cond: ValueId,
        tys: &[Type],
        then: impl FnOnce(&mut KB) -> Vec<ValueId>,
        els: impl FnOnce(&mut KB) -> Vec<ValueId>,
    ) -> Vec<ValueId> {
        self.begin(&[]);
        let y = then(self);
        self.op0(OpKind::Yield(y));
        let then_block = self.end();
        self.begin(&[]);
        let y = els(self);
        self.op0(OpKind::Yield(y));
        let else_block = self.end();
        self.op_n(
            OpKind::If {
                cond,
                then_block,
                else_block,
            },
            tys,
        )
    }
    /// `for iv in lb..ub step` carrying `init`; the body gets (iv, carried) and returns the
    /// next carried values.
    pub fn for_(
        &mut self,
        lb: ValueId,
        ub: ValueId,
        step: ValueId,
        init: &[ValueId],
        body: impl FnOnce(&mut KB, ValueId, &[ValueId]) -> Vec<ValueId>,
    ) -> Vec<ValueId> {
        let tys: Vec<Type> = init.iter().map(|&v| self.k.ty(v)).collect();
        let mut arg_tys = vec![Type::s(ScalarType::I32)];
        arg_tys.extend(&tys);
        let args = self.begin(&arg_tys);
        let y = body(self, args[0], &args[1..]);
        self.op0(OpKind::Yield(y));
        let body = self.end();
        self.op_n(
            OpKind::For {
                lb,
                ub,
                step,
                init: init.to_vec(),
                body,
            },
            &tys,
        )
    }
    /// The finished kernel.
    pub fn finish(mut self) -> Kernel {
        self.k.body = self.stack.pop().unwrap();
        self.k
    }
}

/// The LLVM tools the tests drive.
pub struct Tools {
    /// llc-22.
    pub llc: PathBuf,
    /// llvm-objdump-22.
    pub objdump: PathBuf,
    /// llvm-readelf-22.
    pub readelf: PathBuf,
    /// rust-lld.
    pub lld: PathBuf,
}

fn find_tool(names: &[&str]) -> Option<PathBuf> {
    for n in names {
        let p = Path::new(n);
        if p.is_absolute() {
            if p.exists() {
                return Some(p.to_path_buf());
            }
            continue;
        }
        if let Ok(path) = std::env::var("PATH") {
            for dir in std::env::split_paths(&path) {
                let c = dir.join(n);
                if c.exists() {
                    return Some(c);
                }
            }
        }
    }
    None
}

fn find_lld() -> Option<PathBuf> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let dir = Path::new(sysroot.trim()).join("lib/rustlib");
    for e in std::fs::read_dir(&dir).ok()? {
        let p = e.ok()?.path().join("bin/rust-lld");
        if p.exists() {
            return Some(p);
        }
    }
    None
}

/// The tools, or `None` with a printed skip reason. With `CI` set, missing tools fail.
pub fn tools() -> Option<Tools> {
    let t = (|| {
        Some(Tools {
            llc: find_tool(&["llc-22", "/usr/lib/llvm-22/bin/llc"])?,
            objdump: find_tool(&["llvm-objdump-22", "/usr/lib/llvm-22/bin/llvm-objdump"])?,
            readelf: find_tool(&["llvm-readelf-22", "/usr/lib/llvm-22/bin/llvm-readelf"])?,
            lld: find_lld()?,
        })
    })();
    if t.is_none() {
        let msg = "llc-22 / llvm-objdump-22 / llvm-readelf-22 / rust-lld not found: install \
                   `llvm-22` (apt) and a rustup toolchain";
        if std::env::var_os("CI").is_some() {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
    }
    t
}

/// The compiled artefacts of one kernel.
pub struct Compiled {
    /// Disassembly (AMD) or PTX text (NVIDIA).
    pub asm: String,
    /// `llvm-readelf --notes` output (AMD only).
    pub notes: String,
    /// The LLVM IR that was compiled.
    pub ir: String,
}

fn run(cmd: &mut Command, what: &str, ir: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    if !out.status.success() {
        panic!(
            "{what} failed:\n{}\n--- IR ---\n{ir}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Lower `k` and compile it for its target; panics with the IR on any failure.
pub fn compile(t: &Tools, k: &Kernel) -> Compiled {
    let ir = flydsl_codegen::lower(k).unwrap_or_else(|e| panic!("lowering failed: {e}"));
    let dir = std::env::temp_dir()
        .join(format!("flydsl-lower-tests-{}", std::process::id()))
        .join(format!("{}-{}", k.name, k.target));
    std::fs::create_dir_all(&dir).unwrap();
    let ll = dir.join("k.ll");
    std::fs::write(&ll, &ir).unwrap();
    let cpu = k.target.mcpu();
    if k.target.is_amd() {
        let obj = dir.join("k.o");
        let hsaco = dir.join("k.hsaco");
        run(
            Command::new(&t.llc)
                .args(["-O3", "-mtriple=amdgcn-amd-amdhsa", &format!("-mcpu={cpu}")])
                .args(["-filetype=obj", "-o"])
                .arg(&obj)
                .arg(&ll),
            "llc",
            &ir,
        );
        run(
            Command::new(&t.lld)
                .args(["-flavor", "gnu", "-shared", "-o"])
                .arg(&hsaco)
                .arg(&obj),
            "rust-lld",
            &ir,
        );
        let asm = run(
            Command::new(&t.objdump)
                .args(["-d", &format!("--mcpu={cpu}")])
                .arg(&hsaco),
            "objdump",
            &ir,
        );
        let notes = run(
            Command::new(&t.readelf).arg("--notes").arg(&hsaco),
            "readelf",
            &ir,
        );
        let _ = std::fs::remove_dir_all(&dir);
        Compiled { asm, notes, ir }
    } else {
        let ptx = dir.join("k.ptx");
        run(
            Command::new(&t.llc)
                .args([
                    "-O3",
                    "-mtriple=nvptx64-nvidia-cuda",
                    "-mcpu=sm_90",
                    "-mattr=+ptx84",
                ])
                .arg("-o")
                .arg(&ptx)
                .arg(&ll),
            "llc",
            &ir,
        );
        let asm = std::fs::read_to_string(&ptx).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        Compiled {
            asm,
            notes: String::new(),
            ir,
        }
    }
}

/// `key: value` of the AMDGPU metadata note (first occurrence).
pub fn note_value(notes: &str, key: &str) -> Option<String> {
    notes.lines().find_map(|l| {
        let l = l.trim().trim_start_matches("- ");
        l.strip_prefix(key)
            .and_then(|r| r.trim_start().strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

/// The (offset, size) of every explicit kernel argument in the metadata note, in order
/// (hidden arguments are skipped).
pub fn note_args(notes: &str) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let (mut off, mut size) = (None, None);
    let mut in_args = false;
    for l in notes.lines() {
        let l = l.trim().trim_start_matches("- ");
        if l.starts_with(".args:") {
            in_args = true;
            continue;
        }
        if !in_args {
            continue;
        }
        if let Some(v) = l.strip_prefix(".offset:") {
            off = v.trim().parse::<u32>().ok();
        } else if let Some(v) = l.strip_prefix(".size:") {
            size = v.trim().parse::<u32>().ok();
        } else if let Some(v) = l.strip_prefix(".value_kind:") {
            if let (Some(o), Some(s)) = (off.take(), size.take()) {
                if !v.trim().starts_with("hidden_") {
                    out.push((o, s));
                }
            }
        } else if !l.starts_with('.') || l.starts_with(".group_segment_fixed_size") {
            break;
        }
    }
    out
}

/// Check the standard properties of an AMD code object against the kernel.
pub fn check_amd_object(k: &Kernel, c: &Compiled) {
    let wave = note_value(&c.notes, ".wavefront_size").expect("wavefront size in notes");
    assert_eq!(
        wave,
        k.target.wave_size().to_string(),
        "wave size of {}",
        k.name
    );
    assert_eq!(
        note_value(&c.notes, ".private_segment_fixed_size").as_deref(),
        Some("0"),
        "scratch use in {}:\n{}",
        k.name,
        c.notes
    );
    let want: Vec<(u32, u32)> = k
        .kernarg_layout()
        .slots
        .iter()
        .map(|s| (s.offset, s.size))
        .collect();
    assert_eq!(
        note_args(&c.notes),
        want,
        "kernarg layout of {}:\n{}",
        k.name,
        c.notes
    );
}

/// The four AMD targets.
pub const AMD: [Target; 4] = [
    Target::Gfx942,
    Target::Gfx950,
    Target::Gfx1201,
    Target::Gfx1250,
];
