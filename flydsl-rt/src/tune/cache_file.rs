//! The tune cache's on-disk format (see the [`tune`](super) docs) and its safe update by
//! several processes at once: under a lock file, read what is on disk, merge, write a
//! temporary file and rename it over the cache.

use flydsl_ir::Target;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// The first line of every cache file this module writes.
pub const CACHE_HEADER: &str = "# flydsl tune cache v1";

/// The winners of a file: key fields (device, target, kernel, dtype, shape) to winner id.
pub(crate) type Entries = BTreeMap<[String; 5], String>;

/// What a cache file holds.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A flydsl tune cache (an empty or missing file is one with no entries).
    Ok(Entries),
    /// Not UTF-8: someone else's file.
    NotUtf8,
    /// The first line is not [`CACHE_HEADER`]: someone else's file.
    Foreign,
    /// The header, then a malformed line (what is wrong with it).
    Corrupt(String),
}

/// Classify a file's bytes.
pub(crate) fn decode(bytes: Vec<u8>) -> Parsed {
    match String::from_utf8(bytes) {
        Ok(text) => parse(&text),
        Err(_) => Parsed::NotUtf8,
    }
}

/// Parse a file's text.
pub(crate) fn parse(text: &str) -> Parsed {
    let mut lines = text.lines();
    match lines.next() {
        None => return Parsed::Ok(BTreeMap::new()),
        Some(h) if h.trim_end() == CACHE_HEADER => {}
        Some(_) => return Parsed::Foreign,
    }
    let mut entries = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let bad = f.len() != 6
            || f.iter()
                .any(|s| s.trim().is_empty() || s.chars().any(char::is_control))
            || f[1].parse::<Target>().is_err();
        if bad {
            return Parsed::Corrupt(format!(
                "line {} is not `device<TAB>target<TAB>kernel<TAB>dtype<TAB>shape<TAB>winner`",
                i + 2
            ));
        }
        let key = [f[0], f[1], f[2], f[3], f[4]].map(str::to_string);
        entries.insert(key, f[5].to_string());
    }
    Parsed::Ok(entries)
}

/// The file text of `entries`.
pub(crate) fn render(entries: &Entries) -> String {
    let mut text = format!("{CACHE_HEADER}\n");
    for (k, v) in entries {
        text.push_str(&k.join("\t"));
        text.push('\t');
        text.push_str(v);
        text.push('\n');
    }
    text
}

/// The file's bytes, `None` when it does not exist.
pub(crate) fn read(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// How long [`with_lock`] waits for another process's lock before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// A lock file older than this is left over from a process that died holding it (an update
/// holds it for one read and one write of a small file) and is removed.
const LOCK_STALE: Duration = Duration::from_secs(10);

/// The lock file of `path`: `<path>.lock`.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Removes the lock file when the update is over (also on error or panic).
struct LockGuard(PathBuf);

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Run `f` holding `path`'s lock file (created with `create_new`, so one process at a time
/// holds it), creating `path`'s directory first. Errors name the file and the fix.
pub(crate) fn with_lock<T>(
    path: &Path,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<T, String> {
    let cannot = |what: &str, p: &Path, e: std::io::Error| {
        format!(
            "cannot {what} {}: {e}; make the directory writable or set FLYDSL_TUNE_CACHE",
            p.display()
        )
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| cannot("create the directory", dir, e))?;
    }
    let lock = lock_path(path);
    let deadline = Instant::now() + LOCK_WAIT;
    let mut pause = Duration::from_millis(1);
    let _guard = loop {
        match OpenOptions::new().write(true).create_new(true).open(&lock) {
            Ok(mut file) => {
                // The holder's pid, for whoever finds a stale lock.
                let _ = writeln!(file, "{}", std::process::id());
                break LockGuard(lock);
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let age = std::fs::metadata(&lock)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok());
                if age.is_some_and(|a| a > LOCK_STALE) {
                    let _ = std::fs::remove_file(&lock);
                    continue;
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "timed out after {}s waiting for the lock file {} of the tune cache; \
                         another process is updating it, or one died holding it: delete the \
                         lock file if no flydsl process is tuning",
                        LOCK_WAIT.as_secs(),
                        lock.display()
                    ));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => return Err(cannot("create the lock file", &lock, e)),
        }
    };
    f()
}

/// Replace `path` with `text` atomically: write a temporary file next to it, then rename it
/// over `path` (readers see the old or the new file, never a partial one).
pub(crate) fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(
        ".tmp{}.{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rules() {
        assert!(matches!(parse(""), Parsed::Ok(e) if e.is_empty()));
        assert!(matches!(parse("hello\n"), Parsed::Foreign));
        assert!(matches!(decode(vec![0xff, 0xfe]), Parsed::NotUtf8));
        let good = format!("{CACHE_HEADER}\nGPU\tgfx942\tk\tf32\ts\tw\n");
        assert!(matches!(parse(&good), Parsed::Ok(e) if e.len() == 1));
        let bad_target = format!("{CACHE_HEADER}\nGPU\tgfx999\tk\tf32\ts\tw\n");
        assert!(matches!(parse(&bad_target), Parsed::Corrupt(_)));
        let short = format!("{CACHE_HEADER}\nGPU\tgfx942\tk\n");
        assert!(matches!(parse(&short), Parsed::Corrupt(_)));
    }

    #[test]
    fn render_parses_back() {
        let mut e = Entries::new();
        e.insert(
            [
                "G".into(),
                "sm90".into(),
                "k".into(),
                "f32".into(),
                "s".into(),
            ],
            "w".into(),
        );
        e.insert(
            [
                "G".into(),
                "gfx950".into(),
                "k".into(),
                "bf16".into(),
                "t".into(),
            ],
            "v".into(),
        );
        assert!(matches!(parse(&render(&e)), Parsed::Ok(back) if back == e));
    }

    #[test]
    fn a_stale_lock_is_taken_over_and_the_lock_is_released() {
        let dir = std::env::temp_dir().join(format!("flydsl-tune-lock-{}", std::process::id()));
        let path = dir.join("tune.txt");
        std::fs::create_dir_all(&dir).unwrap();
        let lock = lock_path(&path);
        let old = std::fs::File::create(&lock).unwrap();
        old.set_modified(SystemTime::now() - 2 * LOCK_STALE)
            .unwrap();
        drop(old);
        let held = with_lock(&path, || Ok(lock.exists())).unwrap();
        assert!(held, "the lock file exists while the update runs");
        assert!(!lock.exists(), "the lock file is removed afterwards");
        let err = with_lock(&path, || Err::<(), _>("inner".to_string())).unwrap_err();
        assert_eq!(err, "inner");
        assert!(
            !lock.exists(),
            "the lock file is removed after an error too"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
