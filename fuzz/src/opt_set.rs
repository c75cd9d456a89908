//! Socket-option sets never panic; what parses prints back to text that parses to the same set.
use socklab_net::sockopt::OptSet;

/// One input of the target.
pub fn run(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    if let Ok(set) = s.parse::<OptSet>() {
        assert_eq!(set.to_string().parse::<OptSet>().unwrap(), set);
    }
}
