//! sockperf across socklab's emulated link, both ways (issue 27 part 5; root): `sockperf pp`
//! against `socklab echo` and `socklab pingpong --to sockperf://` against `sockperf sr`, each
//! server in the server namespace of `socklab netem --link "delay 5ms"`. The round trip both
//! clients see must reflect the link (at least 5 ms each way: a lower bound from the link, not
//! a speed claim), and the namespaces must be gone afterwards. Skipped without root or without
//! /usr/bin/sockperf.

mod common;

use std::fs::File;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{root_or_skip, socklab, wait_bounded};

const SOCKPERF: &str = "/usr/bin/sockperf";
/// Far beyond a 1-second run plus the link's set-up, even with the CPUs loaded.
const BOUND: Duration = Duration::from_secs(120);
/// 5 ms each way.
const LINK: &str = "delay 5ms";
/// The round trip over [`LINK`] cannot be shorter, in microseconds.
const MIN_RTT_US: f64 = 10_000.0;

fn ready(test: &str) -> bool {
    if !root_or_skip(test) {
        return false;
    }
    if Path::new(SOCKPERF).exists() {
        return true;
    }
    socklab_sys::skip::skip(test, "no /usr/bin/sockperf", "apt install sockperf");
    false
}

/// The namespaces of the `socklab netem` run with process id `pid`.
fn namespaces_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("sl-{pid}-")))
        .collect()
}

/// `socklab netem --driver tun --link LINK --server SERVER -- CMD…`, bounded: its exit code,
/// stdout and stderr. Asserts that its namespaces are gone once it has exited.
fn across(server: &str, cmd: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = socklab()
        .args([
            "netem", "--driver", "tun", "--link", LINK, "--server", server, "--",
        ])
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let status = wait_bounded(&mut child, BOUND, "socklab netem");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let (out, err) = (read(&out), read(&err));
    assert!(
        namespaces_of(pid).is_empty(),
        "namespaces left behind: {:?}\n{err}",
        namespaces_of(pid)
    );
    (status.code().unwrap_or(-1), out, err)
}

/// sockperf's `percentile NN.NNN = X` (microseconds) in `out`.
fn sockperf_percentile(out: &str, q: &str) -> f64 {
    let key = format!("percentile {q} =");
    let line = out
        .lines()
        .find(|l| l.contains(&key))
        .unwrap_or_else(|| panic!("no '{key}' in:\n{out}"));
    line.split('=').nth(1).unwrap().trim().parse().unwrap()
}

#[test]
fn sockperf_pp_across_a_delayed_link_sees_the_delay_in_socklab_echos_answers() {
    let test = "sockperf_pp_across_a_delayed_link_sees_the_delay_in_socklab_echos_answers";
    if !ready(test) {
        return;
    }
    let exe = env!("CARGO_BIN_EXE_socklab");
    for tcp in [true, false] {
        let server = format!(
            "{exe} echo --port 11111 -q{}",
            if tcp { "" } else { " --udp" }
        );
        let mut cmd = vec![SOCKPERF, "pp"];
        if tcp {
            cmd.push("--tcp");
        }
        cmd.extend([
            "-i",
            "10.77.0.2",
            "-p",
            "11111",
            "-t",
            "1",
            "-m",
            "64",
            "--full-rtt",
        ]);
        let (code, out, err) = across(&server, &cmd);
        assert_eq!(code, 0, "tcp={tcp}:\n{out}\n{err}");
        let p50 = sockperf_percentile(&out, "50.000");
        assert!(
            p50 >= MIN_RTT_US,
            "tcp={tcp}: sockperf's p50 round trip {p50} us over '{LINK}':\n{out}"
        );
        // The answers were sockperf's own messages, in order.
        assert!(
            out.contains("# duplicated messages = 0; # out-of-order messages = 0"),
            "tcp={tcp}:\n{out}"
        );
    }
}

#[test]
fn pingpong_across_a_delayed_link_sees_the_delay_in_sockperf_srs_answers() {
    let test = "pingpong_across_a_delayed_link_sees_the_delay_in_sockperf_srs_answers";
    if !ready(test) {
        return;
    }
    let exe = env!("CARGO_BIN_EXE_socklab");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("link.db");
    let db = db.to_str().unwrap();
    for tcp in [true, false] {
        let server = format!(
            "exec {SOCKPERF} sr{} -i 10.77.0.2 -p 11111",
            if tcp { " --tcp" } else { "" }
        );
        let mut cmd = vec![
            exe,
            "pingpong",
            "--to",
            "sockperf://server:11111",
            "--count",
            "20",
            "--reps",
            "2",
            "--warmup",
            "0",
            "--json",
            "--db",
            db,
        ];
        if !tcp {
            cmd.push("--udp");
        }
        let (code, out, err) = across(&server, &cmd);
        assert_eq!(code, 0, "tcp={tcp}:\n{out}\n{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let cell = &v["cells"][0];
        assert_eq!(
            cell["config"]["to"].as_str(),
            Some("sockperf://10.77.0.2:11111"),
            "{cell}"
        );
        let p50 = &cell["metrics"]["rtt_p50_us"];
        assert_eq!(p50["n"], 2, "tcp={tcp}: {cell}");
        let least = p50["min"].as_f64().unwrap();
        assert!(
            least >= MIN_RTT_US,
            "tcp={tcp}: socklab's smallest p50 round trip {least} us over '{LINK}': {cell}"
        );
    }
}

/// `netem --server` waits until the server listens in the server namespace. It used to read
/// /proc/PID/net of `ip netns exec` before that had entered the namespace, saw this test's
/// own listener (any TCP listener or UDP socket of the host's namespace) and started the
/// client at once: a server slower to start was refused its first connection.
#[test]
fn netem_waits_for_a_server_slow_to_listen_whatever_listens_outside() {
    if !root_or_skip("netem_waits_for_a_server_slow_to_listen_whatever_listens_outside") {
        return;
    }
    let _tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let _udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let exe = env!("CARGO_BIN_EXE_socklab");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("slow.db");
    // The server takes a second to start, as a loaded machine or a slow program may.
    let server = format!("sleep 1; exec {exe} echo --port 7000 -q");
    let (code, out, err) = across(
        &server,
        &[
            exe,
            "pingpong",
            "--to",
            "server:7000",
            "--count",
            "5",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--db",
            db.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
}
