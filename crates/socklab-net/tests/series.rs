//! Issue 17 item 5: the bulk sender's interval time series over loopback, against a real sink
//! in a thread: the intervals cover the run without gaps or overlaps, sum to the bytes sent,
//! arrive live one by one, and flag the omitted start.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use socklab_net::bulk::{self, BulkConfig, Limit};
use socklab_net::series::{Sampling, TcpInterval};
use socklab_net::sink::{Sink, SinkConfig};
use socklab_net::Strategy;

/// A sink on loopback in a thread, for as long as the returned flag is false.
fn sink() -> (std::net::SocketAddr, Arc<AtomicBool>) {
    let mut sink = Sink::bind(SinkConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        read_size: 128 * 1024,
        idle_timeout: Duration::from_secs(5),
        ..SinkConfig::default()
    })
    .unwrap();
    let addr = sink.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        let _ = sink.serve(&|| s.load(Ordering::SeqCst), &mut |_| {});
    });
    (addr, stop)
}

fn cfg(to: std::net::SocketAddr, limit: Limit, sampling: Sampling) -> BulkConfig {
    BulkConfig {
        to,
        strategy: Strategy::Single,
        nbufs: 1,
        bufsize: 128 * 1024,
        limit,
        cc: "cubic".into(),
        nodelay: false,
        sndbuf: None,
        read_size: 128 * 1024,
        verify: false,
        seed: 1,
        connect_timeout: Duration::from_secs(5),
        timeout: None,
        grace: socklab_net::bulk::GRACE,
        sampling,
        ..BulkConfig::new(to)
    }
}

#[test]
fn intervals_cover_the_run_sum_to_the_bytes_and_arrive_live() {
    let (addr, stop) = sink();
    let live: Arc<Mutex<Vec<TcpInterval>>> = Arc::default();
    let l = live.clone();
    let c = cfg(
        addr,
        Limit::Duration(Duration::from_millis(600)),
        Sampling {
            interval: Some(Duration::from_millis(50)),
            omit: Some(Duration::from_millis(120)),
        },
    );
    let r = bulk::run_live(
        &c,
        &|| false,
        Some(Arc::new(move |i: &TcpInterval| l.lock().unwrap().push(*i))),
    )
    .unwrap();
    stop.store(true, Ordering::SeqCst);
    let iv = &r.series.intervals;
    assert!(
        r.series.sampler_cpu < Duration::from_millis(600),
        "{:?}",
        r.series.sampler_cpu
    );
    // 600 ms in 50 ms steps, the omit reading at 120 ms, and the tail to the sink's answer.
    assert!(iv.len() >= 12, "{} intervals", iv.len());
    assert_eq!(iv[0].start, Duration::ZERO);
    let end = iv.last().unwrap().end.as_secs_f64();
    assert!((end - r.seconds).abs() < 1e-9, "{end} vs {}", r.seconds);
    for w in iv.windows(2) {
        assert_eq!(w[0].end, w[1].start, "no gap, no overlap");
        assert!(w[0].start < w[0].end);
    }
    let delivered: u64 = iv.iter().map(|i| i.delivered).sum();
    let written: u64 = iv.iter().map(|i| i.written).sum();
    assert_eq!(delivered, r.bytes, "delivered bytes sum to the bytes sent");
    assert_eq!(written, r.bytes);
    // The omitted start: every interval ending by the 120 ms reading, and only those.
    let omit_end = iv
        .iter()
        .filter(|i| i.omitted)
        .map(|i| i.end)
        .max()
        .unwrap();
    assert!(
        omit_end >= Duration::from_millis(120) && omit_end < Duration::from_millis(170),
        "{omit_end:?}"
    );
    assert!(iv.iter().all(|i| i.omitted == (i.end <= omit_end)));
    // Live: the same intervals, in order, as they closed.
    assert_eq!(&*live.lock().unwrap(), iv);
    // TCP_INFO made it: a congestion window and an RTT on loopback.
    assert!(
        iv.iter().all(|i| i.cwnd > 0 && i.srtt_us > 0),
        "{:?}",
        iv[0]
    );
}

#[test]
fn no_sampling_no_intervals_and_a_short_run_gets_one_partial_interval() {
    let (addr, stop) = sink();
    let r = bulk::run(
        &cfg(addr, Limit::Iterations(10), Sampling::default()),
        &|| false,
    )
    .unwrap();
    assert!(r.series.intervals.is_empty());
    // A run far shorter than its interval: one interval, from 0 to the end.
    let r = bulk::run(
        &cfg(
            addr,
            Limit::Iterations(10),
            Sampling {
                interval: Some(Duration::from_secs(5)),
                omit: None,
            },
        ),
        &|| false,
    )
    .unwrap();
    stop.store(true, Ordering::SeqCst);
    assert_eq!(r.series.intervals.len(), 1);
    let i = r.series.intervals[0];
    assert_eq!(i.start, Duration::ZERO);
    assert_eq!(i.delivered, r.bytes);
    assert!(!i.omitted);
}

#[test]
fn bad_sampling_is_refused_before_connecting() {
    // Port 9 on loopback: nothing listens, but the check comes first.
    let to = "127.0.0.1:9".parse().unwrap();
    let e = bulk::run(
        &cfg(
            to,
            Limit::Duration(Duration::from_secs(2)),
            Sampling {
                interval: None,
                omit: Some(Duration::from_secs(2)),
            },
        ),
        &|| false,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`omit` 2s is not shorter than `duration` 2s"),
        "{e}"
    );
}

/// Regression: a run whose end falls on a sampling deadline. The sampler used to take its
/// reading for that deadline just after the sink had answered, print it live, and then the
/// stored series dropped it (it lay past the run's end): live and stored differed. The end is
/// now taken under the readings' lock. Ten runs of 100 ms sampled every 20 ms: the deadline at
/// 100 ms meets the end each time.
#[test]
fn what_is_printed_live_is_what_is_stored_when_the_end_meets_a_deadline() {
    let (addr, stop) = sink();
    for run in 0..10 {
        let live: Arc<Mutex<Vec<TcpInterval>>> = Arc::default();
        let l = live.clone();
        let c = cfg(
            addr,
            Limit::Duration(Duration::from_millis(100)),
            Sampling {
                interval: Some(Duration::from_millis(20)),
                omit: None,
            },
        );
        let r = bulk::run_live(
            &c,
            &|| false,
            Some(Arc::new(move |i: &TcpInterval| l.lock().unwrap().push(*i))),
        )
        .unwrap();
        assert_eq!(&*live.lock().unwrap(), &r.series.intervals, "run {run}");
        let end = r.series.intervals.last().unwrap().end.as_secs_f64();
        assert!((end - r.seconds).abs() < 1e-9, "run {run}");
    }
    stop.store(true, Ordering::SeqCst);
}
