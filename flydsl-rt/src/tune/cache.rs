//! [`TuneCache`]: the winners of this process, persisted in the cache file.

use super::cache_file::{self, Entries, Parsed, CACHE_HEADER};
use super::key::{clean, TuneKey};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The documented cache location: `$FLYDSL_TUNE_CACHE`, else
/// `$XDG_CACHE_HOME/flydsl/tune.txt`, else `$HOME/.cache/flydsl/tune.txt`; `None` when none of
/// these variables is set (winners are then kept in memory only).
///
/// ```
/// if let Some(p) = flydsl_rt::tune::default_cache_path() {
///     assert!(p.is_absolute() || p.components().count() > 0);
/// }
/// ```
pub fn default_cache_path() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = var("FLYDSL_TUNE_CACHE") {
        return Some(p);
    }
    if let Some(x) = var("XDG_CACHE_HOME") {
        return Some(x.join("flydsl").join("tune.txt"));
    }
    var("HOME").map(|h| h.join(".cache").join("flydsl").join("tune.txt"))
}

#[derive(Debug, Default)]
struct CacheState {
    loaded: bool,
    entries: Entries,
    /// The file is someone else's: never overwrite it.
    foreign: bool,
    warnings: Vec<String>,
}

/// Persisted winners (see the [module docs](super) for the file format and its rules).
#[derive(Debug)]
pub struct TuneCache {
    path: Option<PathBuf>,
    state: Mutex<CacheState>,
}

impl TuneCache {
    /// A cache persisted at `path` (read lazily on first use).
    pub fn at(path: impl Into<PathBuf>) -> TuneCache {
        TuneCache {
            path: Some(path.into()),
            state: Mutex::new(CacheState::default()),
        }
    }

    /// A cache that is never persisted.
    ///
    /// ```
    /// use flydsl_rt::tune::{TuneCache, TuneKey};
    /// let c = TuneCache::in_memory();
    /// let k = TuneKey::new("d", flydsl_rt::Target::Sm90, "k", "f32", "s");
    /// c.insert(&k, "a").unwrap();
    /// assert_eq!(c.get(&k).as_deref(), Some("a"));
    /// assert!(c.path().is_none());
    /// ```
    pub fn in_memory() -> TuneCache {
        TuneCache {
            path: None,
            state: Mutex::new(CacheState {
                loaded: true,
                ..Default::default()
            }),
        }
    }

    /// The cache at [`default_cache_path`] (in memory when no location is known).
    ///
    /// ```
    /// let c = flydsl_rt::tune::TuneCache::from_env();
    /// assert_eq!(c.path().map(|p| p.to_path_buf()), flydsl_rt::tune::default_cache_path());
    /// ```
    pub fn from_env() -> TuneCache {
        match default_cache_path() {
            Some(p) => TuneCache::at(p),
            None => TuneCache::in_memory(),
        }
    }

    /// Where the cache is persisted.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Warnings issued so far (each was also printed once on stderr).
    ///
    /// ```
    /// assert!(flydsl_rt::tune::TuneCache::in_memory().warnings().is_empty());
    /// ```
    pub fn warnings(&self) -> Vec<String> {
        self.lock().warnings.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record `msg` and print it on stderr, once per cache.
    pub(crate) fn warn_once(&self, msg: String) {
        Self::warn(&mut self.lock(), msg);
    }

    fn warn(st: &mut CacheState, msg: String) {
        if !st.warnings.contains(&msg) {
            eprintln!("warning: flydsl tuner: {msg}");
            st.warnings.push(msg);
        }
    }

    fn load(&self, st: &mut CacheState) {
        if st.loaded {
            return;
        }
        st.loaded = true;
        let Some(path) = &self.path else { return };
        let bytes = match cache_file::read(path) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return,
            Err(e) => {
                let msg = format!(
                    "cannot read the cache {}: {e}; using defaults",
                    path.display()
                );
                Self::warn(st, msg);
                return;
            }
        };
        match cache_file::decode(bytes) {
            Parsed::Ok(e) => st.entries = e,
            Parsed::NotUtf8 => {
                st.foreign = true;
                let msg = format!(
                    "{} is not a flydsl tune cache (not UTF-8); ignoring it and not overwriting \
                     it (set FLYDSL_TUNE_CACHE to another file)",
                    path.display()
                );
                Self::warn(st, msg);
            }
            Parsed::Foreign => {
                st.foreign = true;
                let msg = format!(
                    "{} does not start with `{CACHE_HEADER}`: not a flydsl tune cache; ignoring \
                     it and not overwriting it (set FLYDSL_TUNE_CACHE to another file)",
                    path.display()
                );
                Self::warn(st, msg);
            }
            Parsed::Corrupt(why) => {
                let msg = format!(
                    "the tune cache {} is corrupt ({why}); ignoring all of it, it will be \
                     rewritten by the next tuning run",
                    path.display()
                );
                Self::warn(st, msg);
            }
        }
    }

    /// The cached winner for `key`, if any.
    pub fn get(&self, key: &TuneKey) -> Option<String> {
        let mut st = self.lock();
        self.load(&mut st);
        st.entries.get(&key.fields().map(str::to_string)).cloned()
    }

    /// Record `winner` for `key` and persist the cache. Persisting fails (with a message naming
    /// the path and the fix) when the file is foreign or cannot be written; the winner is then
    /// still kept in memory for this process.
    ///
    /// Several processes may insert into one file at once: each update holds the file's lock
    /// file (`<path>.lock`) while it reads the file, merges its winners (what is on disk wins
    /// over this process's older copy, the new winner over both) and replaces the file
    /// atomically, so no process's winner is lost.
    pub fn insert(&self, key: &TuneKey, winner: &str) -> std::result::Result<(), String> {
        let mut st = self.lock();
        self.load(&mut st);
        let (key, winner) = (key.fields().map(str::to_string), clean(winner));
        st.entries.insert(key.clone(), winner.clone());
        let Some(path) = &self.path else {
            return Ok(());
        };
        let not_saving = |path: &Path| {
            format!(
                "not saving the tuned winner: {} is not a flydsl tune cache; set \
                 FLYDSL_TUNE_CACHE to a new file",
                path.display()
            )
        };
        if st.foreign {
            return Err(not_saving(path));
        }
        cache_file::with_lock(path, || {
            let disk = match cache_file::read(path) {
                Ok(Some(bytes)) => cache_file::decode(bytes),
                Ok(None) => Parsed::Ok(Entries::new()),
                Err(e) => {
                    return Err(format!(
                        "cannot read the tune cache {}: {e}; not overwriting it",
                        path.display()
                    ))
                }
            };
            match disk {
                Parsed::Ok(disk) => st.entries.extend(disk),
                // Replaced by someone else's file since we loaded: leave it alone.
                Parsed::NotUtf8 | Parsed::Foreign => {
                    st.foreign = true;
                    return Err(not_saving(path));
                }
                // Rewritten with what this process knows.
                Parsed::Corrupt(_) => {}
            }
            st.entries.insert(key, winner);
            cache_file::write_atomic(path, &cache_file::render(&st.entries)).map_err(|e| {
                format!(
                    "cannot write the tune cache {}: {e}; make its directory writable or set \
                     FLYDSL_TUNE_CACHE",
                    path.display()
                )
            })
        })
    }
}
