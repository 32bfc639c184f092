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

use crate::device::Device;
use crate::error::Result;
use crate::stream::Stream;
use flydsl_ir::Target;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The first line of every cache file this module writes.
pub const CACHE_HEADER: &str = "# flydsl tune cache v1";

/// What a winner is keyed by.
///
/// ```
/// use flydsl_rt::tune::TuneKey;
/// use flydsl_rt::Target;
/// let k = TuneKey::new("GPU\tA", Target::Sm90, "softmax_fwd", "f32", "n1024");
/// assert_eq!(k.device, "GPU A"); // tabs and line breaks cannot reach the file
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TuneKey {
    /// Device name as the driver reports it.
    pub device: String,
    /// The device's flydsl target.
    pub target: Target,
    /// Kernel kind (`softmax_fwd`).
    pub kernel: String,
    /// Element dtype name (`bf16`).
    pub dtype: String,
    /// Shape class (family-defined, e.g. `v8192/n8192/m2^14`).
    pub shape: String,
}

fn clean(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if t.trim().is_empty() {
        "-".to_string()
    } else {
        t.trim().to_string()
    }
}

impl TuneKey {
    /// A key from its parts (control characters become spaces, empty parts `-`).
    pub fn new(device: &str, target: Target, kernel: &str, dtype: &str, shape: &str) -> TuneKey {
        TuneKey {
            device: clean(device),
            target,
            kernel: clean(kernel),
            dtype: clean(dtype),
            shape: clean(shape),
        }
    }

    /// A key for `device`.
    ///
    /// ```
    /// use flydsl_rt::{tune::TuneKey, Device, Target};
    /// let k = TuneKey::for_device(&Device::sim(Target::Gfx950), "softmax_bwd", "f16", "n512");
    /// assert_eq!(k.target, Target::Gfx950);
    /// ```
    pub fn for_device(device: &Device, kernel: &str, dtype: &str, shape: &str) -> TuneKey {
        TuneKey::new(device.name(), device.target(), kernel, dtype, shape)
    }

    fn fields(&self) -> [&str; 5] {
        [
            &self.device,
            self.target.name(),
            &self.kernel,
            &self.dtype,
            &self.shape,
        ]
    }
}

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
    entries: BTreeMap<[String; 5], String>,
    /// The file is someone else's: never overwrite it.
    foreign: bool,
    warnings: Vec<String>,
}

/// Persisted winners (see the [module docs](self) for the file format and its rules).
#[derive(Debug)]
pub struct TuneCache {
    path: Option<PathBuf>,
    state: Mutex<CacheState>,
}

enum Parsed {
    Ok(BTreeMap<[String; 5], String>),
    Foreign,
    Corrupt(String),
}

fn parse(text: &str) -> Parsed {
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
        let text = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                let msg = format!(
                    "cannot read the cache {}: {e}; using defaults",
                    path.display()
                );
                Self::warn(st, msg);
                return;
            }
        };
        let Ok(text) = String::from_utf8(text) else {
            st.foreign = true;
            let msg = format!(
                "{} is not a flydsl tune cache (not UTF-8); ignoring it and not overwriting it \
                 (set FLYDSL_TUNE_CACHE to another file)",
                path.display()
            );
            Self::warn(st, msg);
            return;
        };
        match parse(&text) {
            Parsed::Ok(e) => st.entries = e,
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
    pub fn insert(&self, key: &TuneKey, winner: &str) -> std::result::Result<(), String> {
        let mut st = self.lock();
        self.load(&mut st);
        st.entries
            .insert(key.fields().map(str::to_string), clean(winner));
        let Some(path) = &self.path else {
            return Ok(());
        };
        if st.foreign {
            return Err(format!(
                "not saving the tuned winner: {} is not a flydsl tune cache; set \
                 FLYDSL_TUNE_CACHE to a new file",
                path.display()
            ));
        }
        // Merge winners that other processes saved since we loaded.
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Parsed::Ok(disk) = parse(&text) {
                for (k, v) in disk {
                    st.entries.entry(k).or_insert(v);
                }
            }
        }
        let mut text = format!("{CACHE_HEADER}\n");
        for (k, v) in &st.entries {
            text.push_str(&k.join("\t"));
            text.push('\t');
            text.push_str(v);
            text.push('\n');
        }
        write_atomic(path, &text).map_err(|e| {
            format!(
                "cannot write the tune cache {}: {e}; make its directory writable or set \
                 FLYDSL_TUNE_CACHE",
                path.display()
            )
        })
    }
}

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// How a search measures.
///
/// ```
/// let o = flydsl_rt::tune::TuneOptions::default();
/// assert_eq!((o.warmup, o.reps, o.tie), (2, 10, 0.02));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuneOptions {
    /// Untimed runs per candidate before timing.
    pub warmup: u32,
    /// Timed runs per candidate (the median is ranked).
    pub reps: u32,
    /// Relative margin within which the default beats a faster candidate.
    pub tie: f64,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            warmup: 2,
            reps: 10,
            tie: 0.02,
        }
    }
}

/// One candidate's outcome in a search.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Median milliseconds over the timed runs.
    Timed(f64),
    /// Dropped before timing, with the reason (launch error or validation mismatch).
    Rejected(String),
}

/// The result of [`search`].
#[derive(Clone, Debug, PartialEq)]
pub struct SearchReport {
    /// The chosen candidate id.
    pub winner: String,
    /// Every candidate's outcome, in candidate order.
    pub outcomes: Vec<(String, Outcome)>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::INFINITY;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Measure `candidates` (the first is the default) on `stream` and pick the fastest valid one.
///
/// `run(id)` launches one candidate. `check(id, is_default)` is called after each candidate's
/// first run: for the default it captures the reference output and should return `Ok(Ok(()))`;
/// for the others it compares with the reference and returns `Ok(Err(reason))` on a mismatch.
/// Errors of the default's run or check are returned; other candidates' errors only reject
/// them.
///
/// ```
/// use flydsl_rt::tune::{search, TuneOptions, Outcome};
/// use flydsl_rt::{Device, Target};
/// let s = Device::sim(Target::Gfx942).stream().unwrap();
/// let opts = TuneOptions { warmup: 0, reps: 3, tie: 0.02 };
/// let r = search(&s, &["a", "b"], &opts, |_| Ok(()), |id, _| Ok(if id == "b" { Err("differs".into()) } else { Ok(()) })).unwrap();
/// assert_eq!(r.winner, "a");
/// assert_eq!(r.outcomes[1].1, Outcome::Rejected("differs".into()));
/// ```
pub fn search(
    stream: &Stream,
    candidates: &[&str],
    opts: &TuneOptions,
    mut run: impl FnMut(&str) -> Result<()>,
    mut check: impl FnMut(&str, bool) -> Result<std::result::Result<(), String>>,
) -> Result<SearchReport> {
    let Some(&default) = candidates.first() else {
        return Ok(SearchReport {
            winner: String::new(),
            outcomes: Vec::new(),
        });
    };
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    let mut valid: Vec<&str> = Vec::new();
    for (i, &id) in candidates.iter().enumerate() {
        let is_default = i == 0;
        let result = run(id)
            .and_then(|()| stream.synchronize())
            .and_then(|()| check(id, is_default));
        match result {
            Ok(Ok(())) => valid.push(id),
            Ok(Err(reason)) if !is_default => {
                outcomes.push((id.to_string(), Outcome::Rejected(reason)))
            }
            Err(e) if !is_default => {
                outcomes.push((id.to_string(), Outcome::Rejected(e.to_string())))
            }
            Ok(Err(reason)) => {
                return Err(crate::Error::InvalidArgument {
                    op: format!("tuning candidate `{default}`"),
                    reason: format!(
                        "the tuner's validation rejected the default candidate: {reason}"
                    ),
                })
            }
            Err(e) => return Err(e),
        }
    }
    let mut timer = crate::timing::Timer::new(stream.device(), 0)?;
    let mut timed: Vec<(&str, f64)> = Vec::new();
    for &id in &valid {
        let mut times = Vec::with_capacity(opts.reps as usize);
        let mut failed = None;
        for _ in 0..opts.warmup {
            if let Err(e) = run(id) {
                failed = Some(e);
                break;
            }
        }
        for _ in 0..opts.reps.max(1) {
            if failed.is_some() {
                break;
            }
            match timer.once(stream, false, &mut || run(id)) {
                Ok(ms) => times.push(ms),
                Err(e) => failed = Some(e),
            }
        }
        match failed {
            Some(e) if id == default => return Err(e),
            Some(e) => outcomes.push((id.to_string(), Outcome::Rejected(e.to_string()))),
            None => {
                let med = median(times);
                timed.push((id, med));
                outcomes.push((id.to_string(), Outcome::Timed(med)));
            }
        }
    }
    let winner = pick(default, &timed, opts.tie);
    let order = |id: &str| {
        candidates
            .iter()
            .position(|c| *c == id)
            .unwrap_or(usize::MAX)
    };
    outcomes.sort_by_key(|(id, _)| order(id));
    Ok(SearchReport {
        winner: winner.to_string(),
        outcomes,
    })
}

/// The fastest of `timed`, unless the default is within `tie` of it.
fn pick<'a>(default: &'a str, timed: &[(&'a str, f64)], tie: f64) -> &'a str {
    let Some(&(best, best_t)) = timed.iter().min_by(|a, b| a.1.total_cmp(&b.1)) else {
        return default;
    };
    match timed.iter().find(|(id, _)| *id == default) {
        Some(&(_, t)) if t <= best_t * (1.0 + tie) => default,
        _ => best,
    }
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
            let mut st = self.cache.lock();
            TuneCache::warn(&mut st, msg);
        }
        Ok(winner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rules() {
        assert!(matches!(parse(""), Parsed::Ok(e) if e.is_empty()));
        assert!(matches!(parse("hello\n"), Parsed::Foreign));
        let good = format!("{CACHE_HEADER}\nGPU\tgfx942\tk\tf32\ts\tw\n");
        assert!(matches!(parse(&good), Parsed::Ok(e) if e.len() == 1));
        let bad_target = format!("{CACHE_HEADER}\nGPU\tgfx999\tk\tf32\ts\tw\n");
        assert!(matches!(parse(&bad_target), Parsed::Corrupt(_)));
        let short = format!("{CACHE_HEADER}\nGPU\tgfx942\tk\n");
        assert!(matches!(parse(&short), Parsed::Corrupt(_)));
    }

    #[test]
    fn tie_goes_to_default() {
        assert_eq!(pick("d", &[("d", 1.015), ("x", 1.0)], 0.02), "d");
        assert_eq!(pick("d", &[("d", 1.05), ("x", 1.0)], 0.02), "x");
        assert_eq!(pick("d", &[("x", 1.0)], 0.02), "x");
        assert_eq!(pick("d", &[], 0.02), "d");
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
