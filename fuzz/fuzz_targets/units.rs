//! Size and duration parsers never panic; sizes print back to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use socklab_net::units::{format_size, parse_duration, parse_size};

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(n) = parse_size(&s) {
        assert_eq!(parse_size(&format_size(n)).unwrap(), n);
    }
    let _ = parse_duration(&s);
});
