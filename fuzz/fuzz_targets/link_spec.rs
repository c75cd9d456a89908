//! The netem link-spec parser never panics; what parses prints back to an equal spec.
#![no_main]
use libfuzzer_sys::fuzz_target;
use socklab_impair::LinkSpec;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(spec) = s.parse::<LinkSpec>() {
        assert_eq!(spec.to_string().parse::<LinkSpec>().unwrap(), spec);
    }
});
