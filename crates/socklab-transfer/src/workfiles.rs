//! Workload files for `socklab transfer` experiments and tests: deterministic pseudo-random
//! content (the same seed, index and size give the same bytes on every machine), written fast
//! (xorshift64* over 64-bit words, 64 KiB blocks) and hashed (BLAKE3) while being written.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::TransferError;

/// One generated file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its name (the last path component, as sent in the manifest).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// BLAKE3 of its content.
    pub hash: [u8; 32],
}

const BLOCK: usize = 64 * 1024;

/// splitmix64: turns (seed, index) into a well-mixed nonzero xorshift state.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// Fills `buf` with the stream of `state` (xorshift64*), 8 bytes per step.
fn fill(buf: &mut [u8], state: &mut u64) {
    for chunk in buf.chunks_mut(8) {
        let mut x = *state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        let w = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// Writes `files` (`(name, size)`) into `dir` with content derived from `seed` and each file's
/// index; returns them with their hashes. The names must be plain file names.
pub fn write_files(
    dir: &Path,
    files: &[(String, u64)],
    seed: u64,
) -> Result<Vec<WorkFile>, TransferError> {
    let mut out = Vec::with_capacity(files.len());
    let mut buf = vec![0u8; BLOCK];
    for (i, (name, size)) in files.iter().enumerate() {
        super::check_name(name)?;
        let path = dir.join(name);
        let io = |e| TransferError::io("writing a workload file", e);
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).map_err(io)?);
        let mut hasher = blake3::Hasher::new();
        let mut state = mix(seed ^ mix(i as u64));
        let mut left = *size;
        while left > 0 {
            let n = left.min(BLOCK as u64) as usize;
            fill(&mut buf[..n], &mut state);
            hasher.update(&buf[..n]);
            f.write_all(&buf[..n]).map_err(io)?;
            left -= n as u64;
        }
        f.flush().map_err(io)?;
        out.push(WorkFile {
            path,
            name: name.clone(),
            size: *size,
            hash: *hasher.finalize().as_bytes(),
        });
    }
    Ok(out)
}

/// BLAKE3 of a file's content.
pub fn hash_file(path: &Path) -> std::io::Result<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    h.update_reader(std::fs::File::open(path)?)?;
    Ok(*h.finalize().as_bytes())
}

/// Checks that `dir` holds every one of `files` with the same content: `Err` names the first
/// file that is missing or differs.
pub fn verify_copies(dir: &Path, files: &[WorkFile]) -> Result<(), String> {
    for f in files {
        let p = dir.join(&f.name);
        match hash_file(&p) {
            Ok(h) if h == f.hash => {}
            Ok(h) => {
                return Err(format!(
                    "received '{}' differs from what was sent (BLAKE3 {} instead of {})",
                    f.name,
                    super::hex(&h),
                    super::hex(&f.hash)
                ))
            }
            Err(e) => return Err(format!("received '{}' cannot be read: {e}", f.name)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_deterministic_distinct_and_verifiable() {
        let d = tempfile::tempdir().unwrap();
        let spec = vec![("a".to_string(), 100_003u64), ("b".to_string(), 7)];
        let f1 = write_files(d.path(), &spec, 4).unwrap();
        let a1 = std::fs::read(d.path().join("a")).unwrap();
        assert_eq!(a1.len(), 100_003);
        assert_eq!(std::fs::metadata(d.path().join("b")).unwrap().len(), 7);
        assert_eq!(f1[0].hash, *blake3::hash(&a1).as_bytes());
        let e = tempfile::tempdir().unwrap();
        let f2 = write_files(e.path(), &spec, 4).unwrap();
        assert_eq!(f1[0].hash, f2[0].hash, "same seed, same bytes");
        assert_ne!(f1[0].hash, write_files(e.path(), &spec, 5).unwrap()[0].hash);
        assert!(verify_copies(d.path(), &f1).is_ok());
        std::fs::write(d.path().join("b"), b"1234567").unwrap();
        let err = verify_copies(d.path(), &f1).unwrap_err();
        assert!(err.contains("'b' differs"), "{err}");
        std::fs::remove_file(d.path().join("a")).unwrap();
        assert!(verify_copies(d.path(), &f1)
            .unwrap_err()
            .contains("'a' cannot be read"));
        assert!(write_files(d.path(), &[("../x".into(), 1)], 1).is_err());
    }
}
