//! The transfer receiver's chunk handling (`socklab_transfer::FileReceiver`): any chunks a
//! client sends (the manifest on stream 0, file data on the others, in any order, duplicated,
//! overlapping, out of range) never panic and never write outside the target directory; what
//! the receiver answers decodes; a file it calls verified is under its name with the
//! manifest's size; after an error it refuses every later chunk.
//!
//! Input: records `[stream u8][offset u32 LE][len u16 LE][bytes; len]` (a short record ends
//! the input).
use std::sync::Arc;

use socklab_transfer::limits::{MemoryBudget, ReceiveLimits};
use socklab_transfer::{Control, FileReceiver};

/// The chunks of an input: `(stream, offset, bytes)`.
pub fn records(mut data: &[u8]) -> Vec<(u32, u64, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= 7 {
        let stream = u32::from(data[0]);
        let offset = u64::from(u32::from_le_bytes(data[1..5].try_into().unwrap()));
        let len = usize::from(u16::from_le_bytes(data[5..7].try_into().unwrap()));
        let end = (7 + len).min(data.len());
        out.push((stream, offset, &data[7..end]));
        data = &data[end..];
    }
    out
}

/// The input of chunks `(stream, offset, bytes)`.
pub fn encode(chunks: &[(u32, u64, &[u8])]) -> Vec<u8> {
    let mut v = Vec::new();
    for (s, o, d) in chunks {
        v.push(*s as u8);
        v.extend_from_slice(&(*o as u32).to_le_bytes());
        v.extend_from_slice(&(d.len() as u16).to_le_bytes());
        v.extend_from_slice(d);
    }
    v
}

/// Small limits: a fuzzed manifest may declare at most 1 MiB a file.
pub fn limits() -> ReceiveLimits {
    ReceiveLimits {
        max_file_size: Some(1 << 20),
        early_per_session: 64 << 10,
        early_budget: Arc::new(MemoryBudget::new(256 << 10)),
        check_free_space: false,
    }
}

/// One input of the target.
pub fn run(data: &[u8]) {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("rx");
    std::fs::create_dir(&dir).unwrap();
    let mut rx = FileReceiver::with_limits(&dir, &limits()).unwrap();
    let mut failed = false;
    let mut answers = Vec::new();
    for (stream, offset, bytes) in records(data) {
        let r = rx.on_chunk(stream, offset, bytes);
        if failed {
            assert!(r.is_err(), "a chunk accepted after the session failed");
        }
        if let Err(e) = r {
            assert!(!e.to_string().contains('\n'), "{e}");
            failed = true;
        }
        while let Some(c) = rx.poll_control() {
            answers.extend(c);
        }
    }
    let msgs = Control::decode_all(&answers).expect("the receiver's answers decode");
    assert_eq!(
        failed,
        msgs.iter().any(|m| matches!(m, Control::Abort { .. }))
    );
    if rx.manifest().is_some() {
        for f in rx.report().iter().filter(|f| f.ok) {
            let md = std::fs::symlink_metadata(dir.join(&f.name)).unwrap();
            assert!(md.is_file() && md.len() == f.size, "{f:?}");
        }
    }
    drop(rx);
    let outside: Vec<_> = std::fs::read_dir(top.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, ["rx"], "written outside the target directory");
}
