//! The tuner through the softmax API: search on the Sim with a temporary cache file, round
//! trip of the cache, corrupt and foreign cache files, stale winners, validation rejects.

mod common;

use fly_softmax::plan::{candidates, shape_class};
use fly_softmax::table::Kind;
use fly_softmax::{softmax_with, Dispatch, SoftmaxArgs};
use flydsl_rt::tune::{search, Outcome, TuneCache, TuneKey, TuneOptions, Tuner, CACHE_HEADER};
use flydsl_rt::{Device, DeviceBuffer, Target};
use flydsl_testutil::compare::widen;
use flydsl_testutil::softmax as reference;
use std::path::PathBuf;

fn temp_file(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fly-softmax-tune-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("tune.txt")
}

fn quick() -> TuneOptions {
    TuneOptions {
        warmup: 0,
        reps: 2,
        tie: 0.02,
    }
}

#[test]
fn search_persists_a_valid_winner_that_a_new_tuner_reuses() {
    let path = temp_file("search");
    let dev = Device::sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let (m, n) = (4, 8192);
    let x: Vec<f32> = common::inputs(3, m * n, 1.0);
    let xd = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut yd = DeviceBuffer::<f32>::zeroed(&dev, m * n).unwrap();
    let tuner = Tuner::new(TuneCache::at(&path), true).with_options(quick());
    softmax_with(
        &s,
        &xd,
        &mut yd,
        SoftmaxArgs { m, n },
        Dispatch::Tuned(&tuner),
    )
    .unwrap();
    // The result of the tuned call is correct (the search's leftovers are overwritten).
    let want = reference::forward(&widen(&x), m, n);
    reference::check_forward(
        "tuned",
        &widen(&yd.to_vec().unwrap()),
        &want,
        m,
        n,
        &reference::tolerance("f32"),
    )
    .unwrap();

    let text = std::fs::read_to_string(&path).expect("the winner was persisted");
    assert!(text.starts_with(CACHE_HEADER), "{text}");
    let cands = candidates::<f32>(Kind::Forward, &dev, n);
    assert!(cands.len() > 1, "class 8192 has alternatives");
    let names: Vec<String> = cands.iter().map(|v| v.name::<f32>()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let key = TuneKey::for_device(&dev, "softmax_fwd", "f32", &shape_class(&cands[0], m, n));
    let line = text.lines().nth(1).expect("one entry");
    assert!(
        line.contains("softmax_fwd\tf32\tv8192/n8192/m<=2^2\t"),
        "{line}"
    );
    let winner = line.rsplit('\t').next().unwrap();
    assert!(refs.contains(&winner), "winner `{winner}` is a candidate");

    // A fresh tuner without autotune uses the persisted winner and never searches.
    let fresh = Tuner::new(TuneCache::at(&path), false);
    assert_eq!(fresh.cached(&key, &refs), winner);
    let mut ran = false;
    let chosen = fresh
        .select(
            &s,
            &key,
            &refs,
            |_| {
                ran = true;
                Ok(())
            },
            |_, _| Ok(Ok(())),
        )
        .unwrap();
    assert_eq!(chosen, winner);
    assert!(!ran, "an ordinary call must not search");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn no_search_without_autotune() {
    let dev = Device::sim(Target::Sm90);
    let s = dev.stream().unwrap();
    let t = Tuner::new(TuneCache::in_memory(), false);
    let key = TuneKey::for_device(&dev, "k", "f32", "s");
    let mut runs = 0;
    let id = t
        .select(
            &s,
            &key,
            &["d", "a", "b"],
            |_| {
                runs += 1;
                Ok(())
            },
            |_, _| Ok(Ok(())),
        )
        .unwrap();
    assert_eq!((id, runs), ("d", 0));
}

#[test]
fn invalid_candidates_are_rejected_and_never_win() {
    let dev = Device::sim(Target::Gfx1201);
    let s = dev.stream().unwrap();
    let r = search(
        &s,
        &["default", "wrong", "broken"],
        &quick(),
        |id| {
            if id == "broken" {
                return Err(flydsl_rt::Error::KernelArgs {
                    kernel: id.into(),
                    reason: "boom".into(),
                });
            }
            // Make the wrong one look much faster.
            if id == "default" {
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            Ok(())
        },
        |id, is_default| {
            Ok(if id == "wrong" && !is_default {
                Err("differs".into())
            } else {
                Ok(())
            })
        },
    )
    .unwrap();
    assert_eq!(r.winner, "default");
    assert_eq!(
        r.outcomes[1],
        ("wrong".to_string(), Outcome::Rejected("differs".into()))
    );
    assert!(matches!(&r.outcomes[2].1, Outcome::Rejected(m) if m.contains("boom")));
}

#[test]
fn a_clearly_faster_valid_candidate_wins() {
    let s = Device::sim(Target::Gfx950).stream().unwrap();
    let r = search(
        &s,
        &["default", "fast"],
        &TuneOptions {
            warmup: 0,
            reps: 3,
            tie: 0.02,
        },
        |id| {
            let ms = if id == "default" { 20 } else { 1 };
            std::thread::sleep(std::time::Duration::from_millis(ms));
            Ok(())
        },
        |_, _| Ok(Ok(())),
    )
    .unwrap();
    assert_eq!(r.winner, "fast");
}

#[test]
fn cache_round_trip() {
    let path = temp_file("roundtrip");
    let k1 = TuneKey::new(
        "NVIDIA H200",
        Target::Sm90,
        "softmax_fwd",
        "bf16",
        "v8192/n8192/m<=2^16",
    );
    let k2 = TuneKey::new(
        "AMD Instinct MI300X",
        Target::Gfx942,
        "softmax_bwd",
        "f16",
        "lv/n65536/m<=2^12",
    );
    let c = TuneCache::at(&path);
    c.insert(&k1, "a").unwrap();
    c.insert(&k2, "b").unwrap();
    c.insert(&k1, "c").unwrap();
    let d = TuneCache::at(&path);
    assert_eq!(d.get(&k1).as_deref(), Some("c"));
    assert_eq!(d.get(&k2).as_deref(), Some("b"));
    assert!(d.warnings().is_empty());
    let other_device = TuneKey::new(
        "NVIDIA H100",
        Target::Sm90,
        "softmax_fwd",
        "bf16",
        "v8192/n8192/m<=2^16",
    );
    assert_eq!(d.get(&other_device), None);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn corrupt_cache_is_ignored_with_one_warning_and_rewritten() {
    let path = temp_file("corrupt");
    let key = TuneKey::new(
        "GPU",
        Target::Gfx942,
        "softmax_fwd",
        "f32",
        "v64/n60/m<=2^6",
    );
    std::fs::write(
        &path,
        format!(
            "{CACHE_HEADER}\nGPU\tgfx942\tsoftmax_fwd\tf32\tv64/n60/m<=2^6\tevil\ngarbage line\n"
        ),
    )
    .unwrap();
    let c = TuneCache::at(&path);
    assert_eq!(c.get(&key), None, "nothing from a corrupt file is trusted");
    assert_eq!(c.get(&key), None);
    assert_eq!(c.warnings().len(), 1, "{:?}", c.warnings());
    assert!(c.warnings()[0].contains("corrupt"));
    c.insert(&key, "good").unwrap();
    assert_eq!(TuneCache::at(&path).get(&key).as_deref(), Some("good"));
    // Binary junk: no crash, no trust.
    std::fs::write(&path, [0xffu8, 0xfe, 0, 1, 2]).unwrap();
    let c = TuneCache::at(&path);
    assert_eq!(c.get(&key), None);
    assert_eq!(c.warnings().len(), 1);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn foreign_file_is_ignored_and_never_overwritten() {
    let path = temp_file("foreign");
    std::fs::write(&path, "my notes, not a cache\n").unwrap();
    let key = TuneKey::new("GPU", Target::Gfx942, "softmax_fwd", "f32", "x");
    let c = TuneCache::at(&path);
    assert_eq!(c.get(&key), None);
    let e = c.insert(&key, "w").unwrap_err();
    assert!(e.contains("FLYDSL_TUNE_CACHE"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "my notes, not a cache\n"
    );
    assert_eq!(
        c.get(&key).as_deref(),
        Some("w"),
        "kept in memory for this process"
    );
    assert_eq!(c.warnings().len(), 1);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn stale_winner_falls_back_to_the_default() {
    let path = temp_file("stale");
    let dev = Device::sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let (m, n) = (2, 8192);
    let cands = candidates::<f32>(Kind::Forward, &dev, n);
    let key = TuneKey::for_device(&dev, "softmax_fwd", "f32", &shape_class(&cands[0], m, n));
    let cache = TuneCache::at(&path);
    cache
        .insert(&key, "softmax_fwd_f32_from_an_older_build")
        .unwrap();
    let tuner = Tuner::new(TuneCache::at(&path), false);
    let names: Vec<String> = cands.iter().map(|v| v.name::<f32>()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(tuner.cached(&key, &refs), refs[0]);
    // And the API still computes correctly through it.
    let x: Vec<f32> = common::inputs(5, m * n, 1.0);
    let xd = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut yd = DeviceBuffer::<f32>::zeroed(&dev, m * n).unwrap();
    softmax_with(
        &s,
        &xd,
        &mut yd,
        SoftmaxArgs { m, n },
        Dispatch::Tuned(&tuner),
    )
    .unwrap();
    let want = reference::forward(&widen(&x), m, n);
    reference::check_forward(
        "stale",
        &widen(&yd.to_vec().unwrap()),
        &want,
        m,
        n,
        &reference::tolerance("f32"),
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// The new paths' shape classes are searched like the others: an odd `n` (ragged default,
/// masked scalar alternatives) and few long rows (split default, looped alternatives; and
/// split as the alternative of few resident rows). Every search persists a winner among the
/// call's candidates and the tuned call's output matches the reference.
#[test]
fn ragged_and_split_classes_are_searched() {
    use fly_softmax::plan::candidates_for;
    use fly_softmax::table::Path;
    let path = temp_file("new-paths");
    let dev = Device::sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let tuner = Tuner::new(TuneCache::at(&path), true).with_options(quick());
    for (m, n, first, class) in [
        (4, 1021, Path::Ragged, "r1024/n1021/m<=2^2"),
        (2, 40_003, Path::Split, "sp/n40003/m<=2^2"),
        (2, 16_385, Path::Ragged, "r32768/n16385/m<=2^2"),
    ] {
        let cands = candidates_for::<f32>(Kind::Forward, &dev, m, n);
        assert_eq!(cands[0].config.path, first, "{m}x{n}");
        assert!(cands.len() > 1, "{m}x{n}: alternatives to search");
        let x: Vec<f32> = common::inputs(n as u64, m * n, 1.0);
        let xd = DeviceBuffer::from_slice(&dev, &x).unwrap();
        let mut yd = DeviceBuffer::<f32>::zeroed(&dev, m * n).unwrap();
        let args = SoftmaxArgs { m, n };
        softmax_with(&s, &xd, &mut yd, args, Dispatch::Tuned(&tuner)).unwrap();
        let want = reference::forward(&widen(&x), m, n);
        let got = widen(&yd.to_vec().unwrap());
        let tol = reference::tolerance("f32");
        reference::check_forward("tuned", &got, &want, m, n, &tol).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains(&format!("softmax_fwd\tf32\t{class}\t")))
            .unwrap_or_else(|| panic!("no entry for {class} in {text}"));
        let winner = line.rsplit('\t').next().unwrap();
        assert!(
            cands.iter().any(|v| v.name::<f32>() == winner),
            "winner `{winner}` of {class} is a candidate"
        );
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
