//! The server side of a transfer: [`FileReceiver`] turns unordered chunks into verified files in
//! a directory, safely, and resumes interrupted transfers.
//!
//! Safety rules, checked before anything is created:
//! - every name passes [`check_name`] (relative, no `..`, no NUL, …);
//! - no parent directory inside the target directory is a symbolic link or a non-directory
//!   (checked component by component with `symlink_metadata`; missing ones are created);
//! - no name is both a file and a parent directory of another, and no name looks like one of
//!   our temporary files;
//! - data goes to a temporary file `.<name>.sl-part` that is never an inode someone else
//!   planted: a fresh start removes whatever is at that name and creates a new file with
//!   `O_EXCL | O_NOFOLLOW`; a resumed or reopened one must be, on the open descriptor, a
//!   regular file with exactly one link (and on a reopen the same inode). So a symbolic or hard
//!   link planted at the temporary name never makes the receiver write outside the directory.
//!   Only a file whose BLAKE3 hash matches the manifest is renamed to its final name, and a
//!   rename replaces a link at the final name instead of writing through it. A partial or
//!   corrupt file never appears under the final name.
//!
//! The parent-directory checks and the later opens are separate system calls: a local user who
//! can write into the target directory could still swap a parent directory for a link between
//! them. Serve into a directory only you can write.
//!
//! Resume: a sidecar `.<name>.sl-part.json` records the manifest entry (size and hash) and the
//! byte ranges already written; it is saved every [`PERSIST_EVERY`] new bytes and when the
//! receiver is dropped. A later transfer of the same entry picks the ranges up and tells the
//! client with [`Control::Resume`].

use std::collections::{HashSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::manifest::{self, check_name, Entry, Manifest};
use super::reassembly::{Ordered, RangeSet};
use super::{hex, Control, FileOutcome, TransferError};

/// Most file bytes buffered in memory before the manifest is complete.
pub const MAX_EARLY_BYTES: usize = 64 << 20;
/// The sidecar of a partial file is saved after this many new bytes.
pub const PERSIST_EVERY: u64 = 8 << 20;
/// Largest write-behind run (bytes written with one `pwrite`).
const WRITE_RUN: usize = 256 * 1024;
/// Most temporary files held open at once.
const MAX_OPEN: usize = 64;
/// Suffix of temporary files.
const PART: &str = ".sl-part";
/// Sidecar format version.
const SIDECAR_VERSION: u32 = 1;

/// What the sidecar of a partial file records.
#[derive(Debug, Serialize, Deserialize)]
struct Sidecar {
    version: u32,
    size: u64,
    hash: String,
    ranges: Vec<(u64, u64)>,
}

/// One file of the manifest, on the server.
#[derive(Debug)]
struct RxFile {
    entry: Entry,
    final_path: PathBuf,
    temp_path: PathBuf,
    side_path: PathBuf,
    have: RangeSet,
    file: Option<File>,
    /// Truncate the temporary file when it is first opened (a fresh start).
    fresh: bool,
    /// Device and inode of the temporary file once opened: a reopen must find the same one.
    inode: Option<(u64, u64)>,
    /// New bytes since the sidecar was last saved.
    unsaved: u64,
    /// Bytes recovered from an earlier transfer.
    resumed: u64,
    verdict: Option<(bool, String)>,
}

/// Receives the files of one connection into a directory.
#[derive(Debug)]
pub struct FileReceiver {
    dir: PathBuf,
    manifest_stream: Ordered,
    manifest_len: Option<usize>,
    manifest: Option<Manifest>,
    early: Vec<(u32, u64, Vec<u8>)>,
    early_bytes: usize,
    files: Vec<RxFile>,
    open: VecDeque<usize>,
    out: Vec<u8>,
    verdicts: usize,
    done: bool,
    failed: bool,
    bytes_written: u64,
    gaps: Vec<(u64, u64)>,
    /// Write-behind run: contiguous bytes of one file not written yet, `(file, offset)` of the
    /// first one. Written as one `pwrite` when it is full, when a chunk does not continue it,
    /// and before anything reads the file or records its ranges on disk.
    run_at: Option<(usize, u64)>,
    run: Vec<u8>,
}

fn io_err(what: &str, p: &Path) -> impl FnOnce(io::Error) -> TransferError {
    let context = format!("{what} {}", p.display());
    move |e| TransferError::io(context, e)
}

impl FileReceiver {
    /// A receiver that stores files under `dir` (which must exist).
    pub fn new(dir: &Path) -> Result<Self, TransferError> {
        let dir = dir
            .canonicalize()
            .map_err(io_err("opening the directory", dir))?;
        if !dir.is_dir() {
            return Err(TransferError::Invalid(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        Ok(FileReceiver {
            dir,
            manifest_stream: Ordered::new(manifest::MAX_MANIFEST_BYTES),
            manifest_len: None,
            manifest: None,
            early: Vec::new(),
            early_bytes: 0,
            files: Vec::new(),
            open: VecDeque::new(),
            out: Vec::new(),
            verdicts: 0,
            done: false,
            failed: false,
            bytes_written: 0,
            gaps: Vec::new(),
            run_at: None,
            run: Vec::new(),
        })
    }

    /// Handles one chunk from the client. An error ends the session: an `Abort` message saying
    /// why is queued for [`poll_control`](Self::poll_control), and later chunks are refused.
    pub fn on_chunk(&mut self, stream: u32, offset: u64, data: &[u8]) -> Result<(), TransferError> {
        if self.failed {
            return Err(TransferError::Protocol("the session already failed".into()));
        }
        let r = self.chunk(stream, offset, data);
        if let Err(e) = &r {
            self.failed = true;
            Control::Abort {
                detail: e.to_string(),
            }
            .encode(&mut self.out);
        }
        r
    }

    fn chunk(&mut self, stream: u32, offset: u64, data: &[u8]) -> Result<(), TransferError> {
        if stream == 0 {
            return self.manifest_chunk(offset, data);
        }
        if self.manifest.is_none() {
            if self.early_bytes + data.len() > MAX_EARLY_BYTES {
                return Err(TransferError::Limit(format!(
                    "more than {} MiB of file data before the manifest: send the manifest first",
                    MAX_EARLY_BYTES >> 20
                )));
            }
            self.early_bytes += data.len();
            self.early.push((stream, offset, data.to_vec()));
            return Ok(());
        }
        self.file_chunk(stream, offset, data)
    }

    fn manifest_chunk(&mut self, offset: u64, data: &[u8]) -> Result<(), TransferError> {
        let end = offset.saturating_add(data.len() as u64);
        let limit = self.manifest_len.unwrap_or(manifest::MAX_MANIFEST_BYTES) as u64;
        if end > limit {
            return Err(TransferError::Protocol(format!(
                "manifest chunk {offset}..{end} beyond the manifest's {limit} bytes"
            )));
        }
        if self.manifest.is_some() {
            return Ok(()); // a duplicate
        }
        self.manifest_stream.push(offset, data)?;
        if self.manifest_len.is_none() {
            self.manifest_len = Manifest::encoded_len(self.manifest_stream.ready())?;
            if let Some(len) = self.manifest_len {
                if self.manifest_stream.highest_end() > len as u64 {
                    return Err(TransferError::Protocol(format!(
                        "manifest stream longer than the manifest's {len} bytes"
                    )));
                }
            }
        }
        match self.manifest_len {
            Some(len) if self.manifest_stream.ready().len() >= len => {
                let m = Manifest::decode(&self.manifest_stream.ready()[..len])?;
                self.manifest_stream = Ordered::new(0);
                self.start(m)
            }
            _ => Ok(()),
        }
    }

    /// The manifest is complete: check every name, prepare every file, replay early chunks.
    fn start(&mut self, m: Manifest) -> Result<(), TransferError> {
        // Pass 1: check everything before creating anything.
        let mut parents: HashSet<&str> = HashSet::new();
        for e in &m.files {
            let mut at = 0;
            while let Some(i) = e.name[at..].find('/') {
                parents.insert(&e.name[..at + i]);
                at += i + 1;
            }
        }
        for e in &m.files {
            check_name(&e.name)?;
            if parents.contains(e.name.as_str()) {
                return Err(TransferError::name(
                    &e.name,
                    "it is both a file and the parent directory of another file",
                ));
            }
            let last = e.name.rsplit('/').next().unwrap_or(&e.name);
            if last.starts_with(".sl-part-") || (last.starts_with('.') && last.contains(PART)) {
                return Err(TransferError::name(
                    &e.name,
                    "names like .NAME.sl-part are reserved for partial files",
                ));
            }
            self.parent_dir(&e.name, false)?;
        }
        // Pass 2: create parents, look for resumable partial files.
        let mut files = Vec::with_capacity(m.files.len());
        for e in &m.files {
            let parent = self.parent_dir(&e.name, true)?;
            let last = e.name.rsplit('/').next().unwrap_or(&e.name);
            let final_path = parent.join(last);
            if fs::symlink_metadata(&final_path).is_ok_and(|md| md.is_dir()) {
                return Err(TransferError::name(
                    &e.name,
                    "a directory of that name exists",
                ));
            }
            let (temp_name, side_name) = part_names(last);
            let mut f = RxFile {
                entry: e.clone(),
                final_path,
                temp_path: parent.join(temp_name),
                side_path: parent.join(side_name),
                have: RangeSet::new(),
                file: None,
                fresh: true,
                inode: None,
                unsaved: 0,
                resumed: 0,
                verdict: None,
            };
            if let Some(have) = load_sidecar(&f) {
                f.resumed = have.len();
                f.have = have;
                f.fresh = false;
            } else {
                remove_if_exists(&f.side_path)?;
            }
            files.push(f);
        }
        self.files = files;
        self.manifest = Some(m);
        for i in 0..self.files.len() {
            let f = &self.files[i];
            if !f.have.is_empty() {
                Control::Resume {
                    file: i as u32,
                    have: f.have.iter().collect(),
                }
                .encode(&mut self.out);
            }
        }
        for i in 0..self.files.len() {
            let f = &self.files[i];
            if f.have.covers(0, f.entry.size) {
                self.finish_file(i)?;
            }
        }
        for (s, off, data) in std::mem::take(&mut self.early) {
            self.file_chunk(s, off, &data)?;
        }
        self.early_bytes = 0;
        self.check_done();
        Ok(())
    }

    /// The parent directory of `name` inside the target directory, checked component by
    /// component: no symbolic links, only directories. With `create`, missing ones are made.
    fn parent_dir(&self, name: &str, create: bool) -> Result<PathBuf, TransferError> {
        let mut p = self.dir.clone();
        let comps: Vec<&str> = name.split('/').collect();
        let mut rel = String::new();
        for c in &comps[..comps.len() - 1] {
            p.push(c);
            if !rel.is_empty() {
                rel.push('/');
            }
            rel.push_str(c);
            match fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(TransferError::name(
                        name,
                        format!("'{rel}' is a symbolic link in the target directory"),
                    ))
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(TransferError::name(
                        name,
                        format!("'{rel}' exists and is not a directory"),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if create {
                        match fs::DirBuilder::new().mode(0o755).create(&p) {
                            Ok(()) => {}
                            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                            Err(e) => return Err(io_err("creating directory", &p)(e)),
                        }
                        // Re-check: it must be a real directory now.
                        let m = fs::symlink_metadata(&p).map_err(io_err("stat", &p))?;
                        if !m.is_dir() || m.file_type().is_symlink() {
                            return Err(TransferError::name(
                                name,
                                format!("'{rel}' changed under us: not a directory"),
                            ));
                        }
                    }
                }
                Err(e) => return Err(io_err("stat", &p)(e)),
            }
        }
        Ok(p)
    }

    fn file_chunk(&mut self, stream: u32, offset: u64, data: &[u8]) -> Result<(), TransferError> {
        let n = self.files.len();
        let i = (stream as usize).wrapping_sub(1);
        if i >= n {
            return Err(TransferError::Protocol(format!(
                "chunk for stream {stream}, but the manifest has {n} files (streams 1..={n})"
            )));
        }
        let size = self.files[i].entry.size;
        let end = offset.checked_add(data.len() as u64).filter(|&e| e <= size);
        let Some(end) = end else {
            return Err(TransferError::Protocol(format!(
                "chunk {offset}+{} beyond the end of '{}' ({size} bytes)",
                data.len(),
                self.files[i].entry.name
            )));
        };
        if self.files[i].verdict.is_some() || data.is_empty() {
            return Ok(()); // a duplicate of a finished file
        }
        let mut gaps = std::mem::take(&mut self.gaps);
        self.files[i].have.gaps(offset, end, &mut gaps);
        for &(s, e) in &gaps {
            self.stage(i, s, &data[(s - offset) as usize..(e - offset) as usize])?;
            let f = &mut self.files[i];
            f.have.insert(s, e);
            f.unsaved += e - s;
            self.bytes_written += e - s;
        }
        self.gaps = gaps;
        if self.files[i].have.covers(0, size) {
            self.flush()?;
            self.finish_file(i)?;
            self.check_done();
        } else if self.files[i].unsaved >= PERSIST_EVERY {
            self.flush()?;
            save_sidecar(&mut self.files[i])?;
        }
        Ok(())
    }

    /// Adds `part` (bytes of file `i` at `at`) to the write-behind run, writing the run first
    /// when `part` does not continue it or would overfill it.
    fn stage(&mut self, i: usize, at: u64, part: &[u8]) -> Result<(), TransferError> {
        let continues = self
            .run_at
            .is_some_and(|(f, start)| f == i && start + self.run.len() as u64 == at);
        if !continues || self.run.len() + part.len() > WRITE_RUN {
            self.flush()?;
        }
        if part.len() >= WRITE_RUN {
            self.ensure_open(i)?;
            let f = &self.files[i];
            let file = f.file.as_ref().expect("opened");
            return file
                .write_all_at(part, at)
                .map_err(io_err("writing", &f.temp_path));
        }
        if self.run.is_empty() {
            self.run.reserve(WRITE_RUN);
            self.run_at = Some((i, at));
        }
        self.run.extend_from_slice(part);
        Ok(())
    }

    /// Writes the write-behind run, if any.
    fn flush(&mut self) -> Result<(), TransferError> {
        let Some((i, at)) = self.run_at.take() else {
            return Ok(());
        };
        let r = self.ensure_open(i).and_then(|()| {
            let f = &self.files[i];
            let file = f.file.as_ref().expect("opened");
            file.write_all_at(&self.run, at)
                .map_err(io_err("writing", &f.temp_path))
        });
        self.run.clear();
        r
    }

    fn ensure_open(&mut self, i: usize) -> Result<(), TransferError> {
        if self.files[i].file.is_some() {
            return Ok(());
        }
        if self.open.len() >= MAX_OPEN {
            if self
                .run_at
                .is_some_and(|(f, _)| self.open.front() == Some(&f))
            {
                self.flush()?;
            }
            if let Some(j) = self.open.pop_front() {
                self.files[j].file = None;
            }
        }
        let f = &mut self.files[i];
        f.file = Some(open_part(f)?);
        self.open.push_back(i);
        Ok(())
    }

    /// All bytes of file `i` are in its temporary file: verify, then rename or delete.
    fn finish_file(&mut self, i: usize) -> Result<(), TransferError> {
        self.ensure_open(i)?;
        let f = &mut self.files[i];
        let file = f.file.take().expect("opened");
        let got = hash_range(&file, f.entry.size).map_err(io_err("reading back", &f.temp_path))?;
        let verdict = if got == Some(f.entry.hash) {
            file.sync_all().map_err(io_err("fsync", &f.temp_path))?;
            drop(file);
            fs::rename(&f.temp_path, &f.final_path).map_err(io_err(
                &format!("renaming {} to", f.temp_path.display()),
                &f.final_path,
            ))?;
            remove_if_exists(&f.side_path)?;
            if let Some(parent) = f.final_path.parent() {
                if let Ok(d) = File::open(parent) {
                    let _ = d.sync_all();
                }
            }
            (true, format!("ok, {} bytes verified", f.entry.size))
        } else {
            drop(file);
            remove_if_exists(&f.temp_path)?;
            remove_if_exists(&f.side_path)?;
            let got = match got {
                Some(h) => format!("received {}", hex(&h)),
                None => "the partial file is shorter than the manifest says".into(),
            };
            (
                false,
                format!(
                    "hash mismatch: expected {}, {got}; the file was not stored",
                    hex(&f.entry.hash)
                ),
            )
        };
        Control::Verdict {
            file: i as u32,
            ok: verdict.0,
            detail: verdict.1.clone(),
        }
        .encode(&mut self.out);
        f.verdict = Some(verdict);
        f.unsaved = 0;
        self.open.retain(|&j| j != i);
        self.verdicts += 1;
        Ok(())
    }

    fn check_done(&mut self) {
        if !self.done && self.manifest.is_some() && self.verdicts == self.files.len() {
            Control::Done.encode(&mut self.out);
            self.done = true;
        }
    }

    /// Encoded control messages to send on server stream 0, in order, if any are queued.
    pub fn poll_control(&mut self) -> Option<Vec<u8>> {
        if self.out.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.out))
        }
    }

    /// True once every file has a verdict (and `Done` is queued).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// True once an error ended the session (an `Abort` was queued).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The manifest, once it is complete.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// New file bytes written to disk in this session.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// What became of each file so far.
    pub fn report(&self) -> Vec<FileOutcome> {
        self.files
            .iter()
            .map(|f| {
                let (ok, detail) = match &f.verdict {
                    Some((ok, d)) => (*ok, d.clone()),
                    None => (
                        false,
                        format!("incomplete: {} of {} bytes", f.have.len(), f.entry.size),
                    ),
                };
                FileOutcome {
                    name: f.entry.name.clone(),
                    size: f.entry.size,
                    ok,
                    detail,
                    skipped_bytes: f.resumed,
                }
            })
            .collect()
    }
}

impl Drop for FileReceiver {
    fn drop(&mut self) {
        // A sidecar claims only bytes on disk: if the run cannot be written, its file keeps the
        // sidecar saved last time (which claimed only what was written then).
        let unwritten = self.run_at.map(|(i, _)| i);
        let failed = self.flush().is_err();
        for (i, f) in self.files.iter_mut().enumerate() {
            if failed && unwritten == Some(i) {
                continue;
            }
            if f.verdict.is_none() && f.unsaved > 0 {
                let _ = save_sidecar(f);
            }
        }
    }
}

/// Names of the temporary file and its sidecar for final component `last`.
fn part_names(last: &str) -> (String, String) {
    if 1 + last.len() + PART.len() + ".json.tmp".len() <= manifest::MAX_COMPONENT_BYTES {
        (format!(".{last}{PART}"), format!(".{last}{PART}.json"))
    } else {
        let h = blake3::hash(last.as_bytes()).to_hex();
        let short = &h.as_str()[..32];
        (
            format!(".sl-part-{short}"),
            format!(".sl-part-{short}.json"),
        )
    }
}

/// Opens the temporary file of `f` for writing without ever writing into an inode that is not
/// ours. A fresh start removes whatever sits at the temporary name (a planted symbolic link,
/// hard link, FIFO …; removing a name never changes the file another name points to) and
/// creates a new file with `O_EXCL | O_NOFOLLOW`: if anything reappears at the name in between,
/// the open fails instead of following it. A resumed or reopened file is opened without
/// `O_CREAT` and checked on the open descriptor (`fstat`, which cannot race): it must be a
/// regular file with exactly one link, and on a reopen the same inode as before.
fn open_part(f: &mut RxFile) -> Result<File, TransferError> {
    let path = &f.temp_path;
    let mut o = OpenOptions::new();
    o.read(true)
        .write(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK);
    if f.fresh {
        if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(TransferError::name(
                &f.entry.name,
                format!("{} is a directory", path.display()),
            ));
        }
        remove_if_exists(path)?;
        o.create_new(true);
    }
    let file = o.open(path).map_err(io_err("opening", path))?;
    let m = file.metadata().map_err(io_err("checking", path))?;
    let id = (m.dev(), m.ino());
    let refuse = if !m.is_file() {
        Some("is not a regular file".to_string())
    } else if m.nlink() != 1 {
        Some(format!(
            "has {} hard links (another name points to the same file)",
            m.nlink()
        ))
    } else if f.inode.is_some_and(|old| old != id) {
        Some("was replaced by another file while the transfer ran".to_string())
    } else {
        None
    };
    if let Some(why) = refuse {
        return Err(TransferError::name(
            &f.entry.name,
            format!(
                "the temporary file {} {why}; refusing to write through it (serve into a \
                 directory only socklab can write)",
                path.display()
            ),
        ));
    }
    f.inode = Some(id);
    f.fresh = false;
    Ok(file)
}

fn remove_if_exists(p: &Path) -> Result<(), TransferError> {
    match fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("removing", p)(e)),
    }
}

/// The ranges a matching sidecar records, if the partial file is still there and long enough.
fn load_sidecar(f: &RxFile) -> Option<RangeSet> {
    let m = fs::symlink_metadata(&f.side_path).ok()?;
    if !m.is_file() || m.len() > 64 << 20 {
        return None;
    }
    let s: Sidecar = serde_json::from_slice(&fs::read(&f.side_path).ok()?).ok()?;
    if s.version != SIDECAR_VERSION || s.size != f.entry.size || s.hash != hex(&f.entry.hash) {
        return None;
    }
    let temp = fs::symlink_metadata(&f.temp_path).ok()?;
    // A partial file with another link is not ours to continue: start afresh.
    if !temp.is_file() || temp.nlink() != 1 {
        return None;
    }
    let mut have = RangeSet::new();
    for (a, b) in s.ranges {
        if a >= b || b > f.entry.size || b > temp.len() {
            return None;
        }
        have.insert(a, b);
    }
    Some(have)
}

/// Writes the sidecar atomically (temporary file, then rename).
fn save_sidecar(f: &mut RxFile) -> Result<(), TransferError> {
    let s = Sidecar {
        version: SIDECAR_VERSION,
        size: f.entry.size,
        hash: hex(&f.entry.hash),
        ranges: f.have.iter().collect(),
    };
    let body = serde_json::to_vec(&s).expect("a sidecar serializes");
    let mut tmp = f.side_path.clone().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    remove_if_exists(&tmp)?;
    let mut w = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(io_err("creating", &tmp))?;
    w.write_all(&body).map_err(io_err("writing", &tmp))?;
    drop(w);
    fs::rename(&tmp, &f.side_path).map_err(io_err("renaming", &tmp))?;
    f.unsaved = 0;
    Ok(())
}

/// BLAKE3 of the first `size` bytes of `file`, read back from disk; `None` if it is shorter.
fn hash_range(file: &File, size: u64) -> io::Result<Option<[u8; 32]>> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; (1 << 20).min(size.max(1) as usize)];
    let mut off = 0u64;
    while off < size {
        let n = ((size - off) as usize).min(buf.len());
        match file.read_at(&mut buf[..n], off) {
            Ok(0) => return Ok(None),
            Ok(k) => {
                h.update(&buf[..k]);
                off += k as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(*h.finalize().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::testutil::Rng;
    use crate::transfer::FileSender;

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
        assert!(e.contains("64 MiB of file data before the manifest"), "{e}");
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
}
