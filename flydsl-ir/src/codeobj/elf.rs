//! The ELF side of an AMDGPU code object: header checks, `e_flags`, notes, sections, symbols.

use super::meta::{parse_metadata, KernelMeta};
use super::msgpack::decode;
use super::CodeObjectError;
use crate::Target;
use object::elf::{FileHeader64, SHT_SYMTAB, STT_FUNC};
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym};
use object::Endianness;

/// `ELFOSABI_AMDGPU_HSA`.
const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `NT_AMDGPU_METADATA`.
const NT_AMDGPU_METADATA: u32 = 32;
/// `EF_AMDGPU_MACH` mask.
const EF_AMDGPU_MACH: u32 = 0xff;

/// Known `EF_AMDGPU_MACH` values. The four flydsl targets and gfx908/90a/1030/1100/1200 were
/// checked against `llc-22` + `llvm-readelf-22 -h`; gfx940/gfx941 (removed from LLVM 22) are
/// from LLVM's AMDGPUUsage table.
const MACHS: &[(u32, &str)] = &[
    (0x030, "gfx908"),
    (0x036, "gfx1030"),
    (0x03f, "gfx90a"),
    (0x040, "gfx940"),
    (0x041, "gfx1100"),
    (0x048, "gfx1200"),
    (0x049, "gfx1250"),
    (0x04b, "gfx941"),
    (0x04c, "gfx942"),
    (0x04e, "gfx1201"),
    (0x04f, "gfx950"),
];

/// The processor an AMDGPU code object was built for (`e_flags & EF_AMDGPU_MACH`).
///
/// ```
/// use flydsl_ir::{codeobj::GfxArch, Target};
/// let a = GfxArch::from_mach(0x4c);
/// assert_eq!(a.name(), "gfx942");
/// assert_eq!(a.target(), Some(Target::Gfx942));
/// assert_eq!(GfxArch::from_mach(0x4f).name(), "gfx950");
/// assert_eq!(GfxArch::from_mach(0x4e).name(), "gfx1201");
/// assert_eq!(GfxArch::from_mach(0x49).name(), "gfx1250");
/// assert_eq!(GfxArch::from_mach(0xfe).name(), "unknown EF_AMDGPU_MACH 0xfe");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GfxArch {
    /// The raw `EF_AMDGPU_MACH` value.
    pub mach: u32,
}

impl GfxArch {
    /// Wrap a raw `EF_AMDGPU_MACH` value.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::GfxArch;
    /// assert_eq!(GfxArch::from_mach(0x3f).name(), "gfx90a");
    /// ```
    pub fn from_mach(mach: u32) -> GfxArch {
        GfxArch { mach }
    }

    /// The processor name (`gfx942`), or `unknown EF_AMDGPU_MACH 0x..`.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::GfxArch;
    /// assert_eq!(GfxArch::from_mach(0x41).name(), "gfx1100");
    /// ```
    pub fn name(&self) -> std::borrow::Cow<'static, str> {
        match MACHS.iter().find(|(m, _)| *m == self.mach) {
            Some((_, n)) => (*n).into(),
            None => format!("unknown EF_AMDGPU_MACH {:#x}", self.mach).into(),
        }
    }

    /// The flydsl [`Target`] for this processor, if it is one.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::GfxArch;
    /// assert_eq!(GfxArch::from_mach(0x40).target(), None); // gfx940
    /// ```
    pub fn target(&self) -> Option<Target> {
        let name = self.name();
        Target::ALL
            .into_iter()
            .find(|t| t.is_amd() && t.name() == name)
    }
}

impl std::fmt::Display for GfxArch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// The setting of a target feature (xnack, sramecc) recorded in `e_flags`.
///
/// ```
/// use flydsl_ir::codeobj::TargetFeature;
/// // Code object v4+: two bits per feature.
/// assert_eq!(TargetFeature::from_v4_bits(0x1), TargetFeature::Any);
/// assert_eq!(TargetFeature::Off.suffix("xnack"), Some("xnack-".to_string()));
/// assert_eq!(TargetFeature::Any.suffix("xnack"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TargetFeature {
    /// The processor does not support the feature.
    Unsupported,
    /// The code runs with the feature on or off.
    Any,
    /// The code needs the feature off (`feature-`).
    Off,
    /// The code needs the feature on (`feature+`).
    On,
}

impl TargetFeature {
    /// Decode the two-bit v4+ encoding (0 unsupported, 1 any, 2 off, 3 on).
    ///
    /// ```
    /// # use flydsl_ir::codeobj::TargetFeature;
    /// assert_eq!(TargetFeature::from_v4_bits(3), TargetFeature::On);
    /// ```
    pub fn from_v4_bits(bits: u32) -> TargetFeature {
        match bits & 3 {
            0 => TargetFeature::Unsupported,
            1 => TargetFeature::Any,
            2 => TargetFeature::Off,
            _ => TargetFeature::On,
        }
    }

    /// The target-ID suffix (`xnack+` / `xnack-`), none for `Any` / `Unsupported`.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::TargetFeature;
    /// assert_eq!(TargetFeature::On.suffix("sramecc").as_deref(), Some("sramecc+"));
    /// ```
    pub fn suffix(&self, feature: &str) -> Option<String> {
        match self {
            TargetFeature::On => Some(format!("{feature}+")),
            TargetFeature::Off => Some(format!("{feature}-")),
            _ => None,
        }
    }
}

/// A parsed AMDGPU code object.
///
/// ```
/// use flydsl_ir::codeobj::parse_hsaco;
/// // See the tests for real objects; a non-ELF input is an error:
/// assert!(parse_hsaco(b"hello").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObject {
    /// Processor from `e_flags`.
    pub arch: GfxArch,
    /// xnack setting from `e_flags`.
    pub xnack: TargetFeature,
    /// sramecc setting from `e_flags`.
    pub sramecc: TargetFeature,
    /// Raw `e_flags`.
    pub e_flags: u32,
    /// Raw `e_ident[EI_ABIVERSION]`.
    pub abi_version: u8,
    /// Code object version: `abi_version + 2` (v4 = 2, v5 = 3, v6 = 4).
    pub code_object_version: u32,
    /// `amdhsa.version` (metadata format version, e.g. `(1, 2)` for v5 and v6).
    pub metadata_version: Option<(u32, u32)>,
    /// `amdhsa.target`, e.g. `amdgcn-amd-amdhsa--gfx942`.
    pub target_id: Option<String>,
    /// The kernels, in metadata order.
    pub kernels: Vec<KernelMeta>,
    /// Size of the `.text` section in bytes (0 if there is none).
    pub text_size: u64,
}

impl CodeObject {
    /// The kernel whose metadata `.name` is `name`.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::*;
    /// # fn f(co: &CodeObject) { let _ = co.kernel("vadd"); }
    /// ```
    pub fn kernel(&self, name: &str) -> Option<&KernelMeta> {
        KernelMeta::find(&self.kernels, name)
    }

    /// The flydsl target this object was built for, if it is one.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::*;
    /// # fn f(co: &CodeObject) { let _ = co.target(); }
    /// ```
    pub fn target(&self) -> Option<Target> {
        self.arch.target()
    }
}

/// Parse an AMDGPU code object (a linked `.hsaco` or a relocatable `.o` from `llc`).
///
/// Checks `EM_AMDGPU` and `ELFOSABI_AMDGPU_HSA`, decodes `e_flags` and the
/// `NT_AMDGPU_METADATA` note, and fills each kernel's `code_size` from the symbol table.
///
/// ```
/// use flydsl_ir::codeobj::{parse_hsaco, CodeObjectError};
/// let err = parse_hsaco(b"\x7fELF\x02\x01\x01").unwrap_err();
/// assert!(matches!(err, CodeObjectError::Elf(_)), "{err}");
/// ```
pub fn parse_hsaco(bytes: &[u8]) -> Result<CodeObject, CodeObjectError> {
    // The ELF reader is zero-copy and needs 8-byte aligned input; embedded bytes
    // (`include_bytes!`) are only byte-aligned, so copy those into an aligned buffer.
    if bytes.as_ptr().align_offset(8) != 0 {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: `words` owns at least `bytes.len()` bytes, u64 has no invalid bit
        // patterns, and the two allocations do not overlap.
        let aligned = unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                words.as_mut_ptr().cast::<u8>(),
                bytes.len(),
            );
            std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), bytes.len())
        };
        return parse_aligned(aligned);
    }
    parse_aligned(bytes)
}

fn parse_aligned(bytes: &[u8]) -> Result<CodeObject, CodeObjectError> {
    let elf_err = |what: &str, e: object::read::Error| CodeObjectError::Elf(format!("{what}: {e}"));
    if bytes.len() < 16 || &bytes[..4] != b"\x7fELF" {
        return Err(CodeObjectError::Elf(format!(
            "{} bytes without the ELF magic \\x7fELF + 12 identification bytes",
            bytes.len()
        )));
    }
    if bytes[4] != 2 {
        return Err(CodeObjectError::Elf(format!(
            "ELF class {} is not ELFCLASS64 (2); AMDGPU code objects are 64-bit",
            bytes[4]
        )));
    }
    let header = FileHeader64::<Endianness>::parse(bytes).map_err(|e| elf_err("ELF header", e))?;
    let endian = header.endian().map_err(|e| elf_err("ELF header", e))?;
    let machine = header.e_machine(endian);
    if machine != object::elf::EM_AMDGPU {
        return Err(CodeObjectError::NotAmdgpu { machine });
    }
    let ident = header.e_ident();
    if ident.os_abi != ELFOSABI_AMDGPU_HSA {
        return Err(CodeObjectError::NotHsa {
            os_abi: ident.os_abi,
        });
    }
    let e_flags = header.e_flags(endian);
    let abi_version = ident.abi_version;
    let (xnack, sramecc) = if abi_version >= 2 {
        (
            TargetFeature::from_v4_bits(e_flags >> 8),
            TargetFeature::from_v4_bits(e_flags >> 10),
        )
    } else {
        // Code object v3: one bit each, "on" or not.
        let bit = |b: u32| {
            if e_flags & b != 0 {
                TargetFeature::On
            } else {
                TargetFeature::Off
            }
        };
        (bit(0x100), bit(0x200))
    };
    let sections = header
        .sections(endian, bytes)
        .map_err(|e| elf_err("section headers", e))?;
    let desc = find_metadata_note(&sections, endian, bytes)?;
    let meta = parse_metadata(&decode(desc)?)?;
    let text_size = match sections.section_by_name(endian, b".text") {
        Some((_, s)) => s.sh_size(endian),
        None => 0,
    };
    let mut kernels = meta.kernels;
    fill_code_sizes(&mut kernels, &sections, endian, bytes)?;
    Ok(CodeObject {
        arch: GfxArch::from_mach(e_flags & EF_AMDGPU_MACH),
        xnack,
        sramecc,
        e_flags,
        abi_version,
        code_object_version: u32::from(abi_version) + 2,
        metadata_version: meta.version,
        target_id: meta.target,
        kernels,
        text_size,
    })
}

type Sections<'a> = SectionTable<'a, FileHeader64<Endianness>, &'a [u8]>;

fn find_metadata_note<'a>(
    sections: &Sections<'a>,
    endian: Endianness,
    bytes: &'a [u8],
) -> Result<&'a [u8], CodeObjectError> {
    for (i, section) in sections.iter().enumerate() {
        let notes = section
            .notes(endian, bytes)
            .map_err(|e| CodeObjectError::Elf(format!("note section {i}: {e}")))?;
        let Some(mut notes) = notes else { continue };
        while let Some(note) = notes
            .next()
            .map_err(|e| CodeObjectError::Elf(format!("note in section {i}: {e}")))?
        {
            if note.name() == b"AMDGPU" && note.n_type(endian) == NT_AMDGPU_METADATA {
                return Ok(note.desc());
            }
        }
    }
    Err(CodeObjectError::NoMetadata)
}

fn fill_code_sizes(
    kernels: &mut [KernelMeta],
    sections: &Sections<'_>,
    endian: Endianness,
    bytes: &[u8],
) -> Result<(), CodeObjectError> {
    let symbols = sections
        .symbols(endian, bytes, SHT_SYMTAB)
        .map_err(|e| CodeObjectError::Elf(format!("symbol table: {e}")))?;
    for sym in symbols.iter() {
        if sym.st_type() != STT_FUNC {
            continue;
        }
        let Ok(name) = symbols.symbol_name(endian, sym) else {
            continue;
        };
        for k in kernels.iter_mut().filter(|k| k.name.as_bytes() == name) {
            k.code_size = Some(sym.st_size(endian));
        }
    }
    Ok(())
}
