//! `socklab rrul` through the binary: latency under load over loopback (no root) and over the
//! tun link (root), FIFO against fq_codel at the same rate and limit (issue 19 item 7), the
//! suite in `lab --quick`, and bad input as one-line errors.

mod common;

use common::{assert_usage_error, root_or_skip, run};

/// The measuring tests run one at a time: a loopback run at full speed beside the emulated
/// link would starve the emulator (its repetitions are then marked invalid).
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The mean of `metric` of cell `label` in `socklab rrul --json`'s statistics.
fn mean(json: &serde_json::Value, label: &str, metric: &str) -> f64 {
    let cells = json["cells"].as_array().expect("cells");
    let cell = cells
        .iter()
        .find(|c| c["label"].as_str() == Some(label))
        .unwrap_or_else(|| panic!("no cell {label} in {json}"));
    cell["metrics"][metric]["mean"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {metric} in {label}: {cell}"))
}

fn json_of(out: &str) -> serde_json::Value {
    serde_json::from_str(out.trim().lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Over loopback (no link, no root): both phases probed, every probe answered, bytes moved
/// both ways, the repetition stored with its time series. The probe timeout is a minute, so
/// "answered" does not depend on how busy the machine is.
#[test]
fn rrul_over_loopback_probes_both_phases_and_moves_bytes_both_ways() {
    let _one = HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let (code, out, err) = run(&[
        "rrul",
        "--idle",
        "500ms",
        "--duration",
        "1s",
        "--streams",
        "2",
        "--probe-timeout",
        "60s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--json",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{err}");
    let j = json_of(&out);
    let label = j["cells"][0]["label"].as_str().unwrap().to_string();
    assert!(mean(&j, &label, "up_mbps") > 0.0);
    assert!(mean(&j, &label, "down_mbps") > 0.0);
    // 100 ms probes of each kind in both phases (how many a busy machine sends on time is a
    // figure, not asserted), all answered on loopback.
    assert!(mean(&j, &label, "probes_tcp") > 0.0, "{j}");
    assert!(mean(&j, &label, "probes_udp") > 0.0, "{j}");
    assert_eq!(mean(&j, &label, "tcp_missing"), 0.0);
    assert_eq!(mean(&j, &label, "udp_loss_loaded_pct"), 0.0);
    assert!(mean(&j, &label, "idle_tcp_p50_ms") > 0.0);
    assert!(mean(&j, &label, "loaded_udp_p50_ms") > 0.0);
    // The time series: throughput each way and the probes' RTT, from the idle phase on.
    let (code, csv, err) = run(&["results", "series", "--csv", "--db", db]);
    assert_eq!(code, 0, "{err}");
    let head = csv.lines().next().unwrap_or_default();
    for col in ["mbps", "probe_tcp_rtt_us", "probe_udp_rtt_us", "direction"] {
        assert!(head.contains(col), "{col} not in {head}");
    }
    assert!(csv.lines().any(|l| l.contains(",down,")), "{csv}");
}

/// Issue 19 item 7: at the same rate and queue limit, fq_codel at the bottleneck keeps the
/// queue the load builds short against the FIFO, while both directions still move data and
/// every probe gets an answer.
///
/// Asserted is what the emulator decided on its model's clock (the bottleneck's queueing delay
/// and its AQM's drops, stored with the repetition), which holds on a busy machine too; a
/// repetition marked invalid there (the emulator fell behind the wall clock) is kept in the
/// statistics (`--keep-invalid`) rather than failing the test. The probes' added latency is a
/// wall-clock figure: bench/rrul-vs-flent measures it over the same two links (docs/
/// benchmarks.md), and the model's sparse-beside-bulk behaviour is asserted in simulated time
/// by socklab-impair's `fq_codel_keeps_a_sparse_flow_fast_beside_a_bulk_flow`.
#[test]
fn fq_codel_cuts_the_latency_a_fifo_adds_under_load() {
    if !root_or_skip("fq_codel_cuts_the_latency_a_fifo_adds_under_load") {
        return;
    }
    let _one = HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let fifo = "rate 20mbit limit 3000";
    let fq = "rate 20mbit limit 3000 aqm fq_codel";
    let (code, out, err) = run(&[
        "rrul",
        "--link",
        fifo,
        "--link",
        fq,
        "--driver",
        "tun",
        "--idle",
        "1s",
        "--duration",
        "4s",
        "--probe-timeout",
        "10s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--json",
        "--keep-invalid",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let j = json_of(&out);
    let (lf, lq) = (format!("link={fifo}"), format!("link={fq}"));
    // The load's queue at the bottleneck: cubic fills a FIFO (up to 1.8 s at 20 Mbit/s),
    // fq_codel holds each flow's queue near CoDel's 5 ms target. Which direction's FIFO fills
    // depends on the streams' timing (a bloated queue one way slows the other way's ACKs, and
    // so its streams' growth: once, on a loaded machine, the FIFO's back direction waited 6 ms
    // on average against fq_codel's 8 ms), so the worse of the two directions is compared.
    let worse = |l: &str| {
        let (f, b) = (
            mean(&j, l, "link_fwd_qdelay_mean_us"),
            mean(&j, l, "link_back_qdelay_mean_us"),
        );
        f.max(b)
    };
    let (qf, qq) = (worse(&lf), worse(&lq));
    assert!(
        qf > qq,
        "worse direction's mean queueing delay: FIFO {qf} µs, fq_codel {qq} µs \
         (added p50: FIFO {} ms, fq_codel {} ms)",
        mean(&j, &lf, "added_p50_ms"),
        mean(&j, &lq, "added_p50_ms")
    );
    eprintln!(
        "added p50 (a wall-clock figure, not asserted): FIFO {} ms, fq_codel {} ms",
        mean(&j, &lf, "added_p50_ms"),
        mean(&j, &lq, "added_p50_ms")
    );
    for l in [&lf, &lq] {
        assert!(mean(&j, l, "up_mbps") > 0.0, "{l}: up");
        assert!(mean(&j, l, "down_mbps") > 0.0, "{l}: down");
        assert_eq!(mean(&j, l, "tcp_missing"), 0.0, "{l}: TCP probes answered");
        assert!(mean(&j, l, "probes_tcp") > 0.0, "{l}: probes sent");
        // Alone on the link no UDP probe meets a full queue or a drop.
        assert_eq!(
            mean(&j, l, "udp_loss_idle_pct"),
            0.0,
            "{l}: UDP probes answered"
        );
    }
    // The bottleneck's own counts are stored with the repetition: fq_codel dropped or
    // marked packets, the FIFO did not use an AQM.
    assert!(mean(&j, &lq, "link_fwd_aqm_dropped") + mean(&j, &lq, "link_fwd_aqm_marked") > 0.0);
    assert_eq!(
        mean(&j, &lf, "link_fwd_aqm_dropped") + mean(&j, &lf, "link_fwd_aqm_marked"),
        0.0
    );
}

#[test]
fn bad_input_is_a_one_line_error() {
    assert_usage_error(
        &["rrul", "--streams", "0", "--dry-run"],
        &["streams = '0'", "use 1 to 64"],
    );
    assert_usage_error(
        &["rrul", "--probe-interval", "0", "--dry-run"],
        &["probe_interval = '0'", "0ms"],
    );
    assert_usage_error(
        &["rrul", "--duration", "0s", "--dry-run"],
        &["duration = '0s'", "the loaded phase needs some time"],
    );
    assert_usage_error(
        &[
            "rrul",
            "--link",
            "rate 20mbit",
            "--driver",
            "udp-proxy",
            "--dry-run",
        ],
        &["udp-proxy relays UDP only", "tun or netem"],
    );
    assert_usage_error(
        &["rrul", "--link-back", "delay 1ms", "--dry-run"],
        &["--link-back needs --link"],
    );
}

#[test]
fn two_links_are_two_cells_and_lab_quick_lists_the_suite_as_root() {
    let (code, out, err) = run(&[
        "--dry-run",
        "rrul",
        "--link",
        "rate 20mbit limit 3000",
        "--link",
        "rate 20mbit limit 3000 aqm codel",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 cells"), "{out}");
    assert!(out.contains("aqm codel"), "{out}");
    let (code, out, err) = run(&["--dry-run", "lab", "--quick"]);
    assert_eq!(code, 0, "{err}");
    if is_root() {
        assert!(out.contains("experiment 'rrul': 4 cells"), "{out}");
    } else {
        assert!(!out.contains("experiment 'rrul'"), "{out}");
    }
}
