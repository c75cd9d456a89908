//! Issue 17 item 5: `load --interval` at the library level: per-interval requests over
//! loopback, against socklab's HTTP session in threads, two generator threads. The intervals
//! cover the run, their requests and failures sum to the totals, and each arrives live once.

use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use socklab_net::load::{self, LoadConfig, LoadInterval, LoadProtocol};
use socklab_net::server::handler::Handler;

mod load_common;
use load_common::serve_session;

fn server() -> std::net::SocketAddr {
    static NEVER: AtomicBool = AtomicBool::new(false);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve_session(s, Handler::Http, &NEVER));
        }
    });
    addr
}

#[test]
fn intervals_cover_a_timed_run_and_sum_to_its_requests() {
    let mut cfg = LoadConfig::new(server(), LoadProtocol::Http);
    cfg.connections = 4;
    cfg.threads = 2;
    cfg.new_connection_per_request = false;
    cfg.duration = Some(Duration::from_millis(650));
    cfg.interval = Some(Duration::from_millis(100));
    let seen: Arc<Mutex<Vec<LoadInterval>>> = Arc::default();
    let s = seen.clone();
    let live: load::LiveLoad = Arc::new(move |i: &LoadInterval| s.lock().unwrap().push(*i));
    let r = load::run_live(&cfg, &AtomicBool::new(false), Some(live)).unwrap();
    let iv = &r.intervals;
    assert_eq!(iv.len(), 7, "0.65 s in 100 ms intervals: {iv:?}");
    assert_eq!(iv[0].start, Duration::ZERO);
    for w in iv.windows(2) {
        assert_eq!(w[0].end, w[1].start);
    }
    let end = iv.last().unwrap().end.as_secs_f64();
    assert!(
        (end - r.duration_s).abs() < 1e-9,
        "{end} vs {}",
        r.duration_s
    );
    assert_eq!(iv.iter().map(|i| i.completed).sum::<u64>(), r.completed);
    assert_eq!(iv.iter().map(|i| i.errors).sum::<u64>(), r.failed.total());
    assert!(r.completed > 0);
    assert!(iv.iter().all(|i| i.completed == i.latency.count));
    assert_eq!(&*seen.lock().unwrap(), iv);
}

#[test]
fn a_count_bounded_run_ends_its_last_interval_at_its_end() {
    let mut cfg = LoadConfig::new(server(), LoadProtocol::Http);
    cfg.connections = 2;
    cfg.threads = 2;
    cfg.new_connection_per_request = false;
    cfg.requests = Some(500);
    cfg.interval = Some(Duration::from_millis(20));
    let r = load::run(&cfg, &AtomicBool::new(false)).unwrap();
    let iv = &r.intervals;
    assert!(!iv.is_empty());
    assert_eq!(iv.iter().map(|i| i.completed).sum::<u64>(), 500);
    let end = iv.last().unwrap().end.as_secs_f64();
    assert!(
        (end - r.duration_s).abs() < 1e-9,
        "{end} vs {}",
        r.duration_s
    );
    // Off: nothing.
    cfg.interval = None;
    assert!(load::run(&cfg, &AtomicBool::new(false))
        .unwrap()
        .intervals
        .is_empty());
}

#[test]
fn a_bad_interval_is_refused() {
    let mut cfg = LoadConfig::new("127.0.0.1:9".parse().unwrap(), LoadProtocol::Http);
    cfg.interval = Some(Duration::ZERO);
    let e = load::run(&cfg, &AtomicBool::new(false))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("`interval` 0s"), "{e}");
}
