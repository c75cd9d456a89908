//! The bulk workload's unit tests.
use super::*;
use crate::resources::LinkRun;
use crate::workload::Workload;
use socklab_net::bulk::{BulkResult, StreamStats};
use socklab_net::series::Direction;
use socklab_sys::usage::Usage;

#[test]
fn bulk_parses_with_defaults_and_prints_back_the_same_text() {
    let p = Params::new()
        .with("strategy", "writev")
        .with("nbufs", "100")
        .with("bufsize", "15")
        .with("iterations", "20000");
    let w = Workload::from_params("bulk", &p).unwrap();
    let full = w.params();
    assert_eq!(full.get("cc"), Some("cubic"));
    assert_eq!(full.get("to"), Some("self"));
    assert_eq!(full.get("iterations"), Some("20000"));
    assert_eq!(full.get("duration"), None);
    assert_eq!(Workload::from_params("bulk", &full).unwrap(), w);
}

#[test]
fn bad_bulk_params_name_the_key_and_the_fix() {
    let e = |p: Params| Workload::from_params("bulk", &p).unwrap_err().to_string();
    assert!(e(Params::new().with("bufsize", "0")).starts_with("bufsize = '0': must be at least 1"));
    assert!(e(Params::new().with("strategy", "writeev")).contains("choose one of write, writev"));
    assert!(e(Params::new().with("nbuf", "3")).contains("unknown parameter 'nbuf'"));
    assert!(e(Params::new()
        .with("nbufs", "2000")
        .with("strategy", "writev"))
    .contains("IOV_MAX"));
    assert!(
        e(Params::new().with("iterations", "1").with("duration", "1s")).contains("only one of")
    );
    assert!(e(Params::new().with("to", "localhost")).contains("missing port"));
    assert!(Workload::from_params("bulkk", &Params::new())
        .unwrap_err()
        .to_string()
        .contains("unknown workload 'bulkk'"));
}

#[test]
fn timeout_is_auto_by_default_and_printed_only_when_given() {
    let spec = |p: Params| BulkSpec::parse(&p);
    let auto = spec(Params::new()).unwrap();
    assert_eq!(auto.cfg.timeout, None);
    assert_eq!(auto.cfg.grace, socklab_net::bulk::GRACE);
    assert_eq!(
        auto.cfg.deadline(),
        Some(Duration::from_secs(2) + socklab_net::bulk::GRACE)
    );
    assert_eq!(
        auto.params().get("timeout"),
        None,
        "old plans keep their text"
    );
    // Over a link the grace covers its round trips too.
    let linked = spec(Params::new().with("link", "delay 50ms")).unwrap();
    assert_eq!(
        linked.cfg.grace,
        socklab_net::bulk::GRACE + Duration::from_millis(200)
    );
    let given = spec(Params::new().with("timeout", "5s")).unwrap();
    assert_eq!(given.cfg.deadline(), Some(Duration::from_secs(5)));
    assert_eq!(given.params().get("timeout"), Some("5s"));
    assert_eq!(BulkSpec::parse(&given.params()).unwrap(), given);
    // A count-limited test has no deadline unless one is given.
    let counted = spec(Params::new().with("iterations", "10")).unwrap();
    assert_eq!(counted.cfg.deadline(), None);
    let e = spec(Params::new().with("duration", "3s").with("timeout", "2s"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`timeout` 2s is not longer than `duration` 3s"),
        "{e}"
    );
    let e = spec(Params::new().with("timeout", "soon"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("timeout = 'soon'"), "{e}");
}

fn one_stream() -> StreamStats {
    StreamStats {
        index: 0,
        direction: Direction::Up,
        bytes: 1_000_000_000,
        received: 1_000_000_000,
        rounds: 7630,
        writes: 7630,
        reads: 4000,
        seconds: 0.5,
        send_seconds: 0.49,
        receiver_cpu: Usage {
            user: Duration::from_millis(100),
            sys: Duration::from_millis(150),
            ..Usage::default()
        },
        cc: "cubic".into(),
        verified: Some(true),
        ..StreamStats::default()
    }
}

#[test]
fn a_result_maps_to_its_metrics() {
    let r = BulkResult::from_streams(vec![one_stream()], Default::default());
    let s = sample(&r, "127.0.0.1:9".parse().unwrap(), LinkRun::default());
    assert_eq!(s.get("gbps"), Some(16.0));
    assert!(s.intervals.is_empty() && s.get("gbps_all").is_none());
    assert_eq!(s.get("bytes_per_read"), Some(250_000.0));
    assert_eq!(s.get("rcv_cpu_pct"), Some(50.0));
    assert_eq!(s.get("writes"), Some(7630.0));
    assert_eq!(s.get("zc_completions"), None);
    assert_eq!(s.extra["verified"], true);
    assert_eq!(s.extra["link"], serde_json::Value::Null);
    // One stream up: nothing of several streams (old samples read the same).
    assert!(s.get("fairness").is_none() && s.get("gbps.s0").is_none());
    assert!(s.get("gbps_up").is_none() && s.extra.get("streams").is_none());
    // Omitted start (issue 17 item 5): gbps covers what follows it; the end-to-end figure
    // is gbps_all; the intervals are the sample's.
    let iv = |a: u64, b: u64, bytes: u64, omitted: bool| TcpInterval {
        start: Duration::from_millis(a),
        end: Duration::from_millis(b),
        delivered: bytes,
        omitted,
        ..TcpInterval::default()
    };
    let r = BulkResult {
        series: socklab_net::series::SeriesOutput {
            intervals: vec![
                iv(0, 200, 100_000_000, true),
                iv(200, 400, 400_000_000, false),
                iv(400, 500, 500_000_000, false),
            ],
            sampler_cpu: Duration::from_millis(3),
        },
        ..r
    };
    let s = sample(&r, "127.0.0.1:9".parse().unwrap(), LinkRun::default());
    assert_eq!(s.intervals.len(), 3);
    assert!((s.get("gbps").unwrap() - 900e6 * 8.0 / 0.3 / 1e9).abs() < 1e-9);
    assert_eq!(s.get("gbps_all"), Some(16.0));
    assert_eq!(s.get("omitted_s"), Some(0.2));
    assert_eq!(s.get("sampler_cpu_s"), Some(0.003));
    assert_eq!(s.metrics.iter().filter(|(n, _)| n == "gbps").count(), 1);
}

#[test]
fn interval_and_omit_parse_print_and_refuse_bad_values() {
    let p = Params::new()
        .with("interval", "100ms")
        .with("omit", "2s")
        .with("duration", "10s");
    let w = Workload::from_params("bulk", &p).unwrap();
    let full = w.params();
    assert_eq!(
        (full.get("interval"), full.get("omit")),
        (Some("100ms"), Some("2s"))
    );
    assert_eq!(Workload::from_params("bulk", &full).unwrap(), w);
    assert_eq!(
        Workload::from_params("bulk", &Params::new())
            .unwrap()
            .params()
            .get("interval"),
        None,
        "unset keys are not printed"
    );
    let e = |p: Params| Workload::from_params("bulk", &p).unwrap_err().to_string();
    assert!(
        e(Params::new().with("interval", "0")).starts_with("interval = '0': must be more than 0")
    );
    let m = e(Params::new().with("omit", "2s"));
    assert!(
        m.contains("`omit` 2s is not shorter than `duration` 2s"),
        "{m}"
    );
    let m = e(Params::new().with("omit", "1s").with("iterations", "10"));
    assert!(m.contains("needs a run bounded by `duration`"), "{m}");
}

#[test]
fn several_streams_map_to_per_stream_metrics_fairness_and_facts() {
    let st = |index, direction, bytes: u64, seconds, retrans| StreamStats {
        index,
        direction,
        bytes,
        received: bytes,
        seconds,
        reads: 10,
        tcp: socklab_sys::tcp::TcpInfo {
            total_retrans: retrans,
            snd_cwnd: 10 + index,
            rtt_us: 100,
            ..Default::default()
        },
        cc: "bbr".into(),
        pacing: Some(62_500_000),
        cpu: Some(1),
        server_cpu: Some(0),
        ..StreamStats::default()
    };
    let r = BulkResult::from_streams(
        vec![
            st(0, Direction::Up, 1_000_000_000, 1.0, 2),
            st(1, Direction::Up, 1_000_000_000, 1.0, 3),
            st(2, Direction::Down, 500_000_000, 2.0, 0),
            st(3, Direction::Down, 500_000_000, 2.0, 0),
        ],
        Default::default(),
    );
    let s = sample(&r, "127.0.0.1:9".parse().unwrap(), LinkRun::default());
    assert_eq!(s.get("gbps"), Some(12.0));
    assert_eq!(s.get("gbps_up"), Some(16.0));
    assert_eq!(s.get("gbps_down"), Some(4.0));
    assert_eq!(s.get("gbps.s0"), Some(8.0));
    assert_eq!(s.get("gbps.s3"), Some(2.0));
    assert_eq!(s.get("bytes.s2"), Some(5e8));
    assert_eq!(s.get("retrans.s1"), Some(3.0));
    assert_eq!(s.get("cwnd.s3"), Some(13.0));
    assert_eq!(s.get("retrans"), Some(5.0), "every stream's");
    // Jain over 8, 8, 2, 2.
    let f = s.get("fairness").unwrap();
    assert!((f - 400.0 / (4.0 * 136.0)).abs() < 1e-12, "{f}");
    let facts = &s.extra["streams"];
    assert_eq!(facts.as_array().unwrap().len(), 4);
    assert_eq!(facts[2]["direction"], "down");
    assert_eq!(facts[0]["pacing_rate_bps"], 500_000_000u64);
    assert_eq!(
        (facts[1]["cpu"].clone(), facts[1]["server_cpu"].clone()),
        (1.into(), 0.into())
    );
    assert_eq!(facts[3]["cc"], "bbr");
    // Every per-stream name has a definition.
    for (n, _) in &s.metrics {
        assert_ne!(crate::workload::metric(n).name, "unknown", "{n}");
    }
}

#[test]
fn stream_keys_parse_print_and_keep_old_plans_text() {
    let plain = Workload::from_params("bulk", &Params::new())
        .unwrap()
        .params();
    for k in [
        "streams",
        "direction",
        "pacing_rate",
        "affinity",
        "server_affinity",
    ] {
        assert_eq!(plain.get(k), None, "{k}: defaults print nothing");
    }
    let p = Params::new()
        .with("streams", "4")
        .with("direction", "bidir")
        .with("pacing_rate", "500M")
        .with("affinity", "0-1")
        .with("server_affinity", "1,0");
    let w = Workload::from_params("bulk", &p).unwrap();
    let full = w.params();
    assert_eq!(full.get("streams"), Some("4"));
    assert_eq!(full.get("direction"), Some("bidir"));
    assert_eq!(full.get("pacing_rate"), Some("500M"));
    assert_eq!(full.get("affinity"), Some("0-1"));
    assert_eq!(full.get("server_affinity"), Some("1,0"));
    assert_eq!(Workload::from_params("bulk", &full).unwrap(), w);
    let Workload::Bulk(b) = &w else { panic!() };
    assert_eq!((b.cfg.streams, b.cfg.flow), (4, Flow::Bidir));
    assert_eq!(b.cfg.pacing_bytes(), Some(62_500_000));
    let down = Workload::from_params("bulk", &Params::new().with("direction", "down")).unwrap();
    assert_eq!(down.params().get("direction"), Some("down"));
}

#[test]
fn bad_stream_keys_are_one_line_naming_the_key_and_the_fix() {
    let e = |k: &str, v: &str| {
        Workload::from_params("bulk", &Params::new().with(k, v))
            .unwrap_err()
            .to_string()
    };
    for (k, v, want) in [
        ("streams", "0", "`streams` 0: run at least one stream"),
        ("streams", "100000", "`streams` 100000 is more than 128"),
        ("streams", "99999999999", "streams = '99999999999'"),
        (
            "direction",
            "sideways",
            "direction 'sideways': use up, down",
        ),
        (
            "pacing_rate",
            "0",
            "pacing_rate = '0': 0 bit/s is out of range",
        ),
        ("pacing_rate", "max", "max is no pacing rate"),
        (
            "affinity",
            "3-1",
            "affinity = '3-1': CPU list '3-1': range 3-1 runs backwards",
        ),
        ("server_affinity", "x", "'x' is not a CPU number"),
    ] {
        let m = e(k, v);
        assert!(m.contains(want), "{k}={v}: {m}");
        assert!(!m.contains('\n'), "{m}");
    }
    let m = Workload::from_params(
        "bulk",
        &Params::new()
            .with("streams", "65")
            .with("direction", "bidir"),
    )
    .unwrap_err()
    .to_string();
    assert!(m.contains("more than 64 each way with `bidir`"), "{m}");
}
