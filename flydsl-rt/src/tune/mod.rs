//! A generic autotuner for kernel families: measure candidate configurations once on the
//! current device, validate each against the default candidate's output, persist the winner.
//!
//! A family describes a tuning problem by
//! - a [`TuneKey`] (device name, target, kernel kind, dtype, shape class),
//! - candidate ids (opaque strings, the first one is the default),
//! - a closure that runs one candidate on a stream, and
//! - a validation callback that captures the default's output and compares the others to it.
//!
//! [`Tuner::select`] returns the cached winner, or searches when autotuning is enabled
//! (`FLYDSL_AUTOTUNE=1`) and the key is not cached yet, or else returns the default. Ordinary
//! calls never search.
//!
//! # Ranking
//!
//! Every candidate runs once and is validated (the default's run captures the reference);
//! candidates that fail to launch or whose output differs are dropped. The survivors are
//! timed with [`Event`]s: [`TuneOptions::warmup`] untimed runs, then [`TuneOptions::reps`]
//! timed runs, ranked by the median. Within [`TuneOptions::tie`] (2%) of the fastest, the
//! default wins.
//!
//! # Cache file
//!
//! Location: `$FLYDSL_TUNE_CACHE`, else `$XDG_CACHE_HOME/flydsl/tune.txt`, else
//! `~/.cache/flydsl/tune.txt`. Format (UTF-8 text, one winner per line, fields separated by
//! one tab, no field empty or containing a tab or line break):
//!
//! ```text
//! # flydsl tune cache v1
//! <device name>\t<target>\t<kernel kind>\t<dtype>\t<shape class>\t<winner id>
//! ```
//!
//! A file whose first line is not the header is *foreign*: it is ignored (a warning on stderr,
//! once) and never overwritten. A file with the header but a malformed line is *corrupt*: all
//! of it is ignored (warning once) and it is rewritten on the next insert. Cached ids that are
//! not among the current candidates (an older build) are ignored. Nothing in the file is ever
//! trusted beyond choosing among the caller's own candidates.
//!
//! Several processes may tune into one file at once: every insert takes the lock file
//! `<cache>.lock`, merges with what is on disk, writes a temporary file and renames it over
//! the cache, so no process's winner is lost (a lock left by a process that died is taken over
//! after 10 s).
//!
//! ```
//! use flydsl_rt::tune::{TuneCache, TuneKey};
//! use flydsl_rt::Target;
//! let dir = std::env::temp_dir().join(format!("flydsl-tune-doc-{}", std::process::id()));
//! let cache = TuneCache::at(dir.join("tune.txt"));
//! let key = TuneKey::new("My GPU", Target::Gfx942, "softmax_fwd", "bf16", "n8192");
//! assert_eq!(cache.get(&key), None);
//! cache.insert(&key, "variant_b").unwrap();
//! assert_eq!(TuneCache::at(dir.join("tune.txt")).get(&key).as_deref(), Some("variant_b"));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod cache;
mod cache_file;
mod key;
mod search;

pub use cache::{default_cache_path, TuneCache};
pub use cache_file::CACHE_HEADER;
pub use key::TuneKey;
pub use search::{search, Outcome, SearchReport, TuneOptions};

use crate::error::Result;
use crate::stream::Stream;
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// Whether `FLYDSL_AUTOTUNE` asks for searching (`1`, `true`, `yes`, `on`).
///
/// ```
/// // Unset in doc tests: ordinary calls never search.
/// # std::env::remove_var("FLYDSL_AUTOTUNE");
/// assert!(!flydsl_rt::tune::autotune_requested());
/// ```
pub fn autotune_requested() -> bool {
    std::env::var("FLYDSL_AUTOTUNE")
        .map(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
        .unwrap_or(false)
}

/// Chooses among candidates: cached winner, a search when enabled, or the default.
#[derive(Debug)]
pub struct Tuner {
    cache: TuneCache,
    autotune: bool,
    opts: TuneOptions,
    searched: Mutex<HashSet<TuneKey>>,
}

impl Tuner {
    /// A tuner over `cache`; `autotune` enables searching for uncached keys.
    ///
    /// ```
    /// use flydsl_rt::tune::{Tuner, TuneCache, TuneKey};
    /// use flydsl_rt::{Device, Target};
    /// let t = Tuner::new(TuneCache::in_memory(), false);
    /// let s = Device::sim(Target::Gfx942).stream().unwrap();
    /// let key = TuneKey::for_device(s.device(), "k", "f32", "n");
    /// let id = t.select(&s, &key, &["default", "other"], |_| Ok(()), |_, _| Ok(Ok(()))).unwrap();
    /// assert_eq!(id, "default"); // no search without autotune, nothing cached
    /// ```
    pub fn new(cache: TuneCache, autotune: bool) -> Tuner {
        Tuner {
            cache,
            autotune,
            opts: TuneOptions::default(),
            searched: Mutex::new(HashSet::new()),
        }
    }

    /// Use other measurement options.
    pub fn with_options(mut self, opts: TuneOptions) -> Tuner {
        self.opts = opts;
        self
    }

    /// The process-wide tuner: cache at [`default_cache_path`], searching iff
    /// [`autotune_requested`] (both read once).
    ///
    /// ```
    /// let t = flydsl_rt::tune::Tuner::global();
    /// assert_eq!(t.autotune(), flydsl_rt::tune::autotune_requested());
    /// ```
    pub fn global() -> &'static Tuner {
        static G: OnceLock<Tuner> = OnceLock::new();
        G.get_or_init(|| Tuner::new(TuneCache::from_env(), autotune_requested()))
    }

    /// The cache.
    pub fn cache(&self) -> &TuneCache {
        &self.cache
    }

    /// Whether this tuner searches uncached keys.
    pub fn autotune(&self) -> bool {
        self.autotune
    }

    /// The cached winner for `key` if it is one of `candidates`, else the default
    /// (`candidates[0]`); never searches. Empty `candidates` give `""`.
    ///
    /// ```
    /// use flydsl_rt::tune::{TuneCache, TuneKey, Tuner};
    /// let t = Tuner::new(TuneCache::in_memory(), false);
    /// let k = TuneKey::new("d", flydsl_rt::Target::Gfx942, "k", "f32", "s");
    /// t.cache().insert(&k, "b").unwrap();
    /// assert_eq!(t.cached(&k, &["a", "b"]), "b");
    /// assert_eq!(t.cached(&k, &["a", "c"]), "a"); // stale winner: the default
    /// ```
    pub fn cached<'a>(&self, key: &TuneKey, candidates: &[&'a str]) -> &'a str {
        let default = candidates.first().copied().unwrap_or("");
        if candidates.len() <= 1 {
            return default;
        }
        match self.cache.get(key) {
            Some(w) => candidates
                .iter()
                .copied()
                .find(|c| *c == w)
                .unwrap_or(default),
            None => default,
        }
    }

    /// Choose a candidate for `key`: the cached winner; else, when autotuning and this key was
    /// not searched yet in this process, run [`search`] (with `run` and `check`) and persist
    /// the winner (a failure to persist is a warning, not an error); else the default.
    pub fn select<'a>(
        &self,
        stream: &Stream,
        key: &TuneKey,
        candidates: &[&'a str],
        run: impl FnMut(&str) -> Result<()>,
        check: impl FnMut(&str, bool) -> Result<std::result::Result<(), String>>,
    ) -> Result<&'a str> {
        let default = candidates.first().copied().unwrap_or("");
        if candidates.len() <= 1 {
            return Ok(default);
        }
        if let Some(w) = self.cache.get(key) {
            if let Some(c) = candidates.iter().copied().find(|c| *c == w) {
                return Ok(c);
            }
        }
        if !self.autotune {
            return Ok(default);
        }
        {
            let mut searched = self.searched.lock().unwrap_or_else(|e| e.into_inner());
            if !searched.insert(key.clone()) {
                return Ok(default);
            }
        }
        let report = search(stream, candidates, &self.opts, run, check)?;
        let winner = candidates
            .iter()
            .copied()
            .find(|c| *c == report.winner)
            .unwrap_or(default);
        if let Err(msg) = self.cache.insert(key, winner) {
            self.cache.warn_once(msg);
        }
        Ok(winner)
    }
}
