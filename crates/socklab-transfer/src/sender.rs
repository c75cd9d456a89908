//! The client side of a transfer: [`FileSender`] produces the chunks to send (the manifest, then
//! each file in order, skipping what the server already has) and follows the server's control
//! messages.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::control::ControlDecoder;
use super::manifest::Manifest;
use super::reassembly::{Ordered, RangeSet};
use super::{Control, FileOutcome, TransferError};

/// Sends files; one per transfer session.
#[derive(Debug)]
pub struct FileSender {
    manifest: Manifest,
    manifest_bytes: Vec<u8>,
    manifest_sent: usize,
    paths: Vec<PathBuf>,
    /// File being sent and the next offset in it.
    cur: usize,
    off: u64,
    open: Option<File>,
    /// Ranges the server has, per file.
    have: Vec<RangeSet>,
    skipped: Vec<u64>,
    sent_bytes: u64,
    control: Ordered,
    decoder: ControlDecoder,
    verdicts: Vec<Option<(bool, String)>>,
    done: bool,
    abort: Option<String>,
}

impl FileSender {
    /// Hashes the files and builds the manifest (names are the paths' last components).
    pub fn new(paths: &[PathBuf]) -> Result<Self, TransferError> {
        let manifest = Manifest::from_paths(paths)?;
        let n = manifest.files.len();
        let mut s = FileSender {
            manifest_bytes: manifest.encode(),
            manifest,
            manifest_sent: 0,
            paths: paths.to_vec(),
            cur: 0,
            off: 0,
            open: None,
            have: vec![RangeSet::new(); n],
            skipped: vec![0; n],
            sent_bytes: 0,
            control: Ordered::default(),
            decoder: ControlDecoder::new(),
            verdicts: vec![None; n],
            done: false,
            abort: None,
        };
        s.advance();
        Ok(s)
    }

    /// The manifest being sent.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Fills `buf` with the next chunk to send and returns `(stream, offset, len)`, or `None`
    /// when everything has been handed out. Files are read with `pread`; nothing is allocated.
    pub fn next_chunk(
        &mut self,
        buf: &mut [u8],
    ) -> Result<Option<(u32, u64, usize)>, TransferError> {
        if buf.is_empty() {
            return Err(TransferError::Invalid(
                "next_chunk needs a buffer of at least one byte".into(),
            ));
        }
        if self.manifest_sent < self.manifest_bytes.len() {
            let at = self.manifest_sent;
            let n = buf.len().min(self.manifest_bytes.len() - at);
            buf[..n].copy_from_slice(&self.manifest_bytes[at..at + n]);
            self.manifest_sent += n;
            return Ok(Some((0, at as u64, n)));
        }
        self.advance();
        let Some(entry) = self.manifest.files.get(self.cur) else {
            return Ok(None);
        };
        let size = entry.size;
        let mut end = size.min(self.off.saturating_add(buf.len() as u64));
        if let Some(s) = self.have[self.cur].next_start(self.off) {
            end = end.min(s);
        }
        let len = (end - self.off) as usize;
        if self.open.is_none() {
            self.open = Some(self.open_current()?);
        }
        let file = self.open.as_ref().expect("opened");
        file.read_exact_at(&mut buf[..len], self.off).map_err(|e| {
            let p = self.paths[self.cur].display();
            if e.kind() == io::ErrorKind::UnexpectedEof {
                TransferError::Invalid(format!("{p} shrank while it was being sent"))
            } else {
                TransferError::io(format!("reading {p}"), e)
            }
        })?;
        let chunk = (self.cur as u32 + 1, self.off, len);
        self.off = end;
        self.sent_bytes += len as u64;
        self.advance();
        Ok(Some(chunk))
    }

    fn open_current(&self) -> Result<File, TransferError> {
        let p = &self.paths[self.cur];
        let f =
            File::open(p).map_err(|e| TransferError::io(format!("opening {}", p.display()), e))?;
        let len = f
            .metadata()
            .map_err(|e| TransferError::io(format!("stat {}", p.display()), e))?
            .len();
        let want = self.manifest.files[self.cur].size;
        if len != want {
            return Err(TransferError::Invalid(format!(
                "{} changed since it was hashed ({want} bytes then, {len} now): send it again",
                p.display()
            )));
        }
        Ok(f)
    }

    /// Moves the cursor past ranges the server has and past finished files.
    fn advance(&mut self) {
        while let Some(e) = self.manifest.files.get(self.cur) {
            if let Some((_, end)) = self.have[self.cur].containing(self.off) {
                self.skipped[self.cur] += end - self.off;
                self.off = end;
            }
            if self.off < e.size {
                return;
            }
            self.cur += 1;
            self.off = 0;
            self.open = None;
        }
    }

    /// Number of leading files whose chunks have all been handed out (0 while the manifest is
    /// still being sent): the point at which a driver samples per-file counters.
    pub fn files_passed(&self) -> usize {
        if self.manifest_sent < self.manifest_bytes.len() {
            0
        } else {
            self.cur
        }
    }

    /// True when every chunk has been handed out.
    pub fn sent_all(&self) -> bool {
        self.manifest_sent == self.manifest_bytes.len() && self.cur >= self.manifest.files.len()
    }

    /// File bytes handed out so far (skipped ranges excluded).
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes
    }

    /// Stream bytes handed out so far: the manifest's and the files'.
    pub fn handed_out_bytes(&self) -> u64 {
        self.manifest_sent as u64 + self.sent_bytes
    }

    /// Handles a chunk of the server's control stream (stream 0), in any order.
    pub fn on_control(&mut self, offset: u64, data: &[u8]) -> Result<(), TransferError> {
        self.control.push(offset, data)?;
        if !self.control.ready().is_empty() {
            let bytes = self.control.take_ready();
            self.decoder.push(&bytes);
        }
        while let Some(m) = self.decoder.next_message()? {
            self.apply(m)?;
        }
        Ok(())
    }

    fn file_index(&self, file: u32, what: &str) -> Result<usize, TransferError> {
        let i = file as usize;
        if i >= self.manifest.files.len() {
            return Err(TransferError::Protocol(format!(
                "{what} for file {file}, but the manifest has {} files",
                self.manifest.files.len()
            )));
        }
        Ok(i)
    }

    fn apply(&mut self, m: Control) -> Result<(), TransferError> {
        match m {
            Control::Resume { file, have } => {
                let i = self.file_index(file, "Resume")?;
                let size = self.manifest.files[i].size;
                for (s, e) in have {
                    if s >= e || e > size {
                        return Err(TransferError::Protocol(format!(
                            "Resume for '{}' lists {s}..{e}, outside its {size} bytes",
                            socklab_units::text::quote(&self.manifest.files[i].name)
                        )));
                    }
                    self.have[i].insert(s, e);
                }
            }
            Control::Verdict { file, ok, detail } => {
                let i = self.file_index(file, "Verdict")?;
                if self.verdicts[i].is_some() {
                    return Err(TransferError::Protocol(format!(
                        "two verdicts for '{}'",
                        socklab_units::text::quote(&self.manifest.files[i].name)
                    )));
                }
                if ok {
                    // The server has all of it: nothing more to send for this file.
                    let size = self.manifest.files[i].size;
                    self.have[i].insert(0, size);
                }
                self.verdicts[i] = Some((ok, detail));
            }
            Control::Done => self.done = true,
            Control::Abort { detail } => self.abort = Some(detail),
        }
        if self.manifest_sent == self.manifest_bytes.len() {
            self.advance();
        }
        Ok(())
    }

    /// True when the server said `Done` and every verdict is ok.
    pub fn is_done(&self) -> bool {
        self.done && self.verdicts.iter().all(|v| matches!(v, Some((true, _))))
    }

    /// Why the transfer failed, if it did: the server aborted, a verdict is not ok, or the
    /// server finished without a verdict for some file.
    pub fn failed(&self) -> Option<String> {
        if let Some(d) = &self.abort {
            return Some(format!("the server aborted: {d}"));
        }
        for (e, v) in self.manifest.files.iter().zip(&self.verdicts) {
            if let Some((false, d)) = v {
                return Some(format!("{}: {d}", e.name));
            }
        }
        if self.done {
            if let Some((e, _)) = self
                .manifest
                .files
                .iter()
                .zip(&self.verdicts)
                .find(|(_, v)| v.is_none())
            {
                return Some(format!(
                    "the server finished without a verdict for {}",
                    e.name
                ));
            }
        }
        None
    }

    /// The server's reason, if it aborted the session.
    pub fn aborted(&self) -> Option<&str> {
        self.abort.as_deref()
    }

    /// What became of each file.
    pub fn outcomes(&self) -> Vec<FileOutcome> {
        self.manifest
            .files
            .iter()
            .zip(&self.verdicts)
            .zip(&self.skipped)
            .map(|((e, v), &skipped_bytes)| {
                let (ok, detail) = match v {
                    Some((ok, d)) => (*ok, d.clone()),
                    None => (false, "no verdict from the server".into()),
                };
                FileOutcome {
                    name: e.name.clone(),
                    size: e.size,
                    ok,
                    detail,
                    skipped_bytes,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::FileReceiver;
    use crate::testutil::Rng;

    #[test]
    fn transfer_sender_chunks_cover_everything_once() {
        let d = tempfile::tempdir().unwrap();
        let mut rng = Rng(1);
        let contents = [rng.bytes(100_000), vec![], rng.bytes(7)];
        let paths: Vec<PathBuf> = contents
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let p = d.path().join(format!("f{i}"));
                std::fs::write(&p, c).unwrap();
                p
            })
            .collect();
        let mut s = FileSender::new(&paths).unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got: Vec<Vec<u8>> = vec![Vec::new(); 4];
        let mut passed = Vec::new();
        while let Some((st, off, n)) = s.next_chunk(&mut buf).unwrap() {
            assert!(n > 0 && n <= buf.len());
            assert_eq!(off, got[st as usize].len() as u64, "in order, no gaps");
            got[st as usize].extend_from_slice(&buf[..n]);
            passed.push(s.files_passed());
        }
        assert_eq!(Manifest::decode(&got[0]).unwrap(), *s.manifest());
        for i in 0..3 {
            assert_eq!(got[i + 1], contents[i]);
        }
        assert!(s.sent_all());
        assert_eq!(s.files_passed(), 3);
        assert!(passed.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(s.sent_bytes(), 100_007);
        assert!(s.next_chunk(&mut []).is_err());
    }

    #[test]
    fn transfer_sender_follows_resume_verdicts_and_abort() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![5u8; 10_000]).unwrap();
        let mut s = FileSender::new(std::slice::from_ref(&p)).unwrap();
        let mut buf = vec![0u8; 1000];
        assert_eq!(s.next_chunk(&mut buf).unwrap().unwrap().0, 0);
        // Control bytes arrive out of order: the Resume's second half first.
        let ctl = Control::encode_all(&[Control::Resume {
            file: 0,
            have: vec![(0, 2500), (3000, 9000)],
        }]);
        s.on_control(5, &ctl[5..]).unwrap();
        s.on_control(0, &ctl[..5]).unwrap();
        let mut chunks = Vec::new();
        while let Some((_, off, n)) = s.next_chunk(&mut buf).unwrap() {
            chunks.push((off, n));
        }
        assert_eq!(chunks, vec![(2500, 500), (9000, 1000)]);
        assert_eq!(s.outcomes()[0].skipped_bytes, 8500);
        assert!(!s.is_done() && s.failed().is_none());
        let more = Control::encode_all(&[
            Control::Verdict {
                file: 0,
                ok: false,
                detail: "hash mismatch: x".into(),
            },
            Control::Done,
        ]);
        s.on_control(ctl.len() as u64, &more).unwrap();
        assert!(!s.is_done());
        assert_eq!(s.failed().unwrap(), "f: hash mismatch: x");
        // Bad messages are protocol errors.
        let mut s = FileSender::new(std::slice::from_ref(&p)).unwrap();
        let bad = Control::encode_all(&[Control::Resume {
            file: 0,
            have: vec![(0, 10_001)],
        }]);
        assert!(s
            .on_control(0, &bad)
            .unwrap_err()
            .to_string()
            .contains("outside"));
        let mut s = FileSender::new(std::slice::from_ref(&p)).unwrap();
        let bad = Control::encode_all(&[Control::Verdict {
            file: 9,
            ok: true,
            detail: String::new(),
        }]);
        assert!(s
            .on_control(0, &bad)
            .unwrap_err()
            .to_string()
            .contains("file 9"));
        let mut s = FileSender::new(std::slice::from_ref(&p)).unwrap();
        let ab = Control::encode_all(&[Control::Abort {
            detail: "disk full".into(),
        }]);
        s.on_control(0, &ab).unwrap();
        assert!(s.failed().unwrap().contains("disk full"));
    }

    #[test]
    fn transfer_sender_notices_a_file_that_changed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![1u8; 5000]).unwrap();
        let mut s = FileSender::new(std::slice::from_ref(&p)).unwrap();
        std::fs::write(&p, vec![1u8; 10]).unwrap();
        let mut buf = vec![0u8; 100_000];
        s.next_chunk(&mut buf).unwrap();
        let e = s.next_chunk(&mut buf).unwrap_err().to_string();
        assert!(e.contains("changed since it was hashed"), "{e}");
    }

    #[test]
    fn transfer_in_memory_end_to_end_with_reordered_control() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let mut rng = Rng(9);
        let a = rng.bytes(300_000);
        let pa = src.path().join("a");
        let pb = src.path().join("b");
        std::fs::write(&pa, &a).unwrap();
        std::fs::write(&pb, b"").unwrap();
        let mut tx = FileSender::new(&[pa, pb]).unwrap();
        let mut rx = FileReceiver::new(dst.path()).unwrap();
        let mut buf = vec![0u8; 30_000];
        let mut ctl: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut ctl_off = 0;
        while let Some((s, off, n)) = tx.next_chunk(&mut buf).unwrap() {
            rx.on_chunk(s, off, &buf[..n]).unwrap();
            if let Some(b) = rx.poll_control() {
                // Split the control bytes into single bytes, delivered later in random order.
                for (i, byte) in b.iter().enumerate() {
                    ctl.push((ctl_off + i as u64, vec![*byte]));
                }
                ctl_off += b.len() as u64;
            }
        }
        rng.shuffle(&mut ctl);
        for (off, b) in ctl {
            tx.on_control(off, &b).unwrap();
        }
        assert!(tx.is_done(), "{:?}", tx.failed());
        assert_eq!(std::fs::read(dst.path().join("a")).unwrap(), a);
        assert_eq!(tx.outcomes().iter().filter(|o| o.ok).count(), 2);
    }
}
