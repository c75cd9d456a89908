//! The child line protocol (`socklab_net::childline::ChildLine`, what the lab reads from a
//! server child's stdout, or a remote role's through SSH): any line parses or is ignored
//! without panicking, and a line that parses prints back to a line that parses to the same
//! kind (the same value, where no JSON float is involved).
use socklab_net::childline::ChildLine;

/// One input of the target.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        let Some(l) = ChildLine::parse(line) else {
            continue;
        };
        let again = ChildLine::parse(&l.to_string())
            .unwrap_or_else(|| panic!("{l:?} prints as a line that does not parse"));
        match (&l, &again) {
            (ChildLine::Listening(_), _)
            | (ChildLine::Effective(_), _)
            | (ChildLine::Usage(_), _) => assert_eq!(l, again),
            _ => assert_eq!(std::mem::discriminant(&l), std::mem::discriminant(&again)),
        }
    }
}
