//! The one-off `socklab load`'s text: the wrk/ab-like summary, the CSV row, each
//! generator's figures (`generators`), and the end of a run as the store holds it.

use std::fmt::Write as _;

use socklab_net::load::{LoadReport, Timing};

use crate::store::Store;
use crate::table::Table;
use crate::LabError;

/// How a one-off run ended, after its text is printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// It ran to its end and something completed.
    Done,
    /// It failed (no request completed, or it stopped early): why, in one line.
    Failed(String),
    /// Ctrl-C or SIGTERM stopped it; the figures printed cover the run until then.
    Interrupted(String),
}

/// What the command prints of a finished one-off run, and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The report: JSON, CSV, or the summary with the generators' lines and where it is stored.
    pub text: String,
    /// How it ended.
    pub end: End,
}

/// How the report is printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Format {
    /// As JSON (one line after interval lines, else pretty).
    pub json: bool,
    /// As CSV: a header and one row.
    pub csv: bool,
    /// Interval lines came before it (`interval`).
    pub intervals: bool,
}

/// The one run of experiment `id`: its report read back from the store, as text in `format`;
/// the experiment is marked interrupted or failed when the run stopped early.
pub fn finish(store: &mut Store, id: i64, format: Format) -> Result<Finished, LabError> {
    let r = stored_report(store, id)?;
    let gens = generator_lines(store, id)?;
    let text = if format.json {
        // The report, and each generator's own figures as the text prints them.
        let mut v = serde_json::to_value(&r).unwrap_or_default();
        if let Some(g) = generator_figures(store, id)? {
            v["generators"] = serde_json::Value::Array(g);
        }
        // After the intervals' JSON lines, the report is one more line.
        let mut s = if format.intervals {
            serde_json::to_string(&v)
        } else {
            serde_json::to_string_pretty(&v)
        }
        .map_err(|e| LabError::Io {
            context: "the load report as JSON".into(),
            source: e.into(),
        })?;
        s.push('\n');
        s
    } else if format.csv {
        csv(&r)
    } else {
        format!(
            "{}{gens}stored as experiment {id} in {}\n",
            summary(&r),
            store.path().display()
        )
    };
    match r.aborted.as_deref() {
        None => {}
        Some("interrupted") => store.finish_experiment(id, "interrupted")?,
        Some(_) => store.finish_experiment(id, "failed")?,
    }
    Ok(Finished {
        text,
        end: end_of(&r),
    })
}

/// How the run of report `r` ended.
pub fn end_of(r: &LoadReport) -> End {
    match r.aborted.as_deref() {
        None if r.completed == 0 && r.failed.total() > 0 => End::Failed(format!(
            "no request completed ({} failed: connect {}, read {}, write {}, timeout {}, bad reply {}): is a {} server listening at {}?",
            r.failed.total(),
            r.failed.connect,
            r.failed.read,
            r.failed.write,
            r.failed.timeout,
            r.failed.bad_reply,
            r.config.protocol,
            r.config.to
        )),
        None => End::Done,
        Some("interrupted") => End::Interrupted(
            "interrupted: the figures above cover the run until Ctrl-C".into(),
        ),
        Some(why) => End::Failed(why.to_string()),
    }
}

/// Each generator's own figures (`generators`) as the run of experiment `id` stored them;
/// `None` when one generator, the controller, ran the load.
pub fn generator_figures(
    store: &Store,
    id: i64,
) -> Result<Option<Vec<serde_json::Value>>, LabError> {
    let sample = store.samples(id)?.into_iter().find(|s| !s.warmup);
    Ok(sample.and_then(|s| s.extra["generators"].as_array().cloned()))
}

/// Each generator's own figures (`generators`), as lines under the merged report.
pub fn generator_lines(store: &Store, id: i64) -> Result<String, LabError> {
    let Some(gens) = generator_figures(store, id)? else {
        return Ok(String::new());
    };
    let mut t = Table::new(&[
        "generator",
        "connections",
        "completed",
        "failed",
        "req/s",
        "p50 us",
        "p99 us",
        "behind",
    ]);
    t.left = vec![true, false, false, false, false, false, false, true];
    let n = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x:.0}"));
    for g in &gens {
        t.row(vec![
            g["host"].as_str().unwrap_or("?").to_string(),
            n(&g["connections"]),
            n(&g["completed"]),
            n(&g["failed"]),
            n(&g["req_per_s"]),
            n(&g["lat_p50_us"]),
            n(&g["lat_p99_us"]),
            g["behind"].as_str().unwrap_or("no").to_string(),
        ]);
    }
    Ok(format!(
        "\nEach generator (the figures above are their merge: histograms added, counts summed):\n{}\n",
        t.to_text()
    ))
}

/// The report of the one run of experiment `id`, as the store holds it.
pub fn stored_report(store: &Store, id: i64) -> Result<LoadReport, LabError> {
    let missing = |why: String| {
        LabError::store(
            store.path(),
            format!("experiment {id} holds no load report ({why})"),
        )
    };
    let sample = store
        .samples(id)?
        .into_iter()
        .find(|s| !s.warmup)
        .ok_or_else(|| missing("no repetition".into()))?;
    serde_json::from_value(sample.extra["report"].clone()).map_err(|e| missing(e.to_string()))
}

/// Microseconds as the summary prints them: us below a millisecond, ms above.
pub fn us(x: f64) -> String {
    if x >= 100_000.0 {
        format!("{:.1}ms", x / 1000.0)
    } else if x >= 1000.0 {
        format!("{:.2}ms", x / 1000.0)
    } else {
        format!("{x:.1}us")
    }
}

/// Bytes with a decimal unit (KB, MB, GB).
pub fn bytes_h(x: f64) -> String {
    for (d, s) in [(1e9, "GB"), (1e6, "MB"), (1e3, "KB")] {
        if x >= d {
            return format!("{:.2} {s}", x / d);
        }
    }
    format!("{x:.0} B")
}

fn timing_row(s: &mut String, name: &str, t: &Timing) {
    if t.count == 0 {
        let _ = writeln!(s, "  {name:<12} {:>10}", "-");
        return;
    }
    let _ = writeln!(
        s,
        "  {name:<12} {:>10} {:>10} {:>10} {:>10} {:>10}",
        us(t.min_us),
        us(t.mean_us),
        us(t.sd_us),
        us(t.median_us),
        us(t.max_us)
    );
}

/// The wrk/ab-like human summary.
pub fn summary(r: &LoadReport) -> String {
    let c = &r.config;
    let mut s = String::new();
    let mode = match c.rate {
        Some(rate) => format!("open loop at {rate} req/s"),
        None => "closed loop".into(),
    };
    let conns = if c.new_connection_per_request {
        "a new connection per request"
    } else {
        "keep-alive"
    };
    let _ = writeln!(
        s,
        "socklab load: {} to {}, {} connections ({conns}), {} thread(s), {mode}, {:.2} s",
        c.protocol,
        c.to,
        c.connections,
        c.threads.min(c.connections),
        r.duration_s
    );
    if let Some(t) = &r.tls {
        let _ = writeln!(
            s,
            "  TLS {} {}, certificate {}, session resumption {} (connect times include the handshake)",
            if t.version.is_empty() { "(no handshake completed)" } else { &t.version },
            t.cipher,
            t.trust,
            if t.resumption {
                format!("on ({} of {} handshakes resumed)", t.resumed, r.connections_opened)
            } else {
                "off".into()
            }
        );
    }
    let f = &r.failed;
    let _ = writeln!(
        s,
        "  Complete requests:  {}\n  Failed requests:    {} (connect {}, read {}, write {}, timeout {}, bad reply {})",
        r.completed,
        f.total(),
        f.connect,
        f.read,
        f.write,
        f.timeout,
        f.bad_reply
    );
    let _ = writeln!(
        s,
        "  Requests/s:         {:.1}\n  Connections/s:      {:.1} ({} opened)\n  Transfer rate:      {}/s read ({} read, {} written)",
        r.requests_per_s,
        r.connections_per_s,
        r.connections_opened,
        bytes_h(r.transfer_bytes_per_s),
        bytes_h(r.bytes_read as f64),
        bytes_h(r.bytes_written as f64)
    );
    let _ = writeln!(
        s,
        "\n  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "Times", "min", "mean", "[+/-sd]", "median", "max"
    );
    timing_row(&mut s, "Connect", &r.connect);
    timing_row(&mut s, "First byte", &r.first_byte);
    timing_row(&mut s, "Response", &r.response);
    if let Some(t) = &r.response_corrected {
        timing_row(&mut s, "Corrected", t);
    }
    percentiles(&mut s, r);
    let g = &r.generator;
    let util: Vec<String> = g
        .thread_utilisation
        .iter()
        .map(|u| format!("{:.0}%", u * 100.0))
        .collect();
    // The https generator (tokio tasks) has no event loop of its own to time.
    let loop_work = if g.loop_busy.count == 0 {
        String::new()
    } else {
        format!(
            "; event-loop work p99 {}, max {}",
            us(g.loop_busy.percentiles.p99_us),
            us(g.loop_busy.max_us)
        )
    };
    let _ = writeln!(
        s,
        "\n  Generator: cpu user {:.2} s, sys {:.2} s; threads busy {}{loop_work}",
        g.cpu_user_s,
        g.cpu_sys_s,
        util.join(" "),
    );
    if let (Some(send), Some(timer)) = (&g.send_lag, &g.timer_lag) {
        let _ = writeln!(
            s,
            "  Send lag (actual - intended): p50 {}, p99 {}, max {}; timer lag p99 {}",
            us(send.percentiles.p50_us),
            us(send.percentiles.p99_us),
            us(send.max_us),
            us(timer.percentiles.p99_us)
        );
    }
    for w in &g.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    if let Some(a) = &r.aborted {
        let _ = writeln!(s, "  stopped early: {a}");
    }
    s
}

/// The latency percentiles' table; with no response there is no latency, and it says so
/// (rather than a row of 0.0us).
fn percentiles(s: &mut String, r: &LoadReport) {
    if r.response.count == 0 {
        let _ = writeln!(
            s,
            "\n  Latency percentiles: none (no response completed, so no latency to report)"
        );
        return;
    }
    let _ = write!(s, "\n  Latency percentiles");
    for (label, _) in r.response.percentiles.rows() {
        let _ = write!(s, " {label:>9}");
    }
    s.push('\n');
    let mut pct = |name: &str, t: &Timing| {
        let _ = write!(s, "  {name:<19}");
        for (_, v) in t.percentiles.rows() {
            let _ = write!(s, " {:>9}", us(v));
        }
        s.push('\n');
    };
    match &r.response_corrected {
        Some(t) => {
            pct("corrected", t);
            pct("uncorrected", &r.response);
        }
        None => pct("response", &r.response),
    }
}

/// A CSV header and one row: the figures most tables want (the JSON has everything).
pub fn csv(r: &LoadReport) -> String {
    let c = &r.config;
    let mut head: Vec<String> = [
        "protocol",
        "to",
        "connections",
        "new_connection_per_request",
        "threads",
        "rate",
        "duration_s",
        "completed",
        "failed",
        "failed_connect",
        "failed_read",
        "failed_write",
        "failed_timeout",
        "failed_bad_reply",
        "connections_opened",
        "requests_per_s",
        "connections_per_s",
        "transfer_bytes_per_s",
        "bytes_read",
        "bytes_written",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let f = &r.failed;
    let mut row: Vec<String> = vec![
        c.protocol.to_string(),
        c.to.to_string(),
        c.connections.to_string(),
        c.new_connection_per_request.to_string(),
        c.threads.min(c.connections).to_string(),
        c.rate.map_or(String::new(), |x| x.to_string()),
        format!("{:.6}", r.duration_s),
        r.completed.to_string(),
        f.total().to_string(),
        f.connect.to_string(),
        f.read.to_string(),
        f.write.to_string(),
        f.timeout.to_string(),
        f.bad_reply.to_string(),
        r.connections_opened.to_string(),
        format!("{:.3}", r.requests_per_s),
        format!("{:.3}", r.connections_per_s),
        format!("{:.3}", r.transfer_bytes_per_s),
        r.bytes_read.to_string(),
        r.bytes_written.to_string(),
    ];
    let mut timing = |name: &str, t: Option<&Timing>| {
        let d = Timing::default();
        let t = t.unwrap_or(&d);
        let p = &t.percentiles;
        for (k, v) in [
            ("min", t.min_us),
            ("mean", t.mean_us),
            ("sd", t.sd_us),
            ("median", t.median_us),
            ("max", t.max_us),
            ("p50", p.p50_us),
            ("p75", p.p75_us),
            ("p90", p.p90_us),
            ("p99", p.p99_us),
            ("p99_9", p.p99_9_us),
            ("p99_99", p.p99_99_us),
        ] {
            head.push(format!("{name}_{k}_us"));
            // No sample, no time: an empty cell rather than 0.000.
            row.push(if t.count == 0 {
                String::new()
            } else {
                format!("{v:.3}")
            });
        }
    };
    timing("connect", Some(&r.connect));
    timing("first_byte", Some(&r.first_byte));
    timing("response", Some(&r.response));
    timing("corrected", r.response_corrected.as_ref());
    let g = &r.generator;
    head.extend(["cpu_user_s", "cpu_sys_s", "aborted"].map(String::from));
    row.push(format!("{:.6}", g.cpu_user_s));
    row.push(format!("{:.6}", g.cpu_sys_s));
    row.push(
        r.aborted
            .as_deref()
            .map_or(String::new(), |a| format!("\"{}\"", a.replace('"', "\"\""))),
    );
    format!("{}\n{}\n", head.join(","), row.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_net::load::{Failures, GeneratorStats, LoadConfig, LoadProtocol};

    fn report() -> LoadReport {
        let t = Timing {
            count: 3,
            mean_us: 12.5,
            ..Timing::default()
        };
        LoadReport {
            config: LoadConfig::new("127.0.0.1:8080".parse().unwrap(), LoadProtocol::Http),
            duration_s: 1.5,
            completed: 3,
            failed: Failures::default(),
            connections_opened: 1,
            requests_per_s: 2.0,
            connections_per_s: 0.5,
            bytes_written: 100,
            bytes_read: 4200,
            transfer_bytes_per_s: 2800.0,
            connect: t,
            first_byte: t,
            response: t,
            response_corrected: None,
            generator: GeneratorStats {
                send_lag: None,
                timer_lag: None,
                loop_busy: t,
                thread_utilisation: vec![0.25],
                cpu_user_s: 0.01,
                cpu_sys_s: 0.02,
                warnings: vec!["w".into()],
            },
            aborted: None,
            tls: None,
            intervals: Vec::new(),
        }
    }

    #[test]
    fn times_and_sizes_print_in_their_unit() {
        assert_eq!(us(12.34), "12.3us");
        assert_eq!(us(1500.0), "1.50ms");
        assert_eq!(us(250_000.0), "250.0ms");
        assert_eq!(bytes_h(999.0), "999 B");
        assert_eq!(bytes_h(4200.0), "4.20 KB");
        assert_eq!(bytes_h(3e9), "3.00 GB");
    }

    #[test]
    fn the_summary_and_the_csv_row_cover_the_report() {
        let r = report();
        let s = summary(&r);
        assert!(s.starts_with("socklab load: http to 127.0.0.1:8080"), "{s}");
        assert!(s.contains("Complete requests:  3"), "{s}");
        assert!(s.contains("  warning: w"), "{s}");
        let c = csv(&r);
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0].split(',').count(),
            lines[1].split(',').count(),
            "{c}"
        );
        assert!(lines[0].starts_with("protocol,to,connections,"));
    }

    #[test]
    fn the_end_of_a_run_says_why_it_failed() {
        let r = report();
        assert_eq!(end_of(&r), End::Done);
        let none = LoadReport {
            completed: 0,
            failed: Failures {
                connect: 2,
                ..Failures::default()
            },
            ..r.clone()
        };
        let End::Failed(why) = end_of(&none) else {
            panic!("not failed")
        };
        assert!(
            why.starts_with("no request completed (2 failed: connect 2"),
            "{why}"
        );
        // No response: no latency, neither 0.0us percentiles nor 0.000 cells.
        let no_latency = LoadReport {
            response: Timing::default(),
            first_byte: Timing::default(),
            ..none.clone()
        };
        let text = summary(&no_latency);
        assert!(
            text.contains("Latency percentiles: none (no response completed"),
            "{text}"
        );
        assert!(!text.contains("  response "), "{text}");
        let c = csv(&no_latency);
        let (head, row) = c.split_once('\n').unwrap();
        let p50 = head
            .split(',')
            .position(|h| h == "response_p50_us")
            .unwrap();
        assert_eq!(row.split(',').nth(p50), Some(""), "{c}");
        let stopped = LoadReport {
            aborted: Some("interrupted".into()),
            ..r
        };
        assert!(matches!(end_of(&stopped), End::Interrupted(_)));
    }
}
