//! The manifest: the list of files a client sends, with sizes and BLAKE3 hashes, and the rules a
//! file name must follow.
//!
//! Encoding (all integers little-endian):
//!
//! ```text
//! header  "SLMF" | version u16 = 1 | flags u16 = 0 | total_len u32 | count u32     (16 bytes)
//! entry   name_len u16 | name (UTF-8) | size u64 | blake3 [u8; 32]               (× count)
//! ```
//!
//! `total_len` is the length of the whole encoding, so a receiver collecting the manifest from
//! unordered chunks knows when it is complete ([`Manifest::encoded_len`]). Decoding is strict
//! (exact length, zero flags, valid names, no duplicates), so `encode(decode(b)) == b`.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::{Reader, TransferError};

/// The magic at the start of an encoded manifest.
pub const MAGIC: [u8; 4] = *b"SLMF";
/// The encoding version this code reads and writes.
pub const VERSION: u16 = 1;
/// Length of the fixed header.
pub const HEADER_LEN: usize = 16;
/// Largest encoded manifest accepted.
pub const MAX_MANIFEST_BYTES: usize = 16 << 20;
/// Longest name, in bytes.
pub const MAX_NAME_BYTES: usize = 4096;
/// Longest name component, in bytes (Linux `NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;
/// Most components in a name.
pub const MAX_COMPONENTS: usize = 64;
/// Smallest entry the encoding can hold (an empty name). The count is checked against it
/// before allocating; an entry with an empty name then gets the name error it deserves.
const MIN_ENTRY_LEN: usize = 2 + 8 + 32;

/// One file of a transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative, `/`-separated name (see [`check_name`]).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// BLAKE3 hash of the content.
    pub hash: [u8; 32],
}

/// The files of a transfer, in the order they are sent; file `i` travels on stream `i + 1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The files.
    pub files: Vec<Entry>,
}

/// Checks that `name` is a safe relative file name: `/`-separated, no leading `/`, no empty,
/// `.` or `..` components, no NUL or backslash, at most [`MAX_NAME_BYTES`] bytes,
/// [`MAX_COMPONENTS`] components of at most [`MAX_COMPONENT_BYTES`] bytes each.
pub fn check_name(name: &str) -> Result<(), TransferError> {
    let bad = |why: &str| Err(TransferError::name(name, why));
    if name.is_empty() {
        return bad("the name is empty");
    }
    if name.len() > MAX_NAME_BYTES {
        return bad(&format!(
            "the name is {} bytes long, more than {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    if name.starts_with('/') {
        return bad("absolute names are not allowed (it starts with '/')");
    }
    if name.contains('\0') {
        return bad("the name contains a NUL byte");
    }
    if name.contains('\\') {
        return bad("the name contains a backslash");
    }
    let mut n = 0;
    for c in name.split('/') {
        n += 1;
        if n > MAX_COMPONENTS {
            return bad(&format!("more than {MAX_COMPONENTS} path components"));
        }
        match c {
            "" => return bad("empty path component ('//' or a trailing '/')"),
            "." | ".." => return bad(&format!("'{c}' components are not allowed")),
            _ if c.len() > MAX_COMPONENT_BYTES => {
                return bad(&format!(
                    "a component is {} bytes long, more than {MAX_COMPONENT_BYTES}",
                    c.len()
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn protocol(m: impl Into<String>) -> TransferError {
    TransferError::Protocol(m.into())
}

impl Manifest {
    /// Builds a manifest from local files: the name of each is its last path component, the
    /// size and hash come from reading it once.
    pub fn from_paths(paths: &[PathBuf]) -> Result<Manifest, TransferError> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            let name = file_name(p)?;
            if !seen.insert(name.clone()) {
                return Err(TransferError::Invalid(format!(
                    "two files are named '{name}' (the second is {}): the server stores files by name, rename one",
                    p.display()
                )));
            }
            let (size, hash) = hash_file(p)?;
            files.push(Entry { name, size, hash });
        }
        Ok(Manifest { files })
    }

    /// Total bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|e| e.size).sum()
    }

    /// The binary encoding.
    pub fn encode(&self) -> Vec<u8> {
        let len = HEADER_LEN
            + self
                .files
                .iter()
                .map(|e| 2 + e.name.len() + 8 + 32)
                .sum::<usize>();
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&(self.files.len() as u32).to_le_bytes());
        for e in &self.files {
            out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            out.extend_from_slice(e.name.as_bytes());
            out.extend_from_slice(&e.size.to_le_bytes());
            out.extend_from_slice(&e.hash);
        }
        out
    }

    /// The length of the whole encoding, read from its first [`HEADER_LEN`] bytes (`None`
    /// while fewer have arrived). Rejects a bad magic, version or length at once.
    pub fn encoded_len(prefix: &[u8]) -> Result<Option<usize>, TransferError> {
        if prefix.len() < HEADER_LEN {
            let k = prefix.len().min(MAGIC.len());
            if prefix[..k] != MAGIC[..k] {
                return Err(protocol("not a socklab manifest (bad magic)"));
            }
            return Ok(None);
        }
        let mut r = Reader::new(&prefix[..HEADER_LEN], "manifest header");
        if r.array::<4>()? != MAGIC {
            return Err(protocol("not a socklab manifest (bad magic)"));
        }
        let version = r.u16()?;
        if version != VERSION {
            return Err(protocol(format!(
                "manifest version {version}, this socklab reads version {VERSION}: use the same socklab on both ends"
            )));
        }
        let flags = r.u16()?;
        if flags != 0 {
            return Err(protocol(format!("manifest flags {flags:#x}, expected 0")));
        }
        let len = r.u32()? as usize;
        if !(HEADER_LEN..=MAX_MANIFEST_BYTES).contains(&len) {
            return Err(protocol(format!(
                "manifest length {len} out of range {HEADER_LEN}..={MAX_MANIFEST_BYTES}"
            )));
        }
        Ok(Some(len))
    }

    /// Decodes and validates an encoded manifest (exactly, no trailing bytes).
    pub fn decode(bytes: &[u8]) -> Result<Manifest, TransferError> {
        let Some(len) = Manifest::encoded_len(bytes)? else {
            return Err(protocol(format!(
                "manifest truncated: {} bytes, the header alone has {HEADER_LEN}",
                bytes.len()
            )));
        };
        if bytes.len() != len {
            return Err(protocol(format!(
                "manifest says it is {len} bytes long but {} bytes were given",
                bytes.len()
            )));
        }
        let mut r = Reader::new(&bytes[12..], "manifest");
        let count = r.u32()? as usize;
        if count > r.remaining() / MIN_ENTRY_LEN {
            return Err(protocol(format!(
                "manifest lists {count} files but has room for at most {}",
                r.remaining() / MIN_ENTRY_LEN
            )));
        }
        let mut files = Vec::with_capacity(count);
        let mut seen: HashSet<&str> = HashSet::with_capacity(count);
        for i in 0..count {
            let n = r.u16()? as usize;
            let raw = r.bytes(n)?;
            let name = std::str::from_utf8(raw)
                .map_err(|_| protocol(format!("file {i}: the name is not UTF-8")))?;
            check_name(name)?;
            if !seen.insert(name) {
                return Err(protocol(format!(
                    "file name '{}' appears twice",
                    socklab_units::text::quote(name)
                )));
            }
            let size = r.u64()?;
            let hash = r.array::<32>()?;
            files.push(Entry {
                name: name.to_string(),
                size,
                hash,
            });
        }
        if r.remaining() != 0 {
            return Err(protocol(format!(
                "{} bytes after the last manifest entry",
                r.remaining()
            )));
        }
        Ok(Manifest { files })
    }
}

/// The last component of `p`, as a checked name.
fn file_name(p: &Path) -> Result<String, TransferError> {
    let Some(os) = p.file_name() else {
        return Err(TransferError::Invalid(format!(
            "{}: not a file name (give paths to regular files)",
            p.display()
        )));
    };
    let Some(name) = os.to_str() else {
        return Err(TransferError::Invalid(format!(
            "{}: the file name is not UTF-8: rename it",
            p.display()
        )));
    };
    check_name(name).map_err(|e| TransferError::Invalid(format!("{}: {e}", p.display())))?;
    Ok(name.to_string())
}

/// Reads a regular file once: its size and BLAKE3 hash.
pub(crate) fn hash_file(p: &Path) -> Result<(u64, [u8; 32]), TransferError> {
    let ctx = |what: &str| format!("{what} {}", p.display());
    let mut f = File::open(p).map_err(|e| TransferError::io(ctx("opening"), e))?;
    let meta = f
        .metadata()
        .map_err(|e| TransferError::io(ctx("stat"), e))?;
    if !meta.is_file() {
        return Err(TransferError::Invalid(format!(
            "{} is not a regular file: give files, not directories or devices",
            p.display()
        )));
    }
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(TransferError::io(ctx("reading"), e)),
        };
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, *h.finalize().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(name: &str, size: u64) -> Entry {
        Entry {
            name: name.into(),
            size,
            hash: *blake3::hash(name.as_bytes()).as_bytes(),
        }
    }

    #[test]
    fn transfer_manifest_round_trips() {
        let m = Manifest {
            files: vec![
                entry("a", 0),
                entry("dir/b.bin", 3 << 20),
                entry("ü", u64::MAX),
            ],
        };
        let b = m.encode();
        assert_eq!(
            Manifest::encoded_len(&b[..HEADER_LEN]).unwrap(),
            Some(b.len())
        );
        assert_eq!(Manifest::encoded_len(&b[..3]).unwrap(), None);
        assert_eq!(Manifest::decode(&b).unwrap(), m);
        let empty = Manifest::default();
        assert_eq!(Manifest::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn transfer_manifest_rejects_garbage_clearly() {
        let m = Manifest {
            files: vec![entry("a", 1), entry("b", 2)],
        };
        let b = m.encode();
        let err = |bytes: &[u8]| Manifest::decode(bytes).unwrap_err().to_string();
        assert!(err(b"").contains("truncated"), "{}", err(b""));
        assert!(err(b"GET / HTTP/1.1\r\n\r\n").contains("bad magic"));
        let mut v = b.clone();
        v[4] = 9;
        assert!(err(&v).contains("version 9"), "{}", err(&v));
        let mut v = b.clone();
        v.push(0);
        assert!(err(&v).contains("bytes were given"), "{}", err(&v));
        assert!(err(&b[..b.len() - 1]).contains("bytes were given"));
        // A huge count with a small body: refused before allocating.
        let mut v = b.clone();
        v[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&v).contains("room for at most"), "{}", err(&v));
        // Duplicate names.
        let d = Manifest {
            files: vec![entry("a", 1), entry("a", 1)],
        };
        assert!(err(&d.encode()).contains("appears twice"));
        // Unsafe names are refused by decode already.
        for bad in [
            "../x",
            "/etc/x",
            "a/../../x",
            "a\0b",
            "a\\b",
            "",
            "a//b",
            "./a",
            "a/",
        ] {
            let d = Manifest {
                files: vec![entry(bad, 1)],
            };
            let e = err(&d.encode());
            assert!(e.contains("refusing file name"), "{bad:?}: {e}");
        }
        // Non-UTF-8 name.
        let mut v = Manifest {
            files: vec![entry("ab", 1)],
        }
        .encode();
        v[HEADER_LEN + 2] = 0xff;
        assert!(err(&v).contains("not UTF-8"));
    }

    #[test]
    fn transfer_name_rules() {
        let deep = "a/".repeat(63) + "a";
        let long = "x".repeat(255);
        for ok in ["a", "a/b/c", "dir/.hidden", "x..y", "ü/名前", &deep, &long] {
            check_name(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        for bad in [
            "".to_string(),
            "/etc/passwd".into(),
            "../x".into(),
            "a/../../x".into(),
            "a/./b".into(),
            ".".into(),
            "a\0".into(),
            "a\\..\\b".into(),
            "a//b".into(),
            "x".repeat(4097),
            "a/".repeat(65) + "a",
            "y".repeat(256),
        ] {
            assert!(check_name(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn transfer_from_paths_hashes_and_rejects_duplicates() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.bin");
        std::fs::write(&a, b"hello").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let a2 = d.path().join("sub/a.bin");
        std::fs::write(&a2, b"other").unwrap();
        let m = Manifest::from_paths(std::slice::from_ref(&a)).unwrap();
        assert_eq!(
            m.files,
            vec![Entry {
                name: "a.bin".into(),
                size: 5,
                hash: *blake3::hash(b"hello").as_bytes()
            }]
        );
        let e = Manifest::from_paths(&[a, a2]).unwrap_err().to_string();
        assert!(
            e.contains("two files are named 'a.bin'") && e.contains("sub/a.bin"),
            "{e}"
        );
        let e = Manifest::from_paths(&[d.path().join("sub")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let e = Manifest::from_paths(&[d.path().join("missing")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("opening") && e.contains("missing"), "{e}");
    }

    fn name_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec("[a-zA-Z0-9_.ü-]{1,12}", 1..4)
            .prop_map(|v| v.join("/"))
            .prop_filter("valid", |n| check_name(n).is_ok())
    }

    proptest! {
        #[test]
        fn transfer_manifest_round_trip_prop(
            files in proptest::collection::vec((name_strategy(), any::<u64>(), any::<[u8; 32]>()), 0..8)
        ) {
            let mut seen = HashSet::new();
            let files: Vec<Entry> = files
                .into_iter()
                .filter(|(n, _, _)| seen.insert(n.clone()))
                .map(|(name, size, hash)| Entry { name, size, hash })
                .collect();
            let m = Manifest { files };
            let b = m.encode();
            prop_assert_eq!(Manifest::decode(&b).unwrap(), m);
        }

        #[test]
        fn transfer_manifest_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(m) = Manifest::decode(&bytes) {
                prop_assert_eq!(m.encode(), bytes);
            }
        }

        #[test]
        fn transfer_manifest_mutations_never_panic(
            pos in any::<prop::sample::Index>(), val in any::<u8>()
        ) {
            let m = Manifest { files: vec![entry("a/b", 7), entry("c", 9)] };
            let mut b = m.encode();
            let i = pos.index(b.len());
            b[i] = val;
            if let Ok(d) = Manifest::decode(&b) {
                prop_assert_eq!(d.encode(), b);
            }
        }
    }
}
