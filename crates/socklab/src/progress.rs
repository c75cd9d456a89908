//! Progress while a plan runs: a bar with ETA on a terminal, plain lines otherwise (stderr, so
//! stdout stays clean for --json and --csv); and the live lines of a time series (`--interval`):
//! one per interval on stdout (JSON lines with --json; on stderr with --csv, whose stdout is
//! the table), written at most every 100 ms and at the end of each repetition.

use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use socklab_lab::plan::{Cell, Plan};
use socklab_lab::runner::{Observer, Sample};
use socklab_lab::series::LiveSink;
use socklab_lab::session::{LiveBuffer, LiveWrite, Tally};

pub use socklab_lab::session::LiveLines;

/// Writes live lines to stdout (stderr for [`LiveLines::TextStderr`]) around the progress
/// `bar`, if one is drawn.
fn writer(live: &LiveBuffer, bar: Option<ProgressBar>) -> LiveWrite {
    let stderr = live.mode() == LiveLines::TextStderr;
    Arc::new(move |text: &str| {
        // A closed stdout ends the command when it next prints its results.
        let print = || {
            if stderr {
                eprint!("{text}");
            } else {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(text.as_bytes());
                let _ = o.flush();
            }
        };
        match &bar {
            Some(b) => b.suspend(print),
            None => print(),
        }
    })
}

/// The CLI's observer.
pub struct Progress {
    bar: Option<ProgressBar>,
    tally: Tally,
    live: LiveBuffer,
    experiment: i64,
}

impl Progress {
    /// A bar if stderr is a terminal, else plain lines.
    pub fn new() -> Progress {
        Progress {
            bar: None,
            tally: Tally::default(),
            live: LiveBuffer::new(LiveLines::Off),
            experiment: 0,
        }
    }

    /// Prints the intervals of a time series as they close.
    pub fn with_live(mut self, live: LiveLines) -> Progress {
        self.live = LiveBuffer::new(live);
        self
    }
}

impl Observer for Progress {
    fn start(&mut self, plan: &Plan, experiment: i64, runs: usize) {
        let (tally, line) = Tally::start(plan, experiment, runs);
        self.tally = tally;
        self.experiment = experiment;
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(runs as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} ETA {eta} {wide_msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(format!("{} (experiment {experiment})", plan.name));
            self.bar = Some(bar);
        } else {
            eprintln!("{line}");
        }
    }

    fn run_start(&mut self, cell: &Cell, rep: usize, warmup: bool) {
        if let Some(b) = &self.bar {
            b.set_message(Tally::running(cell, rep, warmup));
        }
    }

    fn live(&mut self, cell: &Cell, rep: usize, warmup: bool) -> Option<LiveSink> {
        let write = writer(&self.live, self.bar.clone());
        self.live.sink(self.experiment, cell, rep, warmup, write)
    }

    fn retry(&mut self, cell: &Cell, rep: usize) {
        let line = self.tally.retry(cell, rep);
        match &self.bar {
            Some(b) => {
                b.inc_length(1);
                b.println(line);
            }
            None => eprintln!("{line}"),
        }
    }

    fn run_done(&mut self, cell: &Cell, rep: usize, warmup: bool, sample: &Sample) {
        self.live.flush();
        self.tally.done();
        match &self.bar {
            Some(b) => b.inc(1),
            None => eprintln!("{}", self.tally.done_line(cell, rep, warmup, sample)),
        }
    }

    fn end(&mut self) {
        self.live.flush();
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// How long a one-off run goes before [`OneRun`] shows its line.
const ONE_RUN_QUIET: Duration = Duration::from_secs(3);

/// The observer of a one-off run (`socklab load` without `--reps`), whose report is printed
/// when it ends: nothing for a short run; on a terminal, once the run has lasted a few
/// seconds, one line on stderr with the time elapsed and the run's time bound, cleared at the
/// end. Off for `--json`/`--csv` and when stderr is not a terminal.
pub struct OneRun {
    enabled: bool,
    shown: Option<(ProgressBar, Arc<AtomicBool>, JoinHandle<()>)>,
    live: LiveBuffer,
    experiment: i64,
}

impl OneRun {
    /// `enabled`: not for `--json`/`--csv`.
    pub fn new(enabled: bool) -> OneRun {
        OneRun {
            enabled: enabled && std::io::stderr().is_terminal(),
            shown: None,
            live: LiveBuffer::new(LiveLines::Off),
            experiment: 0,
        }
    }

    /// Prints the intervals of a time series as they close.
    pub fn with_live(mut self, live: LiveLines) -> OneRun {
        self.live = LiveBuffer::new(live);
        self
    }

    fn clear(&mut self) {
        if let Some((bar, done, reveal)) = self.shown.take() {
            done.store(true, Ordering::Relaxed);
            let _ = reveal.join();
            bar.finish_and_clear();
        }
    }
}

impl Observer for OneRun {
    fn start(&mut self, _plan: &Plan, experiment: i64, _runs: usize) {
        self.experiment = experiment;
    }

    fn live(&mut self, cell: &Cell, rep: usize, warmup: bool) -> Option<LiveSink> {
        let bar = self.shown.as_ref().map(|(b, _, _)| b.clone());
        self.live
            .sink(self.experiment, cell, rep, warmup, writer(&self.live, bar))
    }

    fn run_start(&mut self, cell: &Cell, _rep: usize, _warmup: bool) {
        if !self.enabled {
            return;
        }
        self.clear();
        let params = cell.workload.params();
        let bound = params
            .get("duration")
            .map_or_else(String::new, |d| format!(" of at most {d}"));
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{spinner} socklab {prefix}: {elapsed}{msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(cell.workload.kind());
        bar.set_message(format!("{bound}; Ctrl-C prints what was measured"));
        bar.enable_steady_tick(Duration::from_millis(250));
        let done = Arc::new(AtomicBool::new(false));
        let (b, d) = (bar.clone(), done.clone());
        let reveal = std::thread::spawn(move || {
            let t0 = Instant::now();
            while t0.elapsed() < ONE_RUN_QUIET {
                if d.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if !d.load(Ordering::Relaxed) {
                b.set_draw_target(ProgressDrawTarget::stderr());
            }
        });
        self.shown = Some((bar, done, reveal));
    }

    fn run_done(&mut self, _cell: &Cell, _rep: usize, _warmup: bool, _sample: &Sample) {
        self.live.flush();
        self.clear();
    }

    fn end(&mut self) {
        self.live.flush();
        self.clear();
    }
}
