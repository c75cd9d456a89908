//! Tests of [`FileReceiver`](super::FileReceiver).

use super::*;
use crate::testutil::Rng;
use crate::FileSender;

/// Writes `files` (name, content) into a fresh source directory.
fn sources(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let d = tempfile::tempdir().unwrap();
    let paths = files
        .iter()
        .map(|(n, c)| {
            let p = d.path().join(n);
            fs::write(&p, c).unwrap();
            p
        })
        .collect();
    (d, paths)
}

/// Every chunk a sender produces (buffer size `chunk`), ignoring the server.
fn all_chunks(paths: &[PathBuf], chunk: usize) -> Vec<(u32, u64, Vec<u8>)> {
    let mut s = FileSender::new(paths).unwrap();
    let mut buf = vec![0u8; chunk];
    let mut v = Vec::new();
    while let Some((st, off, n)) = s.next_chunk(&mut buf).unwrap() {
        v.push((st, off, buf[..n].to_vec()));
    }
    v
}

fn controls(rx: &mut FileReceiver) -> Vec<Control> {
    rx.poll_control()
        .map(|b| Control::decode_all(&b).unwrap())
        .unwrap_or_default()
}

fn manifest_bytes(names: &[&str]) -> Vec<u8> {
    Manifest {
        files: names
            .iter()
            .map(|n| Entry {
                name: n.to_string(),
                size: 1,
                hash: *blake3::hash(b"x").as_bytes(),
            })
            .collect(),
    }
    .encode()
}

fn tree(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            v.extend(tree(&e.path()).into_iter().map(|s| format!("{name}/{s}")));
        }
        v.push(name);
    }
    v.sort();
    v
}

#[test]
fn transfer_unordered_duplicated_split_chunks_give_identical_files() {
    let mut rng = Rng(11);
    let big = rng.bytes(700_000);
    let mid = rng.bytes(65_537);
    let (_src, paths) = sources(&[
        ("big.bin", big.clone()),
        ("empty", vec![]),
        ("mid.bin", mid.clone()),
        ("one", vec![42]),
    ]);
    for seed in 0..8 {
        let mut chunks = all_chunks(&paths, 1 + rng.below(40_000) as usize);
        // Split some chunks at random points and duplicate some.
        let mut mangled = Vec::new();
        for (s, off, d) in chunks.drain(..) {
            if d.len() > 1 && rng.below(3) == 0 {
                let cut = 1 + rng.below(d.len() as u64 - 1) as usize;
                mangled.push((s, off, d[..cut].to_vec()));
                mangled.push((s, off + cut as u64, d[cut..].to_vec()));
            } else {
                mangled.push((s, off, d.clone()));
            }
            if rng.below(5) == 0 {
                let a = rng.below(d.len() as u64 + 1) as usize;
                let b = a + rng.below((d.len() - a) as u64 + 1) as usize;
                mangled.push((s, off + a as u64, d[a..b].to_vec()));
            }
        }
        rng.shuffle(&mut mangled);
        let dst = tempfile::tempdir().unwrap();
        let mut rx = FileReceiver::new(dst.path()).unwrap();
        let mut msgs = Vec::new();
        for (s, off, d) in &mangled {
            rx.on_chunk(*s, *off, d).unwrap();
            msgs.extend(controls(&mut rx));
        }
        assert!(rx.is_done(), "seed {seed}");
        assert_eq!(msgs.last(), Some(&Control::Done));
        assert_eq!(
            msgs.iter()
                .filter(|m| matches!(m, Control::Verdict { ok: true, .. }))
                .count(),
            4
        );
        assert_eq!(fs::read(dst.path().join("big.bin")).unwrap(), big);
        assert_eq!(fs::read(dst.path().join("mid.bin")).unwrap(), mid);
        assert_eq!(fs::read(dst.path().join("empty")).unwrap(), b"");
        assert_eq!(fs::read(dst.path().join("one")).unwrap(), [42]);
        assert_eq!(
            tree(dst.path()),
            vec!["big.bin", "empty", "mid.bin", "one"],
            "no temporary files left"
        );
        assert!(rx.report().iter().all(|o| o.ok));
        // Late duplicates after the end are harmless.
        let (s, off, d) = &mangled[0];
        rx.on_chunk(*s, *off, d).unwrap();
    }
}

#[test]
fn transfer_path_attacks_are_refused_and_nothing_is_written_outside() {
    let outside = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dst.path().join("link")).unwrap();
    fs::write(dst.path().join("plain"), b"").unwrap();
    for (name, why) in [
        ("../x", "'..' components"),
        ("/etc/x", "absolute"),
        ("a/../../x", "'..' components"),
        ("link/x", "symbolic link"),
        ("a\0b", "NUL"),
        ("plain/x", "not a directory"),
        ("sub\\..\\x", "backslash"),
        (".x.sl-part", "reserved"),
    ] {
        let mut rx = FileReceiver::new(dst.path()).unwrap();
        let b = manifest_bytes(&[name]);
        let e = rx.on_chunk(0, 0, &b).unwrap_err().to_string();
        assert!(e.contains(why), "{name:?}: {e}");
        // The client is told why.
        match controls(&mut rx).as_slice() {
            [Control::Abort { detail }] => assert!(detail.contains(why), "{detail}"),
            m => panic!("{name:?}: {m:?}"),
        }
        // A file chunk after the failure is refused too.
        assert!(rx.on_chunk(1, 0, b"x").is_err());
    }
    // One bad name among good ones: nothing at all is created.
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let b = manifest_bytes(&["good/one", "link/x"]);
    assert!(rx.on_chunk(0, 0, &b).is_err());
    drop(rx);
    assert_eq!(tree(dst.path()), vec!["link", "plain"]);
    assert_eq!(tree(outside.path()), Vec::<String>::new());
    // A file that is also a parent of another.
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let e = rx
        .on_chunk(0, 0, &manifest_bytes(&["d", "d/e"]))
        .unwrap_err();
    assert!(e.to_string().contains("both a file and the parent"), "{e}");
    // A symlink planted at the temporary name is replaced, never followed.
    let target = outside.path().join("victim");
    fs::write(&target, b"keep").unwrap();
    std::os::unix::fs::symlink(&target, dst.path().join(".f.sl-part")).unwrap();
    let (_s, paths) = sources(&[("f", b"new content".to_vec())]);
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    for (s, off, d) in all_chunks(&paths, 4) {
        rx.on_chunk(s, off, &d).unwrap();
    }
    assert!(rx.is_done());
    assert_eq!(fs::read(&target).unwrap(), b"keep");
    assert_eq!(fs::read(dst.path().join("f")).unwrap(), b"new content");
}

#[test]
fn transfer_a_hard_link_planted_at_the_temporary_name_is_never_written_through() {
    let dst = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, b"keep me").unwrap();
    fs::hard_link(&victim, dst.path().join(".hl.sl-part")).unwrap();
    let (_s, paths) = sources(&[("hl", b"the sent bytes".to_vec())]);
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    for (s, off, d) in all_chunks(&paths, 4) {
        rx.on_chunk(s, off, &d).unwrap();
    }
    assert!(rx.is_done());
    assert_eq!(fs::read(&victim).unwrap(), b"keep me");
    assert_eq!(fs::read(dst.path().join("hl")).unwrap(), b"the sent bytes");
    assert_eq!(fs::metadata(&victim).unwrap().nlink(), 1);
}

#[test]
fn transfer_a_resume_through_a_hard_link_starts_afresh() {
    // A planted partial file (a hard link to a victim) and a matching sidecar: resuming it
    // would write the missing ranges into the victim.
    let dst = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let content = vec![7u8; 100_000];
    let victim = outside.path().join("victim");
    fs::write(&victim, vec![0u8; 100_000]).unwrap();
    fs::hard_link(&victim, dst.path().join(".f.sl-part")).unwrap();
    let side = Sidecar {
        version: SIDECAR_VERSION,
        size: content.len() as u64,
        hash: hex(blake3::hash(&content).as_bytes()),
        ranges: vec![(0, 10)],
    };
    fs::write(
        dst.path().join(".f.sl-part.json"),
        serde_json::to_vec(&side).unwrap(),
    )
    .unwrap();
    let (_s, paths) = sources(&[("f", content.clone())]);
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    for (s, off, d) in all_chunks(&paths, 30_000) {
        rx.on_chunk(s, off, &d).unwrap();
    }
    assert!(rx.is_done());
    assert_eq!(rx.report()[0].skipped_bytes, 0, "nothing was resumed");
    assert_eq!(fs::read(&victim).unwrap(), vec![0u8; 100_000]);
    assert_eq!(fs::read(dst.path().join("f")).unwrap(), content);
}

#[test]
fn transfer_a_temporary_file_swapped_while_open_is_refused() {
    // Between two opens of the same temporary file (the receiver closes files beyond
    // MAX_OPEN), the name is replaced by a hard link, then by another single-link file.
    let dst = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, b"keep").unwrap();
    let (_s, paths) = sources(&[("f", vec![3u8; 1000])]);
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let chunks = all_chunks(&paths, 10_000);
    rx.on_chunk(chunks[0].0, chunks[0].1, &chunks[0].2).unwrap();
    let temp = dst.path().join(".f.sl-part");
    let f = &mut rx.files[0];
    f.file = Some(open_part(f).unwrap());
    f.file = None; // closed, as when evicted
                   // Moved aside, not removed, so that no new file can reuse its inode number.
    fs::rename(&temp, outside.path().join("aside")).unwrap();
    fs::hard_link(&victim, &temp).unwrap();
    let e = open_part(&mut rx.files[0]).unwrap_err().to_string();
    assert!(e.contains("2 hard links") && e.contains("refusing"), "{e}");
    fs::remove_file(&temp).unwrap();
    fs::write(&temp, b"other").unwrap();
    let e = open_part(&mut rx.files[0]).unwrap_err().to_string();
    assert!(e.contains("was replaced"), "{e}");
    assert_eq!(fs::read(&victim).unwrap(), b"keep");
}

#[test]
fn transfer_subdirectories_are_created_inside() {
    let dst = tempfile::tempdir().unwrap();
    let content = b"abc".to_vec();
    let m = Manifest {
        files: vec![Entry {
            name: "x/y/z.txt".into(),
            size: 3,
            hash: *blake3::hash(&content).as_bytes(),
        }],
    };
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    rx.on_chunk(1, 0, &content).unwrap(); // before the manifest: buffered
    rx.on_chunk(0, 0, &m.encode()).unwrap();
    assert!(rx.is_done());
    assert_eq!(fs::read(dst.path().join("x/y/z.txt")).unwrap(), content);
}

#[test]
fn transfer_protocol_violations_are_errors() {
    let dst = tempfile::tempdir().unwrap();
    let (_s, paths) = sources(&[("f", vec![1; 10])]);
    let chunks = all_chunks(&paths, 1 << 20);
    let man = &chunks[0];
    assert_eq!(man.0, 0);
    let fresh = || {
        let mut rx = FileReceiver::new(dst.path()).unwrap();
        rx.on_chunk(0, 0, &man.2).unwrap();
        rx
    };
    let e = fresh().on_chunk(2, 0, b"x").unwrap_err().to_string();
    assert!(e.contains("stream 2") && e.contains("1 files"), "{e}");
    let e = fresh().on_chunk(1, 5, &[0; 6]).unwrap_err().to_string();
    assert!(e.contains("beyond the end of 'f'"), "{e}");
    let e = fresh()
        .on_chunk(0, man.2.len() as u64, b"x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("beyond the manifest"), "{e}");
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let e = rx
        .on_chunk(0, 0, b"GARBAGE GARBAGE!")
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad magic"), "{e}");
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let big = vec![0u8; 1 << 20];
    let e = (0..100)
        .find_map(|i| rx.on_chunk(1, i << 20, &big).err())
        .unwrap()
        .to_string();
    assert!(
        e.contains("64 MiB of memory held for file data before the manifest"),
        "{e}"
    );
    assert!(FileReceiver::new(&dst.path().join("missing")).is_err());
}

#[test]
fn transfer_hash_mismatch_gives_a_failed_verdict_and_no_file() {
    let dst = tempfile::tempdir().unwrap();
    let (_s, paths) = sources(&[("f.bin", vec![7; 100_000]), ("g", b"fine".to_vec())]);
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let mut msgs = Vec::new();
    for (i, (s, off, mut d)) in all_chunks(&paths, 10_000).into_iter().enumerate() {
        if i == 3 {
            d[17] ^= 1;
        }
        rx.on_chunk(s, off, &d).unwrap();
        msgs.extend(controls(&mut rx));
    }
    assert!(rx.is_done());
    match &msgs[0] {
        Control::Verdict {
            file: 0,
            ok: false,
            detail,
        } => {
            assert!(detail.starts_with("hash mismatch: expected"), "{detail}")
        }
        m => panic!("{m:?}"),
    }
    assert!(matches!(
        msgs[1],
        Control::Verdict {
            file: 1,
            ok: true,
            ..
        }
    ));
    assert_eq!(msgs[2], Control::Done);
    assert_eq!(tree(dst.path()), vec!["g"]);
    let r = rx.report();
    assert!(!r[0].ok && r[1].ok);
}

#[test]
fn transfer_an_existing_file_is_replaced_only_after_verification() {
    let dst = tempfile::tempdir().unwrap();
    fs::write(dst.path().join("f"), b"old").unwrap();
    let (_s, paths) = sources(&[("f", vec![9; 50_000])]);
    let chunks = all_chunks(&paths, 4096);
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    for (s, off, d) in &chunks[..chunks.len() - 1] {
        rx.on_chunk(*s, *off, d).unwrap();
        assert_eq!(fs::read(dst.path().join("f")).unwrap(), b"old");
    }
    let (s, off, d) = chunks.last().unwrap();
    rx.on_chunk(*s, *off, d).unwrap();
    assert_eq!(fs::read(dst.path().join("f")).unwrap(), vec![9; 50_000]);
}

#[test]
fn transfer_resume_after_interruption() {
    let mut rng = Rng(5);
    let content = rng.bytes(3 << 20);
    let small = rng.bytes(1000);
    let (_s, paths) = sources(&[("big", content.clone()), ("small", small.clone())]);
    let dst = tempfile::tempdir().unwrap();
    // First session: the manifest and half the chunks of "big", in random order.
    let mut chunks = all_chunks(&paths, 64 * 1024);
    let man = chunks.remove(0);
    let mut big: Vec<_> = chunks.iter().filter(|c| c.0 == 1).cloned().collect();
    rng.shuffle(&mut big);
    let half = big.len() / 2;
    {
        let mut rx = FileReceiver::new(dst.path()).unwrap();
        rx.on_chunk(man.0, man.1, &man.2).unwrap();
        for (s, off, d) in &big[..half] {
            rx.on_chunk(*s, *off, d).unwrap();
        }
        assert!(!rx.is_done());
    } // dropped: the sidecar is saved
    assert!(dst.path().join(".big.sl-part.json").exists());
    assert!(!dst.path().join("big").exists());
    let had: u64 = big[..half].iter().map(|c| c.2.len() as u64).sum();

    // Second session with a new sender: the server offers the ranges, the sender skips them.
    let mut tx = FileSender::new(&paths).unwrap();
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut ctl_off = 0u64;
    let mut resume = None;
    while let Some((s, off, n)) = tx.next_chunk(&mut buf).unwrap() {
        rx.on_chunk(s, off, &buf[..n]).unwrap();
        if let Some(b) = rx.poll_control() {
            for m in Control::decode_all(&b).unwrap() {
                if let Control::Resume { file, have } = m {
                    resume = Some((file, have));
                }
            }
            tx.on_control(ctl_off, &b).unwrap();
            ctl_off += b.len() as u64;
        }
    }
    let (file, have) = resume.expect("a Resume message");
    assert_eq!(file, 0);
    assert_eq!(have.iter().map(|(s, e)| e - s).sum::<u64>(), had);
    assert!(tx.is_done(), "{:?}", tx.failed());
    let out = tx.outcomes();
    assert_eq!(out[0].skipped_bytes, had);
    assert!(had > 0 && out.iter().all(|o| o.ok));
    assert_eq!(rx.report()[0].skipped_bytes, had);
    assert_eq!(fs::read(dst.path().join("big")).unwrap(), content);
    assert_eq!(fs::read(dst.path().join("small")).unwrap(), small);
    assert_eq!(tree(dst.path()), vec!["big", "small"]);
}

#[test]
fn transfer_a_stale_partial_file_is_not_resumed() {
    let dst = tempfile::tempdir().unwrap();
    let (_s, paths) = sources(&[("f", vec![1; 200_000])]);
    let chunks = all_chunks(&paths, 50_000);
    {
        let mut rx = FileReceiver::new(dst.path()).unwrap();
        for (s, off, d) in &chunks[..3] {
            rx.on_chunk(*s, *off, d).unwrap();
        }
    }
    // The source changes: same name, other content; the old partial data must not be used.
    let (_s2, paths2) = sources(&[("f", vec![2; 200_000])]);
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let mut msgs = Vec::new();
    for (s, off, d) in all_chunks(&paths2, 50_000) {
        rx.on_chunk(s, off, &d).unwrap();
        msgs.extend(controls(&mut rx));
    }
    assert!(
        !msgs.iter().any(|m| matches!(m, Control::Resume { .. })),
        "{msgs:?}"
    );
    assert_eq!(fs::read(dst.path().join("f")).unwrap(), vec![2; 200_000]);
}

#[test]
fn transfer_long_names_use_short_temporary_names() {
    let (a, b) = part_names(&"n".repeat(250));
    assert!(a.len() <= 255 && b.len() + 4 <= 255 && a.starts_with(".sl-part-"));
    assert_eq!(part_names("f").0, ".f.sl-part");
}

fn manifest_of(entries: &[(&str, u64)]) -> Vec<u8> {
    Manifest {
        files: entries
            .iter()
            .map(|&(n, size)| Entry {
                name: n.to_string(),
                size,
                hash: [0; 32],
            })
            .collect(),
    }
    .encode()
}

/// Issue 16 item 5: a manifest may not declare a file above the server's maximum; the client
/// is told why in one line, and nothing is created (no sparse 1 TiB partial file).
#[test]
fn transfer_a_declared_size_above_the_maximum_is_refused_before_anything_is_created() {
    let dst = tempfile::tempdir().unwrap();
    let mut rx = FileReceiver::new(dst.path()).unwrap();
    let e = rx
        .on_chunk(0, 0, &manifest_of(&[("ok", 10), ("sub/huge", 1 << 40)]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'sub/huge' declares 1099511627776 bytes (1T)")
            && e.contains("`max_file_size` 64G"),
        "{e}"
    );
    match controls(&mut rx).as_slice() {
        [Control::Abort { detail }] => assert!(!detail.contains('\n') && detail == &e),
        m => panic!("{m:?}"),
    }
    assert_eq!(tree(dst.path()), Vec::<String>::new());
    // With the limit off the same file is still refused: no disk has 2^60 bytes free.
    let limits = ReceiveLimits {
        max_file_size: None,
        ..ReceiveLimits::default()
    };
    let mut rx = FileReceiver::with_limits(dst.path(), &limits).unwrap();
    let e = rx
        .on_chunk(0, 0, &manifest_of(&[("sub/huge", 1 << 60)]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the files need 1152921504606846976 bytes (1048576T)") && e.contains("free"),
        "{e}"
    );
    assert_eq!(tree(dst.path()), Vec::<String>::new());
    // A size within both limits is accepted.
    let mut rx = FileReceiver::with_limits(dst.path(), &limits).unwrap();
    rx.on_chunk(0, 0, &manifest_of(&[("small", 1000)])).unwrap();
}

/// Issue 16 item 2: memory held before the manifest is counted as held (buffers by capacity,
/// index included), per session and across every receiver sharing the limits.
#[test]
fn transfer_tiny_chunks_before_the_manifest_are_bounded_by_memory_held() {
    let dst = tempfile::tempdir().unwrap();
    let limits = ReceiveLimits {
        early_per_session: 4 << 20,
        early_budget: std::sync::Arc::new(super::super::MemoryBudget::new(6 << 20)),
        ..ReceiveLimits::default()
    };
    // Scattered one-byte chunks (they cannot be merged): refused long before 4 Mi chunks.
    let mut rx = FileReceiver::with_limits(dst.path(), &limits).unwrap();
    let mut n = 0u64;
    let e = loop {
        match rx.on_chunk(1, n * 2, b"x") {
            Ok(()) => n += 1,
            Err(e) => break e.to_string(),
        }
    };
    assert!(n < 300_000, "{n} one-byte chunks accepted");
    assert!(e.contains("4 MiB of memory held"), "{e}");
    assert!(rx.early_memory() <= 4 << 20);
    // A second session gets only what is left of the server's 6 MiB.
    let mut rx2 = FileReceiver::with_limits(dst.path(), &limits).unwrap();
    let big = vec![1u8; 64 * 1024];
    let e = (0..100u64)
        .find_map(|i| rx2.on_chunk(1, i * big.len() as u64, &big).err())
        .expect("the server's budget refuses")
        .to_string();
    assert!(
        e.contains("6 MiB of file data sent before manifests"),
        "{e}"
    );
    assert!(limits.early_budget.held() <= 6 << 20);
    drop((rx, rx2));
    assert_eq!(
        limits.early_budget.held(),
        0,
        "given back when sessions end"
    );
    // Contiguous tiny chunks are merged: 1 Mi one-byte chunks hold about 1 MiB, and the file
    // arrives whole once the manifest comes.
    let content: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut rx = FileReceiver::with_limits(dst.path(), &limits).unwrap();
    for (i, b) in content.iter().enumerate() {
        rx.on_chunk(1, i as u64, std::slice::from_ref(b)).unwrap();
    }
    assert!(rx.early_memory() <= 2 << 20, "{}", rx.early_memory());
    let m = Manifest {
        files: vec![Entry {
            name: "f".into(),
            size: content.len() as u64,
            hash: *blake3::hash(&content).as_bytes(),
        }],
    };
    rx.on_chunk(0, 0, &m.encode()).unwrap();
    assert!(rx.is_done());
    assert_eq!(rx.early_memory(), 0);
    assert_eq!(limits.early_budget.held(), 0);
    assert_eq!(fs::read(dst.path().join("f")).unwrap(), content);
}
