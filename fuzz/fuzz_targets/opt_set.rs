//! Socket-option sets never panic; what parses prints back to text that parses to the same set.
#![no_main]
use libfuzzer_sys::fuzz_target;
use socklab_net::sockopt::OptSet;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(set) = s.parse::<OptSet>() {
        assert_eq!(set.to_string().parse::<OptSet>().unwrap(), set);
    }
});
