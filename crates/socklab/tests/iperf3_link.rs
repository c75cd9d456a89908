//! Debian's real iperf3 client (3.12) against `socklab sink` across socklab's emulated link
//! (issue 27 part 5): the sink runs in the server namespace of `socklab netem --link "rate
//! 100mbit delay 5ms"`, three iperf3 clients at once in the client namespace (`-P 2` and a
//! plain one sending, `-R` receiving). Each client must get a complete result from the sink,
//! no receiver counting more than its sender sent, and the clients of each direction together
//! no more than the link could carry (rate × the clients' window plus slack, and the packets
//! the emulator delivered: physics bounds, not performance figures); the namespaces must be
//! gone afterwards. Needs root (namespaces) and /usr/bin/iperf3; skips, saying so, without
//! either. The other direction (socklab bulk against `iperf3 -s`) crosses the same link.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::iperf3::{have_iperf3, IPERF3};
use common::{root_or_skip, socklab, wait_bounded};

/// The link's rate, bytes per second (`rate 100mbit`).
const RATE_BYTES_PER_S: f64 = 100e6 / 8.0;

fn namespaces_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("sl-{pid}-")))
        .collect()
}

/// The bytes the receiver counted and those the sender sent, after checking the result is
/// complete: no error, every stream has a receiver figure and they add up to
/// `sum_received`, which is positive.
fn received(v: &serde_json::Value, streams: usize, what: &str) -> (u64, u64) {
    assert!(v.get("error").is_none(), "{what}: {}", v["error"]);
    let end = &v["end"];
    let total = end["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(total > 0, "{what}: sum_received {}", end["sum_received"]);
    let per: Vec<u64> = end["streams"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no end.streams: {end}"))
        .iter()
        .map(|s| s["receiver"]["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(per.len(), streams, "{what}: streams {end}");
    assert!(per.iter().all(|&b| b > 0), "{what}: a stream moved nothing");
    assert_eq!(per.iter().sum::<u64>(), total, "{what}: streams vs sum");
    let sent = end["sum_sent"]["bytes"].as_u64().unwrap_or(0);
    (total, sent)
}

/// The packets the emulator delivered in direction `dir` (its accounting on stderr:
/// "  client->server: … N delivered; …").
fn delivered(err: &str, dir: &str) -> u64 {
    let line = err
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{dir}:")) && l.contains(" delivered"))
        .unwrap_or_else(|| panic!("no {dir} accounting in: {err}"));
    let before = line.split(" delivered").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// What `dir`'s delivered packets could carry at most (each one MTU of 1500 bytes).
fn delivered_bytes_bound(err: &str, dir: &str) -> f64 {
    delivered(err, dir) as f64 * 1500.0
}

#[test]
fn iperf3_clients_at_once_across_an_emulated_link_against_one_sink() {
    let name = "iperf3_clients_at_once_across_an_emulated_link_against_one_sink";
    if !root_or_skip(name) || !have_iperf3(name) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        dir.path().join("a.json"),
        dir.path().join("b.json"),
        dir.path().join("c.json"),
    );
    let exe = assert_cmd::cargo::cargo_bin("socklab");
    let server = format!("{} sink --port 5201 --quiet", exe.display());
    let window = dir.path().join("window");
    // The clients at once, between two clock readings (every byte they moved crossed the
    // link between them); the script fails unless each exits 0.
    let script = format!(
        "date +%s.%N > {w}; \
         {IPERF3} -c server -p 5201 -J -t 3 -P 2 > {a} & pa=$!; \
         {IPERF3} -c server -p 5201 -J -t 3 > {c} & pc=$!; \
         {IPERF3} -c server -p 5201 -J -t 3 -R > {b}; rb=$?; \
         wait $pa; ra=$?; wait $pc; rc=$?; date +%s.%N >> {w}; \
         [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ $rc -eq 0 ]",
        w = window.display(),
        a = a.display(),
        b = b.display(),
        c = c.display()
    );
    let mut child = socklab()
        .args([
            "netem",
            "--driver",
            "tun",
            "--link",
            "rate 100mbit delay 5ms",
            "--server",
            &server,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // A hang guard far from a 3 s test: a busy machine slows the namespaces' setup.
    let status = wait_bounded(&mut child, Duration::from_secs(120), "netem + 3 iperf3");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let text = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(
        status.success(),
        "{status}: {err}\nA: {}\nB: {}\nC: {}",
        text(&a),
        text(&b),
        text(&c)
    );
    let parse = |p: &std::path::Path, what: &str| -> serde_json::Value {
        serde_json::from_str(&text(p)).unwrap_or_else(|e| panic!("{what}: {e}: {}", text(p)))
    };
    let va = parse(&a, "client -P 2");
    let vb = parse(&b, "client -R");
    let vc = parse(&c, "client -t 3");
    // Clients A and C send to the sink, which reports what it read; client B receives from
    // the sink and reports what it read itself, the other way along the link.
    let (bytes_a, sent_a) = received(&va, 2, "client -P 2");
    let (bytes_b, sent_b) = received(&vb, 1, "client -R");
    let (bytes_c, sent_c) = received(&vc, 1, "client -t 3");
    assert_eq!(vb["start"]["test_start"]["reverse"], 1, "{}", vb["start"]);
    // Each test's figures are its own: the receiver never counts more than its sender sent
    // (for A and C the sink's count against the client's; for B the client's against the
    // sink's). A sink that counted one test's bytes into another's breaks these.
    assert!(
        bytes_a <= sent_a,
        "A: the sink read {bytes_a} of {sent_a} sent"
    );
    assert!(
        bytes_c <= sent_c,
        "C: the sink read {bytes_c} of {sent_c} sent"
    );
    assert!(
        bytes_b <= sent_b,
        "B: the client read {bytes_b} of {sent_b} sent"
    );
    // Physics: each direction carries at most rate × the clients' window (2 MB of slack for
    // the rate's rounding); A and C share client->server, B has server->client.
    let w: Vec<f64> = text(&window)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let bound = RATE_BYTES_PER_S * (w[1] - w[0]) + 2e6;
    assert!(
        (bytes_a + bytes_c) as f64 <= bound,
        "A + C: {} > {bound} ({w:?})",
        bytes_a + bytes_c
    );
    assert!(bytes_b as f64 <= bound, "B: {bytes_b} > {bound} ({w:?})");
    // And no more than the segments the emulator delivered that way could hold (each at
    // most one 1500-byte MTU).
    let fwd = delivered_bytes_bound(&err, "client->server");
    let back = delivered_bytes_bound(&err, "server->client");
    assert!(
        (bytes_a + bytes_c) as f64 <= fwd,
        "A + C: {} > {fwd}: {err}",
        bytes_a + bytes_c
    );
    assert!(bytes_b as f64 <= back, "B: {bytes_b} > {back}: {err}");
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
}

/// The mean of `metric` in the first cell of a `--json` result.
fn mean(v: &serde_json::Value, metric: &str) -> f64 {
    v["cells"][0]["metrics"][metric]["mean"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {metric} in {}", v["cells"][0]["metrics"]))
}

/// The other direction across the same link: socklab's client (`bulk --to iperf3://`, TCP up,
/// TCP reverse, UDP at a rate) against Debian's unmodified `iperf3 -s` in the server
/// namespace. Each run must finish with the server's own figures stored beside socklab's, the
/// server never counting more than socklab sent, nothing above what the link could carry, and
/// UDP at a fifth of the link's rate delivered whole (an unloaded emulated link drops nothing
/// it has room for); the namespaces must be gone afterwards.
#[test]
fn bulk_against_an_iperf3_server_across_an_emulated_link() {
    let name = "bulk_against_an_iperf3_server_across_an_emulated_link";
    if !root_or_skip(name) || !have_iperf3(name) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = assert_cmd::cargo::cargo_bin("socklab");
    let db = dir.path().join("r.db");
    let (up, down, udp) = (
        dir.path().join("up.json"),
        dir.path().join("down.json"),
        dir.path().join("udp.json"),
    );
    let run = |flags: &str, out: &std::path::Path| {
        format!(
            "{} bulk --to iperf3://server:5201 --reps 2 --warmup 0 --json --db {} {flags} > {}",
            exe.display(),
            db.display(),
            out.display()
        )
    };
    let script = format!(
        "{} && {} && {}",
        run("--duration 2s", &up),
        run("--duration 2s --reverse", &down),
        run("--udp --rate 20M --duration 1s", &udp)
    );
    let mut child = socklab()
        .args([
            "netem",
            "--driver",
            "tun",
            "--link",
            "rate 100mbit delay 5ms",
            "--server",
            &format!("{IPERF3} -s -p 5201"),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // A hang guard far from three 2-repetition runs of 1-2 s.
    let status = wait_bounded(&mut child, Duration::from_secs(180), "netem + bulk x3");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let text = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(status.success(), "{status}: {err}");
    let parse = |p: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&text(p))
            .unwrap_or_else(|e| panic!("{}: {e}: {}", p.display(), text(p)))
    };
    let (vu, vd, vx) = (parse(&up), parse(&down), parse(&udp));
    // Up: socklab's bytes and the server's count beside them; the server never read more
    // than was sent, and socklab's bytes (all acknowledged within its `seconds`) are no more
    // than 100 Mbit/s carries in those seconds (plus 1 MB slack: the means of 2 repetitions).
    let link = |v: &serde_json::Value| RATE_BYTES_PER_S * mean(v, "seconds") + 1e6;
    let (sent, got) = (mean(&vu, "bytes"), mean(&vu, "server_bytes"));
    assert!(
        got > 0.0 && got <= sent,
        "up: the server read {got} of {sent}"
    );
    assert!(
        sent <= link(&vu),
        "up: {sent} bytes over 100 Mbit/s: {}",
        link(&vu)
    );
    // Reverse: socklab read what the server sent, no more.
    let (read, wrote) = (mean(&vd, "bytes"), mean(&vd, "server_bytes"));
    assert!(
        read > 0.0 && read <= wrote,
        "reverse: read {read} of {wrote}"
    );
    assert!(
        read <= link(&vd),
        "reverse: {read} bytes over 100 Mbit/s: {}",
        link(&vd)
    );
    // UDP at 20 Mbit/s over a 100 Mbit/s link: the server's counts are stored beside and
    // nothing is lost.
    assert!(
        mean(&vx, "server_packets") > 0.0,
        "{}",
        vx["cells"][0]["metrics"]
    );
    assert_eq!(
        mean(&vx, "dgrams_lost"),
        0.0,
        "{}",
        vx["cells"][0]["metrics"]
    );
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
}
