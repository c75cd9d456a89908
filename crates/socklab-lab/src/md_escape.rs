//! Escaping for `report.md`: user text as text, commands as code spans. A leaf module (no
//! crate imports), so that tables and the report both use it without a circle.

/// User-supplied text for `report.md`: HTML's `<>&"` as entities, Markdown's `\\`, `` ` ``,
/// `[`, `]` and `|` escaped with a backslash and line breaks as spaces, so that a name or a value
/// renders as the text it is (no tag, no link or image, no extra table column).
pub fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\\' | '`' | '[' | ']' | '|' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

/// `s` as a Markdown code span (shown literally, tags included): fenced by one more backtick
/// than its longest run of backticks, line breaks as spaces, so no text can close it early.
pub fn md_code(s: &str) -> String {
    let s = s.replace(['\n', '\r'], " ");
    let longest = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}
