//! Progress while a plan runs: a bar with ETA on a terminal, plain lines otherwise (stderr, so
//! stdout stays clean for --json and --csv); and the live lines of a time series (`--interval`):
//! one per interval on stdout (JSON lines with --json; on stderr with --csv, whose stdout is
//! the table), written at most every 100 ms and at the end of each repetition.

use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use socklab_lab::plan::{Cell, Plan};
use socklab_lab::runner::{Observer, Sample};
use socklab_lab::sample::Interval;
use socklab_lab::series::{live_json, live_line, LiveSink};
use socklab_lab::table::num;

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
    /// The lines of a command printing `--json` or `--csv` (or neither).
    pub fn for_format(json: bool, csv: bool) -> LiveLines {
        match (json, csv) {
            (true, _) => LiveLines::Json,
            (_, true) => LiveLines::TextStderr,
            _ => LiveLines::Text,
        }
    }
}

/// How often buffered live lines are written at most: a 10 ms interval would otherwise cost a
/// `write()` (and a wake-up of whoever reads the pipe) per line, measurably on a busy core.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Live lines not yet written, and around which progress bar to write them.
struct Pending {
    text: String,
    last: Instant,
    bar: Option<ProgressBar>,
}

/// Prints the live lines of a time series, one per interval, in order; buffered and written
/// at most every [`FLUSH_EVERY`], and at the end of each repetition.
#[derive(Clone)]
struct LivePrinter {
    mode: LiveLines,
    pending: Arc<Mutex<Pending>>,
}

impl LivePrinter {
    fn new(mode: LiveLines) -> LivePrinter {
        LivePrinter {
            mode,
            pending: Arc::new(Mutex::new(Pending {
                text: String::new(),
                last: Instant::now(),
                bar: None,
            })),
        }
    }

    /// The sink of repetition `rep` of `cell` of experiment `experiment`; lines are written
    /// around the progress `bar`, if one is drawn.
    fn sink(
        &self,
        experiment: i64,
        cell: &Cell,
        rep: usize,
        warmup: bool,
        bar: Option<ProgressBar>,
    ) -> Option<LiveSink> {
        if self.mode == LiveLines::Off {
            return None;
        }
        self.flush();
        self.lock().bar = bar;
        let (label, index) = (cell.label.clone(), cell.index);
        let printer = self.clone();
        Some(Arc::new(move |i: &Interval| {
            let line = match printer.mode {
                LiveLines::Json => live_json(experiment, index, &label, rep, warmup, i).to_string(),
                _ => live_line(&label, rep, warmup, i),
            };
            let mut p = printer.lock();
            p.text.push_str(&line);
            p.text.push('\n');
            if p.last.elapsed() >= FLUSH_EVERY {
                printer.write(&mut p);
            }
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes what is buffered.
    fn flush(&self) {
        let mut p = self.lock();
        self.write(&mut p);
    }

    fn write(&self, p: &mut Pending) {
        p.last = Instant::now();
        if p.text.is_empty() {
            return;
        }
        let text = std::mem::take(&mut p.text);
        let print = || {
            // A closed stdout ends the command when it next prints its results.
            if self.mode == LiveLines::TextStderr {
                eprint!("{text}");
            } else {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(text.as_bytes());
                let _ = o.flush();
            }
        };
        match &p.bar {
            Some(b) => b.suspend(print),
            None => print(),
        }
    }
}

/// The CLI's observer.
pub struct Progress {
    bar: Option<ProgressBar>,
    name: String,
    total: usize,
    done: usize,
    t0: Instant,
    live: LivePrinter,
    experiment: i64,
}

impl Progress {
    /// A bar if stderr is a terminal, else plain lines.
    pub fn new() -> Progress {
        Progress {
            bar: None,
            name: String::new(),
            total: 0,
            done: 0,
            t0: Instant::now(),
            live: LivePrinter::new(LiveLines::Off),
            experiment: 0,
        }
    }

    /// Prints the intervals of a time series as they close.
    pub fn with_live(mut self, live: LiveLines) -> Progress {
        self.live = LivePrinter::new(live);
        self
    }
}

fn describe(s: &Sample) -> String {
    if let Some(g) = s.get("gbps") {
        format!("{} Gbit/s", num(g))
    } else if let Some(t) = s.get("total_us") {
        format!(
            "{} us, p50 {} us",
            num(t),
            s.get("rtt_p50_us").map(num).unwrap_or_default()
        )
    } else if let Some(t) = s.get("total_s") {
        format!(
            "{} s, {} Mbit/s, retx {}",
            num(t),
            s.get("goodput_mbps").map(num).unwrap_or_default(),
            s.get("retx").map(num).unwrap_or_default()
        )
    } else if s.get("failed") == Some(1.0) {
        "failed".to_string()
    } else if let Some(r) = s.get("rebind_ok") {
        format!("rebind {}", if r > 0.0 { "ok" } else { "failed" })
    } else {
        String::new()
    }
}

impl Observer for Progress {
    fn start(&mut self, plan: &Plan, experiment: i64, runs: usize) {
        self.name = plan.name.clone();
        self.experiment = experiment;
        self.total = runs;
        self.done = 0;
        self.t0 = Instant::now();
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
            eprintln!(
                "experiment {experiment} '{}': {} cells, {runs} runs",
                plan.name,
                plan.cells.len()
            );
        }
    }

    fn run_start(&mut self, cell: &Cell, rep: usize, warmup: bool) {
        if let Some(b) = &self.bar {
            b.set_message(format!(
                "{}{} rep {}",
                cell.label,
                if warmup { " (warm-up)" } else { "" },
                rep + 1
            ));
        }
    }

    fn live(&mut self, cell: &Cell, rep: usize, warmup: bool) -> Option<LiveSink> {
        self.live
            .sink(self.experiment, cell, rep, warmup, self.bar.clone())
    }

    fn retry(&mut self, cell: &Cell, rep: usize) {
        self.total += 1;
        let line = format!(
            "{} | {}: a repetition was marked invalid (emu_valid = 0); running it again as rep {} (a cell gets at most 2 × reps attempts)",
            self.name,
            cell.label,
            rep + 1
        );
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
        self.done += 1;
        match &self.bar {
            Some(b) => b.inc(1),
            None => {
                let elapsed = self.t0.elapsed().as_secs_f64();
                let eta = elapsed / self.done as f64 * self.total.saturating_sub(self.done) as f64;
                eprintln!(
                    "[{}/{}] {} | {}{} rep {}: {} (ETA {:.0}s)",
                    self.done,
                    self.total,
                    self.name,
                    cell.label,
                    if warmup { " warm-up" } else { "" },
                    rep + 1,
                    describe(sample),
                    eta
                );
            }
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
    live: LivePrinter,
    experiment: i64,
}

impl OneRun {
    /// `enabled`: not for `--json`/`--csv`.
    pub fn new(enabled: bool) -> OneRun {
        OneRun {
            enabled: enabled && std::io::stderr().is_terminal(),
            shown: None,
            live: LivePrinter::new(LiveLines::Off),
            experiment: 0,
        }
    }

    /// Prints the intervals of a time series as they close.
    pub fn with_live(mut self, live: LiveLines) -> OneRun {
        self.live = LivePrinter::new(live);
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
        self.live.sink(self.experiment, cell, rep, warmup, bar)
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
