//! Several streams of one test, the sink sending, both at once (issue 17 items 1, 2, 4): a real
//! sink on 127.0.0.1 in a thread, real sockets, every wait bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use socklab_net::bulk::{self, BulkConfig, Flow, Limit};
use socklab_net::series::{Direction, Sampling};
use socklab_net::sink::{ConnReport, Mode, Outcome, SinkConfig};
use socklab_net::{NetError, Strategy};

mod sink_common;
use sink_common::TestSink;

fn sink_cfg() -> SinkConfig {
    SinkConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        idle_timeout: Duration::from_secs(5),
        ..SinkConfig::default()
    }
}

fn cfg(to: SocketAddr, streams: u32, flow: Flow, limit: Limit) -> BulkConfig {
    BulkConfig {
        streams,
        flow,
        limit,
        bufsize: 32 * 1024,
        read_size: 16 * 1024,
        verify: true,
        seed: 5,
        ..BulkConfig::new(to)
    }
}

/// The sink's counts of the stream connections of one test, by stream index.
fn stream_counts(reports: &[ConnReport]) -> Vec<(u32, bool, u64)> {
    let mut v: Vec<(u32, bool, u64)> = reports
        .iter()
        .filter_map(|r| match r.mode {
            Mode::Stream { index, down, .. } => {
                assert_eq!(r.outcome, Outcome::Complete, "{}", r.line());
                Some((index, down, r.result.bytes))
            }
            _ => None,
        })
        .collect();
    v.sort();
    v
}

#[test]
fn four_streams_add_up_to_the_total_and_to_the_sinks_counts() {
    let sink = TestSink::start(sink_cfg());
    let r = bulk::run(
        &cfg(sink.addr, 4, Flow::Up, Limit::Iterations(300)),
        &|| false,
    )
    .unwrap();
    assert_eq!(r.streams.len(), 4);
    let want = 300 * 32 * 1024;
    for (i, s) in r.streams.iter().enumerate() {
        assert_eq!(s.index, i as u32);
        assert_eq!(s.direction, Direction::Up);
        assert_eq!((s.bytes, s.received, s.rounds), (want, want, 300));
        assert_eq!(s.verified, Some(true));
        assert_eq!(s.cc, "cubic");
        assert!(s.reads >= want / (16 * 1024), "{}", s.reads);
        assert!(s.seconds > 0.0 && s.seconds <= r.seconds);
    }
    assert_eq!(r.bytes, 4 * want);
    assert_eq!(r.bytes, r.streams.iter().map(|s| s.bytes).sum::<u64>());
    assert_eq!(r.verified, Some(true));
    assert!(r.fairness().unwrap() > 0.0 && r.fairness().unwrap() <= 1.0);
    // The sink: one control connection and four streams, whose counts are the client's.
    let reps = sink.reports(5);
    assert_eq!(
        stream_counts(&reps),
        (0..4).map(|i| (i, false, want)).collect::<Vec<_>>()
    );
    let control = reps
        .iter()
        .find(|r| matches!(r.mode, Mode::Control { streams: 4, .. }))
        .expect("the control connection's report");
    assert_eq!(control.outcome, Outcome::Complete);
}

#[test]
fn reverse_counts_and_verifies_what_the_sink_sent_with_each_strategy() {
    let sink = TestSink::start(sink_cfg());
    for strategy in Strategy::ALL {
        let c = BulkConfig {
            strategy,
            nbufs: 3,
            bufsize: 7001,
            ..cfg(sink.addr, 2, Flow::Down, Limit::Iterations(200))
        };
        let r = bulk::run(&c, &|| false).unwrap_or_else(|e| panic!("{strategy}: {e}"));
        let want = 200 * 3 * 7001;
        assert_eq!(r.streams.len(), 2);
        for s in &r.streams {
            assert_eq!(s.direction, Direction::Down, "{strategy}");
            assert_eq!((s.bytes, s.received, s.rounds), (want, want, 200));
            assert_eq!(s.verified, Some(true), "{strategy}: hash of what arrived");
            assert!(s.writes > 0 && s.reads > 0, "{strategy}: {s:?}");
            assert_eq!(s.cc, "cubic", "{strategy}: the sink's cc read back");
            assert!(s.tcp.snd_mss > 0, "{strategy}: the sink's TCP_INFO");
        }
        assert_eq!(
            stream_counts(&sink.reports(3)),
            vec![(0, true, want), (1, true, want)],
            "{strategy}"
        );
    }
}

#[test]
fn bidir_runs_both_ways_at_once_each_with_its_own_figures() {
    let sink = TestSink::start(sink_cfg());
    let r = bulk::run(
        &cfg(
            sink.addr,
            2,
            Flow::Bidir,
            Limit::Duration(Duration::from_millis(600)),
        ),
        &|| false,
    )
    .unwrap();
    assert_eq!(r.streams.len(), 4);
    let dirs: Vec<Direction> = r.streams.iter().map(|s| s.direction).collect();
    assert_eq!(
        dirs,
        [
            Direction::Up,
            Direction::Up,
            Direction::Down,
            Direction::Down
        ]
    );
    for s in &r.streams {
        assert!(s.bytes > 0 && s.bytes == s.received, "{s:?}");
        assert_eq!(s.verified, Some(true));
        // Both ran for the duration, at once.
        assert!(s.seconds >= 0.6 && s.seconds < 5.0, "{}", s.seconds);
    }
    assert!(r.gbps_of(Direction::Up).unwrap() > 0.0);
    assert!(r.gbps_of(Direction::Down).unwrap() > 0.0);
    let counts = stream_counts(&sink.reports(5));
    let sent: Vec<u64> = r.streams.iter().map(|s| s.bytes).collect();
    assert_eq!(counts.iter().map(|c| c.2).collect::<Vec<_>>(), sent);
    assert_eq!(
        counts.iter().map(|c| c.1).collect::<Vec<_>>(),
        [false, false, true, true]
    );
}

#[test]
fn a_sampled_reverse_test_records_each_stream_down_summing_to_its_bytes() {
    let sink = TestSink::start(sink_cfg());
    let c = BulkConfig {
        sampling: Sampling {
            interval: Some(Duration::from_millis(50)),
            omit: None,
        },
        ..cfg(
            sink.addr,
            2,
            Flow::Down,
            Limit::Duration(Duration::from_millis(400)),
        )
    };
    let r = bulk::run(&c, &|| false).unwrap();
    for s in &r.streams {
        let ivs: Vec<_> = r
            .series
            .intervals
            .iter()
            .filter(|i| i.stream == s.index)
            .collect();
        assert!(ivs.len() >= 4, "{}", ivs.len());
        assert!(ivs.iter().all(|i| i.direction == Direction::Down));
        assert_eq!(ivs.iter().map(|i| i.delivered).sum::<u64>(), s.bytes);
        assert_eq!(ivs.last().unwrap().end.as_secs_f64(), r.seconds);
    }
}

#[test]
fn pacing_and_affinity_are_applied_on_both_ends_and_read_back() {
    let sink = TestSink::start(sink_cfg());
    let cpus = socklab_sys::sched::thread_affinity().unwrap();
    let last = *cpus.last().unwrap();
    let c = BulkConfig {
        pacing_rate: Some(400_000_000),
        affinity: Some(last.to_string().parse().unwrap()),
        server_affinity: Some(cpus[0].to_string().parse().unwrap()),
        ..cfg(sink.addr, 1, Flow::Bidir, Limit::Iterations(20))
    };
    let r = bulk::run(&c, &|| false).unwrap();
    for s in &r.streams {
        assert_eq!(s.pacing, Some(50_000_000), "{:?}: bits/s / 8", s.direction);
        assert_eq!(s.cpu, Some(last));
        assert_eq!(s.server_cpu, Some(cpus[0]));
    }
    // The caller's thread is not pinned.
    assert_eq!(socklab_sys::sched::thread_affinity().unwrap(), cpus);
}

#[test]
fn bad_multi_stream_parameters_are_refused_before_connecting() {
    let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
    for (c, want) in [
        (
            cfg(to, 0, Flow::Up, Limit::Iterations(1)),
            "`streams` 0: run at least one stream",
        ),
        (
            cfg(to, 129, Flow::Up, Limit::Iterations(1)),
            "`streams` 129 is more than 128",
        ),
        (
            cfg(to, 65, Flow::Bidir, Limit::Iterations(1)),
            "more than 64 each way with `bidir`",
        ),
        (
            BulkConfig {
                pacing_rate: Some(0),
                ..cfg(to, 1, Flow::Up, Limit::Iterations(1))
            },
            "`pacing_rate` 0",
        ),
    ] {
        let e = bulk::run(&c, &|| false).unwrap_err();
        assert!(matches!(e, NetError::Invalid(_)), "{e}");
        assert!(e.to_string().contains(want), "{e}");
    }
}

/// Ctrl-C while a reverse test runs: the client gives up as interrupted, and the sink's down
/// streams stop with their test (they never send on forever): every connection of the test
/// ends at the sink unfinished, which a stream that sent on to its 30 s end would not be.
#[test]
fn stop_ends_a_reverse_test_and_the_sinks_sending() {
    let sink = TestSink::start(sink_cfg());
    let flag = Arc::new(AtomicBool::new(false));
    let f2 = flag.clone();
    let c = cfg(
        sink.addr,
        2,
        Flow::Down,
        Limit::Duration(Duration::from_secs(30)),
    );
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(bulk::run(&c, &|| f2.load(Ordering::SeqCst)));
    });
    std::thread::sleep(Duration::from_millis(300));
    flag.store(true, Ordering::SeqCst);
    let r = rx.recv_timeout(Duration::from_secs(60)).expect("ended");
    assert!(matches!(r, Err(NetError::Interrupted)), "{r:?}");
    // Every connection of the test ends at the sink too, and none of them as complete.
    let reps = sink.reports(3);
    for r in reps {
        assert_ne!(r.outcome, Outcome::Complete, "{}", r.line());
    }
}

/// Reads one line from the sink.
fn line(s: &TcpStream) -> String {
    let mut l = String::new();
    BufReader::new(s).read_line(&mut l).unwrap();
    l
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// What a hostile client can ask of the `BULK/2` side of the sink is bounded: an unknown test,
/// a million streams, a reverse stream without an end, a stream index out of range or taken
/// twice, GO before the streams joined, a down stream left unread.
#[test]
fn hostile_test_requests_are_refused_or_bounded() {
    let sink = TestSink::start(SinkConfig {
        idle_timeout: Duration::from_secs(1),
        max_conns: 8,
        ..sink_cfg()
    });
    let ask = |req: &str| {
        let mut s = connect(sink.addr);
        s.write_all(req.as_bytes()).unwrap();
        line(&s)
    };
    let l = ask("SOCKLAB JOIN/2 test=00000000000000aa index=0\n");
    assert!(l.starts_with("ERROR unknown test 00000000000000aa"), "{l}");
    let l = ask("SOCKLAB BULK/2 test=1 up=1000000\n");
    assert!(l.starts_with("ERROR 1000000 streams"), "{l}");
    let l = ask("SOCKLAB BULK/2 test=1 down=1 strategy=single nbufs=1 bufsize=100 cc=cubic\n");
    assert!(l.contains("need an end"), "{l}");
    let l = ask("SOCKLAB BULK/2 test=1 down=1 strategy=single nbufs=1 bufsize=100 cc=cubic duration_us=99999999999999\n");
    assert!(l.starts_with("ERROR down streams take one of"), "{l}");
    // A round that can never fit the budget (512 MiB) is refused as such, not as "busy".
    let l = ask("SOCKLAB BULK/2 test=1 down=1 strategy=single nbufs=1024 bufsize=1048576 cc=cubic rounds=1\n");
    assert!(
        l.starts_with("ERROR a round of 1024 MiB") && l.contains("allows 512 MiB"),
        "{l}"
    );
    // More streams than the sink serves connections at once (--max-conns 8 here).
    let l = ask("SOCKLAB BULK/2 test=1 up=8\n");
    assert!(
        l.starts_with("ERROR a test of 8 streams needs 9 connections; this sink serves at most 8"),
        "{l}"
    );

    // A real test: index out of range, taken twice, GO too early.
    let mut ctl = connect(sink.addr);
    ctl.write_all(b"SOCKLAB BULK/2 test=77 up=2\n").unwrap();
    let mut ctl_r = BufReader::new(ctl.try_clone().unwrap());
    let mut l = String::new();
    ctl_r.read_line(&mut l).unwrap();
    assert_eq!(l, "READY test=0000000000000077 streams=2\n");
    let l = ask("SOCKLAB JOIN/2 test=77 index=2\n");
    assert!(l.starts_with("ERROR stream 2 of a test of 2"), "{l}");
    let mut s0 = connect(sink.addr);
    s0.write_all(b"SOCKLAB JOIN/2 test=77 index=0\n").unwrap();
    assert!(line(&s0).starts_with("READY index=0 dir=up"));
    let l = ask("SOCKLAB BULK/2 test=77 up=1\n");
    assert!(l.contains("in progress already"), "{l}");
    let l = ask("SOCKLAB JOIN/2 test=77 index=0\n");
    assert!(l.starts_with("ERROR stream 0 has joined already"), "{l}");
    ctl.write_all(b"GO\n").unwrap();
    let mut l = String::new();
    ctl_r.read_line(&mut l).unwrap();
    assert!(l.starts_with("ERROR GO with 1 of 2 streams joined"), "{l}");
    // The test is gone with its control connection: its joined stream is given up.
    // End of stream (or a reset), not the 10 s read timeout: the sink closed it.
    let mut b = [0u8; 16];
    match s0.read(&mut b) {
        Ok(n) => assert_eq!(n, 0, "data on a given-up stream"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    let l = ask("SOCKLAB JOIN/2 test=77 index=1\n");
    assert!(l.starts_with("ERROR unknown test"), "{l}");

    // A down stream nobody reads: it ends at the idle timeout, not never.
    let mut ctl = connect(sink.addr);
    ctl.write_all(b"SOCKLAB BULK/2 test=78 down=1 strategy=single nbufs=1 bufsize=65536 cc=cubic duration_us=3600000000\n").unwrap();
    let mut ctl_r = BufReader::new(ctl.try_clone().unwrap());
    let mut l = String::new();
    ctl_r.read_line(&mut l).unwrap();
    assert!(l.starts_with("READY test=0000000000000078"), "{l}");
    let d = connect(sink.addr);
    (&d).write_all(b"SOCKLAB JOIN/2 test=78 index=0\n").unwrap();
    let mut got = Vec::new();
    let mut one = [0u8; 1];
    while !got.ends_with(b"\n") {
        (&d).read_exact(&mut one).unwrap();
        got.push(one[0]);
    }
    let ready = String::from_utf8_lossy(&got);
    assert!(
        ready.starts_with("READY index=0 dir=down") && ready.contains(" cc=cubic "),
        "{ready}"
    );
    ctl.write_all(b"GO\n").unwrap();
    let mut l = String::new();
    ctl_r.read_line(&mut l).unwrap();
    // The 1 s idle timeout ended it (the test asked for an hour).
    assert!(l.starts_with("FAILED index=0 idle timeout"), "{l}");
    drop(d);
}
