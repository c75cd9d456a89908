//! Parsing and printing of sizes, durations and rates, so every layer speaks the same text.
//!
//! Sizes: `1500`, `1K` (1024), `64KiB`, `1M`, `1G` (binary multiples; `k`/`m`/`g` too);
//! `KB`, `MB`, `GB`, `TB` are refused as ambiguous (1000 or 1024?), saying what to write.
//! Durations: `500ms`, `10s`, `2m`, `1.5s`, `250us`, `100ns`.
//! Rates ([`rate`]): `1G`, `100M`, `500mbit` (decimal bits per second, as iperf3's `-b`), `max`.
//! Text from outside ([`text`]): control characters escaped, quotes cut to a readable length.
//!
//! A pure crate: no I/O, no dependencies; every layer above (stats, net, link, transfer, lab,
//! the binary) parses and prints through it.

use std::time::Duration;

pub mod rate;
pub mod text;

pub use rate::{format_bps, parse_rate, Rate, MAX_BPS, MIN_BPS};

/// Parses a byte size such as `15`, `1K`, `512KiB`, `1M`, `1G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("'{}' is not a size: write a number with an optional K, M or G suffix (1K = 1024), e.g. 1500 or 64K", text::quote(s)));
    }
    let n: u64 = num.parse().map_err(|_| {
        format!(
            "'{}' is not a size: the number is too large",
            text::quote(s)
        )
    })?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        // KB is 1000 bytes to some (SI, disk makers) and 1024 to others (iperf3): refused,
        // rather than read one way while the user meant the other.
        u @ ("kb" | "mb" | "gb" | "tb") => {
            let (pow, k) = match u {
                "kb" => (1u32, "K"),
                "mb" => (2, "M"),
                "gb" => (3, "G"),
                _ => (4, "T"),
            };
            let si = num
                .parse::<u64>()
                .ok()
                .and_then(|n| n.checked_mul(1000u64.pow(pow)));
            let si = si.map_or_else(String::new, |v| format!(" or {v}"));
            return Err(format!(
                "'{}': {} is ambiguous (1000 or 1024?): write {num}{k} ({k}iB, 1024-based){si}",
                text::quote(s),
                text::quote(suffix.trim())
            ));
        }
        _ => {
            return Err(format!(
                "'{}' has an unknown size suffix '{}': use K, M or G (binary: 1K = 1024)",
                text::quote(s),
                text::quote(suffix)
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{}' is too large a size", text::quote(s)))
}

/// Prints a byte size compactly and exactly when possible: `1500`, `1K`, `512K`, `1M`.
pub fn format_size(n: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n >= (1 << shift) && n.is_multiple_of(1 << shift) {
            return format!("{}{}", n >> shift, suffix);
        }
    }
    n.to_string()
}

/// Parses a duration such as `10s`, `500ms`, `1.5s`, `2m`, `250us`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| {
        format!(
            "'{}' is not a duration: write a number and a unit, e.g. 10s, 500ms, 2m",
            text::quote(s)
        )
    })?;
    let secs = match unit.trim() {
        "s" | "sec" | "secs" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "ns" => v / 1e9,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        "" => {
            let s = text::quote(s);
            return Err(format!("'{s}' has no unit: write e.g. {s}s or {s}ms"));
        }
        u => {
            return Err(format!(
                "'{}' has an unknown unit '{}': use ns, us, ms, s, m or h",
                text::quote(s),
                text::quote(u)
            ))
        }
    };
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("'{}' is out of range", text::quote(s)));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Prints a duration in the largest unit that keeps it exact-ish: `10s`, `500ms`, `1.5s`.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0s".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) && ns < 10_000_000_000 {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) && ns < 10_000_000 {
        format!("{}us", ns / 1_000)
    } else if ns < 1_000 {
        format!("{ns}ns")
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print_the_same_text() {
        assert_eq!(parse_size("15").unwrap(), 15);
        assert_eq!(parse_size("1K").unwrap(), 1024);
        assert_eq!(parse_size("512KiB").unwrap(), 512 * 1024);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        for n in [1u64, 15, 1024, 1500, 4096, 512 * 1024, 1 << 20, 3 << 30] {
            assert_eq!(parse_size(&format_size(n)).unwrap(), n);
        }
        assert_eq!(format_size(1536), "1536");
        assert!(parse_size("").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("12X").unwrap_err().contains("suffix"));
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn kb_is_refused_as_ambiguous_and_the_message_says_what_to_write() {
        let e = parse_size("128KB").unwrap_err();
        assert!(e.contains("ambiguous"), "{e}");
        assert!(e.contains("write 128K (KiB, 1024-based) or 128000"), "{e}");
        assert!(parse_size("4mb").unwrap_err().contains("4M (MiB"));
        assert!(parse_size("1GB").unwrap_err().contains("or 1000000000"));
        assert_eq!(parse_size("128KiB").unwrap(), 128 << 10);
        assert_eq!(parse_size("128k").unwrap(), 128 << 10);
    }

    #[test]
    fn a_bad_size_or_duration_is_quoted_escaped_and_short() {
        let hostile = format!("1\x1b[2J{}", "x".repeat(100_000));
        for e in [
            parse_size(&hostile).unwrap_err(),
            parse_duration(&hostile).unwrap_err(),
        ] {
            assert!(!e.contains('\x1b'), "{e}");
            assert!(e.len() < 400, "{}", e.len());
        }
    }

    #[test]
    fn durations_parse_and_print_the_same_text() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        for d in ["10s", "500ms", "250us", "100ns"] {
            assert_eq!(format_duration(parse_duration(d).unwrap()), d);
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        for d in ["1.5s", "2m", "12.25s", "3h"] {
            let v = parse_duration(d).unwrap();
            assert_eq!(parse_duration(&format_duration(v)).unwrap(), v, "{d}");
        }
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }
}
