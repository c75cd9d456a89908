//! Issue 19 item 7: the bufferbloat a drop-tail queue adds beside a bulk TCP flow, cured by
//! fq_codel at the same rate and limit, over the real TUN link. Root only: without root the test
//! prints why it skips and passes.
//!
//! A cubic flow fills whatever queue it finds (BBR, the kernel's default, would not: it is set
//! explicitly); beside it, a UDP ping-pong probe every 20 ms. What is asserted is what the
//! emulator decided on its model's clock, whatever the machine's load: the drop-tail queue
//! made packets wait longer than fq_codel's, fq_codel dropped to do it, drop-tail never used an
//! AQM. The probe's round trips (what an application sees) are printed, not asserted: they are
//! wall-clock figures, measured in bench/rrul-vs-flent (socklab rrul over the same FIFO and
//! fq_codel links); the sparse-beside-bulk behaviour itself is asserted on the model in
//! simulated time (socklab-impair's `fq_codel_keeps_a_sparse_flow_fast_beside_a_bulk_flow`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socklab_link::{Driver, EmulatedLink, LinkConfig, LinkPair, LinkReport, Side, SERVER_ADDR};

fn root_or_skip(test: &str) -> bool {
    socklab_sys::skip::root_or_skip(test)
}

/// What one run measured: the probe's round trips (after the warm-up) and the link's counts
/// over the same window.
struct Run {
    rtts: Vec<Duration>,
    report: LinkReport,
    bulk_bytes: u64,
}

const WARMUP: Duration = Duration::from_millis(1500);
const MEASURE: Duration = Duration::from_millis(3500);

fn bulk_beside_ping(spec: &str) -> Run {
    let mut link = EmulatedLink::start(&LinkConfig {
        driver: Driver::Tun,
        pair: LinkPair::parse(spec, None).unwrap(),
        seed: 7,
        ..LinkConfig::default()
    })
    .unwrap();
    let (listener, echo) = {
        let _g = link.namespaces().unwrap().enter(Side::Server).unwrap();
        (
            TcpListener::bind(SocketAddr::from((SERVER_ADDR, 0))).unwrap(),
            UdpSocket::bind(SocketAddr::from((SERVER_ADDR, 0))).unwrap(),
        )
    };
    let (tcp_to, udp_to) = (listener.local_addr().unwrap(), echo.local_addr().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let sink = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        while let Ok(k) = c.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        n
    });
    let stop2 = stop.clone();
    let echoer = std::thread::spawn(move || {
        echo.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut buf = [0u8; 64];
        while !stop2.load(Ordering::Relaxed) {
            if let Ok((n, from)) = echo.recv_from(&mut buf) {
                let _ = echo.send_to(&buf[..n], from);
            }
        }
    });
    let _g = link.enter_client().unwrap();
    let stop3 = stop.clone();
    let bulk = std::thread::spawn(move || {
        let mut c = TcpStream::connect_timeout(&tcp_to, Duration::from_secs(5)).unwrap();
        socket2::SockRef::from(&c)
            .set_tcp_congestion(b"cubic")
            .unwrap();
        let chunk = vec![0x5au8; 1 << 16];
        while !stop3.load(Ordering::Relaxed) {
            if c.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let ping = UdpSocket::bind("0.0.0.0:0").unwrap();
    ping.connect(udp_to).unwrap();
    ping.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let start = Instant::now();
    let mut before = None;
    let mut rtts = Vec::new();
    let mut seq = 0u64;
    let mut buf = [0u8; 64];
    while start.elapsed() < WARMUP + MEASURE {
        let measuring = start.elapsed() >= WARMUP;
        if measuring && before.is_none() {
            before = Some(link.report());
        }
        seq += 1;
        let t0 = Instant::now();
        ping.send(&seq.to_be_bytes()).unwrap();
        // Wait for this ping's echo (an old one may come late: skip it).
        while t0.elapsed() < Duration::from_secs(2) {
            match ping.recv(&mut buf) {
                Ok(8) if buf[..8] == seq.to_be_bytes() => {
                    if measuring {
                        rtts.push(t0.elapsed());
                    }
                    break;
                }
                Ok(_) => continue,
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_millis(20).saturating_sub(t0.elapsed()));
    }
    let report = link.report().since(&before.unwrap());
    stop.store(true, Ordering::Relaxed);
    drop(_g);
    // The bulk writer ends at its next write; shutting the link down ends any stuck one.
    link.set(&LinkPair::parse("", None).unwrap()).unwrap();
    bulk.join().unwrap();
    let bulk_bytes = sink.join().unwrap();
    echoer.join().unwrap();
    link.stop().unwrap();
    Run {
        rtts,
        report,
        bulk_bytes,
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn fq_codel_cures_the_bloat_that_drop_tail_adds_beside_a_bulk_flow() {
    if !root_or_skip("fq_codel_cures_the_bloat") {
        return;
    }
    let mut fifo = bulk_beside_ping("rate 20mbit limit 1000");
    let mut fq = bulk_beside_ping("rate 20mbit limit 1000 aqm fq_codel");
    let (ff, qf) = (&fifo.report.forward.stats, &fq.report.forward.stats);
    eprintln!(
        "drop-tail: bottleneck wait mean {:.1} ms, {} queue drops; fq_codel: {:.2} ms, {} aqm drops, {} queue drops",
        ff.mean_queue_delay_ns() / 1e6,
        ff.queue_dropped,
        qf.mean_queue_delay_ns() / 1e6,
        qf.aqm_dropped,
        qf.queue_dropped
    );
    // Both carried the bulk flow through the bottleneck.
    assert!(fifo.bulk_bytes > 0 && fq.bulk_bytes > 0);
    assert!(ff.queue_passed > 0 && qf.queue_passed > 0, "{ff:?} {qf:?}");
    // The emulator's own decisions, on its model's clock: drop-tail lets cubic keep its queue
    // full (hundreds of ms at 20 Mbit/s), fq_codel holds it near CoDel's 5 ms target and drops
    // to do it; the FIFO has no AQM to drop with.
    assert!(
        ff.mean_queue_delay_ns() > qf.mean_queue_delay_ns(),
        "bottleneck wait: drop-tail {ff:?} vs fq_codel {qf:?}"
    );
    assert!(qf.aqm_dropped > 0, "{qf:?}");
    assert_eq!((ff.aqm_dropped, ff.aqm_marked), (0, 0), "{ff:?}");
    // What the application sees, for the log only (a wall-clock figure: see the module note).
    let p50 = |v: &mut Vec<Duration>| (!v.is_empty()).then(|| median(v));
    eprintln!(
        "ping RTT p50: drop-tail {:?} ({} pings), fq_codel {:?} ({} pings)",
        p50(&mut fifo.rtts),
        fifo.rtts.len(),
        p50(&mut fq.rtts),
        fq.rtts.len()
    );
}

/// `ecn` marks TCP's packets instead of dropping them: the link's namespaces ask for ECN, the
/// data packets are ECN-capable, the model marks them CE (netem's `loss … ecn` and an AQM's
/// marks alike), and the transfer arrives whole.
#[test]
fn ecn_turns_losses_and_aqm_drops_into_marks_for_tcp() {
    if !root_or_skip("ecn_turns_losses_into_marks") {
        return;
    }
    for spec in ["loss 5% ecn", "rate 20mbit limit 1000 aqm codel ecn"] {
        let link = EmulatedLink::start(&LinkConfig {
            driver: Driver::Tun,
            pair: LinkPair::parse(spec, None).unwrap(),
            seed: 3,
            ..LinkConfig::default()
        })
        .unwrap();
        let listener = {
            let _g = link.namespaces().unwrap().enter(Side::Server).unwrap();
            TcpListener::bind(SocketAddr::from((SERVER_ADDR, 0))).unwrap()
        };
        let to = listener.local_addr().unwrap();
        let data: Vec<u8> = (0..6_000_000u32)
            .map(|i| (i * 31 + i / 977) as u8)
            .collect();
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            got
        });
        {
            let _g = link.enter_client().unwrap();
            let mut c = TcpStream::connect_timeout(&to, Duration::from_secs(5)).unwrap();
            socket2::SockRef::from(&c)
                .set_tcp_congestion(b"cubic")
                .unwrap();
            c.write_all(&data).unwrap();
        }
        let got = server.join().unwrap();
        assert!(got == data, "{spec}: the transfer arrived damaged");
        let r = link.stop().unwrap();
        let f = &r.forward.stats;
        eprintln!("{spec}: {f:?}");
        let marks = f.loss_marked + f.aqm_marked;
        assert!(marks > 0, "{spec}: {f:?}");
        // What is still dropped is what is not ECN-capable (the SYN, the last ACKs).
        assert!(f.dropped + f.aqm_dropped < 10, "{spec}: {f:?}");
    }
}
