//! Emulated links over real namespaces and TUN devices. Root only: without root every test
//! prints why it skips and passes (CI runs as root, so there they run).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use socklab_link::check::{compare, probe, CheckConfig, CheckRow, Endpoints, ProbeResult};
use socklab_link::{ns, Driver, EmulatedLink, LinkConfig, LinkPair, Side, SERVER_ADDR};

fn root_or_skip(test: &str) -> bool {
    socklab_sys::skip::root_or_skip(test)
}

fn tun_link(spec: &str) -> EmulatedLink {
    EmulatedLink::start(&LinkConfig {
        driver: Driver::Tun,
        pair: LinkPair::parse(spec, None).unwrap(),
        seed: 7,
        ..LinkConfig::default()
    })
    .unwrap()
}

fn exists(name: &str) -> bool {
    ns::exists(name)
}

/// Sends `packets` datagrams of 100 bytes client -> server across `link` and returns what
/// arrived, with the comparison against the forward spec.
fn probe_forward(link: &EmulatedLink, packets: u64) -> (ProbeResult, Vec<CheckRow>) {
    let ends = Endpoints {
        sender_ns: Some(link.namespaces().unwrap().path(Side::Client)),
        receiver_ns: Some(link.namespaces().unwrap().path(Side::Server)),
        receiver_bind: SERVER_ADDR,
        receiver_port: 0,
        via: None,
    };
    let cfg = CheckConfig { packets, size: 100 };
    let r = probe(&ends, &link.pair().forward, &cfg, &|| false).unwrap();
    let rows = compare(&link.pair().forward, &r);
    (r, rows)
}

#[test]
fn tcp_crosses_the_tun_link_byte_exact_and_everything_is_removed() {
    if !root_or_skip("tcp_crosses_the_tun_link") {
        return;
    }
    let link = tun_link("delay 1ms loss 1%");
    let (c, s) = (
        link.namespaces().unwrap().name(Side::Client),
        link.namespaces().unwrap().name(Side::Server),
    );
    assert!(exists(&c) && exists(&s));
    let listener = {
        let _g = link.namespaces().unwrap().enter(Side::Server).unwrap();
        TcpListener::bind(SocketAddr::from((SERVER_ADDR, 0))).unwrap()
    };
    let port = listener.local_addr().unwrap().port();
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).unwrap();
        got
    });
    {
        let _g = link.namespaces().unwrap().enter(Side::Client).unwrap();
        let mut conn = TcpStream::connect_timeout(
            &SocketAddr::from((SERVER_ADDR, port)),
            Duration::from_secs(5),
        )
        .unwrap();
        conn.write_all(&data).unwrap();
    }
    let got = server.join().unwrap();
    assert_eq!(blake3::hash(&got), blake3::hash(&data));
    let r = link.report();
    assert!(r.forward.stats.packets_in > 1000, "{r:?}");
    // 1 % loss over > 1000 packets: the model dropped some, and TCP recovered them.
    assert!(r.forward.stats.dropped > 0, "{r:?}");
    assert!(r.forward.cpu_ns > 0, "{r:?}");
    link.stop().unwrap();
    assert!(!exists(&c) && !exists(&s), "namespaces left behind");
    assert!(!Path::new(ns::ETC_NETNS_DIR).join(&c).exists());
}

/// The rows of a check that count packets (loss, duplication, corruption …): their verdicts are
/// statistics of the seeded model. The delay rows measure time, which a loaded machine
/// stretches; they are left to benchmarks.
fn counting_rows(rows: &[CheckRow]) -> impl Iterator<Item = &CheckRow> {
    rows.iter().filter(|r| !r.what.contains("delay"))
}

#[test]
fn check_measures_loss_and_duplication_and_never_delivers_early() {
    if !root_or_skip("check_measures_loss") {
        return;
    }
    let spec = "delay 5ms loss 10% duplicate 5%";
    let link = tun_link(spec);
    let (r, rows) = probe_forward(&link, 5000);
    assert_eq!(r.sent, 5000);
    for row in counting_rows(&rows) {
        assert_ne!(row.ok, Some(false), "{row:?}\n{rows:#?}");
    }
    // Never early (a property of the model); how late depends on the machine's load, which is
    // a benchmark's business (`socklab netem check`, bench/netem-throughput), not a test's.
    assert!(
        r.delays_ns.iter().all(|d| *d >= 5_000_000),
        "a packet arrived before its 5 ms delay"
    );
    let rep = link.stop().unwrap();
    assert_eq!(rep.forward.stats.packets_in, 5000, "{rep:?}");
}

#[test]
fn corrupt_with_fixcsum_reaches_the_application_and_without_it_does_not() {
    if !root_or_skip("corrupt_with_fixcsum") {
        return;
    }
    for (spec, reach) in [("corrupt 20% fixcsum", true), ("corrupt 20%", false)] {
        let link = tun_link(spec);
        let (r, rows) = probe_forward(&link, 2000);
        for row in counting_rows(&rows) {
            assert_ne!(row.ok, Some(false), "{spec}: {row:?}");
        }
        assert_eq!(r.corrupted > 0, reach, "{spec}: {r:?}");
        link.stop().unwrap();
    }
}

#[test]
fn cleanup_removes_leftovers_of_a_dead_owner_and_spares_others() {
    if !root_or_skip("cleanup_removes_leftovers") {
        return;
    }
    // A leftover as a SIGKILLed run leaves it: owner pid that no longer exists.
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    let tag = format!("{pid}-99");
    let mut left = ns::Namespaces::create(&tag).unwrap();
    left.keep();
    drop(left);
    let name = ns::ns_name(&tag, Side::Client);
    assert!(exists(&name));
    // Someone else's namespace (not sl-) must survive.
    let _ = ns::ip(&["netns", "del", "other-ns-socklab-test"]);
    ns::ip(&["netns", "add", "other-ns-socklab-test"]).unwrap();
    let live = tun_link("");
    let done = ns::cleanup(false).unwrap();
    assert!(done.removed.contains(&name), "{done:?}");
    assert!(!exists(&name));
    assert!(exists("other-ns-socklab-test"));
    assert!(
        exists(&live.namespaces().unwrap().name(Side::Client)),
        "a live link was removed"
    );
    ns::ip(&["netns", "del", "other-ns-socklab-test"]).unwrap();
    live.stop().unwrap();
}

#[test]
fn creating_over_existing_namespaces_fails_and_leaves_them_alone() {
    if !root_or_skip("creating_over_existing_namespaces") {
        return;
    }
    let tag = ns::fresh_tag();
    let mut first = ns::Namespaces::create(&tag).unwrap();
    let e = ns::Namespaces::create(&tag).unwrap_err().to_string();
    assert!(e.contains("already exists"), "{e}");
    // The failed attempt must not have removed the namespaces it found.
    assert!(exists(&ns::ns_name(&tag, Side::Client)));
    assert!(exists(&ns::ns_name(&tag, Side::Server)));
    first.remove().unwrap();
    assert!(!exists(&ns::ns_name(&tag, Side::Client)));
}

#[test]
fn namespace_drivers_serve_the_same_workload_api_as_udp_proxy() {
    if !root_or_skip("namespace_drivers_serve_the_same_workload_api") {
        return;
    }
    let mut link = tun_link("loss 100%");
    let ns = link.server_namespace().expect("tun makes namespaces");
    assert_eq!(link.server_bind(), std::net::IpAddr::from(SERVER_ADDR));
    // The server: a UDP socket in the server namespace, bound on the link's server address.
    let rx = {
        let _in = ns.enter(Side::Server).unwrap();
        std::net::UdpSocket::bind((link.server_bind(), 0)).unwrap()
    };
    let server = rx.local_addr().unwrap();
    assert_eq!(link.route(server).unwrap(), server, "no relay in between");
    let before = link.report();
    {
        let _client = link.enter_client().unwrap();
        let tx = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        for _ in 0..20 {
            tx.send_to(b"x", server).unwrap();
        }
    }
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert!(rx.recv(&mut [0u8; 8]).is_err(), "loss 100% delivered");
    let r = link.report().since(&before);
    assert_eq!(r.forward.stats.dropped, 20, "{r:?}");
    let (c, s) = (
        link.namespaces().unwrap().name(Side::Client),
        link.namespaces().unwrap().name(Side::Server),
    );
    link.stop().unwrap();
    assert!(!exists(&c) && !exists(&s));
}

/// A lossy repetition must not slow down the clean one after it: the link's namespaces keep
/// no per-destination TCP metrics (ssthresh, RTT) between connections.
#[test]
fn the_link_namespaces_keep_no_tcp_metrics_between_connections() {
    if !root_or_skip("the_link_namespaces_keep_no_tcp_metrics") {
        return;
    }
    let host_path = "/proc/sys/net/ipv4/tcp_no_metrics_save";
    let host_before = std::fs::read_to_string(host_path).unwrap();
    let link = tun_link("delay 1ms");
    for side in [Side::Client, Side::Server] {
        let _g = link.namespaces().unwrap().enter(side).unwrap();
        for (k, v) in ns::SYSCTLS {
            let path = format!("/proc/sys/{}", k.replace('.', "/"));
            let got = std::fs::read_to_string(&path).unwrap();
            assert_eq!(got.trim(), *v, "{k} in the {side:?} namespace");
        }
    }
    let host_after = std::fs::read_to_string(host_path).unwrap();
    assert_eq!(
        host_after, host_before,
        "the host's own setting is left alone"
    );
    link.stop().unwrap();
}

/// Re-specifying or re-seeding the link (every repetition and every cell does) must not let a
/// packet through before its delay: the old model keeps releasing what it holds on its own
/// schedule. (Before, the queue was flushed at once: a SYN crossed a 50 ms link in 0.1 ms,
/// TCP measured a round trip of microseconds and BBR starved every later connection.) A
/// lower bound only: a loaded machine makes packets later, never earlier.
#[test]
fn re_specifying_the_link_never_delivers_a_packet_before_its_delay() {
    if !root_or_skip("re_specifying_the_link_never_delivers_early") {
        return;
    }
    let mut link = tun_link("delay 50ms");
    let ns = link.namespaces().unwrap();
    let server = {
        let _g = ns.enter(Side::Server).unwrap();
        std::net::UdpSocket::bind(SocketAddr::from((SERVER_ADDR, 0))).unwrap()
    };
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let to = server.local_addr().unwrap();
    let client = {
        let _g = ns.enter(Side::Client).unwrap();
        std::net::UdpSocket::bind("0.0.0.0:0").unwrap()
    };
    let specs = ["delay 50ms", "delay 50ms loss 0.1%"];
    let mut buf = [0u8; 64];
    for i in 0..6u64 {
        let t0 = std::time::Instant::now();
        client.send_to(&i.to_be_bytes(), to).unwrap();
        if i % 2 == 0 {
            link.reseed(100 + i).unwrap();
        } else {
            let pair = LinkPair::parse(specs[(i / 2 % 2) as usize], None).unwrap();
            link.set(&pair).unwrap();
        }
        // A socket with a timeout returns EINTR on any pending signal: try again.
        let n = loop {
            match server.recv_from(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.unwrap().0,
            }
        };
        let took = t0.elapsed();
        assert_eq!(&buf[..n], &i.to_be_bytes());
        assert!(
            took >= Duration::from_millis(49),
            "datagram {i} crossed a 50 ms link in {took:?}"
        );
    }
    link.stop().unwrap();
}

/// The worst wait at the bottleneck is reported since the link was last specified, even while
/// the replaced model still holds packets: here 20 datagrams wait behind each other at 1 Mbit/s
/// (up to ~150 ms) and then sit in a 10 s delay line when the link is re-specified. The new
/// model has seen no packet, so its worst wait is 0; the old model's packets still count. (Before,
/// every report taken while the old model drained carried its worst wait: the next
/// repetition showed the previous cell's.) No timing is asserted: the waits are the model's.
#[test]
fn a_draining_model_takes_its_worst_wait_with_it() {
    if !root_or_skip("a_draining_model_takes_its_worst_wait_with_it") {
        return;
    }
    let mut link = tun_link("delay 10s rate 1mbit");
    let ns = link.namespaces().unwrap();
    let client = {
        let _g = ns.enter(Side::Client).unwrap();
        std::net::UdpSocket::bind("0.0.0.0:0").unwrap()
    };
    let to = SocketAddr::from((SERVER_ADDR, 9));
    for _ in 0..20 {
        client.send_to(&[7u8; 1000], to).unwrap();
    }
    let old = wait_for(&link, "the datagrams entered the model", &|f| {
        f.stats.packets_in == 20
    });
    assert!(old.stats.queue_delay_max_ns > 0, "they queued: {old:?}");
    link.set(&LinkPair::parse("rate 1mbit", None).unwrap())
        .unwrap();
    let new = wait_for(&link, "the new model took over", &|f| {
        f.stats.queue_delay_max_ns == 0 || f.stats.delivered > 0
    });
    assert_eq!(
        new.stats.queue_delay_max_ns, 0,
        "the worst wait is the new model's (it saw no packet), not the draining one's"
    );
    assert_eq!(
        new.stats.delivered, 0,
        "the old model still held its datagrams (10 s delay) when the report was read"
    );
    assert_eq!(new.stats.packets_in, 20, "the old model's counts stay");
    link.stop().unwrap();
}

/// `link`'s forward accounting once `ok` holds; a bounded wait (a hang guard, not a timing check).
fn wait_for(
    link: &EmulatedLink,
    what: &str,
    ok: &dyn Fn(&socklab_link::DirReport) -> bool,
) -> socklab_link::DirReport {
    let t0 = std::time::Instant::now();
    loop {
        let f = link.report().forward;
        if ok(&f) {
            return f;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{what}: {f:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
