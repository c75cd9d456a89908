//! Parameters as data: every parameter of every workload is a `key = text` pair, so the CLI,
//! experiment files, the store and the report share one vocabulary. Keys use underscores;
//! dashes are accepted and normalised (`read-size` is `read_size`).

use std::collections::BTreeMap;

use crate::LabError;

/// One parameter of a workload, defined once: its name, its default as text (parsed by the same
/// parser as a user's value; empty: unset, or a description in parentheses when the default is
/// not a value), and its meaning. The same descriptor drives experiment-file checks, the key
/// listings in errors, the docs and the CLI's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The key (underscores).
    pub name: &'static str,
    /// Its default, as a user would write it.
    pub default: &'static str,
    /// One line of meaning.
    pub doc: &'static str,
}

impl Key {
    /// A descriptor.
    pub const fn new(name: &'static str, default: &'static str, doc: &'static str) -> Key {
        Key { name, default, doc }
    }

    /// Whether the default is a value the key's parser reads (not empty, not a description
    /// such as `(none)` or `= link`).
    pub fn default_is_value(&self) -> bool {
        !self.default.is_empty() && !self.default.starts_with('(') && !self.default.starts_with('=')
    }
}

/// An ordered map of parameter keys to their text values.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Params(pub BTreeMap<String, String>);

/// Normalises a key: lower case, dashes to underscores.
pub fn normalize_key(k: &str) -> String {
    k.trim().to_ascii_lowercase().replace('-', "_")
}

impl Params {
    /// An empty map.
    pub fn new() -> Params {
        Params::default()
    }

    /// Sets `key` (normalised) to `value`.
    pub fn set(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.0.insert(normalize_key(key), value.into());
        self
    }

    /// Builder form of [`Params::set`].
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.set(key, value);
        self
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(&normalize_key(key)).map(String::as_str)
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.0.remove(&normalize_key(key))
    }

    /// `self` overlaid with `other` (other wins).
    pub fn merged(&self, other: &Params) -> Params {
        let mut m = self.clone();
        for (k, v) in &other.0 {
            m.0.insert(k.clone(), v.clone());
        }
        m
    }

    /// `k=v k=v …` in key order, for labels and logs.
    pub fn to_text(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Parses `key` with `parse`, or returns `default` when unset.
    pub fn parse_or<T, E: std::fmt::Display>(
        &self,
        key: &str,
        default: T,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Result<T, LabError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => parse(v).map_err(|reason| LabError::param(key, v, reason.to_string())),
        }
    }

    /// Parses `key`'s value, or its default text when unset (see [`Key`]).
    pub fn value<T, E: std::fmt::Display>(
        &self,
        key: &Key,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Result<T, LabError> {
        let v = self.get(key.name).unwrap_or(key.default);
        parse(v).map_err(|reason| LabError::param(key.name, v, reason.to_string()))
    }

    /// Like [`Params::value`], for the key `name` of the table `keys`.
    pub fn value_in<T, E: std::fmt::Display>(
        &self,
        keys: &[Key],
        name: &str,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Result<T, LabError> {
        match keys.iter().find(|k| k.name == name) {
            Some(k) => self.value(k, parse),
            None => Err(LabError::Plan(format!("no key '{name}' in this workload"))),
        }
    }

    /// Parses an optional key.
    pub fn parse_opt<T, E: std::fmt::Display>(
        &self,
        key: &str,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Result<Option<T>, LabError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => parse(v)
                .map(Some)
                .map_err(|reason| LabError::param(key, v, reason.to_string())),
        }
    }
}

/// Parses a boolean: `1/0`, `true/false`, `yes/no`, `on/off`.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("not a boolean: write true or false".into()),
    }
}

/// Parses an unsigned integer with optional K/M/G suffix.
pub fn parse_count(s: &str) -> Result<u64, String> {
    socklab_units::parse_size(s)
}

/// Parses a size that must fit in `usize`.
pub fn parse_usize(s: &str) -> Result<usize, String> {
    let v = parse_count(s)?;
    usize::try_from(v).map_err(|_| "too large".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_normalised_and_values_parse_with_context() {
        let p = Params::new()
            .with("Read-Size", "1500")
            .with("verify", "maybe");
        assert_eq!(p.get("read_size"), Some("1500"));
        assert_eq!(p.parse_or("read_size", 0usize, parse_usize).unwrap(), 1500);
        assert_eq!(p.parse_or("nbufs", 7usize, parse_usize).unwrap(), 7);
        let e = p
            .parse_or("verify", false, parse_bool)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "verify = 'maybe': not a boolean: write true or false");
        assert_eq!(p.to_text(), "read_size=1500 verify=maybe");
    }
}
