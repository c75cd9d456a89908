//! Loopback integration tests: a real sink on 127.0.0.1 in a thread, real sockets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use socklab_net::bulk::{self, BulkConfig, Limit};
use socklab_net::sink::{Mode, Outcome, SinkConfig};
use socklab_net::{NetError, Strategy};

mod sink_common;
use sink_common::TestSink;

/// The sink the loopback tests run against: 64 KiB reads, idle after 5 s.
fn loopback_cfg() -> SinkConfig {
    SinkConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        read_size: 64 * 1024,
        idle_timeout: Duration::from_secs(5),
        ..SinkConfig::default()
    }
}

fn cfg(
    to: SocketAddr,
    strategy: Strategy,
    nbufs: usize,
    bufsize: usize,
    iterations: u64,
) -> BulkConfig {
    BulkConfig {
        to,
        strategy,
        nbufs,
        bufsize,
        limit: Limit::Iterations(iterations),
        cc: "cubic".into(),
        nodelay: false,
        sndbuf: None,
        read_size: 1500,
        verify: true,
        seed: 42,
        connect_timeout: Duration::from_secs(5),
        timeout: None,
        grace: bulk::GRACE,
        sampling: Default::default(),
        ..BulkConfig::new(to)
    }
}

#[test]
fn every_strategy_delivers_exactly_the_bytes_sent() {
    let sink = TestSink::start(loopback_cfg());
    for strategy in Strategy::ALL {
        for (nbufs, bufsize, iters) in [
            (15usize, 100usize, 300u64),
            (100, 15, 200),
            (1, 65536, 40),
            (7, 4099, 33),
        ] {
            let c = cfg(sink.addr, strategy, nbufs, bufsize, iters);
            let r = bulk::run(&c, &|| false).unwrap_or_else(|e| panic!("{strategy}: {e}"));
            let want = (nbufs * bufsize) as u64 * iters;
            assert_eq!(r.bytes, want, "{strategy}");
            assert_eq!(r.streams[0].received, want, "{strategy} sink count");
            assert_eq!(
                r.verified,
                Some(true),
                "{strategy} {nbufs}x{bufsize}: stream hash differs"
            );
            assert_eq!(r.rounds, iters);
            assert!(
                r.reads >= want.div_ceil(1500),
                "{strategy}: reads {} below bytes/read_size",
                r.reads
            );
            assert_eq!(r.cc, "cubic");
            let rep = sink.report_within(Duration::from_secs(20));
            assert_eq!(rep.mode, Mode::Socklab);
            assert_eq!(rep.outcome, Outcome::Complete);
            assert_eq!(rep.result.bytes, want);
            if strategy == Strategy::Write {
                assert!(
                    r.syscalls >= nbufs as u64 * iters,
                    "write issues one call per buffer"
                );
            }
            if strategy == Strategy::Zerocopy {
                let zc = r.zerocopy.expect("zerocopy completions");
                assert!(
                    zc.completed > 0 && zc.completed <= r.syscalls,
                    "{zc:?} vs {} calls",
                    r.syscalls
                );
            }
        }
    }
}

#[test]
fn bytes_and_duration_limits_end_the_test() {
    let sink = TestSink::start(loopback_cfg());
    let mut c = cfg(sink.addr, Strategy::Single, 1, 1000, 1);
    c.limit = Limit::Bytes(10_500);
    let r = bulk::run(&c, &|| false).unwrap();
    assert_eq!(r.rounds, 11, "bytes are rounded up to whole rounds");
    assert_eq!(r.verified, Some(true));
    sink.report_within(Duration::from_secs(20));
    c.limit = Limit::Duration(Duration::from_millis(100));
    let r = bulk::run(&c, &|| false).unwrap();
    assert!(r.send_seconds >= 0.1);
    assert!(r.rounds > 0);
    assert_eq!(r.verified, Some(true));
}

#[test]
fn the_stop_flag_abandons_a_test() {
    let sink = TestSink::start(loopback_cfg());
    let mut c = cfg(sink.addr, Strategy::Single, 1, 1000, 1);
    c.limit = Limit::Duration(Duration::from_secs(3600));
    let e = bulk::run(&c, &|| true).unwrap_err();
    assert!(matches!(e, NetError::Interrupted));
    // The sink survives the abandoned connection and serves the next client.
    let rep = sink.report_within(Duration::from_secs(20));
    assert_ne!(rep.outcome, Outcome::Refused(String::new()));
    let r = bulk::run(&cfg(sink.addr, Strategy::Writev, 10, 10, 10), &|| false).unwrap();
    assert_eq!(r.verified, Some(true));
}

#[test]
fn sink_survives_a_client_that_dies_mid_stream_and_counts_raw_clients() {
    let sink = TestSink::start(loopback_cfg());
    // A socklab client that sends its request, some data, then resets the connection.
    {
        let mut s = TcpStream::connect(sink.addr).unwrap();
        s.write_all(b"SOCKLAB BULK/1 read_size=1000 verify=0\n")
            .unwrap();
        let mut line = [0u8; 64];
        let n = s.read(&mut line).unwrap();
        assert!(line[..n].starts_with(b"READY read_size=1000"));
        s.write_all(&[1u8; 50_000]).unwrap();
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
    } // dropped with linger 0: RST
    let rep = sink.report_within(Duration::from_secs(20));
    assert!(
        matches!(rep.outcome, Outcome::Aborted(_) | Outcome::Complete),
        "{rep:?}"
    );
    assert!(rep.result.bytes <= 50_000);

    // A raw client, like `dd | nc`.
    {
        let mut s = TcpStream::connect(sink.addr).unwrap();
        s.write_all(&vec![0u8; 300_000]).unwrap();
    }
    let rep = sink.report_within(Duration::from_secs(20));
    assert_eq!(rep.mode, Mode::Raw);
    assert_eq!(rep.result.bytes, 300_000);
    assert_eq!(rep.outcome, Outcome::Complete);

    // A client with a malformed request gets an error line, and the sink goes on.
    {
        let mut s = TcpStream::connect(sink.addr).unwrap();
        s.write_all(b"SOCKLAB BULK/1 read_size=0\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("ERROR read_size 0 out of range"),
            "{answer}"
        );
    }
    assert!(matches!(
        sink.report_within(Duration::from_secs(20)).outcome,
        Outcome::Refused(_)
    ));

    // And a normal test still works afterwards.
    let r = bulk::run(&cfg(sink.addr, Strategy::Sendfile, 3, 333, 100), &|| false).unwrap();
    assert_eq!(r.verified, Some(true));
}

#[test]
fn bad_parameters_are_refused_before_connecting() {
    let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let e = bulk::run(&cfg(to, Strategy::Writev, 2000, 10, 1), &|| false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`nbufs` 2000") && e.contains("IOV_MAX"), "{e}");
    let e = bulk::run(&cfg(to, Strategy::Write, 1, 0, 1), &|| false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`bufsize` 0"), "{e}");
    let mut c = cfg(to, Strategy::Write, 1, 10, 1);
    c.cc = "nosuchcc".into();
    let e = bulk::run(&c, &|| false).unwrap_err().to_string();
    assert!(e.contains("cc=nosuchcc") && e.contains("available"), "{e}");
}

#[test]
fn connecting_to_a_closed_port_is_a_clear_error() {
    // Bind then drop to find a port that is (very likely) closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let e = bulk::run(&cfg(to, Strategy::Write, 1, 10, 1), &|| false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "{e}"
    );
}
