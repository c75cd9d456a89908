//! A command-line parser's error as one line (bad input is a one-line error): its message
//! and tips, the usage line, and where the help is.

/// `rendered` (clap's error text, several lines) as one line: `error: ` and the "For more
/// information" line left out, the usage as `usage: … (see HELP)` (`help`: the help flag, which
/// the binary names), the parts joined by `; `.
pub fn one_line(rendered: &str, help: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for l in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if l.starts_with("For more information") {
            continue;
        }
        let l = l.strip_prefix("error: ").unwrap_or(l);
        match l.strip_prefix("Usage: ") {
            Some(u) => parts.push(format!("usage: {u} (see {help})")),
            None => parts.push(l.to_string()),
        }
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_parser_error_is_one_line() {
        let rendered = "error: unexpected argument 'x' found\n\n  tip: try 'y'\n\nUsage: socklab bulk [OPTIONS]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            super::one_line(rendered, "HELP"),
            "unexpected argument 'x' found; tip: try 'y'; usage: socklab bulk [OPTIONS] (see HELP)"
        );
    }
}
