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

/// Writes the seed corpora of the parser targets from the code's own printers:
/// `cargo test -p socklab-fuzz --test corpus -- --ignored write_seeds` (then commit them).
#[test]
#[ignore]
fn write_seeds() {
    use socklab_net::childline::ChildLine;
    let mut seeds: Vec<(&str, Vec<Vec<u8>>)> = Vec::new();

    let traces = root().join("../experiments/traces");
    let head = |f: &str, n: usize| {
        let t = std::fs::read_to_string(traces.join(f)).unwrap();
        t.lines()
            .take(n)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .into_bytes()
    };
    seeds.push((
        "trace",
        vec![
            b"0\n2\n2\n5\n".to_vec(),
            head("cell-up.trace", 60),
            head("cell-down.trace", 60),
        ],
    ));

    let usage = socklab_sys::usage::Usage {
        user: std::time::Duration::from_micros(1500),
        sys: std::time::Duration::from_micros(700),
        nvcsw: 12,
        nivcsw: 3,
        maxrss_kib: 4096,
    };
    let lines = [
        ChildLine::Listening("127.0.0.1:40000".parse().unwrap()),
        ChildLine::Listening("[::1]:5201".parse().unwrap()),
        ChildLine::Effective(vec![
            ("SO_RCVBUF".into(), "131072".into()),
            ("TCP_NODELAY".into(), "1".into()),
        ]),
        ChildLine::Usage(usage),
        ChildLine::Report(
            serde_json::json!({"test_id": 7, "datagrams": 100, "lost": 2, "rate_bps": 1.5e6}),
        ),
        ChildLine::Interval(
            serde_json::json!({"test_id": 7, "index": 0, "interval": {"datagrams": 10}}),
        ),
    ];
    seeds.push((
        "child_line",
        vec![
            lines
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .into_bytes(),
            format!("{}\n", lines[0]).into_bytes(),
        ],
    ));

    let datagram = |seq, t, len| {
        let mut b = vec![0u8; len];
        socklab_link::check::fill(&mut b, seq, t);
        b
    };
    seeds.push((
        "link_check",
        vec![
            datagram(0, 1_000, 64),
            datagram(41, 2_000_000_000, 1472),
            datagram(1 << 48, 5, 24),
        ],
    ));

    use socklab_net::rrul::probe::probe;
    let mut answers = vec![5u8];
    for seq in [0, 2, 2, 4, 9] {
        answers.extend(probe(seq));
    }
    seeds.push(("rrul_probe", vec![answers, probe(3).to_vec()]));

    use socklab_lab::hosts::probe::{clock_line, Facts, FACTS};
    let facts = format!(
        "{FACTS}{}\n",
        serde_json::to_string(&Facts::here()).unwrap()
    );
    let clock = [
        clock_line(
            "1700000000000000000",
            1_700_000_000_005_000_000,
            1_700_000_000_005_010_000,
        ),
        clock_line(
            "1700000000001000000",
            1_700_000_000_006_100_000,
            1_700_000_000_006_120_000,
        ),
    ]
    .map(|l| l + "\n")
    .concat();
    seeds.push((
        "host_lines",
        vec![format!("{facts}{clock}").into_bytes(), clock.into_bytes()],
    ));

    seeds.push(("generator_report", generator_outputs()));

    use socklab_fuzz::transfer_receiver::encode;
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("d")).unwrap();
    let a: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    let b = b"hello, receiver".to_vec();
    std::fs::write(src.path().join("a"), &a).unwrap();
    std::fs::write(src.path().join("d/b"), &b).unwrap();
    let mut m =
        socklab_transfer::Manifest::from_paths(&[src.path().join("a"), src.path().join("d/b")])
            .unwrap();
    m.files[1].name = "d/b".into();
    let man = m.encode();
    seeds.push((
        "transfer_receiver",
        vec![
            encode(&[
                (0, 0, &man),
                (1, 0, &a[..100]),
                (2, 0, &b),
                (1, 100, &a[100..]),
                (1, 50, &a[50..60]),
            ]),
            encode(&[
                (2, 0, &b),
                (1, 200, &a[200..]),
                (0, 0, &man[..10]),
                (0, 10, &man[10..]),
                (1, 0, &a[..200]),
            ]),
        ],
    ));

    // A sidecar as the receiver saves it when a transfer stops half-way.
    use socklab_fuzz::resume_sidecar::{content, NAME};
    let body = content();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join(NAME), &body).unwrap();
    let m = socklab_transfer::Manifest::from_paths(&[src.path().join(NAME)]).unwrap();
    let mut sidecars = Vec::new();
    for upto in [1000, 1500] {
        let dir = tempfile::tempdir().unwrap();
        let mut rx = socklab_transfer::FileReceiver::new(dir.path()).unwrap();
        rx.on_chunk(0, 0, &m.encode()).unwrap();
        rx.on_chunk(1, 0, &body[..upto]).unwrap();
        drop(rx);
        sidecars.push(std::fs::read(dir.path().join(format!(".{NAME}.sl-part.json"))).unwrap());
    }
    seeds.push(("resume_sidecar", sidecars));

    for (name, inputs) in seeds {
        let dir = root().join("corpus").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in inputs.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
        }
    }
}

/// Result lines of a load generator (`LOAD {json}`) from real runs: against a local echo
/// server, and against a closed port (every connection fails).
fn generator_outputs() -> Vec<Vec<u8>> {
    use socklab_net::load::{run_with_histograms, LoadConfig, LoadProtocol};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().take(4) {
            let mut s = s.unwrap();
            std::thread::spawn(move || {
                let mut r = s.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut s);
            });
        }
    });
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut out = Vec::new();
    for to in [addr, closed] {
        let mut c = LoadConfig::new(to, LoadProtocol::Echo);
        c.connections = 2;
        c.threads = 1;
        c.requests = Some(20);
        c.duration = Some(std::time::Duration::from_secs(2));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (report, h) = run_with_histograms(&c, &stop).unwrap();
        let line =
            socklab_lab::hosts::generators::output_line(&socklab_lab::hosts::generators::Output {
                report,
                histograms: h.buckets(),
            })
            .unwrap();
        out.push(format!("{line}\n").into_bytes());
    }
    out
}
