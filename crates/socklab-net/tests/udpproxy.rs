//! The UDP proxy driver over loopback: a real echo server behind it, the ping-pong client in
//! front. Counts only, no timing assertions.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use socklab_impair::LinkSpec;
use socklab_net::echo::{EchoConfig, EchoServer};
use socklab_net::pingpong::{self, PingConfig};
use socklab_net::udpproxy;

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
