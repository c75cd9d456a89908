//! Every fuzz target replays its committed seed corpus on the stable toolchain: an input that
//! panics (a parser's crash, a broken invariant) fails the ordinary test command, not only a
//! nightly fuzzing session. And the targets, their cargo-fuzz binaries and their corpora agree:
//! a target added without a binary, a binary without a body, or either without seeds fails.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use socklab_fuzz::TARGETS;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `corpus/NAME`, sorted.
fn corpus(name: &str) -> Vec<PathBuf> {
    let dir = root().join("corpus").join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (commit a seed corpus for {name})", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// The inputs of `files` that make `run` panic, with the panic's message.
fn failures(run: fn(&[u8]), files: &[PathBuf]) -> Vec<String> {
    let mut bad = Vec::new();
    for f in files {
        let data = std::fs::read(f).unwrap();
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| run(&data))) {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            bad.push(format!("{}: {msg}", f.display()));
        }
    }
    bad
}

#[test]
fn every_target_replays_its_committed_corpus_without_a_panic() {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let bad = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(name, run)) = TARGETS.get(i) else {
                    break;
                };
                let files = corpus(name);
                assert!(!files.is_empty(), "corpus/{name} is empty");
                let f = failures(run, &files);
                bad.lock()
                    .unwrap()
                    .extend(f.into_iter().map(|m| format!("{name}: {m}")));
            });
        }
    });
    let bad = bad.into_inner().unwrap();
    assert!(
        bad.is_empty(),
        "corpus inputs that panic:\n{}",
        bad.join("\n")
    );
}

#[test]
fn a_panicking_input_is_reported_with_its_file() {
    // The replay can fail: a body that panics on one input names that input.
    let dir = tempfile::tempdir().unwrap();
    let (good, evil) = (dir.path().join("good"), dir.path().join("evil"));
    std::fs::write(&good, b"fine").unwrap();
    std::fs::write(&evil, b"boom").unwrap();
    fn body(d: &[u8]) {
        assert_ne!(d, b"boom", "the bad input");
    }
    let bad = failures(body, &[good, evil.clone()]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].starts_with(&evil.display().to_string()), "{bad:?}");
    assert!(bad[0].contains("the bad input"), "{bad:?}");
}

fn names_in(dir: &Path, ext: Option<&str>) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| ext.is_none_or(|x| p.extension().is_some_and(|e| e == x)))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn targets_binaries_and_corpora_agree() {
    let targets: BTreeSet<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(targets.len(), TARGETS.len(), "a target is listed twice");
    let manifest: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let mut bins = BTreeSet::new();
    for b in manifest["bin"].as_array().unwrap() {
        let name = b["name"].as_str().unwrap();
        assert_eq!(
            b["path"].as_str(),
            Some(format!("fuzz_targets/{name}.rs").as_str()),
            "[[bin]] {name}"
        );
        bins.insert(name.to_string());
    }
    assert_eq!(
        bins, targets,
        "Cargo.toml's [[bin]]s and socklab_fuzz::TARGETS"
    );
    let files = names_in(&root().join("fuzz_targets"), Some("rs"));
    assert_eq!(
        files, targets,
        "fuzz_targets/*.rs and socklab_fuzz::TARGETS"
    );
    let corpora = names_in(&root().join("corpus"), None);
    assert_eq!(corpora, targets, "corpus/* and socklab_fuzz::TARGETS");
}
