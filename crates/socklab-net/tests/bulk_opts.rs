//! Socket options as data on bulk (`opts`, issue 25 item 6): a real sink on 127.0.0.1 in a
//! thread, the client's options on every stream's connection, the server side's set by the sink
//! on the connections it accepted, both read back and compared with what was asked.

use std::collections::BTreeMap;
use std::time::Duration;

use socklab_net::bulk::{self, BulkConfig, Flow, Limit};
use socklab_net::sink::SinkConfig;

mod sink_common;
use sink_common::TestSink;

fn sink() -> TestSink {
    TestSink::start(SinkConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        idle_timeout: Duration::from_secs(5),
        ..SinkConfig::default()
    })
}

fn cfg(to: std::net::SocketAddr, opts: &str, flow: Flow) -> BulkConfig {
    BulkConfig {
        flow,
        limit: Limit::Iterations(50),
        bufsize: 32 * 1024,
        read_size: 16 * 1024,
        verify: true,
        opts: Some(opts.parse().unwrap()),
        ..BulkConfig::new(to)
    }
}

fn map(kv: &[(String, String)]) -> BTreeMap<&str, &str> {
    kv.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[test]
fn both_ends_apply_their_options_and_read_them_back() {
    let sink = sink();
    for flow in [Flow::Up, Flow::Down] {
        let c = cfg(
            sink.addr,
            "nodelay+client:sndbuf=256K+server:rcvbuf=128K+server:cc=reno",
            flow,
        );
        assert!(!c.is_classic(), "a test with opts speaks BULK/2");
        let r = bulk::run(&c, &|| false).unwrap();
        assert_eq!(r.verified, Some(true));
        let client = map(&r.client_opts);
        assert_eq!(client["nodelay"], "1");
        assert_eq!(client["sndbuf"], (2 * 256 * 1024).to_string());
        assert!(!client.contains_key("cc"), "server: only");
        let server = r
            .server_opts
            .clone()
            .expect("the sink reported its options");
        let server = map(&server);
        assert_eq!(server["nodelay"], "1");
        assert_eq!(server["rcvbuf"], (2 * 128 * 1024).to_string());
        assert_eq!(server["cc"], "reno");
        assert!(r.opts_off.is_empty(), "{:?}", r.opts_off);
        if flow == Flow::Down {
            // The sink's sender runs the test's congestion control, read back.
            assert_eq!(r.cc, "reno");
        }
    }
}

#[test]
fn baseline_speaks_bulk2_and_an_option_not_in_effect_is_recorded() {
    let sink = sink();
    let r = bulk::run(&cfg(sink.addr, "baseline", Flow::Up), &|| false).unwrap();
    assert!(r.client_opts.is_empty() && r.opts_off.is_empty());
    assert_eq!(r.server_opts, Some(Vec::new()), "the sink answered opts=-");
    // More than net.core.wmem_max allows an unprivileged socket: the kernel caps it.
    let max: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let asked = (max * 4).min(1 << 30);
    if asked <= max {
        socklab_sys::skip::skip(
            "bulk_opts::baseline_speaks_bulk2_and_an_option_not_in_effect_is_recorded",
            "net.core.wmem_max is 1G or more here",
            "no SO_SNDBUF the kernel would cap",
        );
        return;
    }
    let c = cfg(sink.addr, &format!("client:sndbuf={asked}"), Flow::Up);
    let r = bulk::run(&c, &|| false).unwrap();
    assert_eq!(r.opts_off.len(), 1, "{:?}", r.opts_off);
    assert!(
        r.opts_off[0].starts_with("client:sndbuf=") && r.opts_off[0].contains("kernel reports"),
        "{:?}",
        r.opts_off
    );
}

#[test]
fn options_that_belong_to_a_listener_are_refused_on_the_sinks_side() {
    let c = cfg("127.0.0.1:9".parse().unwrap(), "nodelay+fastopen", Flow::Up);
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("opts 'nodelay+fastopen'") && e.contains("prefix it client:"),
        "{e}"
    );
    assert!(
        cfg("127.0.0.1:9".parse().unwrap(), "client:fastopen", Flow::Up)
            .validate()
            .is_ok()
    );
}

#[test]
fn an_option_the_sinks_kernel_refuses_fails_the_test_naming_it() {
    let sink = sink();
    let e = bulk::run(&cfg(sink.addr, "server:cc=nosuchcc", Flow::Up), &|| false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cc=nosuchcc refused"), "{e}");
}
