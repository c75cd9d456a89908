//! The netem link-spec parser never panics; what parses prints back to an equal spec.
use socklab_impair::LinkSpec;

/// One input of the target.
pub fn run(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    if let Ok(spec) = s.parse::<LinkSpec>() {
        assert_eq!(spec.to_string().parse::<LinkSpec>().unwrap(), spec);
    }
}
