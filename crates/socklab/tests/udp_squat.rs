//! A local process squats the UDP receiver of a victim's `socklab bulk --udp` (issue 26 item
//! 3): it finds the receiver socklab started (its port, from /proc) and holds fake tests open
//! there while the victim's repetitions run. Every repetition is then measured in full or
//! stored failed with the reason; none is a valid sample of 100 % loss, and the exit status
//! says when some failed. Counts only; every wait is bounded.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use socklab_net::udpbulk::collector::MAX_OPEN;
use socklab_net::udpbulk::wire::Header;

/// The pid of a child of `parent` whose command line has `word`, if one runs.
fn child_with(parent: u32, word: &str) -> Option<u32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …: the comm may hold spaces, the fields after ')' do not.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let has = cmdline.split(|&b| b == 0).any(|a| a == word.as_bytes());
        if ppid == Some(parent) && has {
            return Some(pid);
        }
    }
    None
}

/// The loopback UDP port process `pid` holds a socket on (from its fds and /proc/net/udp).
fn udp_port_of(pid: u32) -> Option<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .filter_map(|f| std::fs::read_link(f.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            l.strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .map(str::to_string)
        })
        .collect();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/udp")).ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (local, inode) = (f.get(1)?, f.get(9)?);
        if !inodes.iter().any(|i| i == inode) {
            return None;
        }
        u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()
    })
}

/// Starts `socklab bulk --udp` into `db`: 6 repetitions of 300 ms at 2 Mbit/s.
fn victim(db: &str) -> Child {
    common::socklab()
        .args([
            "bulk",
            "--udp",
            "--db",
            db,
            "--warmup",
            "0",
            "--reps",
            "6",
            "--rate",
            "2M",
            "--size",
            "1000",
            "--duration",
            "300ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Finds the victim's receiver and squats it from `sockets` sockets until the victim exits:
/// every millisecond two fresh fake tests (so a slot the victim frees is taken again at once),
/// and every 50 ms the last 64 again (kept open: the receiver ends a test idle for 2 s).
/// Returns the victim's exit code and stderr.
fn squat(mut v: Child, sockets: usize) -> (i32, String) {
    let t0 = Instant::now();
    let limit = Duration::from_secs(90);
    let port = loop {
        assert!(t0.elapsed() < limit, "no receiver found");
        if let Some(p) = child_with(v.id(), "sink").and_then(udp_port_of) {
            break p;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let socks: Vec<UdpSocket> = (0..sockets)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let fake = |id: u64, seq: u64| {
        let mut d = [0u8; 100];
        let h = Header {
            test_id: 0xbad0_0000 + id,
            seq,
            send_ns: 1,
            fin: None,
        };
        h.emit(&mut d).unwrap();
        let _ = socks[id as usize % sockets].send_to(&d, to);
    };
    for id in 0..MAX_OPEN as u64 {
        fake(id, 0);
    }
    let mut next = MAX_OPEN as u64;
    let status = loop {
        if let Some(s) = v.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > limit {
            let _ = v.kill();
            panic!("the victim ran past {limit:?}");
        }
        for _ in 0..2 {
            fake(next, 0);
            next += 1;
        }
        if next.is_multiple_of(100) {
            for id in next.saturating_sub(64)..next {
                fake(id, 1);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let out = v.wait_with_output().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every repetition stored in `db`.
fn samples(db: &str) -> Vec<serde_json::Value> {
    let (code, json, err) = common::run(&["results", "export", "--db", db, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    match serde_json::from_str(&json).unwrap() {
        serde_json::Value::Array(v) => v,
        other => panic!("not an array: {other}"),
    }
}

/// Each repetition is failed with a reason, or measured in full (loopback at 2 Mbit/s loses
/// nothing); returns how many failed.
fn none_is_a_silent_total_loss(samples: &[serde_json::Value]) -> usize {
    assert_eq!(samples.len(), 6, "every repetition stored");
    let mut failed = 0;
    for s in samples {
        let m = &s["metrics"];
        if m["failed"].as_f64() == Some(1.0) {
            let why = s["extra"]["error"].as_str().unwrap_or_default();
            assert!(why.contains("refused the test"), "{s}");
            failed += 1;
        } else {
            assert_eq!(m["loss_pct"].as_f64(), Some(0.0), "a valid sample: {s}");
            assert!(m["dgrams_received"].as_f64().unwrap_or(0.0) > 0.0, "{s}");
        }
    }
    failed
}

#[test]
fn a_squatter_on_one_socket_does_not_cost_the_victim_a_repetition() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v.db");
    let db = db.to_str().unwrap();
    let (code, err) = squat(victim(db), 1);
    let failed = none_is_a_silent_total_loss(&samples(db));
    assert_eq!((failed, code), (0, 0), "{err}");
}

#[test]
fn squatters_on_many_sockets_make_repetitions_fail_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v.db");
    let db = db.to_str().unwrap();
    let (code, err) = squat(victim(db), MAX_OPEN);
    let failed = none_is_a_silent_total_loss(&samples(db));
    assert!(
        failed > 0,
        "the table was full for a later repetition: {err}"
    );
    assert_eq!(code, 1, "failed repetitions show in the exit status: {err}");
    assert!(err.contains("refused the test"), "{err}");
}
