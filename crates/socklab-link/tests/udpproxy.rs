//! The UDP proxy driver over loopback: a real echo server behind it, the ping-pong client in
//! front. Counts only, no timing assertions.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use socklab_impair::LinkSpec;
use socklab_link::udpproxy;
use socklab_net::echo::{EchoConfig, EchoServer};
use socklab_net::pingpong::{self, PingConfig};

struct Echo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let server = EchoServer::bind(EchoConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            udp: true,
            ..EchoConfig::default()
        })
        .unwrap();
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let join = std::thread::spawn(move || {
            server
                .serve(&|| s2.load(Ordering::Relaxed), &mut |_| {})
                .unwrap();
        });
        Echo {
            addr,
            stop,
            join: Some(join),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

fn ping(to: SocketAddr, count: u64, retries: u32) -> pingpong::PingResult {
    let cfg = PingConfig {
        to,
        udp: true,
        size: 64,
        count,
        timeout: Duration::from_millis(100),
        retries,
        ..PingConfig::default()
    };
    pingpong::run(&cfg, &|| false).unwrap()
}

#[test]
fn a_clean_link_relays_every_datagram_both_ways() {
    let echo = Echo::start();
    let (addr, proxy) =
        udpproxy::spawn(echo.addr, LinkSpec::default(), LinkSpec::default(), 1).unwrap();
    let r = ping(addr, 200, 0);
    assert_eq!((r.completed, r.lost), (200, 0));
    let s = proxy.stop().unwrap();
    assert_eq!(s.forward.packets_in, 200);
    assert_eq!(s.forward.delivered, 200);
    assert_eq!(s.backward.delivered, 200);
}

#[test]
fn every_lost_message_is_a_datagram_the_model_dropped() {
    let echo = Echo::start();
    let loss: LinkSpec = "loss 30%".parse().unwrap();
    let (addr, proxy) = udpproxy::spawn(echo.addr, loss.clone(), loss, 7).unwrap();
    let r = ping(addr, 100, 0);
    let s = proxy.stop().unwrap();
    assert_eq!(r.completed + r.lost, 100);
    assert!(r.lost > 0);
    // With no retries, a message is lost exactly when its request or its reply was dropped.
    assert_eq!(r.lost, s.forward.dropped + s.backward.dropped, "{s:?}");
    assert_eq!(s.forward.packets_in, 100);
    assert_eq!(s.backward.packets_in, 100 - s.forward.dropped);
    // Retries recover from the loss.
    let echo2 = Echo::start();
    let loss: LinkSpec = "loss 30%".parse().unwrap();
    let (addr2, proxy2) = udpproxy::spawn(echo2.addr, loss.clone(), loss, 7).unwrap();
    let r = ping(addr2, 30, 20);
    assert_eq!((r.completed, r.lost), (30, 0));
    assert!(r.retries_sent > 0);
    drop(proxy2);
}

#[test]
fn duplicated_replies_are_counted_late_by_the_client() {
    let echo = Echo::start();
    let dup: LinkSpec = "duplicate 100%".parse().unwrap();
    let (addr, proxy) = udpproxy::spawn(echo.addr, LinkSpec::default(), dup, 3).unwrap();
    let r = ping(addr, 50, 0);
    let s = proxy.stop().unwrap();
    assert_eq!(r.completed, 50);
    assert_eq!(s.backward.duplicated, 50);
    assert!(r.late > 0, "{r:?}");
}

// The same driver behind `EmulatedLink`, as workloads use it: `route()` gives the client's
// address, `report()` the relay's counts.

use socklab_link::{Driver, EmulatedLink, LinkConfig, LinkPair};

fn proxy_link(forward: &str, backward: Option<&str>, seed: u64) -> EmulatedLink {
    EmulatedLink::start(&LinkConfig {
        driver: Driver::UdpProxy,
        pair: LinkPair::parse(forward, backward).unwrap(),
        seed,
        ..LinkConfig::default()
    })
    .unwrap()
}

/// Sends `n` numbered datagrams to `to`, paced so that no socket buffer on the way overflows
/// (`n` at most ~200: `rx` is read only afterwards); returns the numbers `rx` received within
/// 300 ms of the last one.
fn send_and_collect(to: SocketAddr, rx: &std::net::UdpSocket, n: u32) -> Vec<u32> {
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..n {
        tx.send_to(&i.to_be_bytes(), to).unwrap();
        if i % 20 == 19 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while let Ok(k) = rx.recv(&mut buf) {
        assert_eq!(k, 4);
        got.push(u32::from_be_bytes(buf[..4].try_into().unwrap()));
    }
    got
}

#[test]
fn a_udp_proxy_link_with_total_forward_loss_delivers_nothing_and_counts_every_drop() {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut link = proxy_link("loss 100%", Some("none"), 1);
    assert!(link.server_namespace().is_none());
    assert_eq!(link.server_bind(), std::net::Ipv4Addr::LOCALHOST);
    let via = link.route(rx.local_addr().unwrap()).unwrap();
    assert_ne!(via, rx.local_addr().unwrap());
    let before = link.report();
    let got = {
        let _client = link.enter_client().unwrap();
        send_and_collect(via, &rx, 200)
    };
    assert!(got.is_empty(), "{got:?}");
    let r = link.report().since(&before);
    assert_eq!(r.forward.stats.packets_in, 200, "{r:?}");
    assert_eq!(r.forward.stats.dropped, 200);
    assert_eq!(r.forward.stats.delivered, 0);
    assert_eq!(r.backward.stats.packets_in, 0);
    let m = r.metrics();
    let get = |k: &str| m.iter().find(|(n, _)| *n == k).unwrap().1;
    assert_eq!(get("link_fwd_dropped"), 200.0);
    assert_eq!(get("emu_valid"), 1.0);
    assert!(r.invalid_reason().is_none());
    let last = link.stop().unwrap();
    assert_eq!(last.forward.stats.dropped, 200);
}

#[test]
fn a_clean_udp_proxy_link_delivers_everything_in_order_and_counts_match() {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut link = proxy_link("none", None, 1);
    let via = link.route(rx.local_addr().unwrap()).unwrap();
    let got = send_and_collect(via, &rx, 200);
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    let r = link.report();
    assert_eq!(r.forward.stats.packets_in, 200);
    assert_eq!(r.forward.stats.delivered, 200);
    assert_eq!(r.forward.stats.dropped, 0);
    assert_eq!(r.forward.stats.bytes_out, 800);
    // Re-specifying keeps the relay's address and takes effect at once.
    link.set(&LinkPair::parse("loss 100%", None).unwrap())
        .unwrap();
    assert_eq!(link.pair().describe(), "loss 100%");
    assert!(send_and_collect(via, &rx, 50).is_empty());
    let r = link.stop().unwrap();
    assert_eq!(r.forward.stats.packets_in, 250);
    assert_eq!(r.forward.stats.dropped, 50);
}

#[test]
fn every_route_starts_the_relay_from_the_seed_so_runs_repeat_the_same_decisions() {
    let echo = Echo::start();
    let mut link = proxy_link("loss 30%", None, 7);
    let mut lost = Vec::new();
    for _ in 0..3 {
        let via = link.route(echo.addr).unwrap();
        let before = link.report();
        let r = ping(via, 30, 0);
        let d = link.report().since(&before);
        // With no retries, a message is lost exactly when its request or its reply was dropped.
        assert_eq!(r.lost, d.forward.stats.dropped + d.backward.stats.dropped);
        lost.push(r.lost);
    }
    assert!(lost[0] > 0);
    assert!(lost.iter().all(|&l| l == lost[0]), "{lost:?}");
    // The same as a relay spawned on its own with the same seed (today's lab path).
    let (addr, proxy) = udpproxy::spawn(
        echo.addr,
        link.pair().forward.clone(),
        link.pair().backward.clone(),
        7,
    )
    .unwrap();
    let r = ping(addr, 30, 0);
    proxy.stop().unwrap();
    assert_eq!(r.lost, lost[0]);
    let total = link.stop().unwrap();
    assert_eq!(total.forward.stats.packets_in, 90);
}

/// The worst wait at the bottleneck is reported since the link was last specified: a new
/// spec (the lab's next repetition or cell) does not inherit the previous one's maximum,
/// while the counts go on adding up.
#[test]
fn the_worst_queue_wait_starts_afresh_with_a_new_spec() {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // The relay's rate counts payload: 4-byte datagrams at 100 kbit/s take 320 µs each, so
    // 200 sent in bursts of 20 every 2 ms queue for tens of ms.
    let mut link = proxy_link("rate 100kbit limit 1000", Some("none"), 1);
    let via = link.route(rx.local_addr().unwrap()).unwrap();
    assert_eq!(send_and_collect(via, &rx, 200).len(), 200);
    let first = link.report();
    let bloated = first.forward.stats.queue_delay_max_ns;
    assert!(bloated > 5_000_000, "a queue formed: {bloated} ns");
    link.set(&LinkPair::parse("rate 1000mbit limit 1000", Some("none")).unwrap())
        .unwrap();
    let got = {
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut got = 0;
        let mut buf = [0u8; 64];
        rx.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        for i in 0..20u32 {
            tx.send_to(&i.to_be_bytes(), via).unwrap();
            if rx.recv(&mut buf).is_ok() {
                got += 1;
            }
        }
        got
    };
    assert_eq!(got, 20);
    // The relay publishes its counts after it has sent: wait for the last one (bounded).
    let t0 = std::time::Instant::now();
    let mut r = link.report();
    while r.forward.stats.packets_in < 220 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
        r = link.report();
    }
    assert_eq!(r.forward.stats.packets_in, 220, "the counts add up");
    let fresh = r.since(&first).forward.stats.queue_delay_max_ns;
    assert!(
        fresh < bloated / 10,
        "the new spec's worst wait ({fresh} ns) is its own, not the old one's ({bloated} ns)"
    );
}
