//! Helpers the transfer integration tests share: files with pseudo-random content, and the
//! check that a directory holds exactly those files, byte for byte.

use std::path::{Path, PathBuf};

/// Writes files of the given sizes with pseudo-random content into `dir`.
pub fn make_files(dir: &Path, sizes: &[usize]) -> Vec<PathBuf> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
            let data: Vec<u8> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let p = dir.join(format!("file-{i}.bin"));
            std::fs::write(&p, data).unwrap();
            p
        })
        .collect()
}

/// Every file of `sent` is in `dir` under its name with the same bytes, and nothing else is
/// there (no temporary or partial files).
pub fn assert_received(dir: &Path, sent: &[PathBuf]) {
    for p in sent {
        let name = p.file_name().unwrap();
        let got = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert!(got == std::fs::read(p).unwrap(), "{name:?} differs");
    }
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names.len(), sent.len(), "unexpected files: {names:?}");
}
