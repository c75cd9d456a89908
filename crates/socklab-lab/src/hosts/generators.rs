//! Several load generators (`--generators lab1,lab3,local`): the load is split over them (the
//! connections, and the open-loop rate and request budget in proportion), each runs the role
//! `socklab hosts generate` on its host and starts at one agreed instant (the controller's
//! clock plus the host's measured offset), and the controller merges what they send back:
//! their HDR histograms, serialised as buckets, added exactly; their counts summed
//! ([`socklab_net::load::merge`]). Each generator's own figures are kept beside the merge.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socklab_net::load::{LoadConfig, LoadHistograms, LoadReport, Part};
use socklab_sys::process::child_dies_with_parent;

use super::probe::now_ns;
use crate::roles::argv::{Role, RoleArgs};
use crate::LabError;

/// Prefix of the generator role's result line.
pub const LOAD: &str = "LOAD ";

/// How long before the agreed start the generators are told (room for their SSH channels).
pub const LEAD: Duration = Duration::from_millis(1500);

/// What a generator sends back.
#[derive(Debug, Serialize, Deserialize)]
pub struct Output {
    /// Its report.
    pub report: LoadReport,
    /// Its histograms, as `(value, count)` buckets by name.
    pub histograms: BTreeMap<String, Vec<(u64, u64)>>,
}

/// `n` shares of `a`, as equal as whole numbers allow (the first ones one larger).
fn shares(a: u64, n: usize) -> Vec<u64> {
    let n64 = n as u64;
    (0..n64).map(|i| a / n64 + u64::from(i < a % n64)).collect()
}

/// `cfg` split over `n` generators: the connections as equal as whole numbers allow, the
/// open-loop rate and the request budget in proportion to them.
pub fn split(cfg: &LoadConfig, n: usize) -> Result<Vec<LoadConfig>, String> {
    if n == 0 {
        return Err("no generator".into());
    }
    if cfg.connections < n {
        return Err(format!(
            "{} connection(s) over {n} generators: give at least one connection per generator",
            cfg.connections
        ));
    }
    let conns = shares(cfg.connections as u64, n);
    let requests = cfg.requests.map(|r| shares(r, n));
    Ok(conns
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let mut p = cfg.clone();
            p.connections = c as usize;
            p.threads = cfg.threads.min(p.connections).max(1);
            p.rate = cfg.rate.map(|r| r * c as f64 / cfg.connections as f64);
            p.requests = requests.as_ref().map(|r| r[i].max(1));
            p
        })
        .collect())
}

// ------------------------------------------------------------------------------ the role

/// The generator role: waits for `start_at_ns` (this host's clock), runs `cfg` until its
/// bound or `stop`, and prints its report and histograms (`LOAD {json}`).
pub fn serve_generator(
    cfg: &LoadConfig,
    start_at_ns: i128,
    stop: &AtomicBool,
) -> Result<(), String> {
    cfg.validate().map_err(|e| e.to_string())?;
    let wait = start_at_ns - now_ns();
    if wait > 60_000_000_000 {
        return Err(format!(
            "the start is {} s away: this host's clock or the controller's is off",
            wait / 1_000_000_000
        ));
    }
    while now_ns() < start_at_ns && !stop.load(Ordering::Relaxed) {
        let left = (start_at_ns - now_ns()).clamp(0, 10_000_000) as u64;
        std::thread::sleep(Duration::from_nanos(left));
    }
    let (report, h) =
        socklab_net::load::run_with_histograms(cfg, stop).map_err(|e| e.to_string())?;
    let line = output_line(&Output {
        report,
        histograms: h.buckets(),
    })?;
    let mut o = std::io::stdout().lock();
    writeln!(o, "{line}")
        .and_then(|()| o.flush())
        .map_err(|e| format!("cannot print the result: {e}"))
}

/// The role's result line: `LOAD {json}`.
pub fn output_line(out: &Output) -> Result<String, String> {
    serde_json::to_string(out)
        .map(|j| format!("{LOAD}{j}"))
        .map_err(|e| e.to_string())
}

// ----------------------------------------------------------------------- the controller

/// A generator's result, if `line` is its result line.
pub fn read_output(line: &str) -> Option<Output> {
    line.strip_prefix(LOAD)
        .and_then(|j| serde_json::from_str::<Output>(j).ok())
}

/// Generator `name`'s part of the merge, from its result; an error names a bad histogram.
pub fn part(name: &str, o: Output) -> Result<Part, String> {
    let h = LoadHistograms::from_buckets(&o.histograms)
        .map_err(|e| format!("the generator sent a bad histogram: {e}"))?;
    Ok(Part {
        name: name.to_string(),
        report: o.report,
        histograms: h,
    })
}

/// A generator the controller started.
struct Running {
    name: String,
    child: Child,
    result: mpsc::Receiver<Option<Output>>,
    last_err: mpsc::Receiver<String>,
    got: Option<Option<Output>>,
}

fn host_err(host: &str, reason: String) -> LabError {
    LabError::Host {
        host: host.to_string(),
        reason,
    }
}

/// Runs `cfg` split over `gens` (each a transport and its clock offset to the controller,
/// host minus controller, in nanoseconds) from one agreed start; returns the merged report
/// and each generator's part. `None` when stopped (every generator is stopped too).
pub fn run(
    gens: &[super::Generator],
    cfg: &LoadConfig,
    stop: &dyn Fn() -> bool,
    keep_stopped: bool,
) -> Result<Option<(LoadReport, Vec<Part>)>, LabError> {
    let configs = split(cfg, gens.len()).map_err(LabError::Plan)?;
    let start = now_ns() + LEAD.as_nanos() as i128;
    let mut running = Vec::with_capacity(gens.len());
    for ((t, offset), c) in gens.iter().zip(&configs) {
        let role = RoleArgs {
            role: Role::Generate {
                config: Box::new(c.clone()),
                start_at: start + i128::from(*offset),
            },
            listen: None,
            until_eof: true,
        };
        let mut cmd = t.socklab(&role)?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        child_dies_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| host_err(t.name(), format!("cannot start the generator: {e}")))?;
        let (tx, result) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                let found = BufReader::new(out)
                    .lines()
                    .map_while(Result::ok)
                    .find_map(|l| read_output(&l));
                let _ = tx.send(found);
            });
        }
        let (etx, last_err) = mpsc::channel();
        if let Some(err) = child.stderr.take() {
            let name = t.name().to_string();
            std::thread::spawn(move || {
                let mut last = String::new();
                for l in BufReader::new(err).lines().map_while(Result::ok) {
                    if !l.trim().is_empty() {
                        eprintln!("[{name}] {l}");
                        last = l;
                    }
                }
                let _ = etx.send(last);
            });
        }
        running.push(Running {
            name: t.name().to_string(),
            child,
            result,
            last_err,
            got: None,
        });
    }
    let bound = LEAD
        + cfg.duration.unwrap_or(Duration::from_secs(300))
        + cfg.timeout
        + Duration::from_secs(60);
    let t0 = Instant::now();
    let mut stopped = false;
    while running.iter().any(|r| r.got.is_none()) {
        for r in running.iter_mut().filter(|r| r.got.is_none()) {
            match r.result.try_recv() {
                Ok(o) => r.got = Some(o),
                Err(mpsc::TryRecvError::Disconnected) => r.got = Some(None),
                Err(mpsc::TryRecvError::Empty) => {}
            }
        }
        if !stopped && stop() {
            // Every generator stops (its stdin closes) and reports what it ran.
            stopped = true;
            for r in &mut running {
                drop(r.child.stdin.take());
            }
        }
        if t0.elapsed() > bound {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut parts = Vec::with_capacity(running.len());
    let mut failure = None;
    for mut r in running {
        drop(r.child.stdin.take());
        let t1 = Instant::now();
        while matches!(r.child.try_wait(), Ok(None)) && t1.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = r.child.kill();
        let _ = r.child.wait();
        match r.got.flatten() {
            Some(o) => match part(&r.name, o) {
                Ok(p) => parts.push(p),
                Err(e) => {
                    failure.get_or_insert_with(|| host_err(&r.name, e));
                }
            },
            None => {
                let last = r
                    .last_err
                    .recv_timeout(Duration::from_secs(1))
                    .unwrap_or_default();
                failure.get_or_insert_with(|| {
                    host_err(
                        &r.name,
                        format!(
                            "the generator ended without a result{}",
                            if last.is_empty() {
                                " (its SSH session or the host was lost)".to_string()
                            } else {
                                format!(": {}", last.trim_start_matches("socklab: error: "))
                            }
                        ),
                    )
                });
            }
        }
    }
    if stopped && !keep_stopped {
        return Ok(None);
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let (merged, _) = socklab_net::load::merge(cfg, &parts);
    Ok(Some((merged, parts)))
}

/// Each generator's own figures, kept beside the merged ones in the sample.
pub fn part_figures(parts: &[Part]) -> serde_json::Value {
    serde_json::Value::Array(
        parts
            .iter()
            .map(|p| {
                let r = &p.report;
                let lat = r.response_corrected.as_ref().unwrap_or(&r.response);
                serde_json::json!({
                    "host": p.name,
                    "connections": r.config.connections,
                    "rate": r.config.rate,
                    "completed": r.completed,
                    "failed": r.failed.total(),
                    "req_per_s": r.requests_per_s,
                    "lat_p50_us": lat.percentiles.p50_us,
                    "lat_p99_us": lat.percentiles.p99_us,
                    "duration_s": r.duration_s,
                    "behind": p.behind(),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_net::load::LoadProtocol;

    #[test]
    fn the_load_is_split_in_whole_connections_and_proportional_rates() {
        let mut c = LoadConfig::new("10.0.0.2:80".parse().unwrap(), LoadProtocol::Http);
        c.connections = 10;
        c.threads = 4;
        c.rate = Some(1000.0);
        c.requests = Some(7);
        let p = split(&c, 3).unwrap();
        assert_eq!(
            p.iter().map(|x| x.connections).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert_eq!(p.iter().map(|x| x.rate.unwrap()).sum::<f64>(), 1000.0);
        assert_eq!(p[0].rate, Some(400.0));
        assert_eq!(
            p.iter().map(|x| x.requests.unwrap()).collect::<Vec<_>>(),
            [3, 2, 2]
        );
        assert_eq!(p[1].threads, 3);
        let e = split(&c, 11).unwrap_err();
        assert!(e.contains("at least one connection per generator"), "{e}");
        c.rate = None;
        assert!(split(&c, 2).unwrap().iter().all(|x| x.rate.is_none()));
    }
}
