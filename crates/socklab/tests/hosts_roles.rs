//! Server roles on another host: bulk and pingpong (and the load workload's fresh server per
//! repetition) with `--server-host`, against real sshd hosts in network namespaces (see
//! `hosts_support`); the faults: a host lost mid-run, an unreachable host, a role that cannot
//! bind, the controller killed. Root only; they skip with a message elsewhere.

mod hosts_support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use hosts_support::Lab;

/// `results show --json` and `results export --format json` of the newest experiment.
fn stored(lab: &Lab, db: &str) -> (serde_json::Value, Vec<serde_json::Value>) {
    let o = lab
        .in_ctl(&lab.bin)
        .args(["results", "show", "--json", "--db", db])
        .output()
        .unwrap();
    let show: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = lab
        .in_ctl(&lab.bin)
        .args(["results", "export", "--format", "json", "--db", db])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (show, rows.as_array().unwrap().clone())
}

fn fact<'a>(show: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    show["facts"][key].as_str()
}

/// Waits (bounded) until no socklab role runs on host `i`.
fn no_roles_left(lab: &Lab, i: usize, within: Duration) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let left = lab.socklab_in(i);
        if left.is_empty() || t0.elapsed() > within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (at most 60 s: a bound on a hang) until a socklab sink runs in host `i`'s namespace.
fn wait_for_sink(lab: &Lab, i: usize) {
    let t0 = Instant::now();
    while lab.socklab_in(i).iter().all(|c| !c.contains(" sink ")) {
        assert!(t0.elapsed() < Duration::from_secs(60), "no sink started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bulk_and_pingpong_run_their_server_on_another_host() {
    let Some(lab) = Lab::new("bulk_and_pingpong_run_their_server_on_another_host", 1) else {
        return;
    };
    let db = lab.dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (code, out, err) = lab.run(&[
        "bulk",
        "--server-host",
        "h1",
        "--duration",
        "300ms",
        "--bufsize",
        "16K,64K",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{out}\n{err}\n{}", lab.sshd_log("h1"));
    let (show, rows) = stored(&lab, db);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["extra"]["hosts"]["server"], "h1", "{r}");
        assert_eq!(r["extra"]["hosts"]["client"], "local", "{r}");
        assert!(
            r["extra"]["to"].as_str().unwrap().starts_with("10.80.0.2:"),
            "the traffic goes straight to the host: {r}"
        );
        assert!(r["metrics"]["gbps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["metrics"]["rcv_sys_s"].is_number(), "{r}");
    }
    // Both ends' host facts, and the remote sink's own rusage (USAGE, not wait4).
    assert_eq!(fact(&show, "host[server h1]_addr"), Some("10.80.0.2"));
    assert!(fact(&show, "host[server h1]_kernel").is_some(), "{show}");
    assert!(fact(&show, "host[server h1]_clock_offset_s").is_some());
    assert!(fact(&show, "host[client local]_kernel").is_some(), "{show}");
    assert_eq!(fact(&show, "sink_exit"), Some("Code(0)"), "{show}");
    let cpu: f64 = fact(&show, "sink_wait4_sys_s").unwrap().parse().unwrap();
    assert!(cpu > 0.0, "the remote sink reported its CPU: {show}");
    assert!(no_roles_left(&lab, 0, Duration::from_secs(30)).is_empty());

    let (code, out, err) = lab.run(&[
        "pingpong",
        "--server-host",
        "h1",
        "--opts",
        "baseline,nodelay",
        "--count",
        "50",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (show, rows) = stored(&lab, db);
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r["extra"]["hosts"]["server"] == "h1"));
    assert!(rows
        .iter()
        .all(|r| r["metrics"]["rtt_p50_us"].as_f64().unwrap() > 0.0));
    // The echo servers' effective options came back over the line protocol.
    assert_eq!(
        fact(&show, "echo[nodelay]_effective_opts").map(|s| s.contains("nodelay=1")),
        Some(true),
        "{show}"
    );
    assert!(no_roles_left(&lab, 0, Duration::from_secs(30)).is_empty());
}

#[test]
fn a_fresh_server_per_repetition_runs_on_the_server_host() {
    let Some(lab) = Lab::new("a_fresh_server_per_repetition_runs_on_the_server_host", 1) else {
        return;
    };
    let file = lab.dir.path().join("designs.toml");
    std::fs::write(
        &file,
        "name = \"remote-designs\"\nworkload = \"load\"\nreps = 2\nwarmup = 0\n\n[fixed]\nhandler = \"stevens\"\nclients = 4\nloops = 50\nbytes = 100\nworkers = 2\n\n[matrix]\ndesign = [\"iterative\", \"prefork-flock\"]\n",
    )
    .unwrap();
    let db = lab.dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (code, out, err) = lab.run(&[
        "run",
        file.to_str().unwrap(),
        "--server-host",
        "h1",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (_, rows) = stored(&lab, db);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["extra"]["hosts"]["server"], "h1");
        // The server's CPU of this repetition alone, reported by the remote serve (USAGE),
        // and its own per-worker accounting (STATS).
        assert!(r["metrics"]["srv_cpu_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["extra"]["server"]["connections"].as_u64().unwrap() >= 200,
            "{r}"
        );
    }
    assert!(no_roles_left(&lab, 0, Duration::from_secs(30)).is_empty());
}

#[test]
fn a_host_lost_mid_run_fails_its_repetition_and_the_others_go_on() {
    let Some(lab) = Lab::new(
        "a_host_lost_mid_run_fails_its_repetition_and_the_others_go_on",
        1,
    ) else {
        return;
    };
    let db = lab.dir.path().join("r.db");
    let db_s = db.to_str().unwrap().to_string();
    let child = lab
        .socklab(&[
            "bulk",
            "--server-host",
            "h1",
            "--duration",
            "1s",
            "--reps",
            "4",
            "--warmup",
            "0",
            "--db",
            &db_s,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-run: the sink runs on the host; kill its sshd session (the connection dies).
    wait_for_sink(&lab, 0);
    std::thread::sleep(Duration::from_millis(1300));
    lab.kill_sessions(0);
    // The remote role dies with its session (a sink finishes the stream it is reading first).
    let left = no_roles_left(&lab, 0, Duration::from_secs(30));
    assert!(left.is_empty(), "orphans on the host: {left:?}");
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // Some repetition failed and is stored with its reason; the others ran (the connection
    // was made again).
    assert_eq!(o.status.code(), Some(1), "{err}");
    let (_, rows) = stored(&lab, &db_s);
    assert_eq!(rows.len(), 4, "{err}");
    let failed: Vec<_> = rows
        .iter()
        .filter(|r| r["metrics"]["failed"].as_f64() == Some(1.0))
        .collect();
    assert!(!failed.is_empty(), "{rows:?}");
    assert!(failed.len() < 4, "later repetitions ran again: {rows:?}");
    assert!(
        failed[0]["extra"]["error"]
            .as_str()
            .unwrap()
            .contains("host h1: the sink role ended during this repetition"),
        "{failed:?}"
    );
    let ok = rows
        .iter()
        .filter(|r| r["metrics"]["gbps"].is_number())
        .count();
    assert!(ok >= 1, "{rows:?}");
    assert!(no_roles_left(&lab, 0, Duration::from_secs(30)).is_empty());
}

#[test]
fn unreachable_hosts_and_roles_that_cannot_bind_fail_their_repetitions() {
    let Some(lab) = Lab::new(
        "unreachable_hosts_and_roles_that_cannot_bind_fail_their_repetitions",
        1,
    ) else {
        return;
    };
    let db = lab.dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (code, _, err) = lab.run(&[
        "pingpong",
        "--server-host",
        "nowhere",
        "--count",
        "10",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(code, 1, "{err}");
    let last = err.lines().last().unwrap();
    assert!(last.contains("2 repetition(s)"), "{err}");
    assert!(
        last.contains("host nowhere: cannot connect over SSH"),
        "{err}"
    );
    let (_, rows) = stored(&lab, db);
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["extra"]["error"]
        .as_str()
        .unwrap()
        .contains("cannot connect over SSH")));
    // An address that is not the host's: the role cannot bind it, and says so.
    let (code, _, err) = lab.run(&[
        "bulk",
        "--server-host",
        "h1",
        "--server-addr",
        "10.80.0.77",
        "--duration",
        "200ms",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(code, 1, "{err}");
    let last = err.lines().last().unwrap();
    assert!(last.contains("host h1"), "{err}");
    assert!(last.contains("10.80.0.77"), "{err}");
    assert!(last.contains("Cannot assign requested address"), "{err}");
}

#[test]
fn the_roles_die_with_a_killed_controller_and_stop_on_ctrl_c() {
    let Some(lab) = Lab::new(
        "the_roles_die_with_a_killed_controller_and_stop_on_ctrl_c",
        1,
    ) else {
        return;
    };
    let db = lab.dir.path().join("r.db");
    let db_s = db.to_str().unwrap().to_string();
    for signal in ["-KILL", "-INT"] {
        let child = lab
            .socklab(&[
                "bulk",
                "--server-host",
                "h1",
                // Repetitions far longer than the bound below: a role that outlived its
                // controller would still be there at the bound (no timing threshold needed).
                "--duration",
                "120s",
                "--reps",
                "5",
                "--warmup",
                "0",
                "--db",
                &db_s,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_sink(&lab, 0);
        std::thread::sleep(Duration::from_millis(500));
        std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        let left = no_roles_left(&lab, 0, Duration::from_secs(60));
        assert!(
            left.is_empty(),
            "{signal}: roles left on the host: {left:?}"
        );
        let o = child.wait_with_output().unwrap();
        if signal == "-INT" {
            assert_eq!(
                o.status.code(),
                Some(130),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}

#[test]
fn transfers_land_on_the_server_host_and_its_directory_goes() {
    let Some(lab) = Lab::new(
        "transfers_land_on_the_server_host_and_its_directory_goes",
        1,
    ) else {
        return;
    };
    let db = lab.dir.path().join("r.db");
    let db = db.to_str().unwrap().to_string();
    let child = lab
        .socklab(&[
            "transfer",
            "--proto",
            "tcp,rudp",
            "--workload",
            "custom",
            "--file-sizes",
            "300K,10K",
            "--server-host",
            "h1",
            "--reps",
            "2",
            "--warmup",
            "0",
            "--db",
            &db,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let (_, rows) = stored(&lab, &db);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["extra"]["hosts"]["server"], "h1");
        assert_eq!(r["metrics"]["failed"], 0.0, "{r}");
        assert!(r["metrics"]["goodput_mbps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["extra"]["to"].as_str().unwrap().starts_with("10.80.0.2:"),
            "{r}"
        );
    }
    // The receiving directories the roles made on the host are gone.
    let left: Vec<_> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("socklab-rx-{pid}-"))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn load_from_two_generators_merges_their_histograms_and_keeps_each() {
    let Some(lab) = Lab::new(
        "load_from_two_generators_merges_their_histograms_and_keeps_each",
        2,
    ) else {
        return;
    };
    // A server somebody started on h1 (the test), two generators: h2 and the controller.
    let mut server = std::process::Command::new("ip")
        .args(["netns", "exec", &lab.hosts[0].ns])
        .arg(&lab.bin)
        .args([
            "serve",
            "--design",
            "epoll",
            "--handler",
            "http",
            "--bind",
            "10.80.0.2",
            "--port",
            "8080",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let db = lab.dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (code, out, err) = lab.run(&[
        "load",
        "--to",
        "10.80.0.2:8080",
        "--generators",
        "h2,local",
        "--connections",
        "6",
        "--rate",
        "400",
        "--duration",
        "1s",
        "--json",
        "--db",
        db,
    ]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{out}\n{err}");
    let merged: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (show, rows) = stored(&lab, db);
    assert_eq!(rows.len(), 1);
    let gens = rows[0]["extra"]["generators"].as_array().unwrap().clone();
    assert_eq!(gens.len(), 2, "{gens:?}");
    assert_eq!(gens[0]["host"], "h2");
    assert_eq!(gens[1]["host"], "local");
    assert_eq!(gens[0]["connections"], 3);
    assert_eq!(gens[0]["rate"], 200.0);
    // Counts are summed; each generator did its share.
    let sum: u64 = gens.iter().map(|g| g["completed"].as_u64().unwrap()).sum();
    assert_eq!(merged["completed"].as_u64().unwrap(), sum, "{merged}");
    assert!(
        gens.iter().all(|g| g["completed"].as_u64().unwrap() > 100),
        "{gens:?}"
    );
    // The merged percentiles lie within the generators' (a merge of the histograms, not
    // an average of percentiles, which this cannot tell apart; the unit tests do).
    let p99 = merged["response_corrected"]["percentiles"]["p99_us"]
        .as_f64()
        .unwrap();
    let lo = gens
        .iter()
        .map(|g| g["lat_p99_us"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    let hi = gens
        .iter()
        .map(|g| g["lat_p99_us"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        p99 >= lo * 0.99 && p99 <= hi * 1.01,
        "{p99} not in {lo}..{hi}"
    );
    assert_eq!(
        rows[0]["extra"]["hosts"]["generators"],
        serde_json::json!(["h2", "local"])
    );
    assert!(
        fact(&show, "host[generator h2]_clock_offset_s").is_some(),
        "{show}"
    );
    assert!(
        fact(&show, "host[generator local]_kernel").is_some(),
        "{show}"
    );
    assert!(no_roles_left(&lab, 1, Duration::from_secs(30)).is_empty());
}

#[test]
fn the_controller_can_be_a_third_machine_and_files_name_their_hosts() {
    let Some(lab) = Lab::new(
        "the_controller_can_be_a_third_machine_and_files_name_their_hosts",
        2,
    ) else {
        return;
    };
    let db = lab.dir.path().join("r.db");
    let db = db.to_str().unwrap();
    // The server on h1, the client on h2, the controller on neither.
    let (code, out, err) = lab.run(&[
        "pingpong",
        "--server-host",
        "h1",
        "--client-host",
        "h2",
        "--opts",
        "baseline,nodelay",
        "--count",
        "50",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (show, rows) = stored(&lab, db);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["extra"]["hosts"]["server"], "h1", "{r}");
        assert_eq!(r["extra"]["hosts"]["client"], "h2", "{r}");
        assert!(
            r["extra"]["to"].as_str().unwrap().starts_with("10.80.0.2:"),
            "{r}"
        );
        assert!(r["metrics"]["rtt_p50_us"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(fact(&show, "host[server h1]_kernel").is_some(), "{show}");
    assert_eq!(
        fact(&show, "host[client h2]_addr"),
        Some("10.80.0.3"),
        "{show}"
    );
    assert!(fact(&show, "host[client local]_kernel").is_none(), "{show}");
    // The report shows both ends' facts.
    let report = lab.dir.path().join("report");
    let o = lab
        .in_ctl(&lab.bin)
        .args(["report", "--db", db, "--out", report.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("host (server h1): kernel"), "{md}");
    assert!(md.contains("host (client h2): kernel"), "{md}");
    assert!(no_roles_left(&lab, 1, Duration::from_secs(30)).is_empty());

    // An experiment file with [hosts]: the designs' load from two generators.
    let file = lab.dir.path().join("designs.toml");
    std::fs::write(
        &file,
        "name = \"remote-designs\"\nworkload = \"load\"\nreps = 2\nwarmup = 0\n\n[hosts]\nserver = \"h1\"\ngenerators = [\"h2\", \"local\"]\n\n[fixed]\nhandler = \"http\"\nconnections = 4\nduration = \"1s\"\n\n[matrix]\ndesign = [\"epoll\", \"thread\"]\n",
    )
    .unwrap();
    let (code, out, err) = lab.run(&["run", file.to_str().unwrap(), "--db", db]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (show, rows) = stored(&lab, db);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["extra"]["hosts"]["server"], "h1");
        assert_eq!(r["extra"]["generators"].as_array().unwrap().len(), 2, "{r}");
        assert!(r["metrics"]["srv_cpu_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(fact(&show, "host[generator h2]_kernel").is_some(), "{show}");
    // A bad [hosts] is an error at its line.
    std::fs::write(
        &file,
        "name = \"x\"\nworkload = \"bulk\"\n[hosts]\nserverr = \"h1\"\n",
    )
    .unwrap();
    let (code, _, err) = lab.run(&["run", file.to_str().unwrap(), "--db", db]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(":4: unknown key 'serverr' in [hosts]"),
        "{err}"
    );
}
