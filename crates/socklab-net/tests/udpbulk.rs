//! UDP bulk over loopback: the live sender and receiver, directly and through the udp-proxy
//! emulator. Counts only; no timing assertions.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use socklab_impair::LinkSpec;
use socklab_link::udpproxy;
use socklab_net::udpbulk::{self, End, Gso, SendConfig, SinkConfig, TestReport, UdpSink};

struct Sink {
    addr: std::net::SocketAddr,
    reports: mpsc::Receiver<TestReport>,
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<udpbulk::SinkTotals>>,
}

impl Sink {
    fn start(interval: Option<Duration>) -> Sink {
        let sink = UdpSink::bind(SinkConfig {
            interval,
            ..SinkConfig::default()
        })
        .unwrap();
        let addr = sink.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let (tx, reports) = mpsc::channel();
        let join = std::thread::spawn(move || {
            sink.serve(&|| s2.load(Ordering::Relaxed), &mut |r| {
                let _ = tx.send(r);
            })
            .unwrap()
        });
        Sink {
            addr,
            reports,
            stop,
            join: Some(join),
        }
    }

    fn report(&self) -> TestReport {
        self.reports.recv_timeout(Duration::from_secs(10)).unwrap()
    }

    fn stop(mut self) -> udpbulk::SinkTotals {
        self.stop.store(true, Ordering::Relaxed);
        self.join.take().unwrap().join().unwrap()
    }
}

fn cfg(to: std::net::SocketAddr, rate: u64, size: usize, ms: u64) -> SendConfig {
    SendConfig::new(to, rate, size, Duration::from_millis(ms))
}

#[test]
fn every_datagram_sent_on_loopback_arrives_once_in_order() {
    let sink = Sink::start(Some(Duration::from_millis(100)));
    for gso in [Gso::Off, Gso::Auto] {
        let mut c = cfg(sink.addr, 100_000_000, 1200, 300);
        c.gso = gso;
        let s = udpbulk::send(&c, &|| false).unwrap();
        let r = sink.report();
        assert_eq!(r.test_id, s.test_id);
        assert_eq!(r.ended, End::Drain);
        assert_eq!(r.total, Some(s.total()));
        assert_eq!(s.fins, 5);
        // 100 Mbit/s of 1200-byte datagrams for 0.3 s: the pacer owes floor(t × rate / bits)
        // + 1 at t < 0.3 s, so 3126 at most. A busy machine sends fewer, never more: this is
        // the pacer's ceiling, not a figure (how close it gets: bench/bulk-vs-iperf3, UDP rows).
        assert!(s.datagrams > 0 && s.datagrams <= 3126, "{}", s.datagrams);
        assert_eq!(r.counts.unique, s.total(), "gso {gso:?}");
        assert_eq!(r.lost(s.total()), 0);
        assert_eq!(
            (r.counts.duplicates, r.counts.reordered, r.counts.early),
            (0, 0, 0)
        );
        assert_eq!(r.counts.bytes, s.total() * 1200);
        assert_eq!(r.counts.bytes - r.fin_bytes, s.bytes, "data bytes");
        let owd = r.owd.unwrap();
        assert!(owd.min_ns > 0 && owd.min_ns <= owd.p50_ns && owd.p99_ns <= owd.max_ns);
        assert!(r.jitter_ns >= 0.0);
        assert!(!r.intervals.is_empty());
        assert_eq!(
            r.intervals.iter().map(|i| i.counts.unique).sum::<u64>(),
            r.counts.unique
        );
        if gso == Gso::Off {
            assert!(!s.gso);
        }
        // Batches: fewer calls than datagrams once they come 64 at a time.
        assert!(s.calls <= s.total());
    }
    let totals = sink.stop();
    assert_eq!((totals.tests, totals.malformed, totals.refused), (2, 0, 0));
}

#[test]
fn an_unpaced_burst_beyond_the_buffer_shows_as_kernel_drops_or_nothing_lost() {
    // 64-datagram GSO batches at a rate no receiver here keeps up with: whatever is lost is
    // lost at the receiving socket, and the receiver says so.
    let sink = Sink::start(None);
    let s = udpbulk::send(&cfg(sink.addr, 400_000_000_000, 1472, 200), &|| false).unwrap();
    let r = sink.report();
    let lost = r.lost(s.total());
    assert!(
        lost == 0 || r.kernel_drops > 0,
        "lost {lost} without kernel drops"
    );
    sink.stop();
}

#[test]
fn through_the_udp_proxy_the_receivers_counts_are_the_emulators() {
    let sink = Sink::start(None);
    for (spec, what) in [
        ("loss 10%", "loss"),
        ("duplicate 10%", "duplicate"),
        // 2 ms between sends, 20 ms delay: each datagram netem sends early overtakes some.
        ("delay 20ms reorder 10% gap 3", "reorder"),
    ] {
        let spec: LinkSpec = spec.parse().unwrap();
        let (addr, proxy) =
            udpproxy::spawn(sink.addr, spec.clone(), LinkSpec::default(), 7).unwrap();
        let mut c = cfg(addr, 4_000_000, 1000, 1000);
        c.drain = Duration::from_millis(300);
        let s = udpbulk::send(&c, &|| false).unwrap();
        let r = sink.report();
        let st = proxy.stop().unwrap().forward;
        assert_eq!(st.packets_in, s.total(), "{what}");
        assert_eq!(st.queue_dropped, 0);
        assert_eq!(r.lost(s.total()), st.dropped, "{what}: lost");
        assert_eq!(r.counts.duplicates, st.duplicated, "{what}: duplicates");
        // The model's `reordered` are the datagrams it sent at once; one overtakes only what
        // is still in the 20 ms delay (a sender held up that long by a busy machine sends one
        // that overtakes nothing): every early arrival is one of them.
        assert!(r.counts.early <= st.reordered, "{what}: early");
        assert_eq!(r.counts.arrivals, st.delivered, "{what}: arrivals");
        let (n, counted) = match what {
            "loss" => (st.dropped, r.lost(s.total())),
            "duplicate" => (st.duplicated, r.counts.duplicates),
            _ => (st.reordered, r.counts.early),
        };
        assert!(counted > 0, "{what}: the emulator did something ({n})");
        if what == "reorder" {
            assert!(counted <= n, "{what}: {counted} of {n}");
        } else {
            assert_eq!(counted, n, "{what}");
        }
        if what == "reorder" {
            assert!(
                r.counts.reordered >= r.counts.early,
                "RFC 4737 counts the overtaken"
            );
        }
    }
    sink.stop();
}
