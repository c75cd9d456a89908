//! The client role on another host (`--client-host`): the controller starts the server where
//! it runs, then has the client host run the workload's own repetition against that server's
//! address (`socklab hosts rep --kind K --params JSON`, a workload whose `to` is an address
//! runs only its client side), and takes back the [`Sample`] it measured (`SAMPLE {json}`:
//! metrics, facts and histogram buckets, exactly as the store keeps them).

use std::borrow::Cow;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use socklab_sys::process::child_dies_with_parent;

use super::transport::Transport;
use crate::model::params::Params;
use crate::model::sample::{Interval, Sample};
use crate::roles::argv::{Role, RoleArgs};
use crate::LabError;

/// Prefix of the client role's result line.
pub const SAMPLE: &str = "SAMPLE ";

/// A sample as JSON: `{"metrics": [[name, value]…], "extra": …, "histograms": [[name, [[v, n]…]]…],
/// "intervals": [[stream, "up"|"down", start_s, end_s, omitted, [[name, value]…]]…]}`.
pub fn to_json(s: &Sample) -> Value {
    json!({
        "metrics": s.metrics.iter().map(|(n, v)| json!([n, v])).collect::<Vec<_>>(),
        "extra": s.extra,
        "histograms": s.histograms,
        "intervals": s.intervals.iter().map(|i| json!([
            i.stream,
            i.direction.as_str(),
            i.start_s,
            i.end_s,
            i.omitted,
            i.values.iter().map(|(n, v)| json!([n, v])).collect::<Vec<_>>(),
        ])).collect::<Vec<_>>(),
    })
}

/// Histogram names are `'static` in a [`Sample`]: each distinct name is kept once.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.push(n);
    n
}

/// A sample from [`to_json`].
pub fn from_json(v: &Value) -> Result<Sample, String> {
    let bad = |what: &str| format!("a bad sample from the client host: {what}");
    let metrics = v["metrics"]
        .as_array()
        .ok_or_else(|| bad("no metrics"))?
        .iter()
        .map(|m| match (m[0].as_str(), m[1].as_f64()) {
            (Some(n), Some(x)) => Ok((Cow::Owned(n.to_string()), x)),
            // A metric that was not finite (NaN) travels as null; the store drops it too.
            (Some(n), None) => Ok((Cow::Owned(n.to_string()), f64::NAN)),
            _ => Err(bad("a metric")),
        })
        .collect::<Result<_, _>>()?;
    let histograms = match v["histograms"].as_array() {
        None => Vec::new(),
        Some(hs) => hs
            .iter()
            .map(|h| {
                let name = h[0].as_str().ok_or_else(|| bad("a histogram name"))?;
                let buckets: Vec<(u64, u64)> =
                    serde_json::from_value(h[1].clone()).map_err(|_| bad("a histogram"))?;
                Ok((intern(name), buckets))
            })
            .collect::<Result<_, String>>()?,
    };
    let intervals = match v["intervals"].as_array() {
        None => Vec::new(),
        Some(is) => is
            .iter()
            .map(|i| {
                let values = i[5]
                    .as_array()
                    .ok_or_else(|| bad("an interval's values"))?
                    .iter()
                    .map(|m| match (m[0].as_str(), m[1].as_f64()) {
                        (Some(n), x) => Ok((Cow::Owned(n.to_string()), x.unwrap_or(f64::NAN))),
                        _ => Err(bad("an interval's value")),
                    })
                    .collect::<Result<_, String>>()?;
                Ok(Interval {
                    stream: i[0]
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| bad("an interval's stream"))?,
                    direction: i[1]
                        .as_str()
                        .and_then(|d| d.parse().ok())
                        .ok_or_else(|| bad("an interval's direction"))?,
                    start_s: i[2].as_f64().ok_or_else(|| bad("an interval's start"))?,
                    end_s: i[3].as_f64().ok_or_else(|| bad("an interval's end"))?,
                    omitted: i[4]
                        .as_bool()
                        .ok_or_else(|| bad("an interval's omitted flag"))?,
                    values,
                })
            })
            .collect::<Result<_, String>>()?,
    };
    Ok(Sample {
        metrics,
        extra: v["extra"].clone(),
        histograms,
        intervals,
    })
}

/// A host that runs a workload's client side for the controller (`--client-host`): how
/// [`crate::resources::Resources`] reaches it (the role itself is
/// [`crate::roles::remote::rep`]).
pub trait ClientHost {
    /// Runs one repetition of `kind` with `params` there; its sample, or why not
    /// (`Interrupted` when stopped).
    fn run_rep(
        &self,
        kind: &str,
        params: &Params,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError>;
}

impl ClientHost for dyn Transport {
    fn run_rep(
        &self,
        kind: &str,
        params: &Params,
        label: &str,
        stop: &dyn Fn() -> bool,
    ) -> Result<Sample, LabError> {
        run_rep(self, kind, params, label, stop)
    }
}

/// Runs one repetition of `kind` with `params` on the client host of `t`; its sample, or why
/// not (`Interrupted` when stopped).
pub fn run_rep(
    t: &dyn Transport,
    kind: &str,
    params: &Params,
    label: &str,
    stop: &dyn Fn() -> bool,
) -> Result<Sample, LabError> {
    let role = RoleArgs {
        role: Role::Rep {
            kind: kind.to_string(),
            params: params.clone(),
            label: label.to_string(),
        },
        listen: None,
        until_eof: true,
    };
    let mut cmd = t.socklab(&role)?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    child_dies_with_parent(&mut cmd);
    let host = t.name().to_string();
    let mut child = cmd.spawn().map_err(|e| LabError::Host {
        host: host.clone(),
        reason: format!("cannot start the client: {e}"),
    })?;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            let found = BufReader::new(out)
                .lines()
                .map_while(Result::ok)
                .find_map(|l| l.strip_prefix(SAMPLE).map(String::from));
            let _ = tx.send(found);
        });
    }
    let (etx, erx) = mpsc::channel();
    if let Some(err) = child.stderr.take() {
        let name = host.clone();
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
    let mut stopped = false;
    let line = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => break l,
            Err(mpsc::RecvTimeoutError::Disconnected) => break None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !stopped && stop() {
                    // The client stops (its stdin closes) and so does this repetition.
                    stopped = true;
                    drop(child.stdin.take());
                }
            }
        }
    };
    drop(child.stdin.take());
    let _ = child.wait();
    if stopped {
        return Err(LabError::run(label, socklab_net::NetError::Interrupted));
    }
    match line {
        Some(l) => serde_json::from_str(&l)
            .map_err(|e| e.to_string())
            .and_then(|v: Value| from_json(&v))
            .map_err(|e| LabError::Host { host, reason: e }),
        None => {
            let last = erx.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
            let last = last.trim_start_matches("socklab: error: ");
            // The client's own failure (a refused connection, a timeout) is the repetition's.
            Err(LabError::Host {
                host,
                reason: if last.is_empty() {
                    "the client ended without a result: its SSH session or the host was lost".into()
                } else {
                    format!("the client failed: {last}")
                },
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_travels_as_json_unchanged() {
        let mut s = Sample::new(
            [("gbps", 12.5), ("reads", 3.0)],
            json!({"to": "10.0.0.2:5001", "cc": "cubic"}),
        );
        s.push(format!("retx.{}", "large-0"), 2.0);
        s.histograms = vec![("rtt_ns", vec![(1000, 3), (2047, 1)])];
        let back = from_json(&serde_json::from_str(&to_json(&s).to_string()).unwrap()).unwrap();
        assert_eq!(back, s);
        assert!(from_json(&json!({"metrics": [[1, 2]]})).is_err());
        assert!(from_json(&json!({})).unwrap_err().contains("no metrics"));
    }
}
