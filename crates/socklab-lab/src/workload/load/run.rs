//! One repetition of the load workload: a fresh `socklab serve` child, the generator against
//! it, and the pure mapping of what they report to a [`Sample`].

use super::*;
use crate::roles::argv::Role;

/// The generator's configuration for `spec` against `to`.
pub fn load_config(spec: &LoadSpec, to: SocketAddr) -> LoadConfig {
    let protocol = match spec.handler {
        Handler::Stevens => LoadProtocol::Stevens,
        Handler::Echo => LoadProtocol::Echo,
        _ if spec.options.tls => LoadProtocol::Https,
        _ => LoadProtocol::Http,
    };
    let o = &spec.options;
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
            c.loops = (loops != UNLIMITED_LOOPS).then_some(loops);
            c.bytes = bytes;
            c.new_connection_per_request = true;
            // A bound in time too: a design that stalls must not hang the suite.
            c.duration = Some(o.stevens_duration.unwrap_or(Duration::from_secs(600)));
        }
        LoadMode::Requests {
            connections,
            duration,
            new_connection,
            bytes,
        } => {
            c.connections = connections;
            c.duration = Some(duration);
            c.loops = o.conn_requests;
            c.new_connection_per_request = new_connection;
            if bytes > 0 {
                c.bytes = bytes;
            }
        }
    }
    c.rate = o.rate;
    c.requests = o.requests;
    c.interval = o.interval;
    c.path = o.path.clone();
    c.host = o.host.clone();
    c.tls_trust = o.tls_trust.clone();
    c.tls_resume = o.tls_resume;
    c.source_addrs = match o.source_addrs {
        Some(n) => n,
        // Connection per request piles up TIME_WAIT on this side: spread the 4-tuples.
        None if to.ip().is_loopback() && to.is_ipv4() && c.new_connection_per_request => 8,
        None => 1,
    };
    c
}

/// The `socklab serve` role of `spec` (without the address, which the child announces).
pub fn serve_role(spec: &LoadSpec) -> Role {
    Role::Serve {
        design: spec.design,
        handler: spec.handler,
        workers: workers(spec),
        body: spec.body,
    }
}

/// Runs the generator on its own thread, `stop()` turned into its flag: `None` when stopped
/// (with `keep`: the report of the run up to the stop, if the generator returned it in time).
/// The generator bounds itself (duration, per-request timeout); 60 s past that it has failed.
fn generate(
    cfg: LoadConfig,
    stop: &dyn Fn() -> bool,
    keep: bool,
    live: Option<crate::series::LiveSink>,
) -> Option<Result<LoadReport, socklab_net::NetError>> {
    let limit = cfg.duration.unwrap_or_default() + cfg.timeout + Duration::from_secs(60);
    let live = live.map(|sink| -> socklab_net::load::LiveLoad {
        std::sync::Arc::new(move |i: &socklab_net::load::LoadInterval| {
            sink(&crate::series::load_interval(i))
        })
    });
    let ended = on_thread_until(
        "load",
        move |flag| socklab_net::load::run_live(&cfg, flag, live),
        stop,
        limit,
        // The generator ends its loops within its poll interval.
        Duration::from_secs(10),
    );
    match ended {
        Ok(ThreadEnd::Done(r)) => Some(r),
        Ok(ThreadEnd::Stopped(Some(r @ Ok(_)))) if keep => Some(r),
        Ok(ThreadEnd::Stopped(_)) => None,
        Err(why) => Some(Err(socklab_net::NetError::Invalid(why))),
    }
}

/// One repetition of `spec`.
pub(super) fn run_load(
    res: &mut Resources,
    label: &str,
    spec: &LoadSpec,
    stop: &dyn Fn() -> bool,
) -> Result<Sample, LabError> {
    let run_err = |source| LabError::run(label, source);
    let (server, to) = match spec.to {
        Target::SelfSink => {
            let s = res.spawn(&serve_role(spec), false)?;
            let a = s.addr();
            (Some(s), a)
        }
        Target::Addr(a) => (None, a),
    };
    let cfg = load_config(spec, to);
    let keep = spec.options.keep_partial;
    let gens = match res.generators() {
        Ok(g) => g,
        Err(e) => {
            if let Some(s) = server {
                let _ = s.stop();
            }
            return Err(e);
        }
    };
    if to.ip().is_loopback() && gens.iter().any(|(t, _)| !t.is_local()) {
        if let Some(s) = server {
            let _ = s.stop();
        }
        return Err(LabError::Plan(format!(
            "the server listens on {to} (loopback of this machine): generators on other hosts cannot reach it; give `server_host`, or `to` an address they reach"
        )));
    }
    let mut parts = None;
    let generated = if gens.is_empty() {
        generate(cfg, stop, keep, res.live())
    } else {
        match crate::hosts::generators::run(&gens, &cfg, stop, keep) {
            Ok(Some((r, p))) => {
                parts = Some(p);
                Some(Ok(r))
            }
            Ok(None) => None,
            Err(e) => {
                if let Some(s) = server {
                    let _ = s.stop();
                }
                return Err(e);
            }
        }
    };
    let Some(r) = generated else {
        return Err(run_err(socklab_net::NetError::Interrupted));
    };
    let served = match server {
        Some(s) => Some(s.stop()?),
        None => None,
    };
    let r = r.map_err(run_err)?;
    match &r.aborted {
        Some(why) if !keep => return Err(run_err(socklab_net::NetError::Invalid(why.clone()))),
        _ => {}
    }
    if served.as_ref().is_some_and(|s| s.stats.is_none()) {
        eprintln!(
            "socklab: warning: the server of '{label}' printed no STATS line; per-worker counts are missing"
        );
    }
    let mut s = sample(&r, to, served.as_ref());
    if let Some(p) = &parts {
        s.extra["generators"] = crate::hosts::generators::part_figures(p);
    }
    Ok(s)
}

/// The sample of one load run against `to`, with the self-started server's exit if there was
/// one. The whole report is kept in `extra["report"]` (what `socklab load` prints from the
/// store).
pub fn sample(r: &LoadReport, to: SocketAddr, served: Option<&ServerExit>) -> Sample {
    let mut s = Sample::new(
        [
            ("req_per_s", r.requests_per_s),
            ("conn_per_s", r.connections_per_s),
            ("xfer_mbps", r.transfer_bytes_per_s * 8.0 / 1e6),
            ("errors", r.failed.total() as f64),
            ("gen_cpu_s", r.generator.cpu_user_s + r.generator.cpu_sys_s),
        ],
        json!({
            "to": to.to_string(),
            "completed": r.completed,
            "failed": r.failed,
            "connections_opened": r.connections_opened,
            "duration_s": r.duration_s,
            "generator_warnings": r.generator.warnings,
            "report": r,
        }),
    );
    // A time that nothing measured (no connection made, no response) is no metric: a 0 would
    // read as the fastest run of all.
    if r.connect.count > 0 {
        s.extend([("connect_mean_us", r.connect.mean_us)]);
    }
    if r.first_byte.count > 0 {
        s.extend([("first_byte_mean_us", r.first_byte.mean_us)]);
    }
    // Open loop: latency from the intended send time (coordinated omission corrected).
    let lat = r.response_corrected.as_ref().unwrap_or(&r.response);
    if r.response.count > 0 {
        s.extend([
            ("lat_mean_us", lat.mean_us),
            ("lat_p50_us", lat.percentiles.p50_us),
            ("lat_p90_us", lat.percentiles.p90_us),
            ("lat_p99_us", lat.percentiles.p99_us),
            ("lat_p999_us", lat.percentiles.p99_9_us),
            ("lat_max_us", lat.max_us),
        ]);
        if r.response_corrected.is_some() {
            s.extend([("lat_raw_p99_us", r.response.percentiles.p99_us)]);
        }
    }
    s.intervals = r
        .intervals
        .iter()
        .map(crate::series::load_interval)
        .collect();
    let lag = r
        .generator
        .send_lag
        .as_ref()
        .unwrap_or(&r.generator.loop_busy);
    s.extend([("gen_lag_p99_us", lag.percentiles.p99_us)]);
    let Some(exit) = served else { return s };
    let usage = &exit.usage;
    let cpu = usage.cpu().as_secs_f64();
    // The server's own counts when it printed them, else the client's.
    let (conns, reqs) = exit
        .stats
        .as_ref()
        .map_or((r.connections_opened, r.completed), |st| {
            (st.connections(), st.requests())
        });
    s.extend([
        ("srv_cpu_s", cpu),
        ("srv_user_s", usage.user.as_secs_f64()),
        ("srv_sys_s", usage.sys.as_secs_f64()),
        ("srv_nvcsw", usage.nvcsw as f64),
        ("srv_nivcsw", usage.nivcsw as f64),
    ]);
    if conns > 0 {
        s.extend([("cpu_us_per_conn", cpu * 1e6 / conns as f64)]);
    }
    if reqs > 0 {
        s.extend([("cpu_us_per_req", cpu * 1e6 / reqs as f64)]);
    }
    if let Some(st) = &exit.stats {
        if let Some(j) = st.fairness() {
            s.extend([("fairness", j)]);
        }
        s.extra["server"] = json!({
            "design": st.design,
            "workers": st.workers.iter().map(|w| w.connections).collect::<Vec<_>>(),
            "requests": st.requests(),
            "connections": st.connections(),
            "accept_errors": st.accept_errors,
        });
    }
    s
}
