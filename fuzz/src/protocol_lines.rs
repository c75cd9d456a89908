//! The sink's control-line parsers (BULK/1 and BULK/2) and CPU lists never panic, and what
//! parses re-emits to an equal value.
use socklab_net::cpus::CpuList;
use socklab_net::protocol::multi::{Join, JoinReady, StreamLine, TestHello, TestReady};
use socklab_net::protocol::{Hello, Ready, SinkResult};

/// One input of the target.
pub fn run(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    if let Ok(h) = Hello::parse(&s) {
        assert_eq!(Hello::parse(&h.emit()).unwrap(), h);
    }
    if let Ok(r) = Ready::parse(&s) {
        assert_eq!(Ready::parse(&r.emit()).unwrap(), r);
    }
    if let Ok(r) = SinkResult::parse(&s) {
        assert_eq!(SinkResult::parse(&r.emit()).unwrap(), r);
    }
    if let Ok(h) = TestHello::parse(&s) {
        assert!(h.streams() >= 1 && h.streams() <= 128);
        assert_eq!(TestHello::parse(&h.emit()).unwrap(), h);
    }
    if let Ok(r) = TestReady::parse(&s) {
        assert_eq!(TestReady::parse(&r.emit()).unwrap(), r);
    }
    if let Ok(j) = Join::parse(&s) {
        assert_eq!(Join::parse(&j.emit()).unwrap(), j);
    }
    if let Ok(r) = JoinReady::parse(&s) {
        assert_eq!(JoinReady::parse(&r.emit()).unwrap(), r);
    }
    if let Ok(l) = StreamLine::parse(&s) {
        // A FAILED reason is trimmed and cut on emit: parse(emit) is a fixed point after one.
        let once = StreamLine::parse(&l.emit()).unwrap();
        assert_eq!(StreamLine::parse(&once.emit()).unwrap(), once);
    }
    if let Ok(c) = s.parse::<CpuList>() {
        assert_eq!(c.to_string().parse::<CpuList>().unwrap(), c);
    }
}
