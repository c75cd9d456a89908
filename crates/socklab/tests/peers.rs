//! Hostile and dead peers, and signals, through the real binary (issue 16, items 7, 9, 10):
//! an idle client does not hold up the sink, a sink that stops reading fails a repetition at
//! its deadline, Ctrl-C acts on a bulk blocked in `write()`, `timeout`'s repeated SIGTERM
//! takes the graceful path, and the command of `socklab netem -- CMD` dies with socklab.
//! Loopback only; every wait is bounded; the namespace test needs root and skips without it.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{root_or_skip, run, socklab, spawn_announced, wait_bounded};

/// A child killed when the test ends, passed or not.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(pid: i64, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), "--", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

/// A "sink" that answers READY and never reads again: the socket buffers fill and the
/// sender's writes block. It holds its connections until the test process ends.
fn sink_that_never_reads() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut line = [0u8; 512];
            let _ = s.read(&mut line);
            let _ = s.write_all(b"READY read_size=131072 rcvbuf=0\n");
            held.push(s);
        }
    });
    addr
}

/// `socklab results list` of `db`: the status of its only experiment, and its sample count.
fn status_and_samples(db: &str) -> (String, u64) {
    let (code, out, err) = run(&["results", "list", "--db", db]);
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("no experiment: {out}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    // id, created, name, status, cells, samples, command…
    (cols[3].to_string(), cols[5].parse().unwrap())
}

/// Item 7: `nc` left open on the sink blocked every `socklab bulk --to` for the idle timeout
/// (30 s; the bulk gave up after 10 s without READY). Now it runs at once beside it: with the
/// sink's idle timeout at an hour, a bulk held up behind the idle client would fail.
#[test]
fn an_idle_client_does_not_hold_up_bulk() {
    let (sink, addr) = spawn_announced(&[
        "sink",
        "--port",
        "0",
        "--announce",
        "--quiet",
        "--idle-timeout",
        "3600s",
    ]);
    let mut sink = KillOnDrop(sink);
    let idle = TcpStream::connect(&addr).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut bulk = socklab()
        .args(["bulk", "--to", &addr, "--duration", "300ms"])
        .args(["--reps", "1", "--warmup", "0", "--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait_bounded(
        &mut bulk,
        Duration::from_secs(90),
        "bulk beside an idle client",
    );
    let mut err = String::new();
    bulk.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(st.success(), "{st:?}: {err}");
    drop(idle);
    signal(sink.0.id() as i64, "TERM");
    let st = wait_bounded(&mut sink.0, Duration::from_secs(30), "sink after SIGTERM");
    assert!(st.success(), "{st:?}");
}

/// Item 9: a sink that stops reading left `socklab bulk --duration 1s` blocked in `write()`
/// for as long as it lived. Now the repetition fails at --duration + 10 s grace, stored with
/// failed = 1 and its reason.
#[test]
fn a_sink_that_stops_reading_fails_the_repetition_after_duration_and_grace() {
    let to = sink_that_never_reads().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let t0 = Instant::now();
    let mut bulk = socklab()
        .args(["bulk", "--to", &to, "--duration", "1s", "--reps", "1"])
        .args(["--warmup", "0", "--db", db])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait_bounded(
        &mut bulk,
        Duration::from_secs(120),
        "bulk against a deaf sink",
    );
    let took = t0.elapsed();
    let mut err = String::new();
    bulk.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(st.code(), Some(1), "{err}");
    // Never before the deadline (load only makes it later; the bound above catches a
    // deadline that never fires).
    assert!(took >= Duration::from_secs(11), "{took:?}");
    assert!(
        err.contains("stored with failed = 1")
            && err.contains("did not end within 11s (--duration 1s + 10s grace)"),
        "{err}"
    );
    assert_eq!(status_and_samples(db), ("done".to_string(), 1));
}

/// Item 9: with the sink stopped, bulk sat in `write()` and ignored SIGINT (`SA_RESTART`
/// restarted the call). Now Ctrl-C ends it: exit 130 (the stall bound would be exit 1).
#[test]
fn ctrl_c_ends_a_bulk_blocked_in_write() {
    let to = sink_that_never_reads().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut bulk = socklab()
        .args([
            "bulk",
            "--to",
            &to,
            "--iterations",
            "1000000",
            "--bufsize",
            "1M",
        ])
        .args(["--reps", "1", "--warmup", "0", "--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Long enough for the socket buffers to fill and the write to block.
    std::thread::sleep(Duration::from_millis(2000));
    assert!(bulk.try_wait().unwrap().is_none(), "ended by itself");
    signal(bulk.id() as i64, "INT");
    let st = wait_bounded(&mut bulk, Duration::from_secs(60), "bulk after SIGINT");
    assert_eq!(st.code(), Some(130), "{st:?}");
}

/// Runs `socklab ARGS --db DB` in its own process group (as `timeout` does), lets it finish
/// some repetitions, then sends SIGTERM to it and, 20 ms later, to its group (as `timeout`
/// does; the gap keeps the two signals from merging into one). The second signal killed
/// socklab on the spot, leaving the experiment `running`.
fn sigterm_twice(args: &[&str], db: &str) {
    let mut child = socklab()
        .args(args)
        .args(["--db", db])
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(child.try_wait().unwrap().is_none(), "ended by itself");
    let pid = child.id() as i64;
    signal(pid, "TERM");
    std::thread::sleep(Duration::from_millis(20));
    signal(-pid, "TERM");
    let st = wait_bounded(&mut child, Duration::from_secs(30), "after two SIGTERMs");
    assert_eq!(st.code(), Some(130), "{args:?}: {st:?}");
    let (status, samples) = status_and_samples(db);
    assert_eq!(status, "interrupted", "{args:?}");
    assert!(
        samples >= 1,
        "{args:?}: finished repetitions are kept: {samples}"
    );
}

/// Item 10: `timeout N socklab bulk …` sends SIGTERM to socklab and then to its process
/// group; the second signal often killed socklab on the spot (exit 124, the experiment left
/// `running`). Both now take the graceful path: exit 130, finished repetitions stored, the
/// experiment marked `interrupted`.
#[test]
fn repeated_sigterm_stops_bulk_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    sigterm_twice(
        &[
            "bulk",
            "--duration",
            "300ms",
            "--reps",
            "100",
            "--warmup",
            "0",
        ],
        db,
    );
    // And under `timeout` itself.
    let db = dir.path().join("t.db");
    let db = db.to_str().unwrap();
    let exe = env!("CARGO_BIN_EXE_socklab");
    let mut t = Command::new("timeout")
        .args(["-s", "TERM", "3", exe, "bulk", "--duration", "300ms"])
        .args(["--reps", "100", "--warmup", "0", "--db", db])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let st = wait_bounded(&mut t, Duration::from_secs(30), "timeout 3 socklab bulk");
    assert_eq!(st.code(), Some(124), "timeout's own code: {st:?}");
    let (status, samples) = status_and_samples(db);
    assert_eq!(status, "interrupted");
    assert!(samples >= 1, "{samples}");
}

/// Item 10, the same for `socklab run` (an experiment file).
#[test]
fn repeated_sigterm_stops_run_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.toml");
    std::fs::write(
        &file,
        "name = \"x\"\nworkload = \"bulk\"\nreps = 100\nwarmup = 0\n[fixed]\nduration = \"300ms\"\n",
    )
    .unwrap();
    let db = dir.path().join("r.db");
    sigterm_twice(&["run", file.to_str().unwrap()], db.to_str().unwrap());
}

/// A third interrupt still ends a process at once, whatever it is doing.
#[test]
fn a_third_interrupt_exits_at_once() {
    let to = sink_that_never_reads().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut bulk = socklab()
        .args([
            "bulk",
            "--to",
            &to,
            "--iterations",
            "1000000",
            "--bufsize",
            "1M",
        ])
        .args(["--reps", "1", "--warmup", "0", "--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    for _ in 0..3 {
        signal(bulk.id() as i64, "TERM");
    }
    let st = wait_bounded(
        &mut bulk,
        Duration::from_secs(30),
        "bulk after three SIGTERMs",
    );
    assert_eq!(st.code(), Some(130), "{st:?}");
}

/// The pids of processes whose command line is exactly `words`.
fn pids_running(words: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = words
        .iter()
        .flat_map(|w| [w.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// Item 10: a SIGKILL of `socklab netem -- CMD` orphaned CMD. CMD now gets the parent-death
/// signal (through `ip netns exec`, which execs it in place); the namespaces are left, as
/// after any SIGKILL, for `socklab netem cleanup`.
#[test]
fn the_command_of_netem_dies_with_socklab_even_by_sigkill() {
    if !root_or_skip("the_command_of_netem_dies_with_socklab_even_by_sigkill") {
        return;
    }
    // A duration no other test uses, to find this very process; it outlives every bound
    // below, so only the parent-death signal can end it in time.
    let cmd = ["sleep", "4242.5"];
    let mut child = socklab()
        .args(["netem", "--driver", "tun", "--"])
        .args(cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while pids_running(&cmd).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(60), "CMD never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    let t0 = Instant::now();
    while !pids_running(&cmd).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "CMD outlived socklab: {:?}",
            pids_running(&cmd)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, out, err) = run(&["netem", "cleanup"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("sl-{pid}-")), "{out}");
}
