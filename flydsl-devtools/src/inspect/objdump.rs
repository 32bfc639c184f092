//! Finding and running `llvm-objdump` on a code object.

use super::InspectError;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// What to disassemble: a file, or the bytes of a code object (written to a temporary file).
///
/// ```
/// use flydsl_devtools::inspect::ObjectInput;
/// use std::path::Path;
/// let a: ObjectInput = Path::new("k.hsaco").into();
/// let b: ObjectInput = (&[0u8, 1][..]).into();
/// assert!(matches!(a, ObjectInput::Path(_)) && matches!(b, ObjectInput::Bytes(_)));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum ObjectInput<'a> {
    /// A `.hsaco` or `.o` on disk.
    Path(&'a Path),
    /// The bytes of one.
    Bytes(&'a [u8]),
}

impl<'a> From<&'a Path> for ObjectInput<'a> {
    fn from(p: &'a Path) -> Self {
        ObjectInput::Path(p)
    }
}

impl<'a> From<&'a PathBuf> for ObjectInput<'a> {
    fn from(p: &'a PathBuf) -> Self {
        ObjectInput::Path(p)
    }
}

impl<'a> From<&'a [u8]> for ObjectInput<'a> {
    fn from(b: &'a [u8]) -> Self {
        ObjectInput::Bytes(b)
    }
}

impl<'a> From<&'a Vec<u8>> for ObjectInput<'a> {
    fn from(b: &'a Vec<u8>) -> Self {
        ObjectInput::Bytes(b)
    }
}

/// Look for `llvm-objdump`, in order: `FLYDSL_OBJDUMP`, `$ROCM_PATH/llvm/bin/llvm-objdump`,
/// `llvm-objdump-22` then `llvm-objdump` on `PATH`, `/usr/lib/llvm-22/bin/llvm-objdump`.
/// `FLYDSL_OBJDUMP` naming a missing file is an error (it is never silently skipped).
///
/// ```no_run
/// let tool = flydsl_devtools::inspect::find_objdump().unwrap();
/// println!("{}", tool.display());
/// ```
pub fn find_objdump() -> Result<PathBuf, InspectError> {
    discover(&|k| std::env::var_os(k))
}

/// The discovery of [`find_objdump`] over an injectable environment.
pub(crate) fn discover(env: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, InspectError> {
    let mut tried = Vec::new();
    if let Some(p) = env("FLYDSL_OBJDUMP").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        if !p.is_absolute() && p.components().count() == 1 {
            if let Some(found) = on_path(env, &p.to_string_lossy()) {
                return Ok(found);
            }
        }
        tried.push(format!("FLYDSL_OBJDUMP={} (no such file)", p.display()));
        return Err(InspectError::ToolNotFound { tried });
    }
    if let Some(rocm) = env("ROCM_PATH").filter(|p| !p.is_empty()) {
        let p = Path::new(&rocm).join("llvm/bin/llvm-objdump");
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p.display().to_string());
    }
    for name in ["llvm-objdump-22", "llvm-objdump"] {
        if let Some(p) = on_path(env, name) {
            return Ok(p);
        }
        tried.push(format!("{name} on PATH"));
    }
    let p = PathBuf::from("/usr/lib/llvm-22/bin/llvm-objdump");
    if p.is_file() {
        return Ok(p);
    }
    tried.push(p.display().to_string());
    Err(InspectError::ToolNotFound { tried })
}

fn on_path(env: &dyn Fn(&str) -> Option<OsString>, name: &str) -> Option<PathBuf> {
    let path = env("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Disassemble a code object with the `llvm-objdump` that [`find_objdump`] finds:
/// `llvm-objdump -d --mcpu=<mcpu>`. Count instructions in the result with
/// [`count_instructions`](super::count_instructions).
///
/// ```no_run
/// use flydsl_devtools::inspect::{count_instructions, disassemble};
/// let bytes = std::fs::read("k.hsaco").unwrap();
/// let text = disassemble(&bytes, "gfx942").unwrap();
/// println!("{} MFMAs", count_instructions(&text, "v_mfma"));
/// ```
pub fn disassemble<'a>(
    input: impl Into<ObjectInput<'a>>,
    mcpu: &str,
) -> Result<String, InspectError> {
    disassemble_with(&find_objdump()?, input, mcpu)
}

/// [`disassemble`] with a given `llvm-objdump`.
///
/// ```no_run
/// use flydsl_devtools::inspect::disassemble_with;
/// use std::path::Path;
/// let text = disassemble_with(Path::new("/usr/bin/llvm-objdump-22"), Path::new("k.hsaco"), "gfx950");
/// ```
pub fn disassemble_with<'a>(
    tool: &Path,
    input: impl Into<ObjectInput<'a>>,
    mcpu: &str,
) -> Result<String, InspectError> {
    let temp;
    let path = match input.into() {
        ObjectInput::Path(p) => p,
        ObjectInput::Bytes(b) => {
            temp = TempFile::write(b)?;
            temp.path.as_path()
        }
    };
    let out = Command::new(tool)
        .arg("-d")
        .arg(format!("--mcpu={mcpu}"))
        .arg(path)
        .output()
        .map_err(|source| InspectError::Io {
            what: "cannot run",
            path: tool.to_path_buf(),
            source,
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("is not a recognized processor") {
        return Err(InspectError::UnknownCpu {
            tool: tool.to_path_buf(),
            mcpu: mcpu.to_string(),
        });
    }
    if !out.status.success() {
        return Err(InspectError::ToolFailed {
            tool: tool.to_path_buf(),
            status: out.status.to_string(),
            stderr: stderr.trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A uniquely named file under the system temp directory, removed on drop.
struct TempFile {
    path: PathBuf,
}

impl TempFile {
    fn write(bytes: &[u8]) -> Result<TempFile, InspectError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "flydsl-disasm-{}-{}-{nanos}.o",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let io = |source| InspectError::Io {
            what: "cannot write",
            path: path.clone(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io)?;
        let file = TempFile { path: path.clone() };
        f.write_all(bytes).map_err(io)?;
        Ok(file)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let m: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn fake_tool(dir: &Path, name: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, "").unwrap();
        p
    }

    #[test]
    fn discovery_order() {
        let root = std::env::temp_dir().join(format!("flydsl-objdump-disc-{}", std::process::id()));
        let rocm = root.join("rocm");
        let rocm_tool = fake_tool(&rocm.join("llvm/bin"), "llvm-objdump");
        let bin = root.join("bin");
        let versioned = fake_tool(&bin, "llvm-objdump-22");
        let plain = fake_tool(&root.join("bin2"), "llvm-objdump");
        let explicit = fake_tool(&root, "my-objdump");
        let path = std::env::join_paths([root.join("bin2"), bin.clone()]).unwrap();
        let path = path.to_str().unwrap();
        let rocm_s = rocm.to_str().unwrap();

        let e = env(&[
            ("FLYDSL_OBJDUMP", explicit.to_str().unwrap()),
            ("ROCM_PATH", rocm_s),
        ]);
        assert_eq!(discover(&e).unwrap(), explicit);
        let e = env(&[("ROCM_PATH", rocm_s), ("PATH", path)]);
        assert_eq!(discover(&e).unwrap(), rocm_tool);
        // The versioned name wins over the plain one even when later on PATH.
        let e = env(&[("PATH", path)]);
        assert_eq!(discover(&e).unwrap(), versioned);
        let e = env(&[("PATH", root.join("bin2").to_str().unwrap())]);
        assert_eq!(discover(&e).unwrap(), plain);
        // A bad FLYDSL_OBJDUMP is reported, not skipped.
        let e = env(&[("FLYDSL_OBJDUMP", "/nonexistent/objdump"), ("PATH", path)]);
        let err = discover(&e).unwrap_err().to_string();
        assert!(err.contains("FLYDSL_OBJDUMP=/nonexistent/objdump"), "{err}");
        // Nothing anywhere (unless this machine has /usr/lib/llvm-22).
        if !Path::new("/usr/lib/llvm-22/bin/llvm-objdump").exists() {
            let err = discover(&env(&[])).unwrap_err().to_string();
            assert!(err.contains("llvm-objdump-22 on PATH"), "{err}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn temp_files_are_unique_and_removed() {
        let a = TempFile::write(b"a").unwrap();
        let b = TempFile::write(b"b").unwrap();
        assert_ne!(a.path, b.path);
        assert_eq!(std::fs::read(&a.path).unwrap(), b"a");
        let p = a.path.clone();
        drop(a);
        assert!(!p.exists());
    }
}
