//! The server's control messages, sent in order on server stream 0.
//!
//! Each message is one record (integers little-endian):
//!
//! ```text
//! len u32 | type u8 | body            (len counts type + body, at most MAX_RECORD)
//! type 1 Resume   file u32 | n u32 | n × (start u64, end u64)
//! type 2 Verdict  file u32 | ok u8 (0 or 1) | detail (UTF-8, rest of the record)
//! type 3 Done     (empty)
//! type 4 Abort    detail (UTF-8, rest of the record)
//! ```

use super::{Reader, TransferError};

/// Largest record accepted (length field).
pub const MAX_RECORD: usize = 16 << 20;
/// Most ranges one `Resume` carries; the encoder keeps the largest ones (fewer ranges only
/// means the client resends bytes the server then ignores).
pub const MAX_RESUME_RANGES: usize = 65536;
/// Longest `detail` text, in bytes; longer texts are cut at a character boundary.
pub const MAX_DETAIL: usize = 4096;

const RESUME: u8 = 1;
const VERDICT: u8 = 2;
const DONE: u8 = 3;
const ABORT: u8 = 4;

/// A message from the server to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The server already has these byte ranges (`start..end`) of file `file` from an earlier,
    /// interrupted transfer: the client may skip them.
    Resume {
        /// Index in the manifest.
        file: u32,
        /// Sorted, disjoint ranges.
        have: Vec<(u64, u64)>,
    },
    /// The server received file `file` completely and checked its hash.
    Verdict {
        /// Index in the manifest.
        file: u32,
        /// True when the hash matched and the file is stored under its final name.
        ok: bool,
        /// Human-readable detail (e.g. `hash mismatch: …`).
        detail: String,
    },
    /// Every file has a verdict; nothing more follows.
    Done,
    /// The server gave up on the session (an unsafe name, a protocol error, a disk error).
    Abort {
        /// Why.
        detail: String,
    },
}

fn cut(s: &str) -> &str {
    if s.len() <= MAX_DETAIL {
        return s;
    }
    let mut i = MAX_DETAIL;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

fn protocol(m: impl Into<String>) -> TransferError {
    TransferError::Protocol(m.into())
}

impl Control {
    /// Appends this message's record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        match self {
            Control::Resume { file, have } => {
                out.push(RESUME);
                out.extend_from_slice(&file.to_le_bytes());
                let mut keep: Vec<(u64, u64)> = have.clone();
                if keep.len() > MAX_RESUME_RANGES {
                    keep.sort_by_key(|(s, e)| std::cmp::Reverse(e - s));
                    keep.truncate(MAX_RESUME_RANGES);
                    keep.sort();
                }
                out.extend_from_slice(&(keep.len() as u32).to_le_bytes());
                for (s, e) in keep {
                    out.extend_from_slice(&s.to_le_bytes());
                    out.extend_from_slice(&e.to_le_bytes());
                }
            }
            Control::Verdict { file, ok, detail } => {
                out.push(VERDICT);
                out.extend_from_slice(&file.to_le_bytes());
                out.push(u8::from(*ok));
                out.extend_from_slice(cut(detail).as_bytes());
            }
            Control::Done => out.push(DONE),
            Control::Abort { detail } => {
                out.push(ABORT);
                out.extend_from_slice(cut(detail).as_bytes());
            }
        }
        let len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// The records of `msgs`, concatenated.
    pub fn encode_all(msgs: &[Control]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in msgs {
            m.encode(&mut out);
        }
        out
    }

    /// Decodes a whole sequence of records; a partial record at the end is an error.
    pub fn decode_all(bytes: &[u8]) -> Result<Vec<Control>, TransferError> {
        let mut d = ControlDecoder::new();
        d.push(bytes);
        let mut v = Vec::new();
        while let Some(m) = d.next_message()? {
            v.push(m);
        }
        if d.buffered() != 0 {
            return Err(protocol(format!(
                "control stream ends inside a record ({} bytes left)",
                d.buffered()
            )));
        }
        Ok(v)
    }

    /// Decodes one record body (type + body).
    fn decode_body(rec: &[u8]) -> Result<Control, TransferError> {
        let mut r = Reader::new(rec, "control record");
        let t = r.u8()?;
        let text = |b: &[u8], what: &str| {
            std::str::from_utf8(b)
                .map(str::to_string)
                .map_err(|_| protocol(format!("{what} detail is not UTF-8")))
        };
        match t {
            RESUME => {
                let file = r.u32()?;
                let n = r.u32()? as usize;
                if r.remaining() != n.saturating_mul(16) {
                    return Err(protocol(format!(
                        "Resume record says {n} ranges but has {} bytes for them",
                        r.remaining()
                    )));
                }
                let mut have = Vec::with_capacity(n);
                let mut last_end = 0u64;
                for _ in 0..n {
                    let (s, e) = (r.u64()?, r.u64()?);
                    if s >= e || (!have.is_empty() && s <= last_end) {
                        return Err(protocol(format!(
                            "Resume for file {file}: ranges must be non-empty, sorted and disjoint ({s}..{e})"
                        )));
                    }
                    last_end = e;
                    have.push((s, e));
                }
                Ok(Control::Resume { file, have })
            }
            VERDICT => {
                let file = r.u32()?;
                let ok = match r.u8()? {
                    0 => false,
                    1 => true,
                    b => return Err(protocol(format!("Verdict ok byte {b}, expected 0 or 1"))),
                };
                let detail = text(r.bytes(r.remaining())?, "Verdict")?;
                Ok(Control::Verdict { file, ok, detail })
            }
            DONE if r.remaining() == 0 => Ok(Control::Done),
            DONE => Err(protocol("Done record with a body")),
            ABORT => Ok(Control::Abort {
                detail: text(r.bytes(r.remaining())?, "Abort")?,
            }),
            t => Err(protocol(format!("unknown control record type {t}"))),
        }
    }
}

/// Decodes control records from the ordered bytes of server stream 0, as they arrive.
#[derive(Debug, Default)]
pub struct ControlDecoder {
    buf: Vec<u8>,
    start: usize,
}

impl ControlDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the next ordered bytes of the stream.
    pub fn push(&mut self, data: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 4096 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes received but not yet decoded (a partial record).
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete message, if one has arrived.
    pub fn next_message(&mut self) -> Result<Option<Control>, TransferError> {
        let avail = &self.buf[self.start..];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
        if len == 0 || len > MAX_RECORD {
            return Err(protocol(format!(
                "control record of {len} bytes (allowed 1..={MAX_RECORD})"
            )));
        }
        if avail.len() < 4 + len {
            return Ok(None);
        }
        let m = Control::decode_body(&avail[4..4 + len])?;
        self.start += 4 + len;
        Ok(Some(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<Control> {
        vec![
            Control::Resume {
                file: 3,
                have: vec![(0, 10), (20, 1 << 40)],
            },
            Control::Resume {
                file: 0,
                have: vec![],
            },
            Control::Verdict {
                file: 1,
                ok: true,
                detail: "ok".into(),
            },
            Control::Verdict {
                file: 2,
                ok: false,
                detail: "hash mismatch: ü".into(),
            },
            Control::Abort {
                detail: "disk full".into(),
            },
            Control::Done,
        ]
    }

    #[test]
    fn transfer_control_round_trips_and_streams() {
        let msgs = sample();
        let b = Control::encode_all(&msgs);
        assert_eq!(Control::decode_all(&b).unwrap(), msgs);
        // Byte by byte through the incremental decoder.
        let mut d = ControlDecoder::new();
        let mut got = Vec::new();
        for byte in &b {
            d.push(std::slice::from_ref(byte));
            while let Some(m) = d.next_message().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got, msgs);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn transfer_control_rejects_garbage() {
        let err = |b: &[u8]| Control::decode_all(b).unwrap_err().to_string();
        assert!(err(&[0, 0, 0, 0]).contains("control record of 0 bytes"));
        assert!(err(&[255, 255, 255, 255]).contains("allowed"));
        assert!(err(&[1, 0, 0, 0, 9]).contains("unknown control record type 9"));
        assert!(err(&[2, 0, 0, 0, 3, 0]).contains("Done record with a body"));
        assert!(err(&[5, 0, 0, 0, 3]).contains("ends inside a record"));
        let mut b = Vec::new();
        Control::Resume {
            file: 0,
            have: vec![(5, 5)],
        }
        .encode(&mut b);
        assert!(err(&b).contains("non-empty"), "{}", err(&b));
        let mut b = Vec::new();
        Control::Resume {
            file: 0,
            have: vec![(5, 9), (1, 2)],
        }
        .encode(&mut b);
        assert!(err(&b).contains("sorted"));
        // A range count larger than the record.
        let b = [13, 0, 0, 0, 1, 0, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0];
        assert!(err(&b).contains("ranges but has"), "{}", err(&b));
    }

    #[test]
    fn transfer_control_caps_long_texts_and_many_ranges() {
        let long = "é".repeat(5000);
        let mut b = Vec::new();
        Control::Abort { detail: long }.encode(&mut b);
        match &Control::decode_all(&b).unwrap()[0] {
            Control::Abort { detail } => assert!(detail.len() <= MAX_DETAIL && !detail.is_empty()),
            m => panic!("{m:?}"),
        }
        let have: Vec<(u64, u64)> = (0..MAX_RESUME_RANGES as u64 + 10)
            .map(|i| (i * 10, i * 10 + 1 + u64::from(i == 5) * 5))
            .collect();
        let b = Control::encode_all(&[Control::Resume { file: 1, have }]);
        match &Control::decode_all(&b).unwrap()[0] {
            Control::Resume { have, .. } => {
                assert_eq!(have.len(), MAX_RESUME_RANGES);
                assert!(have.contains(&(50, 56)), "the largest range is kept");
            }
            m => panic!("{m:?}"),
        }
    }

    proptest! {
        #[test]
        fn transfer_control_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(v) = Control::decode_all(&bytes) {
                prop_assert_eq!(Control::encode_all(&v), bytes);
            }
        }
    }
}
