//! The sink's control-line parsers never panic, and what parses re-emits to an equal value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use socklab_net::protocol::{Hello, Ready, SinkResult};

fuzz_target!(|data: &[u8]| {
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
});
