//! Tests of the load workload.

use super::*;
use crate::workload::Workload;

fn parse(pairs: &[(&str, &str)]) -> Result<LoadSpec, LabError> {
    let mut p = Params::new();
    for (k, v) in pairs {
        p.set(k, *v);
    }
    parse_spec(&p)
}

#[test]
fn defaults_are_the_seed_workload_and_round_trip() {
    let s = parse(&[]).unwrap();
    assert_eq!(
        s.mode,
        LoadMode::Stevens {
            clients: 10,
            loops: 500,
            bytes: 4000
        }
    );
    assert_eq!(s.design, Design::Epoll);
    assert_eq!(parse_spec(&print_spec(&s)).unwrap(), s);
    let h = parse(&[
        ("handler", "http"),
        ("design", "prefork-flock"),
        ("workers", "15"),
        ("rate", "20000"),
    ])
    .unwrap();
    assert_eq!(parse_spec(&print_spec(&h)).unwrap(), h);
    assert_eq!(print_spec(&h).get("workers"), Some("15"));
}

#[test]
fn bad_values_name_the_key_and_the_fix() {
    let e = parse(&[("design", "prefork-lock")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("prefork-lock") && e.contains("prefork-flock"),
        "{e}"
    );
    let e = parse(&[("handler", "discard")]).unwrap_err().to_string();
    assert!(e.contains("use stevens, echo or http"), "{e}");
    let e = parse(&[("connections", "5")]).unwrap_err().to_string();
    assert!(
        e.contains("connections does not apply to handler = stevens"),
        "{e}"
    );
    let e = parse(&[("handler", "http"), ("loops", "5")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("loops does not apply"), "{e}");
    let e = parse(&[("bytes", "16385")]).unwrap_err().to_string();
    assert!(e.contains("16384"), "{e}");
    let e = parse(&[("workers", "0")]).unwrap_err().to_string();
    assert!(e.contains("1 to 1024"), "{e}");
    let e = parse(&[("to", "127.0.0.1:80"), ("design", "fork")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("design configures the self-started server"),
        "{e}"
    );
}

#[test]
fn the_one_off_keys_round_trip_into_the_generator_config() {
    let h = parse(&[
        ("to", "127.0.0.1:8080"),
        ("handler", "http"),
        ("connections", "4"),
        ("requests", "200"),
        ("conn_requests", "50"),
        ("path", "/index.html"),
        ("host", "example.com"),
        ("source_addrs", "4"),
        ("rate", "0.5"),
        ("partial", "keep"),
    ])
    .unwrap();
    let printed = print_spec(&h);
    assert_eq!(parse_spec(&printed).unwrap(), h);
    for (k, v) in [
        ("requests", "200"),
        ("conn_requests", "50"),
        ("path", "/index.html"),
        ("host", "example.com"),
        ("source_addrs", "4"),
        ("rate", "0.5"),
        ("partial", "keep"),
    ] {
        assert_eq!(printed.get(k), Some(v), "{k}");
    }
    let to: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let c = load_config(&h, to);
    assert_eq!(
        (c.requests, c.loops, c.rate, c.source_addrs),
        (Some(200), Some(50), Some(0.5), 4)
    );
    assert_eq!(
        (c.path.as_str(), c.host.as_deref()),
        ("/index.html", Some("example.com"))
    );
    assert!(h.options.keep_partial);

    // Stevens bounded by time: unlimited loops, a duration and a rate.
    let s = parse(&[
        ("clients", "5"),
        ("loops", "unlimited"),
        ("duration", "3s"),
        ("rate", "20K"),
    ])
    .unwrap();
    assert_eq!(
        s.mode,
        LoadMode::Stevens {
            clients: 5,
            loops: UNLIMITED_LOOPS,
            bytes: 4000
        }
    );
    let printed = print_spec(&s);
    assert_eq!(printed.get("loops"), Some("unlimited"));
    assert_eq!(printed.get("duration"), Some("3s"));
    assert_eq!(printed.get("rate"), Some("20480"));
    assert_eq!(parse_spec(&printed).unwrap(), s);
    let c = load_config(&s, to);
    assert_eq!(c.loops, None);
    assert_eq!(c.duration, Some(Duration::from_secs(3)));
    assert_eq!(c.rate, Some(20480.0));
    assert!(c.validate().is_ok());
    // Stevens with requests and unlimited loops is bounded too.
    assert!(parse(&[("loops", "unlimited"), ("requests", "100")]).is_ok());
}

#[test]
fn source_addrs_auto_spreads_a_connection_per_request_on_loopback_only() {
    let lo: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let v6: SocketAddr = "[::1]:9".parse().unwrap();
    let stevens = parse(&[]).unwrap();
    assert_eq!(stevens.options.source_addrs, None);
    assert_eq!(print_spec(&stevens).get("source_addrs"), None);
    assert_eq!(load_config(&stevens, lo).source_addrs, 8);
    assert_eq!(load_config(&stevens, v6).source_addrs, 1);
    let keep_alive = parse(&[("handler", "http")]).unwrap();
    assert_eq!(load_config(&keep_alive, lo).source_addrs, 1);
    let one = parse(&[("source_addrs", "1")]).unwrap();
    assert_eq!(load_config(&one, lo).source_addrs, 1);
    let auto = parse(&[("source_addrs", "auto")]).unwrap();
    assert_eq!(auto, stevens);
}

#[test]
fn the_one_off_keys_refuse_bad_values_naming_the_fix() {
    let err = |pairs: &[(&str, &str)]| parse(pairs).unwrap_err().to_string();
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (
            &[("loops", "unlimited")],
            &["loops = unlimited needs another bound", "duration"],
        ),
        (&[("loops", "0")], &["loops = '0'", "1 to 10000000"]),
        (&[("requests", "0")], &["requests = '0'", "unlimited"]),
        (&[("requests", "many")], &["requests = 'many'"]),
        (
            &[("handler", "echo"), ("conn_requests", "0")],
            &["conn_requests = '0'", "at least 1"],
        ),
        (
            &[("conn_requests", "5")],
            &["conn_requests does not apply to handler = stevens"],
        ),
        (
            &[("handler", "http"), ("path", "index.html")],
            &["path = 'index.html'", "/index.html"],
        ),
        (
            &[("handler", "http"), ("host", "a b")],
            &["host = 'a b'", "without spaces"],
        ),
        (
            &[("handler", "echo"), ("path", "/x")],
            &["path does not apply to handler = echo"],
        ),
        (
            &[("source_addrs", "0")],
            &["source_addrs = '0'", "1 to 65536"],
        ),
        (
            &[("to", "10.0.0.1:80"), ("source_addrs", "4")],
            &["source_addrs = 4 needs an IPv4 loopback target"],
        ),
        (&[("rate", "fast")], &["rate = 'fast'", "not a number"]),
        (&[("rate", "0")], &["rate = '0'", "positive"]),
        (&[("rate", "1e9")], &["at most 100000000"]),
        (
            &[("partial", "maybe")],
            &["partial = 'maybe'", "fail or keep"],
        ),
    ];
    for (pairs, needles) in cases {
        let e = err(pairs);
        for n in *needles {
            assert!(e.contains(n), "{pairs:?}: '{n}' not in: {e}");
        }
    }
}

#[test]
fn the_sample_keeps_the_whole_report() {
    use socklab_net::load::{Failures, GeneratorStats, Timing};
    let to: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let t = Timing {
        count: 3,
        mean_us: 12.5,
        percentiles: socklab_net::load::Percentiles {
            p99_us: 40.25,
            ..Default::default()
        },
        ..Timing::default()
    };
    let r = LoadReport {
        config: LoadConfig::new(to, LoadProtocol::Http),
        duration_s: 1.5,
        completed: 3,
        failed: Failures {
            timeout: 1,
            ..Failures::default()
        },
        connections_opened: 1,
        requests_per_s: 2.0,
        connections_per_s: 0.5,
        bytes_written: 100,
        bytes_read: 420,
        transfer_bytes_per_s: 280.0,
        connect: t,
        first_byte: t,
        response: t,
        response_corrected: None,
        generator: GeneratorStats {
            send_lag: None,
            timer_lag: None,
            loop_busy: t,
            thread_utilisation: vec![0.25],
            cpu_user_s: 0.01,
            cpu_sys_s: 0.02,
            warnings: vec!["w".into()],
        },
        aborted: Some("interrupted".into()),
        tls: None,
        intervals: Vec::new(),
    };
    let s = sample(&r, to, None);
    let back: LoadReport = serde_json::from_value(s.extra["report"].clone()).unwrap();
    assert_eq!(back, r);
    assert_eq!(s.get("errors"), Some(1.0));
    assert_eq!(s.get("lat_p99_us"), Some(40.25));
    assert!(s.intervals.is_empty());
    // Issue 26 item 10: no response, no latency (a 0 would read as the fastest run).
    let none = LoadReport {
        completed: 0,
        connect: Timing::default(),
        first_byte: Timing::default(),
        response: Timing::default(),
        ..r.clone()
    };
    let s0 = sample(&none, to, None);
    for m in ["lat_p50_us", "lat_p99_us", "lat_mean_us", "connect_mean_us"] {
        assert_eq!(s0.get(m), None, "{m}");
    }
    assert_eq!(s0.get("req_per_s"), Some(2.0));
    // Issue 17 item 5: the report's intervals become the sample's (and stay out of its JSON).
    let iv = socklab_net::load::LoadInterval {
        start: std::time::Duration::ZERO,
        end: std::time::Duration::from_millis(500),
        completed: 3,
        errors: 1,
        latency: t,
    };
    let r = LoadReport {
        intervals: vec![iv],
        ..r
    };
    let s = sample(&r, to, None);
    assert_eq!(s.intervals.len(), 1);
    assert_eq!(s.intervals[0].get("req_per_s"), Some(6.0));
    assert_eq!(s.intervals[0].get("lat_p99_us"), Some(40.25));
    assert!(s.extra["report"].get("intervals").is_none());
}

#[test]
fn the_interval_key_parses_prints_and_is_bounded() {
    let p = Params::new()
        .with("handler", "http")
        .with("duration", "10s")
        .with("interval", "1s");
    let w = Workload::from_params("load", &p).unwrap();
    assert_eq!(w.params().get("interval"), Some("1s"));
    let Workload::Load(spec) = &w else { panic!() };
    let c = load_config(spec, "127.0.0.1:1".parse().unwrap());
    assert_eq!(c.interval, Some(std::time::Duration::from_secs(1)));
    let e = Workload::from_params("load", &p.clone().with("interval", "0"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("interval = '0': must be more than 0"), "{e}");
    let e = Workload::from_params("load", &p.with("interval", "1ms").with("duration", "10m"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("600000 intervals"), "{e}");
}
