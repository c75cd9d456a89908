//! The live `load` workload: a fresh `socklab serve` child per repetition (so its CPU time
//! from `wait4` belongs to this repetition alone), socklab's load generator against it, and
//! the server's own accounting (`STATS` line: per-worker connections, fairness).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use socklab_net::load::{LoadConfig, LoadProtocol, LoadReport};
use socklab_net::server::{Handler, ServeReport};

use crate::live::ServerChild;
use crate::loadspec::{workers, LoadMode, LoadSpec};
use crate::plan::Cell;
use crate::runner::Sample;
use crate::workload::Target;
use crate::LabError;

/// The generator's configuration for `spec` against `to`.
pub fn load_config(spec: &LoadSpec, to: SocketAddr) -> LoadConfig {
    let protocol = match spec.handler {
        Handler::Stevens => LoadProtocol::Stevens,
        Handler::Echo => LoadProtocol::Echo,
        _ => LoadProtocol::Http,
    };
    let mut c = LoadConfig::new(to, protocol);
    c.threads = spec.threads;
    c.timeout = spec.timeout;
    match spec.mode {
        LoadMode::Stevens {
            clients,
            loops,
            bytes,
        } => {
            c.connections = clients;
            c.loops = Some(loops);
            c.bytes = bytes;
            c.new_connection_per_request = true;
            // A bound in time too: a design that stalls must not hang the suite.
            c.duration = Some(Duration::from_secs(600));
        }
        LoadMode::Requests {
            connections,
            duration,
            rate,
            new_connection,
            bytes,
        } => {
            c.connections = connections;
            c.duration = Some(duration);
            c.rate = rate.map(|r| r as f64);
            c.new_connection_per_request = new_connection;
            if bytes > 0 {
                c.bytes = bytes;
            }
        }
    }
    if to.ip().is_loopback() && to.is_ipv4() && c.new_connection_per_request {
        // Connection per request piles up TIME_WAIT on this side: spread the 4-tuples.
        c.source_addrs = 8;
    }
    c
}

/// The `socklab serve` arguments of `spec` (without the address, which the child announces).
pub fn serve_args(spec: &LoadSpec) -> Vec<String> {
    vec![
        "serve".into(),
        "--design".into(),
        spec.design.name().into(),
        "--handler".into(),
        spec.handler.name().into(),
        "--workers".into(),
        workers(spec).to_string(),
        "--body".into(),
        spec.body.to_string(),
    ]
}

/// Runs the generator on its own thread, `stop()` turned into its flag: `None` when stopped.
/// The generator bounds itself (duration, per-request timeout); 60 s past that it has failed.
fn generate(
    cfg: LoadConfig,
    stop: &dyn Fn() -> bool,
) -> Option<Result<LoadReport, socklab_net::NetError>> {
    let limit = cfg.duration.unwrap_or_default() + cfg.timeout + Duration::from_secs(60);
    crate::live::on_thread(
        "load",
        move |flag| socklab_net::load::run(&cfg, flag),
        stop,
        limit,
        // The generator ends its loops within its poll interval.
        Duration::from_secs(10),
    )
    .map(|r| r.unwrap_or_else(|why| Err(socklab_net::NetError::Invalid(why))))
}

/// One repetition of `spec`.
pub fn run_load(
    exe: &PathBuf,
    cell: &Cell,
    spec: &LoadSpec,
    stop: &dyn Fn() -> bool,
) -> Result<Sample, LabError> {
    let run_err = |source| LabError::Run {
        cell: cell.label.clone(),
        source,
    };
    let (server, to) = match spec.to {
        Target::SelfSink => {
            let args = serve_args(spec);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let s = ServerChild::spawn_server(exe, &args)?;
            let a = s.addr();
            (Some(s), a)
        }
        Target::Addr(a) => (None, a),
    };
    let cfg = load_config(spec, to);
    let Some(r) = generate(cfg, stop) else {
        return Err(run_err(socklab_net::NetError::Interrupted));
    };
    let served = match server {
        Some(s) => Some(s.stop_with_usage()?),
        None => None,
    };
    let r = r.map_err(run_err)?;
    if let Some(why) = &r.aborted {
        return Err(run_err(socklab_net::NetError::Invalid(why.clone())));
    }
    let mut metrics: Vec<(&'static str, f64)> = vec![
        ("req_per_s", r.requests_per_s),
        ("conn_per_s", r.connections_per_s),
        ("xfer_mbps", r.transfer_bytes_per_s * 8.0 / 1e6),
        ("errors", r.failed.total() as f64),
        ("connect_mean_us", r.connect.mean_us),
        ("first_byte_mean_us", r.first_byte.mean_us),
        ("gen_cpu_s", r.generator.cpu_user_s + r.generator.cpu_sys_s),
    ];
    // Open loop: latency from the intended send time (coordinated omission corrected).
    let lat = r.response_corrected.as_ref().unwrap_or(&r.response);
    metrics.extend([
        ("lat_mean_us", lat.mean_us),
        ("lat_p50_us", lat.percentiles.p50_us),
        ("lat_p90_us", lat.percentiles.p90_us),
        ("lat_p99_us", lat.percentiles.p99_us),
        ("lat_p999_us", lat.percentiles.p99_9_us),
        ("lat_max_us", lat.max_us),
    ]);
    if r.response_corrected.is_some() {
        metrics.push(("lat_raw_p99_us", r.response.percentiles.p99_us));
    }
    if let Some(lag) = &r.generator.send_lag {
        metrics.push(("gen_lag_p99_us", lag.percentiles.p99_us));
    } else {
        metrics.push(("gen_lag_p99_us", r.generator.loop_busy.percentiles.p99_us));
    }
    let mut extra = json!({
        "to": to.to_string(),
        "completed": r.completed,
        "failed": r.failed,
        "connections_opened": r.connections_opened,
        "duration_s": r.duration_s,
        "generator_warnings": r.generator.warnings,
    });
    if let Some((facts, usage)) = served {
        let cpu = usage.cpu().as_secs_f64();
        let stats: Option<ServeReport> = facts
            .iter()
            .find(|(k, _)| k == "serve_stats")
            .and_then(|(_, v)| serde_json::from_str(v).ok());
        // The server's own counts when it printed them, else the client's.
        let (conns, reqs) = stats
            .as_ref()
            .map_or((r.connections_opened, r.completed), |s| {
                (s.connections(), s.requests())
            });
        metrics.extend([
            ("srv_cpu_s", cpu),
            ("srv_user_s", usage.user.as_secs_f64()),
            ("srv_sys_s", usage.sys.as_secs_f64()),
            ("srv_nvcsw", usage.nvcsw as f64),
            ("srv_nivcsw", usage.nivcsw as f64),
        ]);
        if conns > 0 {
            metrics.push(("cpu_us_per_conn", cpu * 1e6 / conns as f64));
        }
        if reqs > 0 {
            metrics.push(("cpu_us_per_req", cpu * 1e6 / reqs as f64));
        }
        if let Some(s) = &stats {
            if let Some(j) = s.fairness() {
                metrics.push(("fairness", j));
            }
            extra["server"] = json!({
                "design": s.design,
                "workers": s.workers.iter().map(|w| w.connections).collect::<Vec<_>>(),
                "requests": s.requests(),
                "connections": s.connections(),
                "accept_errors": s.accept_errors,
            });
        } else {
            eprintln!(
                "socklab: warning: the server of '{}' printed no STATS line; per-worker counts are missing",
                cell.label
            );
        }
    }
    Ok(Sample {
        metrics,
        extra,
        histograms: Vec::new(),
    })
}
