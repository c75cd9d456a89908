//! [`Trace`]: a trace-driven link in Mahimahi's format (`mm-link`): one line per delivery
//! opportunity, its time in whole milliseconds since the trace began, not decreasing; each
//! opportunity can carry [`OPPORTUNITY_BYTES`] bytes (a packet, or the tail of one and the
//! start of the next: a packet leaves at the opportunity that carries its last byte; bytes of an
//! opportunity nobody uses are lost). The trace repeats after its last timestamp (opportunity
//! `j` is at `(j / n) · last + t[j mod n]` ms), as Mahimahi's does.
//!
//! The spec names the file (`trace PATH`); it is read when the spec is parsed (at most
//! [`MAX_TRACE_BYTES`]), and its BLAKE3 digest (the first 8 bytes, in hex) is printed with the
//! path (`trace PATH blake3 HEX`), so a stored result says which trace ran and a spec read back
//! refuses a file that has changed since.

use std::fmt;
use std::io::Read;
use std::sync::Arc;

use crate::error::ParseSpecError;

/// Bytes one delivery opportunity carries (Mahimahi's `PACKET_SIZE` is 1504, a TUN device's
/// 1500-byte MTU plus its 4-byte packet-information header; socklab's TUN devices carry no
/// such header).
pub const OPPORTUNITY_BYTES: u64 = 1500;
/// The largest trace file read.
pub const MAX_TRACE_BYTES: u64 = 16 << 20;

const MS: u64 = 1_000_000;

/// A Mahimahi trace: its path, content digest and delivery opportunities.
#[derive(Clone)]
pub struct Trace {
    path: String,
    digest: [u8; 8],
    /// Opportunity times, ms, not decreasing, the last one positive.
    ms: Arc<[u32]>,
}

impl PartialEq for Trace {
    /// The same path and the same content.
    fn eq(&self, other: &Trace) -> bool {
        self.path == other.path && self.digest == other.digest
    }
}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trace")
            .field("path", &self.path)
            .field("blake3", &self.digest_hex())
            .field("opportunities", &self.ms.len())
            .field("period_ms", &self.period_ms())
            .finish()
    }
}

fn trace_err(path: &str, reason: impl Into<String>) -> ParseSpecError {
    ParseSpecError::Trace {
        path: path.to_string(),
        reason: reason.into(),
    }
}

impl Trace {
    /// Reads and checks the trace file at `path`.
    pub fn load(path: &str) -> Result<Trace, ParseSpecError> {
        let meta =
            std::fs::metadata(path).map_err(|e| trace_err(path, format!("cannot read it: {e}")))?;
        if !meta.is_file() {
            return Err(trace_err(
                path,
                "not a regular file; give a Mahimahi trace file (one millisecond timestamp a line)",
            ));
        }
        let too_big = || {
            trace_err(
                path,
                format!(
                    "larger than the {} MiB a trace may have",
                    MAX_TRACE_BYTES >> 20
                ),
            )
        };
        if meta.len() > MAX_TRACE_BYTES {
            return Err(too_big());
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_TRACE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| trace_err(path, format!("cannot read it: {e}")))?;
        if bytes.len() as u64 > MAX_TRACE_BYTES {
            return Err(too_big());
        }
        // Not UTF-8, or control bytes (a NUL of /proc/self/environ, an ESC): not a text file,
        // and nothing of it is quoted.
        let not_text = || {
            trace_err(
                path,
                "not a text file: a Mahimahi trace is one whole number of milliseconds a line",
            )
        };
        let text = socklab_units::text::as_text(&bytes).ok_or_else(not_text)?;
        Trace::from_text(path, text)
    }

    /// A trace from its text (`path` names it in errors and in the spec).
    pub fn from_text(path: &str, text: &str) -> Result<Trace, ParseSpecError> {
        let mut ms: Vec<u32> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let at = |reason: String| trace_err(path, format!("line {}: {reason}", i + 1));
            let v: u32 = line.parse().map_err(|_| {
                at(format!(
                    "'{}' is not a whole number of milliseconds (0 to 4294967295); each line of a Mahimahi trace is the time of one delivery opportunity",
                    socklab_units::text::quote(line)
                ))
            })?;
            if let Some(&last) = ms.last() {
                if v < last {
                    return Err(at(format!(
                        "{v} comes after {last}: the timestamps must not decrease"
                    )));
                }
            }
            ms.push(v);
        }
        match ms.last() {
            None => Err(trace_err(
                path,
                "no timestamps in it: a Mahimahi trace has one millisecond timestamp a line",
            )),
            Some(0) => Err(trace_err(
                path,
                "its last timestamp is 0: a trace must last at least 1 ms (it repeats after its last timestamp)",
            )),
            Some(_) => {
                let h = blake3::hash(text.as_bytes());
                let mut digest = [0u8; 8];
                digest.copy_from_slice(&h.as_bytes()[..8]);
                Ok(Trace {
                    path: path.to_string(),
                    digest,
                    ms: ms.into(),
                })
            }
        }
    }

    /// The file's path as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The first 8 bytes of the content's BLAKE3 hash, in hex.
    pub fn digest_hex(&self) -> String {
        self.digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Delivery opportunities per period.
    pub fn len(&self) -> usize {
        self.ms.len()
    }

    /// Never: a trace has at least one opportunity.
    pub fn is_empty(&self) -> bool {
        self.ms.is_empty()
    }

    /// The period after which the trace repeats: its last timestamp, ms.
    pub fn period_ms(&self) -> u64 {
        u64::from(self.ms[self.ms.len() - 1])
    }

    /// The time of opportunity `j` (from 0), ns after the trace began.
    pub fn opportunity_ns(&self, j: u64) -> u64 {
        let n = self.ms.len() as u64;
        (j / n)
            .saturating_mul(self.period_ms() * MS)
            .saturating_add(u64::from(self.ms[(j % n) as usize]) * MS)
    }

    /// The first opportunity at or after `t_ns` (ns after the trace began).
    pub fn first_at_or_after(&self, t_ns: u64) -> u64 {
        let n = self.ms.len() as u64;
        let period = self.period_ms() * MS;
        let cycle = t_ns / period;
        let rem = t_ns % period;
        let i = self.ms.partition_point(|&m| u64::from(m) * MS < rem) as u64;
        let mut j = cycle * n + i;
        // The previous period's last opportunities may share this instant.
        while j > 0 && self.opportunity_ns(j - 1) >= t_ns {
            j -= 1;
        }
        j
    }

    /// Opportunities in `[from_ns, to_ns)` (ns after the trace began).
    pub fn opportunities_between(&self, from_ns: u64, to_ns: u64) -> u64 {
        self.first_at_or_after(to_ns)
            .saturating_sub(self.first_at_or_after(from_ns))
    }

    /// The mean capacity over a period, bits per second.
    pub fn mean_bps(&self) -> f64 {
        self.ms.len() as f64 * (OPPORTUNITY_BYTES * 8) as f64 / (self.period_ms() as f64 / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Trace {
        Trace::from_text("t", text).unwrap()
    }

    fn e(text: &str) -> String {
        Trace::from_text("x.trace", text).unwrap_err().to_string()
    }

    #[test]
    fn opportunities_repeat_after_the_last_timestamp() {
        let tr = t("0\n2\n2\n5\n");
        let got: Vec<u64> = (0..9).map(|j| tr.opportunity_ns(j) / MS).collect();
        // Mahimahi: after the last (5), the base moves by 5 and the schedule starts again.
        assert_eq!(got, [0, 2, 2, 5, 5, 7, 7, 10, 10]);
        assert_eq!(tr.period_ms(), 5);
        for t_ms in 0..12u64 {
            for off in [0, 1, MS - 1] {
                let at = (t_ms * MS).saturating_sub(off);
                let j = tr.first_at_or_after(at);
                assert!(tr.opportunity_ns(j) >= at, "{at}");
                assert!(j == 0 || tr.opportunity_ns(j - 1) < at, "{at} -> {j}");
            }
        }
        assert_eq!(tr.opportunities_between(0, 10 * MS), 7);
        assert_eq!(tr.opportunities_between(5 * MS, 10 * MS), 4);
        // 4 opportunities of 1500 B per 5 ms = 9.6 Mbit/s.
        assert!((tr.mean_bps() - 9.6e6).abs() < 1.0);
    }

    #[test]
    fn bad_traces_name_the_line_and_the_fix() {
        assert_eq!(
            e("1\n2\nabc\n"),
            "trace x.trace: line 3: 'abc' is not a whole number of milliseconds (0 to 4294967295); each line of a Mahimahi trace is the time of one delivery opportunity"
        );
        assert_eq!(
            e("5\n\n3\n"),
            "trace x.trace: line 3: 3 comes after 5: the timestamps must not decrease"
        );
        assert!(e("\n\n").contains("no timestamps"));
        assert!(e("0\n0\n").contains("last timestamp is 0"));
        assert!(e("-1\n").contains("line 1"));
        // Blank lines and trailing spaces are fine; the digest is of the content.
        let a = t("1\n 2 \n\n3");
        assert_eq!(a.len(), 3);
        assert_ne!(a, t("1\n2\n3\n"), "different bytes, different digest");
        assert_eq!(a.digest_hex().len(), 16);
    }

    #[test]
    fn files_are_read_with_clear_errors() {
        let dir = std::env::temp_dir().join(format!("sl-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ok.trace");
        std::fs::write(&f, "1\n1\n2\n").unwrap();
        let tr = Trace::load(f.to_str().unwrap()).unwrap();
        assert_eq!((tr.len(), tr.period_ms()), (3, 2));
        let m = Trace::load(dir.join("missing").to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(m.contains("cannot read it"), "{m}");
        let m = Trace::load(dir.to_str().unwrap()).unwrap_err().to_string();
        assert!(m.contains("not a regular file"), "{m}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
