//! Reading the entry signatures and static shared memory of a PTX module.

mod error;
mod lex;

pub use error::PtxError;

use crate::KernargLayout;
use lex::{lex, Tok};

/// One `.param` of an `.entry`.
///
/// ```
/// use flydsl_ir::codeobj::parse_ptx;
/// let m = parse_ptx(".version 8.0\n.target sm_90\n.entry k(.param .align 8 .b8 p[16]) {}").unwrap();
/// let p = &m.entries[0].params[0];
/// assert_eq!((p.ty.as_str(), p.array_len, p.size, p.align), (".b8", Some(16), 16, 8));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxParam {
    /// The parameter name.
    pub name: String,
    /// The element type (`.u64`, `.f32`, `.b8`, ...), with a `.v2`/`.v4` prefix if any.
    pub ty: String,
    /// True when declared with `.ptr` (a pointer to `state_space`).
    pub is_pointer: bool,
    /// The pointee state space of a `.ptr` parameter (`.global`, ...).
    pub state_space: Option<String>,
    /// The pointee alignment of a `.ptr` parameter (its `.align`).
    pub pointee_align: Option<u32>,
    /// The element count of an array parameter (`.b8 p[16]`).
    pub array_len: Option<u32>,
    /// Size in bytes.
    pub size: u32,
    /// Alignment in bytes: `.align` of a non-pointer parameter, else the type's size.
    pub align: u32,
    /// Offset in a packed parameter buffer (natural alignment, in order).
    pub offset: u32,
}

/// One `.shared` variable.
///
/// ```
/// use flydsl_ir::codeobj::parse_ptx;
/// let m = parse_ptx(".version 8.0\n.target sm_90\n.shared .align 16 .b8 s[400];").unwrap();
/// assert_eq!((m.shared[0].size, m.shared[0].align), (400, 16));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxShared {
    /// The variable name.
    pub name: String,
    /// Size in bytes (0 for a dynamic `.extern .shared ... x[]`).
    pub size: u64,
    /// Alignment in bytes.
    pub align: u32,
    /// True for `.extern` (dynamically sized) shared memory.
    pub is_extern: bool,
}

/// One `.entry` (kernel).
///
/// ```
/// use flydsl_ir::codeobj::parse_ptx;
/// let m = parse_ptx(".version 8.0\n.target sm_90\n.entry k() .maxntid 128, 2 {}").unwrap();
/// assert_eq!(m.entries[0].maxntid, Some([128, 2, 1]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    /// The entry name.
    pub name: String,
    /// Its parameters, in order.
    pub params: Vec<PtxParam>,
    /// `.maxntid` (missing dimensions are 1).
    pub maxntid: Option<[u32; 3]>,
    /// `.reqntid` (missing dimensions are 1).
    pub reqntid: Option<[u32; 3]>,
    /// `.maxnreg`.
    pub maxnreg: Option<u32>,
    /// `.shared` variables declared inside the body.
    pub shared: Vec<PtxShared>,
}

impl PtxEntry {
    /// Bytes of the packed parameter buffer (last parameter's end, unpadded).
    ///
    /// ```
    /// # use flydsl_ir::codeobj::parse_ptx;
    /// let m = parse_ptx(".version 8.0\n.target sm_90\n.entry k(.param .u32 a, .param .u64 b) {}")
    ///     .unwrap();
    /// assert_eq!(m.entries[0].param_bytes(), 16);
    /// ```
    pub fn param_bytes(&self) -> u32 {
        self.params.last().map_or(0, |p| p.offset + p.size)
    }
}

/// A parsed PTX module.
///
/// ```
/// use flydsl_ir::codeobj::parse_ptx;
/// let m = parse_ptx(".version 8.0\n.target sm_90\n.address_size 64\n").unwrap();
/// assert_eq!((m.version.as_str(), m.target[0].as_str(), m.address_size), ("8.0", "sm_90", Some(64)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxModule {
    /// `.version` (e.g. `8.0`).
    pub version: String,
    /// `.target` items (e.g. `sm_90`, then options such as `texmode_independent`).
    pub target: Vec<String>,
    /// `.address_size`.
    pub address_size: Option<u32>,
    /// The `.entry` kernels in order (`.func` bodies are skipped).
    pub entries: Vec<PtxEntry>,
    /// Module-scope `.shared` variables.
    pub shared: Vec<PtxShared>,
}

impl PtxModule {
    /// The entry named `name`.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::parse_ptx;
    /// let m = parse_ptx(".version 8.0\n.target sm_90\n.entry k() {}").unwrap();
    /// assert!(m.entry("k").is_some() && m.entry("q").is_none());
    /// ```
    pub fn entry(&self, name: &str) -> Option<&PtxEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Check the module was built for `target`: an NVIDIA target, `.target` exactly
    /// [`Target::ptx_target`](crate::Target::ptx_target) (`sm_90a` for sm_90: plain `sm_90`
    /// code is rejected, as the driver refuses `wgmma`/`setmaxnreg` there), 64-bit addresses.
    /// The PTX check of a build calls this with the kernel's target; the wave size to expect
    /// is `target.wave_size()`.
    ///
    /// ```
    /// # use flydsl_ir::{codeobj::parse_ptx, Target};
    /// let m = parse_ptx(".version 8.4\n.target sm_90a\n.address_size 64\n").unwrap();
    /// assert!(m.check_target(Target::Sm90).is_ok());
    /// let m = parse_ptx(".version 8.0\n.target sm_90\n.address_size 64\n").unwrap();
    /// assert!(m.check_target(Target::Sm90).unwrap_err().contains("expected `.target sm_90a`"));
    /// let m = parse_ptx(".version 8.0\n.target sm_80\n.address_size 64\n").unwrap();
    /// assert!(m.check_target(Target::Sm90).unwrap_err().contains("sm_80"));
    /// assert!(m.check_target(Target::Gfx942).is_err());
    /// ```
    pub fn check_target(&self, target: crate::Target) -> Result<(), String> {
        let Some(arch) = target.ptx_target() else {
            return Err(format!(
                "PTX checked against {target}: PTX is built for NVIDIA targets only"
            ));
        };
        let got = self.target.first().map(String::as_str).unwrap_or("");
        if got != arch {
            return Err(format!(
                "PTX `.target {got}` is not what {target} kernels are built for: expected \
                 `.target {arch}` (Target::ptx_target); rebuild with llc -mcpu={arch}"
            ));
        }
        if self.address_size != Some(64) {
            return Err(format!(
                "PTX `.address_size` is {:?}, not 64: build with the nvptx64 triple",
                self.address_size
            ));
        }
        Ok(())
    }

    /// Static shared bytes an entry may use: its own `.shared` variables plus every
    /// module-scope one (an upper bound: use is not analysed), each placed at its alignment.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::parse_ptx;
    /// let m = parse_ptx(".version 8.0\n.target sm_90\n.shared .b8 a[3];\n\
    ///                    .entry k() { .shared .align 8 .b64 b[2]; ret; }").unwrap();
    /// assert_eq!(m.static_shared_bytes(&m.entries[0]), 8 + 16);
    /// ```
    pub fn static_shared_bytes(&self, entry: &PtxEntry) -> u64 {
        self.shared
            .iter()
            .chain(&entry.shared)
            .fold(0u64, |end, s| {
                end.next_multiple_of(u64::from(s.align.max(1)))
                    .saturating_add(s.size)
            })
    }
}

/// Parse the module header, every `.entry` signature with its performance directives, and the
/// static `.shared` declarations of a PTX text.
///
/// ```
/// use flydsl_ir::codeobj::parse_ptx;
/// let ptx = "
/// .version 8.0
/// .target sm_90
/// .address_size 64
/// .visible .entry vadd(
///     .param .u64 .ptr .global .align 1 vadd_param_0,
///     .param .u32 vadd_param_1
/// )
/// .maxntid 256
/// {
///     ret;
/// }";
/// let m = parse_ptx(ptx).unwrap();
/// let e = m.entry("vadd").unwrap();
/// assert!(e.params[0].is_pointer);
/// assert_eq!((e.params[1].offset, e.params[1].size), (8, 4));
/// assert_eq!(e.maxntid, Some([256, 1, 1]));
/// ```
pub fn parse_ptx(text: &str) -> Result<PtxModule, PtxError> {
    Parser {
        toks: lex(text)?,
        pos: 0,
    }
    .module()
}

/// Check that the parameters of `entry` are exactly the slots of `layout`: the same count,
/// and for each index the same size and the same offset when packed at natural alignment;
/// pointer slots must be 64-bit integer parameters (`.u64`/`.b64`/`.s64`), and a `.ptr`
/// parameter must be a pointer slot.
///
/// ```
/// use flydsl_ir::*;
/// use flydsl_ir::codeobj::{check_kernarg_layout_ptx, parse_ptx};
/// let layout = KernargLayout::of(&[
///     Param { name: "x".into(), kind: ParamKind::Tensor { elem: ScalarType::F32, writable: false } },
/// ]);
/// let m = parse_ptx(".version 8.0\n.target sm_90\n\
///                    .entry k(.param .u64 .ptr .global .align 1 p0, .param .u64 p1) {}").unwrap();
/// assert_eq!(check_kernarg_layout_ptx(&m.entries[0], &layout), Ok(()));
/// let m = parse_ptx(".version 8.0\n.target sm_90\n\
///                    .entry k(.param .u64 p0, .param .u32 p1) {}").unwrap();
/// let msg = check_kernarg_layout_ptx(&m.entries[0], &layout).unwrap_err();
/// assert!(msg.contains("parameter 1") && msg.contains("x.len"), "{msg}");
/// ```
pub fn check_kernarg_layout_ptx(entry: &PtxEntry, layout: &KernargLayout) -> Result<(), String> {
    let k = &entry.name;
    if entry.params.len() != layout.slots.len() {
        let names: Vec<&str> = layout.slots.iter().map(|s| s.name.as_str()).collect();
        return Err(format!(
            "entry `{k}` has {} parameters but the layout has {} slots ({})",
            entry.params.len(),
            layout.slots.len(),
            names.join(", ")
        ));
    }
    for (i, (p, s)) in entry.params.iter().zip(&layout.slots).enumerate() {
        let wide_int = matches!(p.ty.as_str(), ".u64" | ".b64" | ".s64") && p.array_len.is_none();
        let kind_ok = if s.is_pointer {
            wide_int
        } else {
            !p.is_pointer
        };
        if p.size != s.size || p.offset != s.offset || !kind_ok {
            let want = if s.is_pointer {
                "pointer, .u64"
            } else {
                "by value"
            };
            let ptr = if p.is_pointer { " .ptr" } else { "" };
            return Err(format!(
                "entry `{k}` parameter {i}: expected `{}` ({want}, offset {}, size {}) from the \
                 layout, found `{}` ({}{ptr}, offset {}, size {}) in the PTX",
                s.name, s.offset, s.size, p.name, p.ty, p.offset, p.size
            ));
        }
    }
    Ok(())
}

/// Size in bytes of a PTX fundamental type.
fn type_size(ty: &str) -> Option<u32> {
    Some(match ty {
        ".b8" | ".u8" | ".s8" | ".pred" | ".e4m3" | ".e5m2" => 1,
        ".b16" | ".u16" | ".s16" | ".f16" | ".bf16" | ".e4m3x2" | ".e5m2x2" => 2,
        ".b32" | ".u32" | ".s32" | ".f32" | ".f16x2" | ".bf16x2" | ".tf32" => 4,
        ".b64" | ".u64" | ".s64" | ".f64" => 8,
        ".b128" => 16,
        _ => return None,
    })
}

fn vector_len(word: &str) -> Option<u32> {
    match word {
        ".v2" => Some(2),
        ".v4" => Some(4),
        ".v8" => Some(8),
        _ => None,
    }
}

const STATE_SPACES: [&str; 5] = [".global", ".shared", ".const", ".local", ".param"];

/// The qualifiers of a declaration (`.align 8 .v4 .f32`, `.ptr .global .align 1 .u64`).
#[derive(Default)]
struct Decl {
    ty: Option<String>,
    vec: u32,
    align: Option<u32>,
    is_pointer: bool,
    state_space: Option<String>,
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(|t| t.text.as_str())
    }

    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(1, |t| t.line)
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, PtxError> {
        Err(PtxError {
            line: self.line(),
            message: message.into(),
        })
    }

    fn next(&mut self) -> Result<String, PtxError> {
        match self.toks.get(self.pos) {
            Some(t) => {
                self.pos += 1;
                Ok(t.text.clone())
            }
            None => self.err("unexpected end of the PTX text"),
        }
    }

    fn expect(&mut self, want: &str) -> Result<(), PtxError> {
        match self.peek() {
            Some(t) if t == want => {
                self.pos += 1;
                Ok(())
            }
            Some(t) => {
                let t = t.to_string();
                self.err(format!("expected `{want}`, found `{t}`"))
            }
            None => self.err(format!("expected `{want}`, found the end of the text")),
        }
    }

    fn eat(&mut self, want: &str) -> bool {
        let hit = self.peek() == Some(want);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn number(&mut self, what: &str) -> Result<u32, PtxError> {
        let t = self.next()?;
        let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => t.parse().ok(),
        };
        match parsed {
            Some(n) => Ok(n),
            None => {
                self.pos -= 1;
                self.err(format!("expected a number for {what}, found `{t}`"))
            }
        }
    }

    fn ident(&mut self, what: &str) -> Result<String, PtxError> {
        let t = self.next()?;
        let ok = t
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || "_$%".contains(c));
        if !ok {
            self.pos -= 1;
            return self.err(format!("expected {what}, found `{t}`"));
        }
        Ok(t)
    }

    /// Skip a balanced `{ ... }` starting at the current `{`.
    fn skip_block(&mut self) -> Result<(), PtxError> {
        let start = self.line();
        let mut depth = 0usize;
        while let Some(t) = self.toks.get(self.pos) {
            self.pos += 1;
            match t.text.as_str() {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Err(PtxError {
            line: start,
            message: "unclosed `{`".into(),
        })
    }

    /// Skip to the `;` that ends a statement (skipping brace initialisers).
    fn skip_statement(&mut self) -> Result<(), PtxError> {
        while let Some(t) = self.peek() {
            match t {
                ";" => {
                    self.pos += 1;
                    return Ok(());
                }
                "{" => self.skip_block()?,
                _ => self.pos += 1,
            }
        }
        Ok(())
    }

    fn module(mut self) -> Result<PtxModule, PtxError> {
        let mut m = PtxModule {
            version: String::new(),
            target: Vec::new(),
            address_size: None,
            entries: Vec::new(),
            shared: Vec::new(),
        };
        let mut is_extern = false;
        while let Some(t) = self.peek() {
            match t {
                ".version" => {
                    self.pos += 1;
                    m.version = self.next()?;
                }
                ".target" => {
                    self.pos += 1;
                    m.target.push(self.next()?);
                    while self.eat(",") {
                        m.target.push(self.next()?);
                    }
                }
                ".address_size" => {
                    self.pos += 1;
                    m.address_size = Some(self.number(".address_size")?);
                }
                ".visible" | ".weak" | ".common" => self.pos += 1,
                ".file" => {
                    // `.file 1 "name" [, timestamp, size]`: no terminating `;`.
                    self.pos += 1;
                    self.number(".file")?;
                    self.next()?;
                    while self.eat(",") {
                        self.next()?;
                    }
                }
                ".extern" => {
                    self.pos += 1;
                    is_extern = true;
                    continue;
                }
                ".entry" => {
                    self.pos += 1;
                    if let Some(e) = self.entry()? {
                        m.entries.push(e);
                    }
                }
                ".shared" => {
                    self.pos += 1;
                    m.shared.push(self.shared(is_extern)?);
                }
                "{" => self.skip_block()?,
                // .func, .global/.const variables, .file, .section, ...: not needed.
                _ => self.skip_statement_or_function()?,
            }
            is_extern = false;
        }
        if m.version.is_empty() {
            return Err(PtxError {
                line: 1,
                message: "no `.version` directive".into(),
            });
        }
        if m.target.is_empty() {
            return Err(PtxError {
                line: 1,
                message: "no `.target` directive".into(),
            });
        }
        Ok(m)
    }

    /// Skip an unknown top-level item: up to a `;` or through a `{ ... }` body, whichever
    /// comes first at parenthesis depth 0.
    fn skip_statement_or_function(&mut self) -> Result<(), PtxError> {
        let mut parens = 0i32;
        while let Some(t) = self.peek() {
            match t {
                "(" => parens += 1,
                ")" => parens -= 1,
                ";" if parens <= 0 => {
                    self.pos += 1;
                    return Ok(());
                }
                "{" if parens <= 0 => return self.skip_block(),
                _ => {}
            }
            self.pos += 1;
        }
        Ok(())
    }

    /// After `.entry`: name, parameters, directives, then a body or `;` (a declaration,
    /// which yields `None`).
    fn entry(&mut self) -> Result<Option<PtxEntry>, PtxError> {
        let name = self.ident("an entry name")?;
        let mut params = Vec::new();
        if self.eat("(") {
            let mut offset = 0u32;
            if !self.eat(")") {
                loop {
                    let p = self.param(offset)?;
                    offset = p.offset + p.size;
                    params.push(p);
                    if self.eat(")") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
        }
        let mut e = PtxEntry {
            name,
            params,
            maxntid: None,
            reqntid: None,
            maxnreg: None,
            shared: vec![],
        };
        loop {
            match self.peek() {
                Some(".maxntid") => {
                    self.pos += 1;
                    e.maxntid = Some(self.dims(".maxntid")?);
                }
                Some(".reqntid") => {
                    self.pos += 1;
                    e.reqntid = Some(self.dims(".reqntid")?);
                }
                Some(".maxnreg") => {
                    self.pos += 1;
                    e.maxnreg = Some(self.number(".maxnreg")?);
                }
                Some(";") => {
                    self.pos += 1;
                    return Ok(None);
                }
                Some("{") => break,
                Some(".pragma") => self.skip_statement()?,
                Some(t) if t.starts_with('.') => {
                    // .minnctapersm n, .maxclusterrank n, .noreturn, ...
                    self.pos += 1;
                    while self
                        .peek()
                        .is_some_and(|t| t.chars().all(|c| c.is_ascii_digit()))
                    {
                        self.pos += 1;
                        self.eat(",");
                    }
                }
                Some(t) => {
                    let t = t.to_string();
                    return self.err(format!(
                        "expected `{{` to open the body of `{}`, found `{t}`",
                        e.name
                    ));
                }
                None => return self.err(format!("entry `{}` has no body", e.name)),
            }
        }
        self.body(&mut e)?;
        Ok(Some(e))
    }

    fn dims(&mut self, what: &str) -> Result<[u32; 3], PtxError> {
        let mut d = [1u32; 3];
        d[0] = self.number(what)?;
        for slot in d.iter_mut().skip(1) {
            if !self.eat(",") {
                break;
            }
            *slot = self.number(what)?;
        }
        Ok(d)
    }

    /// Walk a body, collecting `.shared` declarations at any depth.
    fn body(&mut self, e: &mut PtxEntry) -> Result<(), PtxError> {
        let start = self.line();
        self.expect("{")?;
        let mut depth = 1usize;
        let mut is_extern = false;
        while let Some(t) = self.peek() {
            match t {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos += 1;
                        return Ok(());
                    }
                }
                ".extern" => {
                    self.pos += 1;
                    is_extern = true;
                    continue;
                }
                ".shared" => {
                    self.pos += 1;
                    let s = self.shared(is_extern)?;
                    e.shared.push(s);
                    is_extern = false;
                    continue;
                }
                _ => {}
            }
            is_extern = false;
            self.pos += 1;
        }
        Err(PtxError {
            line: start,
            message: format!("the body of `{}` is not closed", e.name),
        })
    }

    /// Qualifiers up to the declared name.
    fn decl(&mut self) -> Result<Decl, PtxError> {
        let mut d = Decl {
            vec: 1,
            ..Decl::default()
        };
        while let Some(t) = self.peek() {
            if !t.starts_with('.') {
                break;
            }
            let t = t.to_string();
            self.pos += 1;
            if t == ".align" {
                d.align = Some(self.number(".align")?);
            } else if t == ".ptr" {
                d.is_pointer = true;
            } else if let Some(n) = vector_len(&t) {
                d.vec = n;
            } else if STATE_SPACES.contains(&t.as_str()) {
                d.state_space = Some(t);
            } else if type_size(&t).is_some() {
                d.ty = Some(t);
            } else {
                self.pos -= 1;
                return self.err(format!("unknown PTX type or qualifier `{t}`"));
            }
        }
        Ok(d)
    }

    /// `[N]` suffixes; `Ok(None)` when there are none, `Some(0)` for `[]`.
    fn array_dims(&mut self) -> Result<Option<u64>, PtxError> {
        let mut total: Option<u64> = None;
        while self.eat("[") {
            let n = if self.peek() == Some("]") {
                0
            } else {
                u64::from(self.number("an array length")?)
            };
            self.expect("]")?;
            total = Some(total.unwrap_or(1).saturating_mul(n));
        }
        Ok(total)
    }

    fn param(&mut self, offset: u32) -> Result<PtxParam, PtxError> {
        self.expect(".param")?;
        let d = self.decl()?;
        let Some(ty) = d.ty else {
            return self.err("a `.param` without a type");
        };
        let name = self.ident("a parameter name")?;
        let array_len = match self.array_dims()? {
            None => None,
            Some(n) => match u32::try_from(n) {
                Ok(n) => Some(n),
                Err(_) => return self.err(format!("parameter `{name}` is too large")),
            },
        };
        let elem = type_size(&ty).unwrap_or(1) * d.vec;
        let Some(size) = elem.checked_mul(array_len.unwrap_or(1)) else {
            return self.err(format!("parameter `{name}` is too large"));
        };
        let (align, pointee_align) = if d.is_pointer {
            (elem, d.align)
        } else {
            (d.align.unwrap_or(elem), None)
        };
        let align = align.max(1);
        let ty = if d.vec > 1 {
            format!(".v{} {ty}", d.vec)
        } else {
            ty
        };
        let Some(offset) = offset.checked_next_multiple_of(align) else {
            return self.err(format!("parameter `{name}` offset overflows"));
        };
        if offset.checked_add(size).is_none() {
            return self.err(format!("parameter `{name}` offset overflows"));
        }
        Ok(PtxParam {
            name,
            ty,
            is_pointer: d.is_pointer,
            state_space: if d.is_pointer { d.state_space } else { None },
            pointee_align,
            array_len,
            size,
            align,
            offset,
        })
    }

    /// After `.shared`: qualifiers, name, dimensions, optional initialiser, `;`.
    fn shared(&mut self, is_extern: bool) -> Result<PtxShared, PtxError> {
        let d = self.decl()?;
        let Some(ty) = d.ty else {
            return self.err("a `.shared` variable without a type");
        };
        let name = self.ident("a shared variable name")?;
        let elem = u64::from(type_size(&ty).unwrap_or(1) * d.vec);
        let size = elem.saturating_mul(self.array_dims()?.unwrap_or(1));
        self.skip_statement()?;
        let align = d.align.unwrap_or(elem as u32).max(1);
        Ok(PtxShared {
            name,
            size: if is_extern { 0 } else { size },
            align,
            is_extern,
        })
    }
}
