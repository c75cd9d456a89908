//! Size and duration parsers never panic; sizes print back to the same value.
use socklab_units::{format_size, parse_duration, parse_size};

/// One input of the target.
pub fn run(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    if let Ok(n) = parse_size(&s) {
        assert_eq!(parse_size(&format_size(n)).unwrap(), n);
    }
    let _ = parse_duration(&s);
}
