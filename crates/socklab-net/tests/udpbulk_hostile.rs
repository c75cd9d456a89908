//! A third party against the UDP bulk receiver on loopback (issue 26 item 3): a squatter that
//! opens fake tests from one socket does not keep a victim out, and datagrams sent into a
//! victim's test from another socket do not change its counts. Counts only; every wait is
//! bounded.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use socklab_net::udpbulk::collector::MAX_OPEN;
use socklab_net::udpbulk::wire::{Fin, Header};
use socklab_net::udpbulk::{self, End, SendConfig, SinkConfig, SinkTotals, TestReport, UdpSink};

struct Sink {
    addr: SocketAddr,
    reports: mpsc::Receiver<TestReport>,
    /// `(test id, interval index)` as the receiver closes intervals.
    intervals: mpsc::Receiver<(u64, usize)>,
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<SinkTotals>>,
}

impl Sink {
    fn start() -> Sink {
        let sink = UdpSink::bind(SinkConfig {
            interval: Some(Duration::from_millis(10)),
            ..SinkConfig::default()
        })
        .unwrap();
        let addr = sink.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let (tx, reports) = mpsc::channel();
        let (itx, intervals) = mpsc::channel();
        let join = std::thread::spawn(move || {
            sink.serve_live(
                &|| s2.load(Ordering::Relaxed),
                &mut |r| {
                    let _ = tx.send(r);
                },
                &mut |id, k, _| {
                    let _ = itx.send((id, k));
                },
            )
            .unwrap()
        });
        Sink {
            addr,
            reports,
            intervals,
            stop,
            join: Some(join),
        }
    }

    /// The report of test `id` (the others are skipped), within 10 s.
    fn report_of(&self, id: u64) -> TestReport {
        loop {
            let r = self
                .reports
                .recv_timeout(Duration::from_secs(10))
                .expect("no report of the test within 10 s");
            if r.test_id == id {
                return r;
            }
        }
    }

    fn stop(mut self) -> SinkTotals {
        self.stop.store(true, Ordering::Relaxed);
        self.join.take().unwrap().join().unwrap()
    }
}

fn datagram(test_id: u64, seq: u64, fin: Option<Fin>) -> Vec<u8> {
    let mut b = vec![0u8; 200];
    Header {
        test_id,
        seq,
        send_ns: 1,
        fin,
    }
    .emit(&mut b)
    .unwrap();
    b
}

#[test]
fn a_squatter_on_one_socket_does_not_keep_a_victim_out() {
    let sink = Sink::start();
    let squatter = UdpSocket::bind("127.0.0.1:0").unwrap();
    // As the attack did: the table's worth of fake tests, one datagram each, from one socket,
    // queued before the victim's first datagram.
    for id in 0..MAX_OPEN as u64 {
        squatter
            .send_to(&datagram(0x5100 + id, 0, None), sink.addr)
            .unwrap();
    }
    let c = SendConfig::new(sink.addr, 2_000_000, 1000, Duration::from_millis(200));
    let s = udpbulk::send(&c, &|| false).unwrap();
    let r = sink.report_of(s.test_id);
    assert_eq!(r.ended, End::Drain, "{:?}", r.refused);
    assert_eq!(r.counts.unique, s.total(), "measured in full");
    assert_eq!(r.total, Some(s.total()));
    let totals = sink.stop();
    assert!(
        totals.refused > 0,
        "the squatter's extra tests were refused"
    );
}

#[test]
fn datagrams_into_a_victims_test_from_another_socket_do_not_change_its_counts() {
    let sink = Sink::start();
    let mut c = SendConfig::new(sink.addr, 1_000_000, 1000, Duration::from_millis(600));
    c.drain = Duration::from_millis(50);
    let id = c.test_id;
    let to = sink.addr;
    let victim = std::thread::spawn(move || udpbulk::send(&c, &|| false).unwrap());
    // The victim's test is open (its first interval closed) before the spoofer starts.
    loop {
        let (got, _) = sink
            .intervals
            .recv_timeout(Duration::from_secs(10))
            .expect("the victim's test opened");
        if got == id {
            break;
        }
    }
    let spoofer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let fin = Fin {
        total: 1_000_000,
        drain_ms: 0,
    };
    // Copies of numbers the victim sent, numbers far ahead, and an end marker that would end
    // the test at once with a million datagrams lost.
    let spoofed = [
        datagram(id, 0, None),
        datagram(id, 1, None),
        datagram(id, 500_000, None),
        datagram(id, 999_999, Some(fin)),
    ];
    for d in &spoofed {
        spoofer.send_to(d, to).unwrap();
    }
    let s = victim.join().unwrap();
    let r = sink.report_of(id);
    assert_eq!(r.ended, End::Drain);
    assert_eq!(
        r.total,
        Some(s.total()),
        "the spoofed end marker was not taken"
    );
    assert_eq!(r.counts.unique, s.total());
    assert_eq!(r.lost(s.total()), 0);
    assert_eq!(
        (r.counts.duplicates, r.counts.reordered, r.counts.early),
        (0, 0, 0)
    );
    assert_eq!(r.foreign, spoofed.len() as u64, "counted apart");
    assert_eq!(sink.stop().foreign, spoofed.len() as u64);
}
