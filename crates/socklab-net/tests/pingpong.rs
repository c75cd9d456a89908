//! The echo server and the ping-pong client over loopback: real sockets, servers in threads.
//! Every loop is bounded (counts, or a stop flag with a bounded wait); no assertion depends on
//! how fast anything ran.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use socket2::SockRef;
use socklab_net::echo::{ConnEnd, EchoConfig, EchoEvent, EchoServer, EchoStats};
use socklab_net::pingpong::{self, PingConfig, PingResult, SEED_MESSAGE};
use socklab_net::NetError;

/// How long a test waits for a server thread to finish after it was told to stop.
const BOUNDED_WAIT: Duration = Duration::from_secs(10);

/// An [`EchoServer`] serving in a thread on 127.0.0.1.
struct TestEcho {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    events: mpsc::Receiver<EchoEvent>,
    done: mpsc::Receiver<Result<EchoStats, NetError>>,
    handle: Option<JoinHandle<()>>,
}

impl TestEcho {
    fn start(udp: bool, opts: &str) -> TestEcho {
        TestEcho::start_with(udp, opts, Duration::from_secs(30))
    }

    fn start_with(udp: bool, opts: &str, idle_timeout: Duration) -> TestEcho {
        let cfg = EchoConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            udp,
            opts: opts.parse().unwrap(),
            idle_timeout,
            ..EchoConfig::default()
        };
        let server = EchoServer::bind(cfg).unwrap();
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (ev_tx, events) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            let r = server.serve(&|| s2.load(Ordering::SeqCst), &mut |e| {
                let _ = ev_tx.send(e.clone());
            });
            let _ = done_tx.send(r);
        });
        TestEcho {
            addr,
            stop,
            events,
            done,
            handle: Some(handle),
        }
    }

    /// Stops the server; serve() must return within [`BOUNDED_WAIT`].
    fn finish(mut self) -> (EchoStats, Vec<EchoEvent>) {
        self.stop.store(true, Ordering::SeqCst);
        let stats = self
            .done
            .recv_timeout(BOUNDED_WAIT)
            .expect("serve() returns once stop() is set")
            .expect("serve() ends without error");
        self.handle.take().unwrap().join().unwrap();
        (stats, self.events.try_iter().collect())
    }
}

impl Drop for TestEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn ping(to: SocketAddr, udp: bool, size: usize, count: u64) -> PingConfig {
    PingConfig {
        to,
        udp,
        size,
        count,
        timeout: Duration::from_secs(5),
        retries: 0,
        ..PingConfig::default()
    }
}

fn run(cfg: &PingConfig) -> PingResult {
    pingpong::run(cfg, &|| false).unwrap_or_else(|e| panic!("{cfg:?}: {e}"))
}

fn assert_all_completed(r: &PingResult, count: u64, what: &str) {
    assert_eq!(r.completed, count, "{what}");
    assert_eq!(
        r.rtt_ns.len(),
        count,
        "{what}: one histogram value per round trip"
    );
    assert_eq!(r.lost, 0, "{what}");
    assert!(r.total_ns > 0, "{what}");
}

#[test]
fn tcp_echo_is_exact_for_every_size() {
    for opts in ["baseline", "nodelay+quickack"] {
        let echo = TestEcho::start(false, opts);
        let mut sent = 0;
        for size in [1, 29, 1500, 65536] {
            let mut cfg = ping(echo.addr, false, size, 20);
            cfg.opts = opts.parse().unwrap();
            let r = run(&cfg);
            assert_all_completed(&r, 20, &format!("tcp {opts} size {size}"));
            assert_eq!(r.connects, 1);
            assert_eq!(r.connect_ns.len(), 1);
            assert_eq!((r.late, r.retries_sent), (0, 0));
            if opts != "baseline" {
                assert!(
                    r.effective.contains(&("nodelay".into(), "1".into())),
                    "{:?}",
                    r.effective
                );
            } else {
                assert!(r.effective.is_empty());
            }
            sent += size as u64 * 20;
        }
        let (stats, events) = echo.finish();
        assert_eq!(stats.connections, 4, "{opts}");
        assert_eq!(
            stats.bytes, sent,
            "{opts}: the server echoed exactly what it got"
        );
        assert!(stats.messages >= 80, "{opts}: {stats:?}");
        let closed = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    EchoEvent::Closed {
                        end: ConnEnd::Complete,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(closed, 4, "{events:?}");
    }
}

#[test]
fn udp_echo_is_exact_for_every_size() {
    let echo = TestEcho::start(true, "baseline");
    for size in [1, 29, 1500, 8192, 65507] {
        let r = run(&ping(echo.addr, true, size, 20));
        assert_all_completed(&r, 20, &format!("udp size {size}"));
        assert_eq!((r.late, r.retries_sent, r.connects), (0, 0, 0));
    }
    let (stats, _) = echo.finish();
    assert_eq!(stats.messages, 100, "{stats:?}");
    assert_eq!(stats.bytes, 20 * (1 + 29 + 1500 + 8192 + 65507));
}

#[test]
fn large_tcp_messages_do_not_deadlock_even_with_tiny_buffers() {
    // The echo comes back while the message is still being sent: with 4K socket buffers on
    // both sides a client that wrote the whole 1 MiB before reading would wait forever.
    let echo = TestEcho::start(false, "server:sndbuf=4K+server:rcvbuf=4K");
    let mut cfg = ping(echo.addr, false, 1 << 20, 3);
    cfg.opts = "client:sndbuf=4K+client:rcvbuf=4K".parse().unwrap();
    assert_all_completed(&run(&cfg), 3, "1 MiB with 4K buffers");
    assert_all_completed(
        &run(&ping(echo.addr, false, 16 << 20, 2)),
        2,
        "16 MiB, default buffers",
    );
}

#[test]
fn the_seed_client_gets_exactly_its_29_bytes_back() {
    let echo = TestEcho::start(false, "baseline");
    let msg = b"asdadqwDSDQWD13123ewadSADASDA";
    assert_eq!(msg.len(), 29);
    assert_eq!(&msg[..], SEED_MESSAGE);
    {
        let mut s = TcpStream::connect(echo.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 2000];
        for i in 0..500 {
            s.write_all(msg).unwrap();
            let n = s.read(&mut buf).unwrap();
            assert_eq!(
                &buf[..n],
                &msg[..],
                "reply {i}: exactly the 29 bytes, no trailing NUL"
            );
        }
    }
    let (stats, events) = echo.finish();
    assert_eq!(stats.connections, 1);
    assert_eq!(stats.bytes, 500 * 29);
    assert_eq!(stats.messages, 500);
    assert!(
        events.iter().any(|e| matches!(
            e,
            EchoEvent::Closed {
                bytes: 14500,
                end: ConnEnd::Complete,
                ..
            }
        )),
        "{events:?}"
    );
    assert!(events.iter().all(|e| !e.line().is_empty()));
}

/// A UDP echo server that drops every other datagram (by count) and, with `dup`, answers the
/// others twice. Runs until `stop` is set.
fn lossy_udp_server(dup: bool) -> (SocketAddr, Arc<AtomicBool>, JoinHandle<u64>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let handle = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut received = 0u64;
        while !s2.load(Ordering::SeqCst) {
            let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                continue;
            };
            received += 1;
            if dup {
                sock.send_to(&buf[..n], peer).unwrap();
                sock.send_to(&buf[..n], peer).unwrap();
            } else if received % 2 == 1 {
                sock.send_to(&buf[..n], peer).unwrap();
            }
        }
        received
    });
    (addr, stop, handle)
}

#[test]
fn udp_resends_after_a_timeout_and_counts_losses() {
    let (addr, stop, handle) = lossy_udp_server(false);
    let mut cfg = ping(addr, true, 100, 20);
    cfg.timeout = Duration::from_millis(50);
    cfg.retries = 3;
    let r = run(&cfg);
    assert_all_completed(&r, 20, "every other datagram dropped, 3 retries");
    assert!(r.retries_sent > 0, "{r:?}");

    cfg.retries = 0;
    let r = run(&cfg);
    assert_eq!(r.completed + r.lost, 20, "{r:?}");
    // Half the datagrams are dropped and nothing is resent: at least half the messages are lost.
    assert!(r.lost >= 10, "{r:?}");
    assert_eq!(r.retries_sent, 0);
    assert_eq!(r.rtt_ns.len(), r.completed);
    stop.store(true, Ordering::SeqCst);
    handle.join().unwrap();
}

#[test]
fn udp_replies_to_an_earlier_message_are_discarded_as_late() {
    // Every reply comes twice: the second copy of message k arrives while the client waits for
    // message k+1, is recognised by its sequence number and discarded.
    let (addr, stop, handle) = lossy_udp_server(true);
    let r = run(&ping(addr, true, 64, 30));
    assert_all_completed(&r, 30, "duplicated replies");
    assert_eq!(r.late, 29, "{r:?}");
    // Sizes below 8 carry the low bytes of the sequence number.
    let r = run(&ping(addr, true, 1, 30));
    assert_all_completed(&r, 30, "duplicated 1-byte replies");
    assert_eq!(r.late, 29, "{r:?}");
    stop.store(true, Ordering::SeqCst);
    handle.join().unwrap();
}

#[test]
fn a_connection_per_message_connects_count_times() {
    for opts in ["baseline", "fastopen"] {
        // With net.ipv4.tcp_fastopen allowing it, the data rides on the SYN; otherwise the
        // kernel falls back to a normal handshake. Both must echo every message.
        let echo = TestEcho::start(false, opts);
        let mut cfg = ping(echo.addr, false, 29, 10);
        cfg.new_connection_per_message = true;
        cfg.opts = opts.parse().unwrap();
        let r = run(&cfg);
        assert_all_completed(&r, 10, opts);
        assert_eq!(r.connects, 10, "{opts}");
        assert_eq!(r.connect_ns.len(), 10, "{opts}");
        if opts == "fastopen" {
            assert_eq!(r.effective, vec![("fastopen".into(), "1".into())]);
        }
        let (stats, _) = echo.finish();
        assert_eq!(stats.connections, 10, "{opts}");
        assert_eq!(stats.bytes, 290, "{opts}");
    }
}

/// A TCP echo that answers `rounds` messages of `size` bytes, flipping the last byte of the
/// last answer when `corrupt`, then closes.
fn short_lived_tcp_echo(size: usize, rounds: usize, corrupt: bool) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; size];
        for i in 0..rounds {
            s.read_exact(&mut buf).unwrap();
            if corrupt && i + 1 == rounds {
                buf[size - 1] ^= 0xff;
            }
            s.write_all(&buf).unwrap();
        }
    });
    (addr, handle)
}

#[test]
fn a_server_that_disappears_mid_run_is_a_clear_error() {
    let (addr, handle) = short_lived_tcp_echo(100, 10, false);
    let e = pingpong::run(&ping(addr, false, 100, 100), &|| false).unwrap_err();
    handle.join().unwrap();
    let text = e.to_string();
    assert!(!matches!(e, NetError::Interrupted));
    assert!(text.contains(&addr.to_string()), "{text}");
    assert!(text.contains("10 of 100 round trips"), "{text}");

    // A UDP peer whose port is closed: ICMP port unreachable, reported as refused.
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let text = pingpong::run(&ping(to, true, 29, 5), &|| false)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains(&to.to_string()) && text.contains("0 of 5"),
        "{text}"
    );
}

#[test]
fn a_wrong_reply_is_a_protocol_error() {
    let (addr, handle) = short_lived_tcp_echo(64, 3, true);
    let e = pingpong::run(&ping(addr, false, 64, 5), &|| false).unwrap_err();
    handle.join().unwrap();
    assert!(matches!(e, NetError::Protocol { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("round trip 3") && text.contains("byte 63"),
        "{text}"
    );
}

#[test]
fn connecting_to_a_closed_port_names_the_address() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let text = pingpong::run(&ping(to, false, 29, 5), &|| false)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains(&to.to_string()) && text.contains("socklab echo"),
        "{text}"
    );
}

#[test]
fn bad_parameters_are_refused_before_connecting() {
    let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let err = |c: PingConfig| c.validate().unwrap_err().to_string();
    assert!(err(ping(to, false, 0, 5)).contains("`size` 0"));
    assert!(err(ping(to, true, 0, 5)).contains("`size` 0"));
    assert!(err(ping(to, false, 29, 0)).contains("`count` 0"));
    let e = err(ping(to, true, 70000, 5));
    assert!(e.contains("`size` 70000") && e.contains("65507"), "{e}");
    assert!(err(ping(to, false, (16 << 20) + 1, 5)).contains("`size`"));
    assert!(ping(to, true, 65507, 5).validate().is_ok());
    assert!(ping(to, false, 70000, 5).validate().is_ok());
    let mut c = ping(to, true, 29, 5);
    c.opts = "nodelay".parse().unwrap();
    assert!(err(c).contains("TCP only"));
    // run() checks before touching the network.
    let e = pingpong::run(&ping(to, false, 0, 5), &|| false).unwrap_err();
    assert!(matches!(e, NetError::Invalid(_)), "{e}");
}

#[test]
fn stop_abandons_a_run() {
    let echo = TestEcho::start(false, "baseline");
    let e = pingpong::run(&ping(echo.addr, false, 29, 1000), &|| true).unwrap_err();
    assert!(matches!(e, NetError::Interrupted), "{e}");
    let e = pingpong::run(&ping(echo.addr, true, 29, 1000), &|| true).unwrap_err();
    assert!(matches!(e, NetError::Interrupted), "{e}");
}

#[test]
fn the_echo_server_survives_a_reset_and_stops_with_idle_clients_connected() {
    let echo = TestEcho::start(false, "baseline");
    {
        // Half a message, never read back, then RST (linger 0).
        let s = TcpStream::connect(echo.addr).unwrap();
        (&s).write_all(&[7u8; 1000]).unwrap();
        SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
    }
    assert_all_completed(&run(&ping(echo.addr, false, 1500, 50)), 50, "after a reset");
    // A client that stays connected and silent must not keep serve() from returning (one
    // round trip first, so that it has surely been accepted).
    let mut idle = TcpStream::connect(echo.addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    idle.write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    idle.read_exact(&mut one).unwrap();
    assert_eq!(&one, b"x");
    let (stats, events) = echo.finish();
    drop(idle);
    assert_eq!(stats.connections, 3, "{events:?}");
    let closed: Vec<&ConnEnd> = events
        .iter()
        .filter_map(|e| match e {
            EchoEvent::Closed { end, .. } => Some(end),
            _ => None,
        })
        .collect();
    assert_eq!(closed.len(), 3, "{events:?}");
    assert!(closed.contains(&&ConnEnd::Stopped), "{events:?}");
}

/// A silent client, and one that keeps sending but never reads its echoes (the server's writes
/// block), are both dropped after the idle timeout (1 s here; the client gives up after 10 s),
/// and the server goes on serving.
#[test]
fn the_echo_server_drops_silent_and_non_reading_clients_after_the_idle_timeout() {
    let echo = TestEcho::start_with(false, "baseline", Duration::from_secs(1));
    let mut silent = TcpStream::connect(echo.addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    match silent.read_to_end(&mut got) {
        Ok(_) => assert!(got.is_empty(), "{got:?}"),
        Err(e) => panic!("the silent client was not closed within 10 s: {e}"),
    }
    let hog = TcpStream::connect(echo.addr).unwrap();
    hog.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let chunk = vec![b'x'; 64 << 10];
    let t0 = std::time::Instant::now();
    let mut sent = 0usize;
    let ended = loop {
        match (&hog).write(&chunk) {
            Ok(n) => sent += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break true, // reset or broken pipe: the server closed it
        }
        if t0.elapsed() > Duration::from_secs(10) {
            break false;
        }
    };
    assert!(
        ended,
        "a client that never reads was still connected after 10 s ({sent} bytes sent)"
    );
    assert_all_completed(
        &run(&ping(echo.addr, false, 100, 10)),
        10,
        "after the idle clients",
    );
    let (_, events) = echo.finish();
    let idle = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                EchoEvent::Closed {
                    end: ConnEnd::IdleTimeout,
                    ..
                }
            )
        })
        .count();
    assert_eq!(idle, 2, "{events:?}");
}

#[test]
fn the_echo_server_refuses_bad_settings_and_busy_ports() {
    let cfg = |bind: &str, udp: bool| EchoConfig {
        bind: bind.parse().unwrap(),
        udp,
        ..EchoConfig::default()
    };
    let mut c = cfg("127.0.0.1:0", false);
    c.max_message = 0;
    assert!(EchoServer::bind(c)
        .unwrap_err()
        .to_string()
        .contains("`max_message` 0"));
    let mut c = cfg("127.0.0.1:0", true);
    c.opts = "nodelay".parse().unwrap();
    assert!(EchoServer::bind(c)
        .unwrap_err()
        .to_string()
        .contains("TCP only"));
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let e = EchoServer::bind(cfg(&held.local_addr().unwrap().to_string(), false))
        .unwrap_err()
        .to_string();
    assert!(e.contains("choose another `port`, or 0"), "{e}");
}

/// A TCP server for one connection that records what it read and answers every read with
/// `answer` (None: an echo), up to `rounds` reads.
fn scripted_tcp(answer: Option<&'static [u8]>, rounds: usize) -> (SocketAddr, JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (mut buf, mut seen) = (vec![0u8; 65536], Vec::new());
        for _ in 0..rounds {
            let n = match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            seen.extend_from_slice(&buf[..n]);
            if s.write_all(answer.unwrap_or(&buf[..n])).is_err() {
                break;
            }
        }
        seen
    });
    (addr, handle)
}

/// A UDP server that answers every datagram with `answer` (None: an echo), up to `rounds`
/// datagrams or 5 s of silence, and returns the datagrams it got.
fn scripted_udp(
    answer: Option<&'static [u8]>,
    rounds: usize,
) -> (SocketAddr, JoinHandle<Vec<Vec<u8>>>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let addr = sock.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (mut buf, mut seen) = (vec![0u8; 65536], Vec::new());
        for _ in 0..rounds {
            let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                break;
            };
            seen.push(buf[..n].to_vec());
            sock.send_to(answer.unwrap_or(&buf[..n]), peer).unwrap();
        }
        seen
    });
    (addr, handle)
}

#[test]
fn the_payload_is_printable_text_for_every_size() {
    // A C server using string functions sees the whole message: no NUL, printable ASCII.
    for size in [1usize, 5, 8, 29, 64, 1500] {
        let (addr, server) = scripted_tcp(None, 1000);
        let r = run(&ping(addr, false, size, 12));
        assert_all_completed(&r, 12, &format!("tcp size {size}"));
        let seen = server.join().unwrap();
        assert_eq!(seen.len(), 12 * size);
        assert!(
            seen.iter().all(|b| b.is_ascii_graphic()),
            "size {size}: {:?}",
            String::from_utf8_lossy(&seen)
        );
        let (addr, server) = scripted_udp(None, 12);
        assert_all_completed(&run(&ping(addr, true, size, 12)), 12, "udp");
        for d in server.join().unwrap() {
            assert_eq!(d.len(), size);
            assert!(d.iter().all(|b| b.is_ascii_graphic()), "{d:?}");
        }
    }
}

#[test]
fn reply_any_or_a_byte_count_measures_a_server_that_is_not_an_echo() {
    for udp in [false, true] {
        for reply in ["any", "5"] {
            let mut cfg = ping("127.0.0.1:9".parse().unwrap(), udp, 64, 10);
            cfg.reply = reply.parse().unwrap();
            assert_eq!(cfg.reply.to_string(), reply);
            let what = format!("udp {udp}, reply {reply}");
            if udp {
                let (addr, server) = scripted_udp(Some(b"pong\n"), 10);
                cfg.to = addr;
                assert_all_completed(&run(&cfg), 10, &what);
                assert_eq!(server.join().unwrap().len(), 10, "{what}");
            } else {
                let (addr, server) = scripted_tcp(Some(b"pong\n"), 10);
                cfg.to = addr;
                assert_all_completed(&run(&cfg), 10, &what);
                assert_eq!(server.join().unwrap().len(), 640, "{what}");
            }
        }
    }
    let bad = "echo2".parse::<pingpong::Reply>().unwrap_err().to_string();
    assert!(bad.contains("echo2") && bad.contains("any"), "{bad}");
}

#[test]
fn an_echo_check_against_another_server_says_what_arrived() {
    for udp in [false, true] {
        let mut cfg = ping("127.0.0.1:9".parse().unwrap(), udp, 64, 3);
        let server = if udp {
            let (addr, h) = scripted_udp(Some(b"pong\n"), 1);
            cfg.to = addr;
            std::thread::spawn(move || drop(h.join()))
        } else {
            let (addr, h) = scripted_tcp(Some(b"pong\n"), 1);
            cfg.to = addr;
            std::thread::spawn(move || drop(h.join()))
        };
        let e = pingpong::run(&cfg, &|| false).unwrap_err();
        server.join().unwrap();
        assert!(matches!(e, NetError::Protocol { .. }), "{e}");
        let text = e.to_string();
        for needle in ["expected 64 bytes", "got 5 bytes", "\"pong\\n\"", "`reply`"] {
            assert!(
                text.contains(needle),
                "udp {udp}: '{needle}' missing in: {text}"
            );
        }
        assert!(!text.contains("no reply"), "{text}");
    }
}
