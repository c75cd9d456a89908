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

use super::early::EarlyChunks;
pub use super::limits::MAX_EARLY_BYTES;
use super::limits::{ReceiveLimits, PART};
use super::manifest::{self, check_name, Entry, Manifest};
use super::reassembly::{Ordered, RangeSet};
use super::{hex, Control, FileOutcome, TransferError};
use socklab_units::format_size;

/// The sidecar of a partial file is saved after this many new bytes.
pub const PERSIST_EVERY: u64 = 8 << 20;
/// Largest write-behind run (bytes written with one `pwrite`).
const WRITE_RUN: usize = 256 * 1024;
/// Most temporary files held open at once.
const MAX_OPEN: usize = 64;
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
    early: EarlyChunks,
    limits: ReceiveLimits,
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
    /// A receiver that stores files under `dir` (which must exist), with the default limits
    /// and a memory budget of its own.
    pub fn new(dir: &Path) -> Result<Self, TransferError> {
        Self::with_limits(dir, &ReceiveLimits::default())
    }

    /// A receiver that stores files under `dir` (which must exist) within `limits`, whose
    /// memory budget it shares with every other receiver given a clone of them.
    pub fn with_limits(dir: &Path, limits: &ReceiveLimits) -> Result<Self, TransferError> {
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
            early: EarlyChunks::new(limits.early_per_session, limits.early_budget.clone()),
            limits: limits.clone(),
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
            return self.early.push(stream, offset, data);
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
            if let Some(max) = self.limits.max_file_size.filter(|&max| e.size > max) {
                return Err(TransferError::Limit(format!(
                    "'{}' declares {} bytes ({}), more than this server's `max_file_size` {}: \
                     send it to a server started with a larger `max_file_size`",
                    socklab_units::text::quote(&e.name),
                    e.size,
                    format_size(e.size),
                    format_size(max)
                )));
            }
        }
        // Pass 2: look for resumable partial files (parents that do not exist yet have none).
        let mut files = Vec::with_capacity(m.files.len());
        for e in &m.files {
            let parent = self.parent_dir(&e.name, false)?;
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
            }
            files.push(f);
        }
        if self.limits.check_free_space {
            self.check_free_space(&files)?;
        }
        // Pass 3: create parents, remove sidecars that do not match.
        for (e, f) in m.files.iter().zip(&files) {
            self.parent_dir(&e.name, true)?;
            if f.fresh {
                remove_if_exists(&f.side_path)?;
            }
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
        let fresh = EarlyChunks::new(0, self.limits.early_budget.clone());
        let early = std::mem::replace(&mut self.early, fresh);
        for (s, off, data) in early.iter() {
            self.file_chunk(s, off, data)?;
        }
        drop(early); // its memory goes back to the server's budget
        self.check_done();
        Ok(())
    }

    /// Refuses a manifest whose missing bytes do not fit in the free space of the directory.
    fn check_free_space(&self, files: &[RxFile]) -> Result<(), TransferError> {
        use std::os::fd::AsFd;
        let need = files
            .iter()
            .map(|f| f.entry.size - f.have.len().min(f.entry.size))
            .fold(0u64, u64::saturating_add);
        if need == 0 {
            return Ok(());
        }
        let dir = File::open(&self.dir).map_err(io_err("opening", &self.dir))?;
        let free = socklab_sys::fs::available_bytes(dir.as_fd())
            .map_err(io_err("reading the free space of", &self.dir))?;
        if need > free {
            return Err(TransferError::Limit(format!(
                "the files need {need} bytes ({}) but the server's directory has {free} bytes \
                 ({}) free: free some space there or send fewer files",
                format_size(need),
                format_size(free)
            )));
        }
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
                        format!(
                            "'{}' is a symbolic link in the target directory",
                            socklab_units::text::quote(&rel)
                        ),
                    ))
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(TransferError::name(
                        name,
                        format!(
                            "'{}' exists and is not a directory",
                            socklab_units::text::quote(&rel)
                        ),
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
                                format!(
                                    "'{}' changed under us: not a directory",
                                    socklab_units::text::quote(&rel)
                                ),
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
                socklab_units::text::quote(&self.files[i].entry.name)
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

    /// Memory held for file data that arrived before the manifest (counted against the
    /// limits; 0 once the manifest is complete).
    pub fn early_memory(&self) -> usize {
        self.early.held()
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
    o.read(true).write(true).mode(0o644).custom_flags(
        socklab_sys::oflag::O_NOFOLLOW
            | socklab_sys::oflag::O_CLOEXEC
            | socklab_sys::oflag::O_NONBLOCK,
    );
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
        .custom_flags(socklab_sys::oflag::O_NOFOLLOW | socklab_sys::oflag::O_CLOEXEC)
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
mod tests;
