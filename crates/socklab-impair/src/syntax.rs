//! The words of a spec and their values: the tokenizer ([`Tokens`]), and the parsers and
//! printers of times, percentages and rates that `spec.rs` and the parts of a spec (`aqm`,
//! `slot`, `schedule`) share. Below all of them, so none imports `spec`.

use crate::error::ParseSpecError;
use crate::keywords::KEYWORDS;

/// The words of a spec, read left to right.
#[derive(Debug)]
pub(crate) struct Tokens<'a> {
    toks: Vec<&'a str>,
    pos: usize,
}

impl<'a> Tokens<'a> {
    /// The words of `s`, split at whitespace.
    pub(crate) fn new(s: &'a str) -> Tokens<'a> {
        Tokens {
            toks: s.split_whitespace().collect(),
            pos: 0,
        }
    }

    /// The next word, without taking it.
    pub(crate) fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).copied()
    }

    pub(crate) fn next(&mut self) -> Option<&'a str> {
        let t = self.toks.get(self.pos).copied();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// The next token if it looks like a value (not a keyword).
    pub(crate) fn next_value(&mut self) -> Option<&'a str> {
        let t = *self.toks.get(self.pos)?;
        let looks_numeric = t
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.' || c == '-' || c == '+');
        if looks_numeric && !KEYWORDS.contains(&t) {
            self.pos += 1;
            Some(t)
        } else {
            None
        }
    }

    /// A required value after `ctx`.
    pub(crate) fn value(
        &mut self,
        ctx: &str,
        what: &str,
        example: &str,
    ) -> Result<&'a str, ParseSpecError> {
        let next = self.toks.get(self.pos).copied();
        if let Some(t) = next.filter(|t| !KEYWORDS.contains(&t.to_ascii_lowercase().as_str())) {
            self.pos += 1;
            return Ok(t);
        }
        Err(ParseSpecError::MissingValue {
            keyword: ctx.to_string(),
            what: what.to_string(),
            example: example.to_string(),
        })
    }
}

/// The error for `word`, just taken, which is no keyword: a unit written apart from the
/// number before it (`delay 50 ms`) says to write them together; anything else is unknown.
pub(crate) fn unknown_word(t: &Tokens<'_>, word: &str) -> ParseSpecError {
    let taken = &t.toks[..t.pos];
    let before = taken.len().checked_sub(2).map(|i| taken[i]);
    if let Some(v) = before.filter(|v| v.parse::<f64>().is_ok() && is_unit(word)) {
        // From the last keyword before the number, if there is one.
        let from = taken[..taken.len() - 2]
            .iter()
            .rposition(|w| KEYWORDS.contains(&w.to_ascii_lowercase().as_str()))
            .unwrap_or(taken.len() - 2);
        return ParseSpecError::DetachedUnit {
            written: taken[from..].join(" "),
            together: format!("{v}{word}"),
        };
    }
    ParseSpecError::UnknownKeyword {
        keyword: word.to_string(),
    }
}

/// Whether `word` is the unit of a time, a rate or a percentage.
fn is_unit(word: &str) -> bool {
    let with = format!("1{word}");
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphabetic() || c == '%' || c == '/')
        && (word == "%" || parse_time("", &with).is_ok() || parse_rate("", &with).is_ok())
}

fn split_number(tok: &str) -> (&str, &str) {
    let end = tok
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(tok.len());
    tok.split_at(end)
}

pub(crate) fn err(ctx: &str, tok: &str, reason: &str) -> ParseSpecError {
    ParseSpecError::BadValue {
        context: ctx.to_string(),
        value: tok.to_string(),
        fix: reason.to_string(),
    }
}

pub(crate) fn parse_time(ctx: &str, tok: &str) -> Result<u64, ParseSpecError> {
    let (num, unit) = split_number(tok);
    let v: f64 = num.parse().map_err(|_| {
        err(
            ctx,
            tok,
            "not a time; write a number with ns, us, ms or s, e.g. 50ms",
        )
    })?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "ns" | "nsec" | "nsecs" => 1.0,
        "" | "us" | "usec" | "usecs" => 1e3,
        "ms" | "msec" | "msecs" => 1e6,
        "s" | "sec" | "secs" => 1e9,
        _ => {
            return Err(err(
                ctx,
                tok,
                "unknown time unit; use ns, us, ms or s, e.g. 50ms",
            ))
        }
    };
    if !v.is_finite() {
        return Err(err(ctx, tok, "not a finite time; write e.g. 50ms"));
    }
    if v < 0.0 {
        return Err(err(
            ctx,
            tok,
            &format!(
                "a time must not be negative; write e.g. {ctx} {}",
                &tok[1..]
            ),
        ));
    }
    let ns = (v * scale).round();
    if ns >= u64::MAX as f64 {
        return Err(err(ctx, tok, "time too large"));
    }
    Ok(ns as u64)
}

fn parse_fraction(ctx: &str, tok: &str, what: &str) -> Result<f64, ParseSpecError> {
    let num = tok.strip_suffix('%').unwrap_or(tok);
    let v: f64 = num.parse().map_err(|_| {
        err(
            ctx,
            tok,
            &format!("not a percentage; a {what} is written like 5% (0% to 100%)"),
        )
    })?;
    if !(0.0..=100.0).contains(&v) {
        return Err(err(ctx, tok, &format!("a {what} must be 0% to 100%")));
    }
    // Divide by 100 by moving the decimal point, so that every f64 printed
    // by `pct` parses back to exactly itself.
    Ok(shift_left2(num)
        .and_then(|d| d.parse::<f64>().ok())
        .unwrap_or(v / 100.0))
}

/// "12.5" -> "0.125" (plain decimals only; `None` for exponents etc.).
fn shift_left2(num: &str) -> Option<String> {
    let num = num.strip_prefix('+').unwrap_or(num);
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let int = format!("{int:0>3}");
    let (hi, lo) = int.split_at(int.len() - 2);
    Some(format!("{hi}.{lo}{frac}"))
}

/// "0.125" -> "12.5": the inverse of `shift_left2`.
fn shift_right2(num: &str) -> String {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let frac = format!("{frac:0<2}");
    let (hi, lo) = frac.split_at(2);
    let int = format!("{int}{hi}");
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let lo = lo.trim_end_matches('0');
    if lo.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{lo}")
    }
}

pub(crate) fn parse_prob(ctx: &str, tok: &str) -> Result<f64, ParseSpecError> {
    parse_fraction(ctx, tok, "probability")
}

pub(crate) fn parse_corr(ctx: &str, tok: &str) -> Result<f64, ParseSpecError> {
    parse_fraction(ctx, tok, "correlation")
}

pub(crate) fn parse_rate(ctx: &str, tok: &str) -> Result<u64, ParseSpecError> {
    let (num, unit) = split_number(tok);
    let v: f64 = num
        .parse()
        .map_err(|_| err(ctx, tok, "not a rate; write e.g. 100mbit, 1gbit or 500kbps"))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "tibit" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        "tbps" => 8e12,
        "kibps" => 8.0 * 1024.0,
        "mibps" => 8.0 * 1024.0 * 1024.0,
        "gibps" => 8.0 * 1024.0 * 1024.0 * 1024.0,
        "tibps" => 8.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err(
            ctx,
            tok,
            "unknown rate unit; use bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps (bytes/s)",
        )),
    };
    let bits = (v * scale).round();
    if bits.is_nan() {
        return Err(err(
            ctx,
            tok,
            "not a rate; write e.g. 100mbit, 1gbit or 500kbps",
        ));
    }
    if bits > MAX_RATE_BPS as f64 {
        return Err(err(
            ctx,
            tok,
            "too large: the largest rate accepted is 1000tbit (10^15 bit/s); omit rate for an unlimited link",
        ));
    }
    if bits < 1.0 {
        return Err(err(
            ctx,
            tok,
            "a rate must be positive; omit rate for an unlimited link",
        ));
    }
    Ok(bits as u64)
}

/// The largest `rate` accepted, bits per second: 1000tbit, far above any link a host can
/// emulate, and far from the overflow of the emulator's and tc's arithmetic.
pub const MAX_RATE_BPS: u64 = 1_000_000_000_000_000;

/// The shortest percentage text that parses back to exactly `p` (Rust's
/// shortest round-trip decimal of `p`, with the point moved two places).
pub(crate) fn pct(p: f64) -> String {
    format!("{}%", shift_right2(&format!("{p}")))
}

pub(crate) fn time(ns: u64) -> String {
    if ns == 0 {
        "0us".to_string()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

pub(crate) fn rate(bits: u64) -> String {
    for (unit, scale) in [
        ("tbit", 1_000_000_000_000u64),
        ("gbit", 1_000_000_000),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
    ] {
        if bits.is_multiple_of(scale) {
            return format!("{}{unit}", bits / scale);
        }
    }
    format!("{bits}bit")
}
