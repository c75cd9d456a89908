//! Experiment facts for reading. The store keeps each fact as the program wrote it
//! (`sink_exit = Code(0)`, `sink_wait4_sys_s = 0.012000`); the reports show what it means
//! (`sink: exit status` = `exited with code 0`, `sink: system CPU time (wait4)` = `12 ms`).

use crate::table::Table;

/// What a fact's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A process exit status as stored (`Code(0)`, `Signal(9)`, or a bare code).
    Exit,
    /// Seconds.
    Seconds,
    /// KiB.
    Kib,
    /// Bytes.
    Bytes,
    /// Anything else (booleans read yes/no).
    Plain,
}

/// The facts socklab stores, by name without a server's prefix (`sink_`, `echo[udp nodelay]_`):
/// what each means.
const MEANINGS: &[(&str, &str)] = &[
    ("exit", "exit status"),
    ("wait4_user_s", "user CPU time (wait4)"),
    ("wait4_sys_s", "system CPU time (wait4)"),
    ("wait4_nvcsw", "voluntary context switches (wait4)"),
    ("wait4_nivcsw", "involuntary context switches (wait4)"),
    ("maxrss_kib", "peak resident memory"),
    (
        "effective_opts",
        "socket options as the kernel reported them",
    ),
    ("serve_stats", "socklab serve's own accounting"),
    (
        "plan_fingerprint",
        "plan fingerprint (what `resume` matches)",
    ),
    (
        "retry_invalid",
        "repetitions marked invalid re-run (at most 2 × reps attempts per cell)",
    ),
    ("link_driver", "link emulator"),
    ("link_sysctls", "sysctls set in the link's namespaces"),
    ("link_emulator_cpu_s", "CPU time of the link emulator"),
    // The hosts of an experiment whose roles ran on several machines (`host[ROLE NAME]_…`).
    ("hostname", "host name"),
    ("kernel", "kernel"),
    ("cpu_model", "CPU"),
    ("cores", "cores"),
    ("mem_mib", "memory (MiB)"),
    ("cc_default", "default congestion control"),
    ("cc_available", "available congestion controls"),
    ("tcp_wmem", "net.ipv4.tcp_wmem"),
    ("tcp_rmem", "net.ipv4.tcp_rmem"),
    ("socklab_version", "socklab version"),
    ("addr", "address the measurement traffic went to"),
    ("clock_offset_s", "clock offset to the controller"),
    ("clock_error_s", "clock offset error (±)"),
    ("path_rtt_s", "path RTT (fastest TCP connect)"),
    ("path_mtu_bytes", "path MTU"),
];

/// Names of the common Linux signals.
const SIGNALS: &[(i32, &str)] = &[
    (1, "SIGHUP"),
    (2, "SIGINT"),
    (3, "SIGQUIT"),
    (4, "SIGILL"),
    (5, "SIGTRAP"),
    (6, "SIGABRT"),
    (7, "SIGBUS"),
    (8, "SIGFPE"),
    (9, "SIGKILL"),
    (10, "SIGUSR1"),
    (11, "SIGSEGV"),
    (12, "SIGUSR2"),
    (13, "SIGPIPE"),
    (14, "SIGALRM"),
    (15, "SIGTERM"),
];

/// The kind of a fact's value, from its name.
fn kind(name: &str) -> Kind {
    if name == "exit" {
        Kind::Exit
    } else if name.ends_with("_s") {
        Kind::Seconds
    } else if name.ends_with("_kib") {
        Kind::Kib
    } else if name.ends_with("_bytes") {
        Kind::Bytes
    } else {
        Kind::Plain
    }
}

/// A stored exit status in words.
fn exit(v: &str) -> Option<String> {
    let code = |s: &str| s.trim().parse::<i32>().ok();
    if let Some(n) = v.strip_prefix("Signal(").and_then(|s| s.strip_suffix(')')) {
        let n = code(n)?;
        return Some(match SIGNALS.iter().find(|(k, _)| *k == n) {
            Some((_, name)) => format!("killed by signal {n} ({name})"),
            None => format!("killed by signal {n}"),
        });
    }
    let n = code(
        v.strip_prefix("Code(")
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or(v),
    )?;
    Some(format!("exited with code {n}"))
}

/// A number with at most three decimals, trailing zeros dropped.
fn short(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// A duration in seconds in the unit that reads best.
fn seconds(x: f64) -> String {
    let a = x.abs();
    if a >= 1.0 || a == 0.0 {
        format!("{} s", short(x))
    } else if a >= 1e-3 {
        format!("{} ms", short(x * 1e3))
    } else {
        format!("{} µs", short(x * 1e6))
    }
}

/// A fact's value in words; the stored text when it does not read as its kind.
fn value(kind: Kind, v: &str) -> String {
    let number = v.trim().parse::<f64>().ok().filter(|x| x.is_finite());
    let read = match (kind, number) {
        (Kind::Exit, _) => exit(v),
        (Kind::Seconds, Some(x)) => Some(seconds(x)),
        (Kind::Kib, Some(x)) => Some(format!("{} KiB", short(x))),
        (Kind::Bytes, Some(x)) => Some(format!("{} bytes", short(x))),
        (Kind::Plain, _) => match v {
            "true" => Some("yes".into()),
            "false" => Some("no".into()),
            _ => None,
        },
        _ => None,
    };
    read.unwrap_or_else(|| v.to_string())
}

/// One fact as (what it is, its value), both for reading.
pub fn readable(key: &str, v: &str) -> (String, String) {
    // The longest known name the key ends with, after a prefix that ends in `_`.
    let known = MEANINGS
        .iter()
        .filter(|(name, _)| {
            key == *name
                || key
                    .strip_suffix(name)
                    .is_some_and(|p| p.len() > 1 && p.ends_with('_'))
        })
        .max_by_key(|(name, _)| name.len());
    let Some((name, meaning)) = known else {
        return (key.to_string(), value(kind(key), v));
    };
    let prefix = key[..key.len() - name.len()].trim_end_matches('_');
    let label = if prefix.is_empty() {
        meaning.to_string()
    } else {
        // `echo[link udp nodelay]` reads `echo (link udp nodelay)`.
        let who = prefix.replace('[', " (").replace(']', ")");
        format!("{who}: {meaning}")
    };
    (label, value(kind(name), v))
}

/// The facts of an experiment as a two-column table (fact, value) for reading.
pub fn table(facts: &[(String, String)]) -> Table {
    let mut t = Table::new(&["fact", "value"]);
    t.left = vec![true, true];
    for (k, v) in facts {
        let (label, value) = readable(k, v);
        t.row(vec![label, value]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(k: &str, v: &str) -> (String, String) {
        readable(k, v)
    }

    fn pair(a: &str, b: &str) -> (String, String) {
        (a.into(), b.into())
    }

    /// Item 10 of issue 15: the report reads the stored facts (`Code(0)`, seconds with six
    /// decimals, KiB) in words and units; the stored text stays as it is.
    #[test]
    fn stored_facts_read_in_words() {
        assert_eq!(
            read("sink_exit", "Code(0)"),
            pair("sink: exit status", "exited with code 0")
        );
        assert_eq!(
            read("echo[link udp nodelay]_exit", "Signal(9)"),
            pair(
                "echo (link udp nodelay): exit status",
                "killed by signal 9 (SIGKILL)"
            )
        );
        assert_eq!(read("sink_exit", "Signal(64)").1, "killed by signal 64");
        assert_eq!(read("sink_exit", "0").1, "exited with code 0");
        assert_eq!(
            read("sink[link]_wait4_user_s", "1.500000"),
            pair("sink (link): user CPU time (wait4)", "1.5 s")
        );
        assert_eq!(read("sink_wait4_sys_s", "0.012000").1, "12 ms");
        assert_eq!(read("sink_wait4_sys_s", "0.000250").1, "250 µs");
        assert_eq!(read("sink_wait4_sys_s", "0.000000").1, "0 s");
        assert_eq!(
            read("sink_wait4_nvcsw", "7"),
            pair("sink: voluntary context switches (wait4)", "7")
        );
        assert_eq!(
            read("sink_maxrss_kib", "1234"),
            pair("sink: peak resident memory", "1234 KiB")
        );
        assert_eq!(
            read("link_emulator_cpu_s", "0.250"),
            pair("CPU time of the link emulator", "250 ms")
        );
        assert_eq!(
            read("plan_fingerprint", "ab12"),
            pair("plan fingerprint (what `resume` matches)", "ab12")
        );
        assert_eq!(
            read("host[server lab2]_kernel", "Linux 6.1 x86_64"),
            pair("host (server lab2): kernel", "Linux 6.1 x86_64")
        );
        assert_eq!(
            read("host[generator local]_clock_offset_s", "-0.000013"),
            pair(
                "host (generator local): clock offset to the controller",
                "-13 µs"
            )
        );
        // Unknown facts keep their name; booleans and byte counts still read.
        assert_eq!(read("tfo_ok", "true"), pair("tfo_ok", "yes"));
        assert_eq!(read("sndbuf_bytes", "4096").1, "4096 bytes");
        // A value that does not read as its kind is shown as stored.
        assert_eq!(read("sink_exit", "Code(x)").1, "Code(x)");
        assert_eq!(read("sink_wait4_user_s", "n/a").1, "n/a");
        // `exit` alone and `..._exit` with an empty prefix are not confused.
        assert_eq!(read("_exit", "Code(1)").0, "_exit");
    }
}
