//! Code objects loaded by `hipModuleLoadData`: the size of an in-memory ELF image, the parsed
//! metadata, and the kernel IR the simulator executes.

use flydsl_ir::codeobj::{
    check_kernarg_layout, explicit_args, parse_hsaco, CodeObject, KernelMeta,
};
use flydsl_ir::Kernel;
use std::path::PathBuf;

/// The layout fields of an ELF64 little-endian header `(e_phoff, e_shoff, e_shentsize,
/// e_shnum)`, from which [`read_image`] computes the image size; `None` if `head` (the first 64
/// bytes) is not such a header.
///
/// ```
/// assert_eq!(amdhip64::module::elf_header_fields(b"not an elf"), None);
/// ```
pub fn elf_header_fields(head: &[u8]) -> Option<(u64, u64, u16, u16)> {
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u64_at = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().unwrap_or([0; 8]));
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
    // e_phoff, e_shoff, e_shentsize, e_shnum
    Some((u64_at(0x20), u64_at(0x28), u16_at(0x3a), u16_at(0x3c)))
}

/// Read the whole ELF image at `image` (the real runtime also learns the size from the headers).
///
/// # Safety
/// `image` must point to a complete, readable ELF64 image (the `hipModuleLoadData` contract).
pub unsafe fn read_image(image: *const u8) -> Option<Vec<u8>> {
    // SAFETY: an ELF image is at least its 64-byte header (caller's contract).
    let head = unsafe { std::slice::from_raw_parts(image, 64) };
    let (phoff, shoff, shentsize, shnum) = elf_header_fields(head)?;
    let phnum = u16::from_le_bytes([head[0x38], head[0x39]]) as u64;
    let phentsize = u16::from_le_bytes([head[0x36], head[0x37]]) as u64;
    let sh_end = shoff.checked_add(u64::from(shentsize) * u64::from(shnum))?;
    let ph_end = phoff.checked_add(phentsize * phnum)?;
    let mut size = sh_end.max(ph_end).max(64);
    // Sections may lie after the section header table.
    if shentsize as usize >= 64 {
        for i in 0..u64::from(shnum) {
            let at = shoff + i * u64::from(shentsize);
            // SAFETY: the section header table lies inside the image (caller's contract).
            let sh = unsafe { std::slice::from_raw_parts(image.add(at as usize), 64) };
            let ty = u32::from_le_bytes(sh[4..8].try_into().ok()?);
            let off = u64::from_le_bytes(sh[0x18..0x20].try_into().ok()?);
            let sz = u64::from_le_bytes(sh[0x20..0x28].try_into().ok()?);
            if ty != 8 {
                // not SHT_NOBITS
                size = size.max(off.checked_add(sz)?);
            }
        }
    }
    if size > (1 << 30) {
        return None;
    }
    // SAFETY: the image extends to `size` bytes per its own headers (caller's contract).
    Some(unsafe { std::slice::from_raw_parts(image, size as usize) }.to_vec())
}

/// A loaded module.
#[derive(Debug)]
pub struct FakeModule {
    /// The parsed code object.
    pub code: CodeObject,
    /// Functions handed out by `hipModuleGetFunction` (freed with the module).
    pub functions: Vec<Box<FakeFunction>>,
}

/// A kernel of a module, with its metadata and the IR that the Sim runs.
#[derive(Debug)]
pub struct FakeFunction {
    /// The code object's metadata of the kernel.
    pub meta: KernelMeta,
    /// The kernel IR read from `$FLYDSL_FAKE_HIP_IR_DIR/<symbol>.<arch>.ir`.
    pub kernel: Kernel,
}

impl FakeModule {
    /// Parse an HSACO.
    pub fn parse(bytes: &[u8]) -> Result<FakeModule, String> {
        let code = parse_hsaco(bytes).map_err(|e| e.to_string())?;
        Ok(FakeModule {
            code,
            functions: Vec::new(),
        })
    }

    /// Look up `name`, load its IR and check the metadata's explicit arguments against the
    /// IR's kernarg layout.
    pub fn function(&self, name: &str) -> Result<FakeFunction, (bool, String)> {
        let meta = self
            .code
            .kernel(name)
            .ok_or_else(|| (true, format!("no kernel `{name}` in the code object")))?
            .clone();
        let dir = std::env::var_os("FLYDSL_FAKE_HIP_IR_DIR").ok_or_else(|| {
            (
                true,
                String::from("FLYDSL_FAKE_HIP_IR_DIR is not set (it must hold <kernel>.<arch>.ir)"),
            )
        })?;
        let path = PathBuf::from(dir).join(format!("{name}.{}.ir", crate::device::base_arch()));
        let bytes = std::fs::read(&path).map_err(|e| (true, format!("{}: {e}", path.display())))?;
        let kernel = flydsl_ir::from_bytes(&bytes)
            .map_err(|e| (false, format!("{}: {e}", path.display())))?;
        check_kernarg_layout(&meta, &kernel.kernarg_layout()).map_err(|e| (false, e))?;
        Ok(FakeFunction { meta, kernel })
    }
}

impl FakeFunction {
    /// Check a kernarg buffer of `size` bytes against the metadata: it must cover every
    /// explicit argument.
    pub fn check_kernarg_size(&self, size: usize) -> Result<(), String> {
        for a in explicit_args(&self.meta) {
            let end = a.offset as usize + a.size as usize;
            if end > size {
                return Err(format!(
                    "kernel `{}`: the kernarg buffer has {size} bytes but argument `{}` needs \
                     bytes {}..{end}",
                    self.meta.name,
                    a.name.as_deref().unwrap_or("?"),
                    a.offset
                ));
            }
        }
        Ok(())
    }
}
