//! Content-hash cache of compiled code objects: key = hash(LLVM IR, target, toolchain identity).

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A directory of cached code objects.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// A cache rooted at `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }
    /// The cache key of one compilation.
    ///
    /// ```
    /// use flydsl_build::cache::Cache;
    /// let a = Cache::key("ir", "gfx942", "llc 22");
    /// assert_ne!(a, Cache::key("ir ", "gfx942", "llc 22"));
    /// assert_eq!(a.len(), 64);
    /// ```
    pub fn key(llvm_ir: &str, target: &str, toolchain: &str) -> String {
        let mut h = Sha256::new();
        for part in [llvm_ir, target, toolchain, env!("CARGO_PKG_VERSION")] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.bin"))
    }
    /// The cached bytes for `key`, if present.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        std::fs::read(self.path(key)).ok()
    }
    /// Store bytes under `key` (atomically: write to a temp file, then rename).
    pub fn put(&self, key: &str, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join(format!("{key}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, self.path(key))
    }
    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
