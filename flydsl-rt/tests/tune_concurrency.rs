//! Several processes tuning into one cache file at once lose no winner: this binary starts
//! copies of itself (`FLYDSL_TUNE_TEST_CHILD` set), which all insert their own winners into
//! one file at the same moment; afterwards every child's every winner must be in the file,
//! and no lock or temporary file may be left behind.

use flydsl_rt::tune::{TuneCache, TuneKey};
use flydsl_rt::Target;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CHILDREN: usize = 6;
const INSERTS: usize = 20;

fn key(child: usize, i: usize) -> TuneKey {
    TuneKey::new(
        "Test GPU",
        Target::Gfx942,
        &format!("k{child}"),
        "f32",
        &format!("s{i}"),
    )
}

fn winner(child: usize, i: usize) -> String {
    format!("w{child}_{i}")
}

/// Wait for the parent's start signal, then insert this child's winners one by one.
fn child(index: usize, path: &Path, go: &Path) {
    let until = Instant::now() + Duration::from_secs(60);
    while !go.exists() {
        assert!(Instant::now() < until, "child {index}: no start signal");
        std::thread::sleep(Duration::from_millis(1));
    }
    let cache = TuneCache::at(path);
    for i in 0..INSERTS {
        cache
            .insert(&key(index, i), &winner(index, i))
            .unwrap_or_else(|e| panic!("child {index}, insert {i}: {e}"));
    }
}

fn parent() {
    let dir = std::env::temp_dir().join(format!("flydsl-tune-concurrency-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tune.txt");
    let go = dir.join("go");
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..CHILDREN)
        .map(|i| {
            Command::new(&exe)
                .env("FLYDSL_TUNE_TEST_CHILD", i.to_string())
                .env("FLYDSL_TUNE_TEST_PATH", &path)
                .env("FLYDSL_TUNE_TEST_GO", &go)
                .spawn()
                .expect("start a child process")
        })
        .collect();
    // Start them together, once all are running.
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&go, "").unwrap();
    for (i, c) in children.iter_mut().enumerate() {
        let status = c.wait().unwrap();
        assert!(status.success(), "child {i} failed: {status}");
    }
    let cache = TuneCache::at(&path);
    let mut missing = Vec::new();
    for c in 0..CHILDREN {
        for i in 0..INSERTS {
            if cache.get(&key(c, i)).as_deref() != Some(winner(c, i).as_str()) {
                missing.push(winner(c, i));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} winners lost: {missing:?}",
        missing.len(),
        CHILDREN * INSERTS
    );
    assert!(cache.warnings().is_empty(), "{:?}", cache.warnings());
    let leftovers: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| *p != path && *p != go)
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    println!(
        "tune_concurrency: {} processes x {INSERTS} inserts, none lost",
        CHILDREN
    );
}

fn main() {
    match std::env::var("FLYDSL_TUNE_TEST_CHILD") {
        Ok(i) => {
            let var = |k: &str| PathBuf::from(std::env::var_os(k).expect(k));
            child(
                i.parse().expect("child index"),
                &var("FLYDSL_TUNE_TEST_PATH"),
                &var("FLYDSL_TUNE_TEST_GO"),
            );
        }
        Err(_) => parent(),
    }
}
