//! The live lines of a time series (`interval`): one per interval as it closes, text or JSON,
//! buffered and handed to the binary's writer at most every [`FLUSH_EVERY`] and at the end of
//! each repetition.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::model::sample::Interval;
use crate::plan::Cell;
use crate::series::{live_json, live_line, LiveSink};

/// Where the live lines of a time series go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveLines {
    /// Nowhere (suites: stored only).
    Off,
    /// A text line each on stdout.
    Text,
    /// A text line each on stderr (stdout holds CSV).
    TextStderr,
    /// A JSON object a line on stdout.
    Json,
}

impl LiveLines {
    /// The lines of a command printing JSON or CSV (or neither).
    pub fn for_format(json: bool, csv: bool) -> LiveLines {
        match (json, csv) {
            (true, _) => LiveLines::Json,
            (_, true) => LiveLines::TextStderr,
            _ => LiveLines::Text,
        }
    }
}

/// Writes a batch of live lines (the binary's: stdout, or stderr for
/// [`LiveLines::TextStderr`], around its progress bar).
pub type LiveWrite = Arc<dyn Fn(&str) + Send + Sync>;

/// How often buffered live lines are written at most: a 10 ms interval would otherwise cost a
/// `write()` (and a wake-up of whoever reads the pipe) per line, measurably on a busy core.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Live lines not yet written, and the writer of the current repetition.
struct Pending {
    text: String,
    last: Instant,
    write: Option<LiveWrite>,
}

/// The live lines of a time series, one per interval, in order; buffered and written at
/// most every [`FLUSH_EVERY`], and on [`LiveBuffer::flush`].
#[derive(Clone)]
pub struct LiveBuffer {
    mode: LiveLines,
    pending: Arc<Mutex<Pending>>,
}

impl std::fmt::Debug for LiveBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveBuffer")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl LiveBuffer {
    /// A buffer of lines in `mode`.
    pub fn new(mode: LiveLines) -> LiveBuffer {
        LiveBuffer {
            mode,
            pending: Arc::new(Mutex::new(Pending {
                text: String::new(),
                last: Instant::now(),
                write: None,
            })),
        }
    }

    /// Its mode.
    pub fn mode(&self) -> LiveLines {
        self.mode
    }

    /// The sink of repetition `rep` of `cell` of experiment `experiment` (none when off); its
    /// lines go to `write` (what is buffered before goes to the writer it had).
    pub fn sink(
        &self,
        experiment: i64,
        cell: &Cell,
        rep: usize,
        warmup: bool,
        write: LiveWrite,
    ) -> Option<LiveSink> {
        if self.mode == LiveLines::Off {
            return None;
        }
        self.flush();
        self.lock().write = Some(write);
        let (label, index) = (cell.label.clone(), cell.index);
        let buffer = self.clone();
        Some(Arc::new(move |i: &Interval| {
            let line = match buffer.mode {
                LiveLines::Json => live_json(experiment, index, &label, rep, warmup, i).to_string(),
                _ => live_line(&label, rep, warmup, i),
            };
            let mut p = buffer.lock();
            p.text.push_str(&line);
            p.text.push('\n');
            if p.last.elapsed() >= FLUSH_EVERY {
                Self::write(&mut p);
            }
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes what is buffered.
    pub fn flush(&self) {
        Self::write(&mut self.lock());
    }

    fn write(p: &mut Pending) {
        p.last = Instant::now();
        if p.text.is_empty() {
            return;
        }
        let text = std::mem::take(&mut p.text);
        if let Some(w) = &p.write {
            w(&text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::Params;
    use crate::plan::{Group, Order, Plan};

    #[test]
    fn lines_are_written_in_batches_and_on_flush() {
        let plan = Plan::build(
            "t",
            "",
            &[Group::new("bulk", Params::new())],
            1,
            0,
            Order::Sequential,
            "",
        )
        .unwrap();
        let got = Arc::new(Mutex::new(Vec::<String>::new()));
        let g = got.clone();
        let write: LiveWrite = Arc::new(move |t: &str| g.lock().unwrap().push(t.to_string()));
        assert!(LiveBuffer::new(LiveLines::Off)
            .sink(1, &plan.cells[0], 0, false, write.clone())
            .is_none());
        let buf = LiveBuffer::new(LiveLines::Json);
        assert_eq!(buf.mode(), LiveLines::Json);
        let sink = buf.sink(7, &plan.cells[0], 0, false, write).unwrap();
        let i = Interval::default();
        sink(&i);
        sink(&i);
        // Written together: the first batch waits for FLUSH_EVERY or a flush.
        buf.flush();
        let batches = got.lock().unwrap().clone();
        assert_eq!(batches.len(), 1, "{batches:?}");
        assert_eq!(batches[0].lines().count(), 2);
        assert!(batches[0].lines().all(|l| l.starts_with('{')));
        buf.flush();
        assert_eq!(got.lock().unwrap().len(), 1, "nothing more to write");
        assert_eq!(LiveLines::for_format(true, false), LiveLines::Json);
        assert_eq!(LiveLines::for_format(false, true), LiveLines::TextStderr);
        assert_eq!(LiveLines::for_format(false, false), LiveLines::Text);
    }
}
