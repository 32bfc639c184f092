//! Counting instructions by mnemonic prefix in `llvm-objdump` output and in PTX text.

/// The mnemonics of an `llvm-objdump -d` listing, in order: the first word of every line
/// that starts with whitespace (instruction lines); headers, labels and blank lines are
/// skipped.
///
/// ```
/// use flydsl_devtools::inspect::mnemonics;
/// let d = "k.hsaco:\tfile format elf64-amdgpu\n\n0000000000001a00 <k>:\n\ts_load_dword s0, s[4:5], 0x18 // 1A00: C0020002\n\ts_endpgm\n";
/// assert_eq!(mnemonics(d).collect::<Vec<_>>(), ["s_load_dword", "s_endpgm"]);
/// ```
pub fn mnemonics(disasm: &str) -> impl Iterator<Item = &str> {
    disasm.lines().filter_map(|line| {
        if !line.starts_with([' ', '\t']) {
            return None;
        }
        let word = line.split_whitespace().next()?;
        (!word.ends_with(':') && !word.starts_with("//")).then_some(word)
    })
}

/// How many instructions of an `llvm-objdump -d` listing have a mnemonic starting with
/// `prefix` (`"v_mfma"`, `"buffer_load_dwordx4"`, `"global_load_dwordx4"`, `"s_barrier"`).
/// A prefix matches whole-mnemonic starts only: `"buffer_load_dword"` also counts
/// `buffer_load_dwordx4`, so use the full mnemonic to count one width.
///
/// ```
/// use flydsl_devtools::inspect::count_instructions;
/// let d = "\tbuffer_load_dwordx4 v[0:3], v4, s[0:3], 0 offen\n\tbuffer_load_dword v5, v4, s[0:3], 0 offen\n";
/// assert_eq!(count_instructions(d, "buffer_load_dword"), 2);
/// assert_eq!(count_instructions(d, "buffer_load_dwordx4"), 1);
/// ```
pub fn count_instructions(disasm: &str, prefix: &str) -> usize {
    mnemonics(disasm).filter(|m| m.starts_with(prefix)).count()
}

/// The instruction mnemonics of a PTX text, in order (`ld.global.nc.v4.f32`, `mma.sync...`):
/// comments, directives (`.reg`, `.param`, ...), labels and braces are skipped, predicate
/// guards (`@%p1`, `@!%p1`) are removed, and several statements on one line are split at `;`.
///
/// ```
/// use flydsl_devtools::inspect::ptx_mnemonics;
/// let p = ".reg .b32 %r<4>;\n$L__BB0_2:\n\t@%p1 bra $L__BB0_2; // loop\n\tret;\n}";
/// assert_eq!(ptx_mnemonics(p).collect::<Vec<_>>(), ["bra", "ret"]);
/// ```
pub fn ptx_mnemonics(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .flat_map(|l| l.split(';'))
        .filter_map(|stmt| {
            let mut words = stmt.trim_matches(|c: char| c.is_whitespace() || c == '{' || c == '}');
            if words.starts_with('@') {
                words = words.split_once(char::is_whitespace)?.1.trim_start();
            }
            let word = words.split_whitespace().next()?;
            let first = word.chars().next()?;
            (first.is_ascii_alphabetic() && !word.ends_with(':')).then_some(word)
        })
}

/// How many PTX instructions have a mnemonic starting with `prefix` (`"mma.sync"`,
/// `"ld.global.v4"`, `"shfl.sync"`). Matching is on the start of the full mnemonic, so
/// `"ld.global"` counts `ld.global.nc.v4.f32` but `"ld.global.v4"` does not.
///
/// ```
/// use flydsl_devtools::inspect::count_ptx_instructions;
/// let p = "\tld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];\n\tld.global.nc.f32 %f5, [%rd2];\n\tshfl.sync.bfly.b32 %r1, %r2, 1, 31, -1;\n";
/// assert_eq!(count_ptx_instructions(p, "ld.global"), 2);
/// assert_eq!(count_ptx_instructions(p, "ld.global.v4"), 1);
/// assert_eq!(count_ptx_instructions(p, "shfl.sync"), 1);
/// ```
pub fn count_ptx_instructions(ptx: &str, prefix: &str) -> usize {
    ptx_mnemonics(ptx).filter(|m| m.starts_with(prefix)).count()
}
