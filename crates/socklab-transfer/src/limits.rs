//! What one transfer server lets its clients cost it: memory held before a manifest (per
//! session and for the whole server), the largest file a manifest may declare, and partial
//! files left behind by transfers that never finished.
//!
//! A server makes one [`ReceiveLimits`] and gives every session a clone: the clones share one
//! [`MemoryBudget`], so TCP and rudp sessions together never hold more than its limit.

use std::fs;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::manifest::MAX_COMPONENTS;
use super::TransferError;

/// Memory one session may hold for file data that arrives before its manifest (buffers and
/// their index, counted by capacity, not payload).
pub const MAX_EARLY_BYTES: usize = 64 << 20;
/// Memory all sessions of one server together may hold before their manifests.
pub const EARLY_BUDGET: usize = 256 << 20;
/// Default largest file size a manifest may declare.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 64 << 30;
/// Default age after which a server reclaims partial files at start.
pub const DEFAULT_PARTIAL_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Suffix of temporary files.
pub(crate) const PART: &str = ".sl-part";

/// Bytes of memory shared by many holders: each takes before it allocates and gives back
/// when it frees; a take that would pass the limit is refused.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    held: AtomicUsize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes, none held.
    pub fn new(limit: usize) -> MemoryBudget {
        MemoryBudget {
            limit,
            held: AtomicUsize::new(0),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Takes `n` bytes if the total stays within the limit.
    pub(crate) fn try_take(&self, n: usize) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                h.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok()
    }

    /// Takes `n` bytes whatever the limit (memory already allocated must be counted).
    pub(crate) fn force_take(&self, n: usize) {
        self.held.fetch_add(n, Ordering::AcqRel);
    }

    /// Gives back `n` bytes taken before.
    pub(crate) fn give_back(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::AcqRel);
    }
}

/// The limits a server applies to every session; clones share the memory budget.
#[derive(Debug, Clone)]
pub struct ReceiveLimits {
    /// Largest size a manifest may declare for one file (`None`: no limit).
    pub max_file_size: Option<u64>,
    /// Memory one session may hold before its manifest.
    pub early_per_session: usize,
    /// Memory all sessions sharing these limits may hold before their manifests.
    pub early_budget: Arc<MemoryBudget>,
    /// Refuse a manifest whose missing bytes exceed the free space of the directory.
    pub check_free_space: bool,
}

impl Default for ReceiveLimits {
    fn default() -> Self {
        ReceiveLimits {
            max_file_size: Some(DEFAULT_MAX_FILE_SIZE),
            early_per_session: MAX_EARLY_BYTES,
            early_budget: Arc::new(MemoryBudget::new(EARLY_BUDGET)),
            check_free_space: true,
        }
    }
}

/// What [`reclaim_partials`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reclaimed {
    /// Partial files, sidecars and sidecar temporaries removed.
    pub files: u64,
    /// Their size in bytes (apparent size).
    pub bytes: u64,
}

/// True for the names of our temporary files: `.NAME.sl-part`, `.sl-part-HASH`, and their
/// sidecars `… .json` and `… .json.tmp`.
pub(crate) fn is_partial_name(name: &str) -> bool {
    let base = name
        .strip_suffix(".json.tmp")
        .or_else(|| name.strip_suffix(".json"))
        .unwrap_or(name);
    let long = base
        .strip_prefix(".sl-part-")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    long || (base.len() > 1 + PART.len() && base.starts_with('.') && base.ends_with(PART))
}

/// Removes the partial files (temporary files of unfinished transfers and their sidecars)
/// under `dir` whose last change is older than `max_age`, so abandoned transfers do not fill
/// the disk. Only regular files with our names are removed; symbolic links are neither
/// followed nor removed; directories are walked at most [`MAX_COMPONENTS`] deep. A partial
/// file and its sidecar go together, judged by the newer of the two.
pub fn reclaim_partials(dir: &Path, max_age: Duration) -> Result<Reclaimed, TransferError> {
    let now = SystemTime::now();
    let mut got = Reclaimed::default();
    walk(dir, 0, now, max_age, &mut got)?;
    Ok(got)
}

fn age(now: SystemTime, m: &fs::Metadata) -> Duration {
    m.modified()
        .ok()
        .and_then(|t| now.duration_since(t).ok())
        .unwrap_or(Duration::ZERO)
}

fn walk(
    dir: &Path,
    depth: usize,
    now: SystemTime,
    max_age: Duration,
    got: &mut Reclaimed,
) -> Result<(), TransferError> {
    let err = |e: io::Error| TransferError::io(format!("reading {}", dir.display()), e);
    for entry in fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let ft = entry.file_type().map_err(err)?; // never follows a link
        let path = entry.path();
        if ft.is_dir() {
            if depth < MAX_COMPONENTS {
                walk(&path, depth + 1, now, max_age, got)?;
            }
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !ft.is_file() || !is_partial_name(name) {
            continue;
        }
        let Ok(m) = fs::symlink_metadata(&path) else {
            continue; // gone meanwhile
        };
        // A partial file lives as long as its sidecar does, and the other way round.
        let partner = match name.strip_suffix(".json") {
            Some(part) => dir.join(part),
            None if !name.ends_with(".json.tmp") => dir.join(format!("{name}.json")),
            None => path.clone(),
        };
        let partner_age = fs::symlink_metadata(&partner)
            .ok()
            .filter(|p| p.is_file())
            .map_or(Duration::MAX, |p| age(now, &p));
        if age(now, &m) <= max_age || partner_age <= max_age {
            continue;
        }
        match fs::remove_file(&path) {
            Ok(()) => {
                got.files += 1;
                got.bytes += m.len();
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(TransferError::io(format!("removing {}", path.display()), e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_partial_names_are_recognised() {
        for n in [
            ".a.sl-part",
            ".a.sl-part.json",
            ".a.sl-part.json.tmp",
            ".sl-part-0123456789abcdef0123456789abcdef",
            ".sl-part-0123456789abcdef0123456789abcdef.json",
        ] {
            assert!(is_partial_name(n), "{n}");
        }
        for n in [
            "a",
            "a.sl-part",
            ".sl-part",
            ".sl-part-xyz",
            ".a.json",
            "x.sl-part.json",
        ] {
            assert!(!is_partial_name(n), "{n}");
        }
    }

    /// Issue 16 item 5: partial files (and their sidecars) older than the limit are removed,
    /// younger ones and everything else kept; links are not followed.
    #[test]
    fn transfer_old_partial_files_are_reclaimed_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let old = SystemTime::now() - Duration::from_secs(8 * 86_400);
        let write = |rel: &str, aged: bool| {
            let p = d.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, vec![1u8; 100]).unwrap();
            if aged {
                fs::File::options()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_modified(old)
                    .unwrap();
            }
        };
        write(".a.sl-part", true);
        write(".a.sl-part.json", true);
        write("sub/deeper/.b.sl-part", true);
        write(".sl-part-0123456789abcdef0123456789abcdef", true);
        write(".c.sl-part.json.tmp", true);
        // Kept: young, a young sidecar keeps its old partial file, not our names.
        write(".young.sl-part", false);
        write(".mixed.sl-part", true);
        write(".mixed.sl-part.json", false);
        write("old-but-finished", true);
        write(".hidden", true);
        // A link to an old partial file elsewhere is neither followed nor removed.
        let victim = outside.path().join(".v.sl-part");
        fs::write(&victim, b"x").unwrap();
        fs::File::options()
            .write(true)
            .open(&victim)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
        std::os::unix::fs::symlink(&victim, d.path().join(".l.sl-part")).unwrap();
        let r = reclaim_partials(d.path(), DEFAULT_PARTIAL_MAX_AGE).unwrap();
        assert_eq!(
            r,
            Reclaimed {
                files: 5,
                bytes: 500
            }
        );
        let mut left: Vec<String> = Vec::new();
        for e in fs::read_dir(d.path()).unwrap() {
            left.push(e.unwrap().file_name().to_string_lossy().into_owned());
        }
        left.sort();
        assert_eq!(
            left,
            [
                ".hidden",
                ".l.sl-part",
                ".mixed.sl-part",
                ".mixed.sl-part.json",
                ".young.sl-part",
                "link",
                "old-but-finished",
                "sub"
            ]
        );
        assert!(!d.path().join("sub/deeper/.b.sl-part").exists());
        assert!(victim.exists());
    }

    #[test]
    fn transfer_a_budget_refuses_past_its_limit_and_takes_back() {
        let b = MemoryBudget::new(100);
        assert!(b.try_take(60));
        assert!(!b.try_take(41));
        assert!(b.try_take(40));
        b.give_back(100);
        assert_eq!(b.held(), 0);
        assert!(!b.try_take(usize::MAX));
    }
}
