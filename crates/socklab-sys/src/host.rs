//! Facts about the machine that every stored result carries.

use std::ffi::CStr;

/// Kernel, CPU and TCP defaults of this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// Host name.
    pub hostname: String,
    /// `uname -srm`, e.g. `Linux 6.18.44 x86_64`.
    pub kernel: String,
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Online CPUs.
    pub cores: usize,
    /// Memory in MiB.
    pub mem_mib: u64,
    /// `net.ipv4.tcp_congestion_control`.
    pub cc_default: String,
    /// `net.ipv4.tcp_available_congestion_control`.
    pub cc_available: String,
    /// `net.ipv4.tcp_wmem` (min default max).
    pub tcp_wmem: String,
    /// `net.ipv4.tcp_rmem` (min default max).
    pub tcp_rmem: String,
}

fn proc_str(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

/// A NUL-terminated field of a kernel structure as a `String`.
fn c_field(f: &[libc::c_char]) -> String {
    if !f.contains(&0) {
        return String::new();
    }
    // SAFETY: the slice contains a NUL (checked above), so the string ends inside it.
    let c = unsafe { CStr::from_ptr(f.as_ptr()) };
    c.to_string_lossy().into_owned()
}

fn uname() -> (String, String) {
    // SAFETY: utsname is plain old data; all-zero is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return ("unknown".into(), "unknown".into());
    }
    let s = c_field;
    (
        s(&u.nodename),
        format!("{} {} {}", s(&u.sysname), s(&u.release), s(&u.machine)),
    )
}

/// CPUs this process may run on (1 if the kernel will not say): the default worker and thread
/// count of the servers and the load generator.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Reads the host facts (cheap: a few small `/proc` files).
pub fn host_facts() -> HostFacts {
    let (hostname, kernel) = uname();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = cores();
    let mem_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|kib| kib / 1024)
        .unwrap_or(0);
    HostFacts {
        hostname,
        kernel,
        cpu_model,
        cores,
        mem_mib,
        cc_default: proc_str("/proc/sys/net/ipv4/tcp_congestion_control"),
        cc_available: proc_str("/proc/sys/net/ipv4/tcp_available_congestion_control"),
        tcp_wmem: proc_str("/proc/sys/net/ipv4/tcp_wmem"),
        tcp_rmem: proc_str("/proc/sys/net/ipv4/tcp_rmem"),
    }
}
