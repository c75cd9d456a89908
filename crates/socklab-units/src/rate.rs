//! Offered rates as text: `--rate 1G` is 10⁹ bits of UDP payload per second (decimal
//! multiples, as iperf3's `-b`), `max` the search for the highest rate without loss.

use std::fmt;

/// Smallest rate: 1 kbit/s.
pub const MIN_BPS: u64 = 1_000;
/// Largest rate: 1 Tbit/s.
pub const MAX_BPS: u64 = 1_000_000_000_000;

/// A rate in bits of UDP payload per second, or the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// This many bits per second.
    Bps(u64),
    /// The highest rate without loss, searched by short trials.
    Max,
}

/// Parses `1G`, `100M`, `2.5g`, `500mbit`, `10kbit/s`, `250000`, or `max`.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("max") {
        return Ok(Rate::Max);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| {
        format!("'{}' is not a rate: write bits per second with an optional K, M or G (decimal: 1G = 10^9), e.g. 100M or 1G, or max", crate::text::quote(s))
    })?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("bit/s")
        .or_else(|| unit.strip_suffix("bps"))
        .or_else(|| unit.strip_suffix("bit"))
        .unwrap_or(&unit);
    let mult = match unit {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        other => {
            return Err(format!(
                "'{}' has an unknown rate unit '{}': use K, M or G (bits per second, decimal), e.g. 100M",
                crate::text::quote(s),
                crate::text::quote(other)
            ))
        }
    };
    let bps = v * mult;
    if !bps.is_finite() || bps < MIN_BPS as f64 || bps > MAX_BPS as f64 {
        return Err(format!(
            "{} bit/s is out of range: use 1K to 1T bits per second (e.g. 100M, 1G), or max",
            if bps.is_finite() && bps < 1e15 {
                format!("{bps:.0}")
            } else {
                "that".into()
            }
        ));
    }
    Ok(Rate::Bps(bps.round() as u64))
}

/// Prints bits per second compactly and exactly: `1G`, `1500M`, `64K`, `12345`.
pub fn format_bps(bps: u64) -> String {
    for (div, suffix) in [
        (1_000_000_000_000u64, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1_000, "K"),
    ] {
        if bps >= div && bps.is_multiple_of(div) {
            return format!("{}{suffix}", bps / div);
        }
    }
    bps.to_string()
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::Bps(b) => f.write_str(&format_bps(*b)),
            Rate::Max => f.write_str("max"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print_back() {
        for (text, bps, printed) in [
            ("1G", 1_000_000_000, "1G"),
            ("1g", 1_000_000_000, "1G"),
            ("2.5G", 2_500_000_000, "2500M"),
            ("100M", 100_000_000, "100M"),
            ("500mbit", 500_000_000, "500M"),
            ("10kbit/s", 10_000, "10K"),
            ("1Gbps", 1_000_000_000, "1G"),
            ("123456", 123_456, "123456"),
            ("1T", 1_000_000_000_000, "1T"),
        ] {
            let r = parse_rate(text).unwrap();
            assert_eq!(r, Rate::Bps(bps), "{text}");
            assert_eq!(r.to_string(), printed);
            assert_eq!(parse_rate(printed), Ok(r));
        }
        assert_eq!(parse_rate(" max "), Ok(Rate::Max));
        assert_eq!(Rate::Max.to_string(), "max");
    }

    #[test]
    fn bad_rates_say_what_to_write() {
        let e = parse_rate("0").unwrap_err();
        assert!(e.contains("out of range") && e.contains("1K to 1T"), "{e}");
        assert!(parse_rate("2T").unwrap_err().contains("out of range"));
        assert!(parse_rate("fast").unwrap_err().contains("not a rate"));
        assert!(parse_rate("1Q")
            .unwrap_err()
            .contains("unknown rate unit 'q'"));
        assert!(parse_rate("").unwrap_err().contains("not a rate"));
        assert!(parse_rate("1e999").is_err());
    }
}
