//! Inline Markdown for the HTML report: descriptions and notes are written in Markdown-ish
//! text (`code`, **bold**, *emphasis*, [links](https://…)); the report renders those and escapes
//! everything else, so no description can inject HTML.

pub use crate::md_escape::{md_code, md_text};
use crate::svg::esc;

/// Marks the place of an already rendered piece (a code span, a link) in the text.
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// Escapes Markdown-ish inline text and renders `` `code` `` as `<code>`, `**bold**` as
/// `<strong>`, `*em*` as `<em>` and `[text](url)` as a link when the url is http or https;
/// anything else stays literal text.
pub fn inline_markdown(s: &str) -> String {
    // The markers are private-use characters: a text that holds them gets them replaced.
    let s = s.replace([OPEN, CLOSE], "\u{FFFD}");
    let mut pieces: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find(['`', '[']) {
        text.push_str(&rest[..i]);
        let at = &rest[i..];
        let piece = match at.strip_prefix('`') {
            Some(code) => code
                .find('`')
                .filter(|&end| end > 0)
                .map(|end| (format!("<code>{}</code>", esc(&code[..end])), end + 2)),
            None => link(at),
        };
        match piece {
            Some((html, len)) => {
                text.push(OPEN);
                text.push_str(&pieces.len().to_string());
                text.push(CLOSE);
                pieces.push(html);
                rest = &at[len..];
            }
            None => {
                text.push_str(&at[..1]);
                rest = &at[1..];
            }
        }
    }
    text.push_str(rest);
    let styled = spans(&spans(&esc(&text), "**", "strong"), "*", "em");
    // Put the pieces back.
    let mut out = String::with_capacity(styled.len());
    let mut rest = styled.as_str();
    while let Some(i) = rest.find(OPEN) {
        out.push_str(&rest[..i]);
        let after = &rest[i + OPEN.len_utf8()..];
        let end = after.find(CLOSE).unwrap_or(after.len());
        if let Some(p) = after[..end]
            .parse::<usize>()
            .ok()
            .and_then(|n| pieces.get(n))
        {
            out.push_str(p);
        }
        rest = after.get(end + CLOSE.len_utf8()..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// `[text](url)` at the start of `s` as a link and the length it spans, when `url` is an
/// http or https address without spaces.
fn link(s: &str) -> Option<(String, usize)> {
    let (label, url, len) = web_link(s)?;
    Some((
        format!("<a href=\"{}\">{}</a>", esc(url), inline_markdown(label)),
        len,
    ))
}

/// `[text](url)` at the start of `s`: its text, its url and the length it spans, when `url` is
/// an http or https address without spaces.
fn web_link(s: &str) -> Option<(&str, &str, usize)> {
    let close = s.find(']')?;
    let label = &s[1..close];
    let after = s[close + 1..].strip_prefix('(')?;
    let end = after.find(')')?;
    let url = &after[..end];
    let lower = url.to_ascii_lowercase();
    let web = lower.starts_with("http://") || lower.starts_with("https://");
    if label.is_empty() || label.contains('[') || !web || url.contains(char::is_whitespace) {
        return None;
    }
    Some((label, url, close + 2 + end + 1))
}

/// Wraps the `d`-delimited spans of `s` in `<tag>`: an opening `d` followed by a non-space,
/// a closing one preceded by a non-space, and for `*` neither part of a `**`. A delimiter
/// that does not pair stays literal.
fn spans(s: &str, d: &str, tag: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = delimiter(rest, d, true) {
        let after = &rest[i + d.len()..];
        let Some(j) = delimiter(after, d, false) else {
            break;
        };
        let _ = std::fmt::Write::write_fmt(
            &mut out,
            format_args!("{}<{tag}>{}</{tag}>", &rest[..i], &after[..j]),
        );
        rest = &after[j + d.len()..];
    }
    out.push_str(rest);
    out
}

/// The first place in `s` where `d` opens (`opening`) or closes a span.
fn delimiter(s: &str, d: &str, opening: bool) -> Option<usize> {
    let mut from = 0;
    while let Some(k) = s[from..].find(d) {
        let i = from + k;
        let before = s[..i].chars().next_back();
        let after = s[i + d.len()..].chars().next();
        let single_star = d == "*" && (before == Some('*') || after == Some('*'));
        let flanking = if opening {
            after.is_some_and(|c| !c.is_whitespace())
        } else {
            i > 0 && before.is_some_and(|c| !c.is_whitespace())
        };
        if flanking && !single_star {
            return Some(i);
        }
        from = i + d.len();
    }
    None
}

/// A description for `report.md`, line by line, read as [`inline_markdown`] reads it for the
/// HTML report: `` `code` `` stays a code span ([`md_code`]) and `[text](url)` a link when the
/// url is http or https (and holds none of `<>"\\`); everything else is [`md_text`], so `*`
/// emphasis still renders and no tag, image or other link gets through.
pub fn md_lines(s: &str) -> String {
    s.lines().map(md_inline).collect::<Vec<_>>().join("\n")
}

fn md_inline(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(['`', '[']) {
        out.push_str(&md_text(&rest[..i]));
        let at = &rest[i..];
        let piece = match at.strip_prefix('`') {
            Some(code) => code
                .find('`')
                .filter(|&end| end > 0)
                .map(|end| (md_code(&code[..end]), end + 2)),
            None => web_link(at)
                .filter(|(_, url, _)| !url.contains(['<', '>', '"', '\\', '`']))
                .map(|(label, url, len)| (format!("[{}]({url})", md_inline(label)), len)),
        };
        match piece {
            Some((md, len)) => {
                // A link after `!` would be an image: the `!` stays text.
                if md.starts_with('[') && out.ends_with('!') {
                    out.pop();
                    out.push_str("\\!");
                }
                out.push_str(&md);
                rest = &at[len..];
            }
            None => {
                out.push_str(&md_text(&at[..1]));
                rest = &at[1..];
            }
        }
    }
    out.push_str(&md_text(rest));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_markdown_escapes_and_renders_bold() {
        assert_eq!(
            inline_markdown("Fastest bulk cell: **a<b & c** at 3 Gbit/s."),
            "Fastest bulk cell: <strong>a&lt;b &amp; c</strong> at 3 Gbit/s."
        );
        assert_eq!(inline_markdown("x ** y"), "x ** y");
        assert_eq!(
            inline_markdown("*vs best* is **it**"),
            "<em>vs best</em> is <strong>it</strong>"
        );
    }

    /// Item 10 of issue 15: descriptions and notes render `code`, bold, emphasis and web links;
    /// everything else is text.
    #[test]
    fn inline_markdown_renders_code_and_links() {
        assert_eq!(
            inline_markdown("the `socklab serve` child's *CPU* (`a*b*c`, **`x`**)"),
            "the <code>socklab serve</code> child&#39;s <em>CPU</em> (<code>a*b*c</code>, <strong><code>x</code></strong>)"
        );
        assert_eq!(
            inline_markdown("see [UNP **27.1**](https://example.org/a?b=1&c=\"2\")."),
            "see <a href=\"https://example.org/a?b=1&amp;c=&quot;2&quot;\">UNP <strong>27.1</strong></a>."
        );
        // Multiplication and unpaired marks stay literal.
        assert_eq!(inline_markdown("2 * 3 * 4, a ` b"), "2 * 3 * 4, a ` b");
        assert_eq!(inline_markdown("[a] (b) [c](d)"), "[a] (b) [c](d)");
    }

    /// No description can inject markup: tags are text, links only go to http(s) addresses.
    #[test]
    fn inline_markdown_never_lets_html_or_scripts_through() {
        assert_eq!(
            inline_markdown("<script>alert(1)</script> `<b>`"),
            "&lt;script&gt;alert(1)&lt;/script&gt; <code>&lt;b&gt;</code>"
        );
        for bad in [
            "[x](javascript:alert(1))",
            "[x](JavaScript:alert(1))",
            "[x](data:text/html,hi)",
            "[x](/relative)",
            "[x](https://a b)",
        ] {
            let h = inline_markdown(bad);
            assert!(!h.contains("<a"), "{bad} -> {h}");
        }
        assert_eq!(
            inline_markdown("[<img src=x>](https://a.org/\"onmouseover=x)"),
            "<a href=\"https://a.org/&quot;onmouseover=x\">&lt;img src=x&gt;</a>"
        );
        // A text holding the internal markers cannot make pieces appear.
        assert_eq!(
            inline_markdown("\u{E000}0\u{E001} `c`"),
            "\u{FFFD}0\u{FFFD} <code>c</code>"
        );
    }

    /// Hostile names render as text in report.md; normal ones read as they are.
    #[test]
    fn md_text_neutralises_html_links_and_pipes() {
        assert_eq!(
            md_text("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(
            md_text("<svg onload=\"x\">"),
            "&lt;svg onload=&quot;x&quot;&gt;"
        );
        assert_eq!(
            md_text("[x](javascript:alert(1))"),
            "\\[x\\](javascript:alert(1))"
        );
        assert_eq!(md_text("![i](http://e/x.png)"), "!\\[i\\](http://e/x.png)");
        assert_eq!(md_text("a|b `c` \\"), "a\\|b \\`c\\` \\\\");
        assert_eq!(md_text("two\nlines"), "two lines");
        for normal in [
            "bulk tcp_nodelay=1",
            "size 64K, 1.5 Gbit/s",
            "cubic (default)",
        ] {
            assert_eq!(md_text(normal), normal);
        }
        assert_eq!(md_lines("a <b>\n[c]"), "a &lt;b&gt;\n\\[c\\]");
        // A description keeps what the HTML report renders: code, emphasis, web links.
        let normal = "`memcpy` of **4K** blocks, see [docs](https://a.org/x)";
        assert_eq!(md_lines(normal), normal);
        assert_eq!(md_lines("`<b>` <i>"), "`<b>` &lt;i&gt;");
        for bad in [
            "[x](javascript:alert(1))",
            "![x](https://a.org/i.png)",
            "a![x](https://a.org/i.png)",
            "[x](https://a.org/\"onmouseover=x)",
        ] {
            let md = md_lines(bad);
            assert!(md.contains("\\[") || md.contains("\\!["), "{bad} -> {md}");
        }
        assert_eq!(
            md_lines("[<img src=x>](https://a.org/)"),
            "[&lt;img src=x&gt;](https://a.org/)"
        );
    }

    /// A code span cannot be closed early by the text it holds.
    #[test]
    fn md_code_fences_longer_than_any_backtick_run() {
        assert_eq!(md_code("socklab bulk"), "`socklab bulk`");
        assert_eq!(md_code("a ``x`` <b>"), "```a ``x`` <b>```");
        assert_eq!(md_code("`x"), "`` `x ``");
        assert_eq!(md_code("a\n\nb"), "`a  b`");
    }
}
