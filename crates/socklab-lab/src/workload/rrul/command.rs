//! `socklab rrul`: the command's group of `rrul` cells, one per link (and per list value of
//! the keys given). Errors name keys in backticks; the binary writes them as its flags.

use crate::flags::{self, Given, Rules};
use crate::plan::Group;
use crate::LabError;

/// Bytes kept of each captured packet by default (65535: whole packets).
pub const CAPTURE_SNAPLEN: u32 = socklab_link::capture::DEFAULT_SNAPLEN;

/// The group of the keys given; `link_back` (given or not) needs a `link`.
pub fn group(given: &[Given], link: bool, link_back: bool) -> Result<Group, LabError> {
    if link_back && !link {
        return Err(LabError::Plan(
            "`link_back` needs `link`: the server → client direction of which link?".into(),
        ));
    }
    flags::group("rrul", given, &Rules::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::rrul::KEYS;

    #[test]
    fn link_back_needs_a_link_and_the_keys_make_the_group() {
        let e = group(&[], false, true).unwrap_err();
        assert!(e.to_string().starts_with("`link_back` needs `link`"), "{e}");
        let streams = KEYS.iter().find(|k| k.name == "streams").unwrap();
        let g = group(&[Given::new(*streams, ["1", "2"])], true, true).unwrap();
        assert_eq!(g.kind, "rrul");
        assert_eq!(g.axes.len(), 1);
    }
}
