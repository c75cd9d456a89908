//! Parameters as data: every parameter of every workload is a `key = text` pair, so the CLI,
//! experiment files, the store and the report share one vocabulary. Keys use underscores;
//! dashes are accepted and normalised (`read-size` is `read_size`).

use std::collections::BTreeMap;

use crate::LabError;

/// One parameter of a workload, defined once: its name, its default as text (parsed by the same
/// parser as a user's value; empty: unset, or a description in parentheses when the default is
/// not a value), and its meaning. The same descriptor drives experiment-file checks, the key
/// listings in errors, the docs and the CLI: its flag (name, short form, value name), whether
/// the flag takes a comma list (several values: an axis), a switch form (a flag without a value,
/// and presets such as `--reverse` = `direction=down`), its help, and the modes of the command
/// it belongs to (bulk's TCP or UDP). Built with const builders:
/// `Key::new("streams", "1", "…").short('P').list()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The key (underscores).
    pub name: &'static str,
    /// Its default, as a user would write it.
    pub default: &'static str,
    /// One line of meaning.
    pub doc: &'static str,
    /// The flag's long name without dashes; `None`: the key with dashes (`read_size`:
    /// `read-size`).
    pub flag: Option<&'static str>,
    /// The flag's short form (`-P`).
    pub short: Option<char>,
    /// Whether the flag takes a comma list: one value is fixed, several are an axis.
    pub list: bool,
    /// Whether the flag is a switch: given without a value, it sets the key to `true`.
    pub switch: bool,
    /// Flags that set the key to one value (`--reverse` = `direction=down`).
    pub presets: &'static [Preset],
    /// The flag's help; `None`: [`Key::doc`].
    pub help: Option<&'static str>,
    /// The value's name in the help (`SIZE`, `D`).
    pub value_name: Option<&'static str>,
    /// The modes of a command the key belongs to ([`Modes::ALL`]: every one).
    pub modes: Modes,
    /// Whether values are byte sizes (printed with K/M/G by sweeps).
    pub size: bool,
    /// Whether the key has no flag of its own (set by the command, e.g. pingpong's `udp`).
    pub no_flag: bool,
}

/// A flag that sets a key to a fixed value: `--reverse` is `direction=down`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The long flag without dashes.
    pub flag: &'static str,
    /// Its short form.
    pub short: Option<char>,
    /// The value it sets.
    pub value: &'static str,
    /// Its help.
    pub help: &'static str,
}

impl Preset {
    /// `--flag` sets the key to `value`.
    pub const fn new(flag: &'static str, value: &'static str, help: &'static str) -> Preset {
        Preset {
            flag,
            short: None,
            value,
            help,
        }
    }

    /// With a short form.
    pub const fn short(mut self, c: char) -> Preset {
        self.short = Some(c);
        self
    }
}

/// The modes of a command a key belongs to, as a bit set (bulk: [`Modes::TCP`] or
/// [`Modes::UDP`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes(pub u8);

impl Modes {
    /// Every mode.
    pub const ALL: Modes = Modes(u8::MAX);
    /// TCP (bulk without `--udp`).
    pub const TCP: Modes = Modes(1);
    /// UDP (bulk `--udp`).
    pub const UDP: Modes = Modes(2);

    /// Whether `self` includes `mode`.
    pub const fn has(self, mode: Modes) -> bool {
        self.0 & mode.0 != 0
    }

    /// Both sets.
    pub const fn or(self, other: Modes) -> Modes {
        Modes(self.0 | other.0)
    }
}

impl Key {
    /// A descriptor.
    pub const fn new(name: &'static str, default: &'static str, doc: &'static str) -> Key {
        Key {
            name,
            default,
            doc,
            flag: None,
            short: None,
            list: false,
            switch: false,
            presets: &[],
            help: None,
            value_name: None,
            modes: Modes::ALL,
            size: false,
            no_flag: false,
        }
    }

    /// The flag's long name (without dashes), when it is not the key with dashes.
    pub const fn flag(mut self, flag: &'static str) -> Key {
        self.flag = Some(flag);
        self
    }

    /// The flag's short form.
    pub const fn short(mut self, c: char) -> Key {
        self.short = Some(c);
        self
    }

    /// The flag takes a comma list (several values: an axis).
    pub const fn list(mut self) -> Key {
        self.list = true;
        self
    }

    /// The flag is a switch (no value: `true`).
    pub const fn switch(mut self) -> Key {
        self.switch = true;
        self
    }

    /// Flags that set the key to fixed values.
    pub const fn presets(mut self, presets: &'static [Preset]) -> Key {
        self.presets = presets;
        self
    }

    /// The flag's help, when not [`Key::doc`].
    pub const fn help(mut self, help: &'static str) -> Key {
        self.help = Some(help);
        self
    }

    /// The value's name in the help.
    pub const fn value_name(mut self, v: &'static str) -> Key {
        self.value_name = Some(v);
        self
    }

    /// The modes the key belongs to.
    pub const fn modes(mut self, modes: Modes) -> Key {
        self.modes = modes;
        self
    }

    /// Values are byte sizes.
    pub const fn size(mut self) -> Key {
        self.size = true;
        self
    }

    /// The key has no flag of its own.
    pub const fn no_flag(mut self) -> Key {
        self.no_flag = true;
        self
    }

    /// The flag's long name (without dashes).
    pub fn flag_name(&self) -> String {
        match self.flag {
            Some(f) => f.to_string(),
            None => self.name.replace('_', "-"),
        }
    }

    /// The flag's help text.
    pub fn help_text(&self) -> &'static str {
        self.help.unwrap_or(self.doc)
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
            None => Err(LabError::Plan(format!(
                "no key '{}' in this workload",
                socklab_units::text::quote(name)
            ))),
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

    #[test]
    fn key_builders_describe_the_flag() {
        const REVERSE: &[Preset] = &[Preset::new("reverse", "down", "the sink sends").short('R')];
        const K: Key = Key::new("read_size", "128K", "bytes per read")
            .short('r')
            .list()
            .size()
            .modes(Modes::TCP)
            .presets(REVERSE);
        assert_eq!(K.flag_name(), "read-size");
        assert_eq!(K.help_text(), "bytes per read");
        assert_eq!(K.short, Some('r'));
        let k = K;
        assert!(k.list && k.size && !k.switch);
        assert!(k.modes.has(Modes::TCP) && !k.modes.has(Modes::UDP));
        assert_eq!(K.presets[0].short, Some('R'));
        let plain = Key::new("cc", "cubic", "congestion control");
        assert!(plain.modes.has(Modes::UDP) && plain.modes.has(Modes::TCP));
        assert_eq!(plain.flag("tcp-cc").help("h").flag_name(), "tcp-cc");
        assert_eq!(plain.help("h").help_text(), "h");
    }
}
