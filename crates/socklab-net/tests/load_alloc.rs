//! "No allocation per request": the whole process (generator and a socklab-handler HTTP server
//! in threads) allocates about as much for 3000 keep-alive requests as for 100. Its own test
//! binary, with one test, because it counts every allocation of the process.

use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use socklab_net::load::{self, LoadConfig, LoadProtocol};
use socklab_net::server::handler::Handler;
use socklab_sys::alloc_count::{allocations, CountingAlloc};

mod load_common;
use load_common::serve_session;

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

/// A socklab `http` session per connection, in a thread (no allocation per request either).
fn server() -> std::net::SocketAddr {
    static NEVER: AtomicBool = AtomicBool::new(false);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve_session(s, Handler::Http, &NEVER));
        }
    });
    addr
}

#[test]
fn allocations_do_not_grow_with_requests() {
    let addr = server();
    let stop = AtomicBool::new(false);
    let mut cfg = LoadConfig::new(addr, LoadProtocol::Http);
    cfg.connections = 4;
    cfg.threads = 2;
    cfg.new_connection_per_request = false;
    cfg.duration = Some(Duration::from_secs(30));
    let mut count = |requests: u64| {
        cfg.requests = Some(requests);
        let before = allocations();
        let r = load::run(&cfg, &stop).unwrap();
        let after = allocations();
        assert_eq!((r.completed, r.failed.total()), (requests, 0), "{r:?}");
        drop(r);
        after - before
    };
    let small = count(100);
    let large = count(3000);
    eprintln!("allocations: 100 requests {small}, 3000 requests {large}");
    // Measured: 102 and 102. A few may differ (thread start-up); 2900 more requests must
    // not show up as thousands more allocations.
    assert!(
        large < small + 200,
        "100 requests: {small} allocations; 3000: {large}"
    );
    // With per-interval figures on (issue 17 item 5): an interval allocates, a request does
    // not (both runs fit in one interval).
    cfg.interval = Some(Duration::from_secs(10));
    let mut count = |requests: u64| {
        cfg.requests = Some(requests);
        let before = allocations();
        let r = load::run(&cfg, &stop).unwrap();
        let after = allocations();
        assert_eq!(r.intervals.len(), 1);
        assert_eq!(r.intervals[0].completed, requests);
        drop(r);
        after - before
    };
    let small = count(100);
    let large = count(3000);
    eprintln!("with --interval: 100 requests {small}, 3000 requests {large}");
    assert!(
        large < small + 200,
        "with --interval, 100 requests: {small} allocations; 3000: {large}"
    );
}
