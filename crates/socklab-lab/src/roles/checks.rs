//! The server roles' shared argument checks: the address to listen on and the idle timeout.
//! Errors name the key in backticks (the binary prints its flag) and the fix.

use std::net::IpAddr;
use std::time::Duration;

use socklab_units::parse_duration;

use super::RoleError;

/// `bind`: an IP address, brackets allowed for IPv6.
pub fn parse_bind(bind: &str) -> Result<IpAddr, RoleError> {
    bind.trim_matches(|c| c == '[' || c == ']')
        .parse()
        .map_err(|_| {
            RoleError::Usage(format!(
                "`bind` '{bind}' is not an IP address: use e.g. 127.0.0.1, ::1 or ::"
            ))
        })
}

/// `idle_timeout`: a positive duration.
pub fn idle_timeout(text: &str) -> Result<Duration, RoleError> {
    let d = parse_duration(text).map_err(|e| RoleError::Usage(format!("`idle_timeout` {e}")))?;
    if d.is_zero() {
        return Err(RoleError::Usage(
            "`idle_timeout` 0s: give the clients some time, e.g. `idle_timeout` 30s".into(),
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_with_or_without_brackets() {
        assert_eq!(
            parse_bind("[::1]").unwrap(),
            "::1".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            parse_bind("127.0.0.1").unwrap(),
            "127.0.0.1".parse::<IpAddr>().unwrap()
        );
        let e = parse_bind("localhost").unwrap_err().to_string();
        assert!(
            e.starts_with("`bind` 'localhost' is not an IP address"),
            "{e}"
        );
    }

    #[test]
    fn the_idle_timeout_is_positive() {
        assert_eq!(idle_timeout("30s").unwrap(), Duration::from_secs(30));
        let e = idle_timeout("0s").unwrap_err().to_string();
        assert!(e.starts_with("`idle_timeout` 0s: give the clients"), "{e}");
        let e = idle_timeout("soon").unwrap_err().to_string();
        assert!(e.starts_with("`idle_timeout` "), "{e}");
    }
}
