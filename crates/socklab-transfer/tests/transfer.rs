//! Loopback integration tests of `socklab transfer`'s two transports: real sockets, a server in
//! a thread, files compared byte for byte.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod common;

use common::{assert_received, make_files};
use socklab_rudp::{wire, Config};
use socklab_transfer::{
    send_rudp, send_tcp, serve_rudp, serve_tcp, Manifest, ServerSession, SessionLimits, SessionLog,
    TransferError,
};

/// A rudp transfer with the default settings and a 30 s timeout, which must succeed.
fn send(to: SocketAddr, files: &[PathBuf]) -> socklab_transfer::RudpReport {
    send_rudp(to, files, &Config::default(), Duration::from_secs(30)).unwrap()
}

struct RudpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<SessionLog, TransferError>>>,
}

impl RudpServer {
    fn start(dir: &Path, config: Config, once: bool) -> RudpServer {
        RudpServer::on(UdpSocket::bind("127.0.0.1:0").unwrap(), dir, config, once)
    }

    /// A server on a socket bound already (in a namespace, say).
    fn on(sock: UdpSocket, dir: &Path, config: Config, once: bool) -> RudpServer {
        let addr = sock.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, d2) = (stop.clone(), dir.to_path_buf());
        let handle = std::thread::spawn(move || {
            serve_rudp(sock, &d2, &config, &SessionLimits::default(), &s2, once)
        });
        RudpServer {
            addr,
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the server and returns its sessions (these tests have fewer than the log keeps).
    fn finish(mut self) -> Vec<ServerSession> {
        self.stop.store(true, Ordering::SeqCst);
        let log = self.handle.take().unwrap().join().unwrap().unwrap();
        let sessions: Vec<ServerSession> = log.recent().cloned().collect();
        assert_eq!(log.sessions, sessions.len() as u64, "{log:?}");
        sessions
    }
}

impl Drop for RudpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[test]
fn rudp_transfers_files_byte_identical_over_loopback() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[0, 1, 1471, 1472, 70_000, 3_000_000, 10_500]);
    let server = RudpServer::start(dst.path(), Config::default(), false);
    let r = send_rudp(
        server.addr,
        &files,
        &Config::default(),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(r.bytes, 3_000_000 + 70_000 + 10_500 + 1472 + 1471 + 1);
    assert_eq!(r.sent_bytes, r.bytes);
    assert!(r.files.iter().all(|f| f.ok), "{:?}", r.files);
    assert_eq!(r.per_file_retransmits.len(), files.len());
    assert!(r.stats.packets_sent > 2000 && r.stats.packets_received > 0);
    assert!(r.stats.min_rtt_ns > 0 && r.total_ns > 0);
    let sessions = server.finish();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].error, None);
    assert_eq!(sessions[0].bytes, r.bytes);
    assert_received(dst.path(), &files);
}

/// `socklab transfer send --proto rudp` to a loopback server (issue 29): the datagrams are as
/// large as the loopback MTU carries, not 1472 bytes, and every byte still arrives intact.
#[test]
fn rudp_send_on_loopback_uses_datagrams_as_large_as_the_loopback_mtu() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = make_files(
        src.path(),
        &[0, 1, 65_506, 65_507, 65_508, 2_000_000, 10_500],
    );
    let server = RudpServer::start(dst.path(), Config::default(), false);
    let report = socklab_transfer::send(
        socklab_transfer::Proto::Rudp,
        server.addr,
        &files,
        None,
        Duration::from_secs(60),
        None,
    )
    .unwrap();
    let socklab_transfer::TransferReport::Rudp(r) = report else {
        panic!("a rudp send gave a TCP report");
    };
    assert!(r.files.iter().all(|f| f.ok), "{:?}", r.files);
    let per_packet = r.stats.bytes_sent / r.stats.packets_sent.max(1);
    assert!(
        per_packet > 2 * Config::default().max_datagram as u64,
        "{per_packet} bytes per packet over {} packets",
        r.stats.packets_sent
    );
    // Each write the client hands the transport fills one datagram: a 64 KiB write would leave
    // as one full packet and one of about 100 bytes (about 69 packets of new data here).
    let per_write = (65_507 - 256) as u64;
    let sizes = [0u64, 1, 65_506, 65_507, 65_508, 2_000_000, 10_500];
    let full: u64 = sizes.iter().map(|s| s.div_ceil(per_write)).sum();
    assert!(
        r.stats.data_packets_sent <= full + sizes.len() as u64 + 2,
        "{} packets of new data for {full} datagrams' worth",
        r.stats.data_packets_sent
    );
    let sessions = server.finish();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].error, None);
    assert_received(dst.path(), &files);
}

#[test]
fn tcp_transfers_files_byte_identical_over_loopback() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[0, 1, 100_000, 2_000_000]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, d2) = (stop.clone(), dst.path().to_path_buf());
    let h = std::thread::spawn(move || serve_tcp(listener, &d2, Some("cubic"), &s2, true));
    let r = send_tcp(addr, &files, Some("cubic"), Duration::from_secs(60)).unwrap();
    assert_eq!(r.cc, "cubic");
    assert!(r.files.iter().all(|f| f.ok));
    let sessions = h.join().unwrap().unwrap();
    assert_eq!(sessions[0].error, None);
    assert_eq!(sessions[0].cc, "cubic");
    assert_received(dst.path(), &files);
}

#[test]
fn rudp_client_without_a_server_fails_clearly_and_quickly() {
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // The socket above is closed again: nothing listens on `port`.
    let src = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[10]);
    let t = Instant::now();
    let e = send_rudp(port, &files, &Config::default(), Duration::from_secs(30)).unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    let msg = e.to_string();
    assert!(msg.contains(&port.to_string()), "{msg}");
}

#[test]
fn garbage_datagrams_to_a_live_server_write_nothing_and_do_not_stop_it() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let server = RudpServer::start(dst.path(), Config::default(), false);
    let evil = UdpSocket::bind("127.0.0.1:0").unwrap();
    // A valid manifest, so a datagram that somehow got through would create a file.
    let files = make_files(src.path(), &[5000]);
    let manifest = Manifest::from_paths(&files).unwrap().encode();
    let mut x = 12345u64;
    let mut rnd = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as u8
    };
    let mut sent = 0;
    for i in 0..3000usize {
        let len = [0, 1, 8, 9, 16, 40, 1200, 1472, 9000][i % 9];
        let mut d: Vec<u8> = (0..len).map(|_| rnd()).collect();
        if i % 3 == 0 && d.len() > 20 {
            // A plausible header (first bytes of an Initial or Data packet) over random rest.
            d[0] = (i % 4) as u8;
        }
        if i % 5 == 0 {
            d.extend_from_slice(&manifest[..manifest.len().min(200)]);
        }
        if i % 7 == 0 {
            d.truncate(len / 2);
        }
        evil.send_to(&d, server.addr).unwrap();
        sent += 1;
    }
    assert_eq!(sent, 3000);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
    // The server still works.
    let r = send(server.addr, &files);
    assert!(r.files[0].ok);
    let sessions = server.finish();
    assert_eq!(sessions.len(), 1, "garbage created sessions: {sessions:?}");
    assert_received(dst.path(), &files);
    let _ = wire::VERSION; // the wire module is what the garbage imitates
}

#[test]
fn an_interrupted_rudp_transfer_resumes_where_it_stopped() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[6_000_000]);
    let server_cfg = Config {
        idle_timeout_ns: 1_000_000_000,
        ..Config::default()
    };
    // First try: paced at 6 MB/s, given 0.5 s: about half of the file gets there.
    let server = RudpServer::start(dst.path(), server_cfg.clone(), true);
    let slow = Config {
        max_rate: Some(6_000_000),
        ..Config::default()
    };
    let e = send_rudp(server.addr, &files, &slow, Duration::from_millis(500)).unwrap_err();
    assert!(matches!(e, TransferError::Timeout(_)), "{e}");
    // The server's session ends on its idle timeout and keeps what it wrote.
    let sessions = server.finish();
    assert!(sessions[0].error.is_some());
    let part = sessions[0].bytes;
    assert!(
        part > 1_000_000 && part < 6_000_000,
        "{part} bytes before the cut"
    );
    assert!(
        !dst.path().join("file-0.bin").exists(),
        "partial file under its final name"
    );
    // Second try resumes.
    let server = RudpServer::start(dst.path(), server_cfg, true);
    let r = send(server.addr, &files);
    assert!(r.files[0].ok);
    assert!(r.files[0].skipped_bytes > 0, "{:?}", r.files[0]);
    assert_eq!(r.sent_bytes + r.files[0].skipped_bytes, 6_000_000);
    drop(server);
    assert_received(dst.path(), &files);
}

fn root_or_skip(test: &str) -> bool {
    socklab_sys::skip::root_or_skip(test)
}

/// Both transports across socklab's TUN emulator with loss, duplication, corruption and
/// reordering in both directions: every file arrives byte-identical, rudp recovers the losses.
#[test]
fn both_transports_cross_a_lossy_emulated_link_byte_identical() {
    use socklab_link::{Driver, EmulatedLink, LinkConfig, LinkPair, Side, SERVER_ADDR};
    if !root_or_skip("both_transports_cross_a_lossy_emulated_link") {
        return;
    }
    let link = EmulatedLink::start(&LinkConfig {
        driver: Driver::Tun,
        pair: LinkPair::parse(
            "delay 5ms 1ms loss 5% duplicate 2% corrupt 1% reorder 5% rate 50mbit",
            Some("delay 5ms loss 5% duplicate 2%"),
        )
        .unwrap(),
        seed: 11,
        ..LinkConfig::default()
    })
    .unwrap();
    let src = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[987_000, 10_500, 987_000, 0, 10_500]);
    // rudp
    let dst = tempfile::tempdir().unwrap();
    let server = {
        let _g = link.namespaces().unwrap().enter(Side::Server).unwrap();
        let sock = UdpSocket::bind((SERVER_ADDR, 0)).unwrap();
        RudpServer::on(sock, dst.path(), Config::default(), true)
    };
    let r = {
        let _g = link.namespaces().unwrap().enter(Side::Client).unwrap();
        send_rudp(
            server.addr,
            &files,
            &Config::default(),
            Duration::from_secs(60),
        )
        .unwrap()
    };
    assert!(r.files.iter().all(|f| f.ok));
    assert!(r.stats.retransmitted_packets > 0, "{:?}", r.stats);
    // Reordered packets skip the forward delay (netem's way), so the floor is the 5 ms back.
    assert!(r.stats.min_rtt_ns >= 5_000_000, "{:?}", r.stats);
    let sessions = server.finish();
    assert_eq!(sessions[0].error, None);
    assert_received(dst.path(), &files);
    // TCP
    let dst = tempfile::tempdir().unwrap();
    let listener = {
        let _g = link.namespaces().unwrap().enter(Side::Server).unwrap();
        TcpListener::bind((SERVER_ADDR, 0)).unwrap()
    };
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, d2) = (stop.clone(), dst.path().to_path_buf());
    let h = std::thread::spawn(move || serve_tcp(listener, &d2, Some("cubic"), &s2, true));
    let r = {
        let _g = link.namespaces().unwrap().enter(Side::Client).unwrap();
        send_tcp(addr, &files, Some("cubic"), Duration::from_secs(120)).unwrap()
    };
    assert!(r.files.iter().all(|f| f.ok));
    assert!(r.total_retrans > 0);
    h.join().unwrap().unwrap();
    assert_received(dst.path(), &files);
    link.stop().unwrap();
}
