//! `socklab serve` over loopback with real processes: every classic design answers Stevens
//! clients with the right bytes and HTTP keep-alive GETs, and on SIGINT prints the classic
//! `user time = U, sys time = S` line and per-worker counts that add up to the connections made.

mod common;
mod serve_support;

use common::run;
use serve_support::{for_designs, http10_keepalive, http_keepalive, stevens, Server, CLASSIC};

/// Connections each Stevens test makes (three clients in parallel, then one more).
const STEVENS_CONNECTIONS: u64 = 7;
const STEVENS_COUNTS: &[usize] = &[4000, 16384, 1, 4000];

fn stevens_then_sigint(design: &str) -> Result<(), String> {
    let server = Server::start(design, &["--workers", "3"]);
    let addr = server.addr;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| s.spawn(move || (0..2).try_for_each(|_| stevens(addr, STEVENS_COUNTS))))
            .collect();
        hs.into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|_| Err("client panicked".into())))
    })?;
    stevens(addr, STEVENS_COUNTS)?;
    let st = server.stop();
    if st.code != Some(0) {
        return Err(format!("exit code {:?}: {}", st.code, st.stdout));
    }
    let first = st.stdout.lines().next().unwrap_or("");
    let ok_first = first
        .strip_prefix("user time = ")
        .and_then(|r| r.split_once(", sys time = "))
        .is_some_and(|(u, s)| u.parse::<f64>().is_ok() && s.parse::<f64>().is_ok());
    if !ok_first {
        return Err(format!("first line after LISTENING: {first:?}"));
    }
    if st.connections() != STEVENS_CONNECTIONS {
        return Err(format!(
            "per-worker connections add to {}, want {STEVENS_CONNECTIONS}: {}",
            st.connections(),
            st.stdout
        ));
    }
    let want_req = STEVENS_CONNECTIONS * STEVENS_COUNTS.len() as u64;
    if st.requests() != want_req {
        return Err(format!("requests {} want {want_req}", st.requests()));
    }
    let workers = st.stats["workers"].as_array().map_or(0, |w| w.len());
    let pool = !matches!(design, "iterative" | "fork" | "thread");
    if workers != if pool { 3 } else { 1 } {
        return Err(format!("{workers} worker entries"));
    }
    if pool && !st.stdout.contains("connections per worker:") {
        return Err(format!("no per-worker line: {}", st.stdout));
    }
    Ok(())
}

#[test]
fn every_classic_design_serves_stevens_clients_and_reports_on_sigint() {
    for_designs(CLASSIC, 4, stevens_then_sigint);
}

#[test]
fn every_classic_design_serves_http_keepalive() {
    for_designs(CLASSIC, 4, |design| {
        let server = Server::start(
            design,
            &["--workers", "2", "--handler", "http", "--body", "1K"],
        );
        http_keepalive(server.addr, 3, 1024)?;
        http_keepalive(server.addr, 2, 1024)?;
        let st = server.stop();
        if (st.connections(), st.requests()) != (2, 5) {
            return Err(format!(
                "connections {} requests {}, want 2 and 5",
                st.connections(),
                st.requests()
            ));
        }
        Ok(())
    });
}

/// Issue 16 item 6: `ab -k` (HTTP/1.0 with `Connection: Keep-Alive`) stalled 10 s per
/// connection on every design, because the response kept the connection open without saying
/// `Connection: keep-alive`. Every design, classic and event-driven.
#[test]
fn every_design_answers_http10_keepalive_with_keep_alive() {
    let all: Vec<&str> = CLASSIC
        .iter()
        .copied()
        .chain([
            "epoll",
            "epoll-shared",
            "epoll-exclusive",
            "reuseport",
            "uring",
            "tokio",
        ])
        .collect();
    for_designs(&all, 4, |design| {
        let server = Server::start(
            design,
            &["--workers", "2", "--handler", "http", "--body", "100"],
        );
        http10_keepalive(server.addr, 3, 100)?;
        let st = server.stop();
        if (st.connections(), st.requests()) != (1, 3) {
            return Err(format!(
                "connections {} requests {}, want 1 and 3",
                st.connections(),
                st.requests()
            ));
        }
        Ok(())
    });
}

/// Workers blocked in `read` (idle clients, a half-sent request) and in `accept` must not hold
/// the server up: SIGTERM ends it with the usual report. Their idle timeout is an hour, so a
/// stop that waited for them would run into the stop's hang bound.
#[test]
fn sigterm_stops_every_design_with_workers_blocked_in_read() {
    for_designs(CLASSIC, 4, |design| {
        let server = Server::start(design, &["--workers", "2", "--idle-timeout", "3600s"]);
        stevens(server.addr, &[10])?;
        let idle: Vec<_> = (0..3)
            .map(|_| serve_support::connect(server.addr))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let mut half = serve_support::connect(server.addr).map_err(|e| e.to_string())?;
        std::io::Write::write_all(&mut half, b"40").map_err(|e| e.to_string())?;
        std::thread::sleep(std::time::Duration::from_millis(200));
        let st = server.stop_with(socklab_sys::process::Signal::Term);
        drop((idle, half));
        if st.code != Some(0) || !st.stdout.starts_with("user time = ") {
            return Err(format!("exit {:?}: {}", st.code, st.stdout));
        }
        Ok(())
    });
}

/// A preforked worker killed with SIGKILL (even holding the accept lock or mutex: the fcntl
/// lock dies with it, the mutex is robust) leaves the others serving; the report still comes.
#[test]
fn a_killed_worker_leaves_the_pool_serving() {
    let pools = [
        "prefork-nolock",
        "prefork-flock",
        "prefork-mutex",
        "prefork-fdpass",
    ];
    for_designs(&pools, 4, |design| {
        let server = Server::start(design, &["--workers", "3"]);
        stevens(server.addr, &[10])?;
        // The children are forked after the LISTENING line: wait (at most 5 s) for all three.
        let t0 = std::time::Instant::now();
        let mut kids = serve_support::children_of(server.pid());
        while kids.len() < 3 && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(10));
            kids = serve_support::children_of(server.pid());
        }
        if kids.len() != 3 {
            return Err(format!("{} worker processes, want 3", kids.len()));
        }
        socklab_sys::process::kill(kids[0], socklab_sys::process::Signal::Kill)
            .map_err(|e| e.to_string())?;
        // Wait (at most 5 s) until it is dead (gone, or a zombie not yet reaped).
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(format!("/proc/{}/stat", kids[0])).is_ok_and(|st| {
            st.rsplit_once(')')
                .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
        }) && t0.elapsed() < std::time::Duration::from_secs(5)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        for _ in 0..6 {
            stevens(server.addr, &[4000, 100])?;
        }
        let st = server.stop();
        if st.code != Some(0) || st.connections() != 7 {
            return Err(format!("exit {:?}: {}", st.code, st.stdout));
        }
        Ok(())
    });
}

/// The echo and discard handlers, and the dual-stack default listener reached over IPv6.
#[test]
fn echo_and_discard_handlers_and_ipv6() {
    use std::io::{Read, Write};
    let server = Server::start("prethread-accept", &["--workers", "2", "--handler", "echo"]);
    let mut c = serve_support::connect(server.addr).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let mut back = vec![0u8; data.len()];
    std::thread::scope(|s| {
        let mut w = c.try_clone().unwrap();
        let data = &data;
        s.spawn(move || w.write_all(data).unwrap());
        c.read_exact(&mut back).unwrap();
    });
    assert_eq!(back, data);
    drop(c);
    // `::` listens dual-stack: the same server over IPv6 (where the host has it).
    let v6 = std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, server.addr.port()));
    match serve_support::connect(v6) {
        Ok(mut c) => {
            c.write_all(b"over v6").unwrap();
            let mut got = [0u8; 7];
            c.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"over v6");
        }
        Err(e) => eprintln!("SKIP the IPv6 part: {e}"),
    }
    let st = server.stop();
    assert_eq!(st.requests(), 0, "echo counts no requests");

    let server = Server::start(
        "prefork-nolock",
        &["--workers", "2", "--handler", "discard"],
    );
    let mut c = serve_support::connect(server.addr).unwrap();
    c.write_all(&[7u8; 50_000]).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "discard answers nothing");
    assert_eq!(server.stop().connections(), 1);
}

#[test]
fn bad_values_exit_2_naming_the_value() {
    for (args, needle) in [
        (&["serve", "--design", "prefork-lock"][..], "'prefork-lock'"),
        (&["serve", "--handler", "ftp"], "'ftp'"),
        (&["serve", "--idle-timeout", "0s"], "--idle-timeout"),
        (&["serve", "--nofile", "3"], "--nofile 3"),
        (&["serve", "--workers", "0", "--port", "0"], "--workers 0"),
        (&["serve", "--bind", "localhost"], "'localhost'"),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    }
}

#[test]
fn help_names_every_flag_the_lab_relies_on() {
    let (code, out, _) = run(&["serve", "--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--design",
        "--workers",
        "--handler",
        "--body",
        "--port",
        "--bind",
        "--backlog",
        "--opts",
        "--idle-timeout",
        "--nofile",
        "--announce",
        "--quiet",
        "Examples",
        "prefork-fdpass",
        "[default: prethread-accept]",
        "[default: 10s]",
    ] {
        assert!(out.contains(flag), "{flag} missing from:\n{out}");
    }
}
