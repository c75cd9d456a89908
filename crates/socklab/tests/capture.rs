//! `--capture FILE.pcapng` and `--json` of the netem commands, through the real binary. The
//! capture tests build namespaces and need root (they skip with a message otherwise); the
//! JSON shape of `netem check` is also checked over the udp-proxy driver, which needs none.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::{assert_usage_error, root_or_skip, run};
use socklab_link::pcapng::{self, Block};

/// Per (interface name, description): packets, and how many comments carry each word.
type Counts = HashMap<(String, String), HashMap<String, u64>>;

fn count(rows: impl IntoIterator<Item = (String, String, String)>) -> Counts {
    let mut m: Counts = HashMap::new();
    for (name, desc, comment) in rows {
        let c = m.entry((name, desc)).or_default();
        *c.entry("packets".into()).or_default() += 1;
        for w in comment.split(' ').skip(2) {
            let w = w.split('=').next().unwrap_or(w);
            *c.entry(w.to_string()).or_default() += 1;
        }
    }
    m
}

/// The capture read with socklab's own pcapng reader.
fn read_ours(path: &Path) -> Counts {
    let blocks = pcapng::read(&std::fs::read(path).unwrap()).unwrap();
    let mut ifaces = Vec::new();
    let mut rows = Vec::new();
    for b in blocks {
        match b {
            Block::Interface {
                linktype,
                name,
                description,
                tsresol,
                ..
            } => {
                assert_eq!((linktype, tsresol), (101, 9), "raw IP, ns timestamps");
                ifaces.push((name.unwrap(), description.unwrap()));
            }
            Block::Packet {
                iface,
                comment,
                data,
                original_len,
                ..
            } => {
                assert!(data.len() as u32 <= original_len && data[0] >> 4 == 4);
                // With TSO the kernel hands over 64 KiB super-packets; the model (and so the
                // capture) sees the MTU-sized segments of the wire.
                assert!(
                    original_len <= 1500,
                    "a packet of {original_len} B entered the model"
                );
                let (n, d) = ifaces[iface as usize].clone();
                rows.push((n, d, comment.unwrap()));
            }
            _ => {}
        }
    }
    count(rows)
}

/// The capture read by tshark. A missing tshark is a failure, not a quiet fallback to
/// socklab's own reader: the capture tests run as root, where tshark can be installed.
fn read_tshark(path: &Path) -> Counts {
    let o = Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-T",
            "fields",
            "-E",
            "separator=\t",
        ])
        .args([
            "-e",
            "frame.interface_name",
            "-e",
            "frame.interface_description",
        ])
        .args(["-e", "frame.comment"])
        .output()
        .expect("tshark: apt-get install tshark (scripts/test installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    count(text.lines().map(|l| {
        let mut f = l.splitn(3, '\t');
        (
            f.next().unwrap_or("").to_string(),
            f.next().unwrap_or("").to_string(),
            f.next().unwrap_or("").to_string(),
        )
    }))
}

/// The window of `dir` whose description contains `label`.
fn window<'a>(c: &'a Counts, dir: &str, label: &str) -> &'a HashMap<String, u64> {
    let found: Vec<_> = c
        .iter()
        .filter(|((n, d), _)| n == dir && d.contains(label))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {dir} window '{label}' in {:?}",
        c.keys()
    );
    found[0].1
}

fn get(m: &HashMap<String, u64>, k: &str) -> u64 {
    m.get(k).copied().unwrap_or(0)
}

#[test]
fn capture_comments_equal_the_emulators_stored_counts() {
    if !root_or_skip("capture_comments_equal_the_emulators_stored_counts") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let cap = dir.path().join("link.pcapng");
    let (code, out, err) = run(&[
        "bulk",
        "--link",
        "loss 10% duplicate 5%",
        "--driver",
        "tun",
        "--duration",
        "1s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--capture",
        cap.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("capture: ") && err.contains("link.pcapng"),
        "{err}"
    );
    let (_, json, _) = run(&["results", "export", "--json", "--db", db.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let m = &v[0]["metrics"];
    let stored = |k: &str| m[k].as_f64().unwrap_or_else(|| panic!("{k} in {m}")) as u64;
    let mut readers = vec![("socklab's reader", read_ours(&cap))];
    readers.push(("tshark", read_tshark(&cap)));
    for (who, counts) in &readers {
        for (d, key) in [("c2s", "fwd"), ("s2c", "back")] {
            let w = window(counts, d, "cell 1 rep 1");
            assert_eq!(
                get(w, "packets"),
                stored(&format!("link_{key}_in")),
                "{who} {d}"
            );
            assert_eq!(
                get(w, "dropped"),
                stored(&format!("link_{key}_dropped")),
                "{who} {d}"
            );
            assert_eq!(
                get(w, "duplicated"),
                stored(&format!("link_{key}_duplicated")),
                "{who} {d}"
            );
        }
        let fwd = window(counts, "c2s", "cell 1 rep 1");
        assert!(
            get(fwd, "dropped") > 10 && get(fwd, "duplicated") > 3,
            "{who}: {fwd:?}"
        );
        // Every delivered copy says how long it was queued (no delay: 0 ns).
        assert!(get(fwd, "queued_ns") >= get(fwd, "packets") - get(fwd, "dropped"));
    }
    assert!(stored("emu_cpu_ns_per_packet") > 0, "{m}");
}

/// A queue discipline that marks and drops at dequeue: the capture's `aqm-dropped` and
/// `aqm-marked` words (taken from the model's own events, at the instant of the decision)
/// equal the stored counts exactly, in both directions.
#[test]
fn capture_aqm_drops_and_marks_equal_the_stored_counts() {
    if !root_or_skip("capture_aqm_drops_and_marks_equal_the_stored_counts") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let cap = dir.path().join("aqm.pcapng");
    // A cubic flow (ECN negotiated: the link's namespaces set tcp_ecn = 1) fills the 20 Mbit/s
    // bottleneck; CoDel marks its data segments and drops what is not ECN-capable.
    let (code, out, err) = run(&[
        "bulk",
        "--link",
        "rate 20mbit limit 100 aqm codel ecn",
        "--driver",
        "tun",
        "--cc",
        "cubic",
        "--duration",
        "2s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--capture",
        cap.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (_, json, _) = run(&["results", "export", "--json", "--db", db.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let m = &v[0]["metrics"];
    let stored = |k: &str| m[k].as_f64().unwrap_or_else(|| panic!("{k} in {m}")) as u64;
    let mut readers = vec![("socklab's reader", read_ours(&cap))];
    readers.push(("tshark", read_tshark(&cap)));
    for (who, counts) in &readers {
        for (d, key) in [("c2s", "fwd"), ("s2c", "back")] {
            let w = window(counts, d, "cell 1 rep 1");
            for (word, metric) in [
                ("packets", "in"),
                ("aqm-dropped", "aqm_dropped"),
                ("aqm-marked", "aqm_marked"),
                ("queue-dropped", "queue_dropped"),
            ] {
                assert_eq!(
                    get(w, word),
                    stored(&format!("link_{key}_{metric}")),
                    "{who} {d} {word}"
                );
            }
            // Each drop and mark carries the sojourn it was decided on.
            assert_eq!(
                get(w, "sojourn_ns"),
                get(w, "aqm-dropped") + get(w, "aqm-marked"),
                "{who} {d}"
            );
        }
        let fwd = window(counts, "c2s", "cell 1 rep 1");
        // The flow negotiated ECN and CoDel acted on it: marks, and each mark left as CE.
        assert!(get(fwd, "aqm-marked") > 0, "{who}: {fwd:?}");
        assert!(
            get(fwd, "ecn-ce") >= get(fwd, "aqm-marked"),
            "{who}: {fwd:?}"
        );
        // Packets waited at the bottleneck, and said so.
        assert!(get(fwd, "qdelay_ns") > 100, "{who}: {fwd:?}");
    }
}

#[test]
fn netem_check_json_and_capture_agree_per_probe() {
    if !root_or_skip("netem_check_json_and_capture_agree_per_probe") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("check.pcapng");
    let (code, out, err) = run(&[
        "netem",
        "check",
        "--driver",
        "tun",
        "--link",
        "loss 10% duplicate 5%",
        "--packets",
        "2000",
        "--json",
        "--capture",
        cap.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["link"]["driver"], "tun");
    assert_eq!(v["capture"]["not_captured_behind"], 0);
    let counts = read_ours(&cap);
    for (i, (d, title)) in [("c2s", "client -> server"), ("s2c", "server -> client")]
        .into_iter()
        .enumerate()
    {
        let dj = &v["directions"][i];
        let em = if i == 0 {
            &dj["emulator"]["forward"]
        } else {
            &dj["emulator"]["backward"]
        };
        let w = window(&counts, d, &format!("{title} probe"));
        assert_eq!(get(w, "packets"), em["packets_in"].as_u64().unwrap(), "{d}");
        assert_eq!(get(w, "dropped"), em["dropped"].as_u64().unwrap(), "{d}");
        assert_eq!(
            get(w, "duplicated"),
            em["duplicated"].as_u64().unwrap(),
            "{d}"
        );
        // Every probe reached the model or was counted as dropped by the kernel in front of it
        // (a busy machine: the emulator's thread was not scheduled in time to read it).
        let reached = em["packets_in"].as_u64().unwrap() + em["kernel_drops"].as_u64().unwrap();
        assert!(reached >= 2000, "{dj}");
        assert!(dj["emulator"]["cpu_ns_per_packet"].as_f64().unwrap() > 0.0);
    }
}

/// `netem check --json` over the udp-proxy driver (no root): the documented shape.
#[test]
fn netem_check_json_has_the_documented_shape() {
    let (code, out, err) = run(&[
        "netem",
        "check",
        "--driver",
        "udp-proxy",
        "--link",
        "loss 5%",
        "--packets",
        "1000",
        "--json",
    ]);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["link"]["driver"], "udp-proxy");
    assert_eq!(v["link"]["link"], "loss 5%");
    assert_eq!(v["packets"], 1000);
    assert_eq!(v["size"], 200);
    assert_eq!(v["ok"].as_bool(), Some(code == 0));
    assert!(v["capture"].is_null());
    let d = &v["directions"][0];
    assert_eq!(d["direction"], "client->server");
    assert_eq!(d["probe"]["sent"], 1000);
    let rows = d["rows"].as_array().unwrap();
    assert_eq!(rows[0]["what"], "lost");
    assert!(["ok", "differs"].contains(&rows[0]["verdict"].as_str().unwrap()));
    for k in ["configured", "measured"] {
        assert!(rows[0][k].is_string());
    }
    let fwd = &d["emulator"]["forward"];
    assert_eq!(fwd["packets_in"], 1000);
    let lost = fwd["dropped"].as_u64().unwrap();
    assert!((10..=120).contains(&lost), "{fwd}");
    assert_eq!(
        d["probe"]["unique"].as_u64().unwrap(),
        1000 - lost,
        "what arrived is what the model did not drop"
    );
    assert!(d["probe"]["delay_ns"]["p50"].is_number());
}

#[test]
fn netem_list_and_cleanup_speak_json() {
    let (code, out, err) = run(&["netem", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.is_array(), "{out}");
    if !root_or_skip("netem_list_and_cleanup_speak_json (cleanup)") {
        return;
    }
    let (code, out, err) = run(&["netem", "cleanup", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for k in [
        "removed_namespaces",
        "removed_interfaces",
        "removed_files",
        "kept",
    ] {
        assert!(v[k].is_array(), "{k}: {out}");
    }
}

#[test]
fn bad_capture_flags_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("x.pcapng");
    let cap = cap.to_str().unwrap();
    assert_usage_error(&["bulk", "--capture", cap], &["--capture", "--link"]);
    assert_usage_error(
        &["bulk", "--link", "loss 1%", "--capture", "x.pcap"],
        &["x.pcap", "FILE.pcapng"],
    );
    assert_usage_error(
        &[
            "pingpong",
            "--link",
            "none",
            "--capture",
            cap,
            "--capture-snaplen",
            "10",
        ],
        &["--capture-snaplen 10", "20"],
    );
    assert_usage_error(
        &[
            "transfer",
            "--link",
            "none",
            "--capture",
            cap,
            "--capture-limit",
            "1K",
        ],
        &["--capture-limit 1K", "128K"],
    );
    assert_usage_error(
        &[
            "pingpong",
            "--udp",
            "--link",
            "none",
            "--driver",
            "udp-proxy",
            "--capture",
            cap,
        ],
        &["--driver tun", "udp-proxy"],
    );
    assert_usage_error(
        &["netem", "check", "--driver", "udp-proxy", "--capture", cap],
        &["--driver tun"],
    );
    assert!(!Path::new(cap).exists(), "no file for a refused command");
    // An existing file or a link is refused before anything runs (no root needed).
    let old = dir.path().join("old.pcapng");
    std::fs::write(&old, b"keep").unwrap();
    let link = dir.path().join("l.pcapng");
    std::os::unix::fs::symlink(&old, &link).unwrap();
    let (old_s, link_s) = (old.to_str().unwrap(), link.to_str().unwrap());
    assert_usage_error(
        &["bulk", "--link", "none", "--capture", old_s],
        &[old_s, "--capture-force"],
    );
    assert_usage_error(
        &["bulk", "--link", "none", "--capture", link_s],
        &[link_s, "symbolic link"],
    );
    assert_usage_error(
        &[
            "pingpong",
            "--link",
            "none",
            "--capture",
            link_s,
            "--capture-force",
        ],
        &[link_s, "symbolic link"],
    );
    assert_eq!(std::fs::read(&old).unwrap(), b"keep");
}

/// Issue 26 item 4: `--capture` never follows a planted link nor overwrites a file;
/// `--capture-force` replaces a regular file only.
#[test]
fn capture_refuses_links_and_existing_files() {
    if !root_or_skip("capture_refuses_links_and_existing_files") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.pcapng");
    std::fs::write(&victim, b"precious").unwrap();
    let link = dir.path().join("link.pcapng");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let check = |cap: &Path, force: bool| {
        let mut a = vec![
            "netem",
            "check",
            "--driver",
            "tun",
            "--link",
            "none",
            "--packets",
            "200",
            "--capture",
            cap.to_str().unwrap(),
        ];
        if force {
            a.push("--capture-force");
        }
        run(&a)
    };
    for force in [false, true] {
        let (code, _, err) = check(&link, force);
        assert_ne!(code, 0, "{err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(
            err.contains("symbolic link") && err.contains("link.pcapng"),
            "{err}"
        );
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }
    let (code, _, err) = check(&victim, false);
    assert_ne!(code, 0, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("--capture-force") && err.contains("victim.pcapng"),
        "{err}"
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let (code, out, err) = check(&victim, true);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    assert!(pcapng::read(&std::fs::read(&victim).unwrap()).is_ok());
}
