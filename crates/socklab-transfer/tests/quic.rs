//! Loopback integration tests of `socklab transfer` over QUIC (issue 30 part 3): real
//! sockets, a server on a thread, files compared byte for byte; a wrong certificate and a
//! flood of handshakes refused while a real client is served.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

mod common;

use common::{assert_received, make_files};
use socklab_tls::{Identity, Trust};
use socklab_transfer::quic::{send_quic, serve_quic, QuicCc, QuicSendOptions, QuicServeOptions};
use socklab_transfer::{SessionLog, TransferError};

struct Server {
    addr: SocketAddr,
    identity: Arc<Identity>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<SessionLog, TransferError>>>,
}

impl Server {
    fn start(dir: &Path, opts: QuicServeOptions, once: bool) -> Server {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let identity = Arc::new(Identity::self_signed(&[]).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let (d, id, st) = (dir.to_path_buf(), identity.clone(), stop.clone());
        let handle = std::thread::spawn(move || serve_quic(sock, &d, &id, &opts, &st, once));
        Server {
            addr,
            identity,
            stop,
            handle: Some(handle),
        }
    }

    fn pinned(&self) -> QuicSendOptions {
        QuicSendOptions {
            trust: Trust::Pinned(self.identity.fingerprint()),
            cc: QuicCc::Cubic,
        }
    }

    fn stop(mut self) -> SessionLog {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap().unwrap()
    }
}

#[test]
fn quic_moves_every_file_byte_for_byte_with_a_pinned_certificate() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[0, 1, 1199, 1200, 987_000, 10_500, 2_000_000]);
    let server = Server::start(dst.path(), QuicServeOptions::default(), false);
    let r = send_quic(
        server.addr,
        &files,
        &server.pinned(),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(r.files.len(), files.len());
    assert!(r.files.iter().all(|f| f.ok), "{:?}", r.files);
    // Streams travel side by side: no per-file attribution is claimed.
    assert!(r.per_file_retransmits.is_empty());
    assert_eq!(r.bytes, r.sent_bytes);
    assert!(r.sent_packets > 0 && r.mtu >= 1200, "{r:?}");
    let log = server.stop();
    assert_eq!((log.sessions, log.files_ok, log.failed), (1, 7, 0));
    assert_received(dst.path(), &files);
}

#[test]
fn each_congestion_control_completes_a_transfer() {
    let src = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[300_000, 10_500]);
    for cc in [QuicCc::Cubic, QuicCc::NewReno, QuicCc::Bbr] {
        let dst = tempfile::tempdir().unwrap();
        let server = Server::start(dst.path(), QuicServeOptions::default(), true);
        let opts = QuicSendOptions {
            cc,
            ..server.pinned()
        };
        let r = send_quic(server.addr, &files, &opts, Duration::from_secs(60)).unwrap();
        assert_eq!(r.cc, cc.as_str());
        server.stop();
        assert_received(dst.path(), &files);
    }
}

#[test]
fn a_client_pinned_to_another_certificate_refuses_in_one_line_and_writes_nothing() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[50_000]);
    let server = Server::start(dst.path(), QuicServeOptions::default(), false);
    let other = Identity::self_signed(&[]).unwrap();
    let opts = QuicSendOptions {
        trust: Trust::Pinned(other.fingerprint()),
        cc: QuicCc::Cubic,
    };
    let e = send_quic(server.addr, &files, &opts, Duration::from_secs(20))
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n'), "{e}");
    assert!(e.contains(&other.fingerprint().to_string()), "{e}");
    assert!(
        e.contains("handshake") && !e.contains("start one there"),
        "{e}"
    );
    // The server keeps serving a client that trusts it.
    send_quic(
        server.addr,
        &files,
        &server.pinned(),
        Duration::from_secs(30),
    )
    .unwrap();
    server.stop();
    assert_received(dst.path(), &files);
}

/// A QUIC client Initial (long header, type 0, version 1) padded to 1200 bytes, with random
/// connection IDs: what a flood from spoofed ports sends. Its payload does not decrypt, so
/// a server must drop it without keeping state.
fn garbage_initial(seed: u64) -> Vec<u8> {
    let mut p = vec![0u8; 1200];
    p[0] = 0xc3;
    p[1..5].copy_from_slice(&1u32.to_be_bytes());
    p[5] = 8;
    let mut x = seed | 1;
    for b in p[6..].iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    p[14] = 8;
    p
}

#[test]
fn a_flood_of_initials_and_handshakes_leaves_the_server_serving() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[200_000, 10_500]);
    let opts = QuicServeOptions {
        max_sessions: 4,
        max_handshaking: 8,
        idle_timeout: Duration::from_secs(3),
        ..QuicServeOptions::default()
    };
    let server = Server::start(dst.path(), opts, false);
    // 2,000 undecryptable Initials from 50 source ports.
    let socks: Vec<UdpSocket> = (0..50)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    for i in 0..2000u64 {
        let _ = socks[(i % 50) as usize].send_to(&garbage_initial(i + 1), server.addr);
    }
    // Real handshakes that never send a file: they hold sessions until the idle timeout.
    let idle: Vec<_> = (0..6)
        .map(|_| {
            let (addr, fp) = (server.addr, server.identity.fingerprint());
            std::thread::spawn(move || {
                let tmp = tempfile::tempdir().unwrap();
                let f = make_files(tmp.path(), &[1]);
                // A client that connects and sends its file: some are refused (server full).
                send_quic(
                    addr,
                    &f,
                    &QuicSendOptions {
                        trust: Trust::Pinned(fp),
                        cc: QuicCc::Cubic,
                    },
                    Duration::from_secs(20),
                )
                .map_err(|e| e.to_string())
            })
        })
        .collect();
    let outcomes: Vec<Result<_, String>> = idle.into_iter().map(|h| h.join().unwrap()).collect();
    for o in &outcomes {
        if let Err(e) = o {
            assert!(!e.contains('\n'), "{e}");
        }
    }
    // After the flood a real client is served.
    let r = send_quic(
        server.addr,
        &files,
        &server.pinned(),
        Duration::from_secs(30),
    )
    .unwrap();
    assert!(r.files.iter().all(|f| f.ok));
    let log = server.stop();
    assert!(log.files_ok >= 2, "{log:?}");
    // Undecryptable Initials never become sessions; every session is a real client's.
    assert!(log.sessions <= 7, "{log:?}");
    assert_eq!(log.failed, 0, "{log:?}");
    for p in &files {
        let name = p.file_name().unwrap();
        assert!(std::fs::read(dst.path().join(name)).unwrap() == std::fs::read(p).unwrap());
    }
}

/// QUIC across socklab's TUN emulator with loss, duplication, corruption and reordering in
/// both directions (root): every file arrives byte-identical and the losses are counted.
#[test]
fn quic_crosses_a_lossy_emulated_link_byte_identical() {
    use socklab_link::{Driver, EmulatedLink, LinkConfig, LinkPair, Side, SERVER_ADDR};
    if !socklab_sys::skip::root_or_skip("quic_crosses_a_lossy_emulated_link_byte_identical") {
        return;
    }
    let link = EmulatedLink::start(&LinkConfig {
        driver: Driver::Tun,
        pair: LinkPair::parse(
            "delay 5ms 1ms loss 5% duplicate 2% corrupt 1% reorder 5% rate 50mbit",
            Some("delay 5ms loss 5% duplicate 2%"),
        )
        .unwrap(),
        seed: 12,
        ..LinkConfig::default()
    })
    .unwrap();
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let files = make_files(src.path(), &[987_000, 10_500, 987_000, 0, 10_500]);
    let server = {
        let _g = link.namespaces().unwrap().enter(Side::Server).unwrap();
        let sock = UdpSocket::bind((SERVER_ADDR, 0)).unwrap();
        let addr = sock.local_addr().unwrap();
        let identity = Arc::new(Identity::self_signed(&[]).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let (d, id, st) = (dst.path().to_path_buf(), identity.clone(), stop.clone());
        let opts = QuicServeOptions::default();
        let handle = std::thread::spawn(move || serve_quic(sock, &d, &id, &opts, &st, true));
        Server {
            addr,
            identity,
            stop,
            handle: Some(handle),
        }
    };
    let r = {
        let _g = link.namespaces().unwrap().enter(Side::Client).unwrap();
        send_quic(
            server.addr,
            &files,
            &server.pinned(),
            Duration::from_secs(120),
        )
        .unwrap()
    };
    assert!(r.files.iter().all(|f| f.ok));
    assert!(r.lost_packets > 0, "{r:?}");
    // The link's forward delay plus its 5 ms back: no RTT below the back direction's.
    assert!(r.min_rtt_us >= 5_000, "{r:?}");
    let log = server.stop();
    assert_eq!((log.sessions, log.failed), (1, 0), "{log:?}");
    assert_received(dst.path(), &files);
    link.stop().unwrap();
}
