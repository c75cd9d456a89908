//! The seeds' published figures, typed in exactly as printed (the seeds are the five
//! documents in `/work/shared/seeds/`; each table cites its file and place). These are the
//! seeds' numbers, not ours, and nothing here is measured.

/// Seed 000 (`000_1941eb21f7014b83.txt`), "Measurements", table "TCP BETWEEN PROGRAMS ON SAME
/// COMPUTER (an old alpha with Digital Unix)": buffer size (printed in a column headed "(KB)",
/// the values are bytes: 1024 to 524288), average and standard deviation in Mbps.
pub const S000_TCP_SAME: [(&str, f64, f64); 10] = [
    ("1K", 0.046, 0.000),
    ("2K", 3.058, 2.835),
    ("4K", 40.313, 1.229),
    ("8K", 56.271, 0.812),
    ("16K", 60.934, 7.706),
    ("32K", 69.078, 1.269),
    ("64K", 71.621, 1.554),
    ("128K", 66.575, 8.319),
    ("256K", 65.037, 5.481),
    ("512K", 65.426, 0.809),
];

/// Seed 000, "Measurements", the sentence after the LAN table: pipes, "an average badwidth of
/// 324.4 Mbps and a standard deviation of 6.2 Mbps" (no transfer size given).
pub const S000_PIPE: (f64, f64) = (324.4, 6.2);

/// Seed 000, "Measurements", the memory copy table: transfer size in bytes, data rate average
/// and standard deviation in Mbps.
pub const S000_MEMCPY: [(&str, f64, f64); 9] = [
    ("4", 68.327, 0.963),
    ("8", 120.254, 1.952),
    ("16", 218.575, 1.873),
    ("32", 313.049, 5.371),
    ("64", 435.295, 1.331),
    ("128", 503.564, 1.422),
    ("256", 531.316, 10.307),
    ("512", 541.813, 2.403),
    ("1K", 545.021, 1.241),
];

/// Seed 001 (`001_d40a31dedc5d220b.txt`), "Таблица 1. Результаты исследования": time in µs
/// for 500 round trips of a 29-byte message, mean ("Математическое ожидание") and standard
/// deviation, 1000 repetitions per option ("Данная процедура проделывалась 1000 раз"). Our
/// option name, the seed's.
pub const S001_OPTS: [(&str, &str, f64, f64); 5] = [
    ("keepalive", "SO_KEEPALIVE", 47607.0, 12440.0),
    ("nodelay", "TCP_NODELAY", 44701.0, 12410.0),
    ("quickack", "TCP_QUICKACK", 45032.0, 9716.0),
    ("fastopen", "TCP_FASTOPEN", 53911.0, 15370.0),
    ("reuseaddr", "SO_REUSEADDR", 56237.0, 17856.0),
];

/// Seed 001's repetitions per option.
pub const S001_N: usize = 1000;

/// `(user, sys)` seconds in each of seed 002's three runs.
pub type Runs = [(f64, f64); 3];

/// Seed 002 (`002_a59d09d9824d06b3.txt`), "Preliminary results": user and system seconds per
/// server program, in its three runs (Pentium III 450 MHz, Red Hat 6.2; dual Pentium III
/// 650 MHz, non-SMP Red Hat 7.1; the same, SMP kernel). Our design, the seed's program, and
/// `(user, sys)` per run; `None` where the seed printed N/A (serv04, serv06).
pub const S002_SERVERS: [(&str, &str, Option<Runs>); 10] = [
    (
        "iterative",
        "serv00",
        Some([(0.5, 5.0), (0.3, 3.8), (0.3, 8.2)]),
    ),
    (
        "fork",
        "serv01",
        Some([(3.7, 17.8), (8.3, 35.1), (9.9, 56.8)]),
    ),
    (
        "prefork-nolock",
        "serv02",
        Some([(0.6, 7.1), (0.5, 4.8), (0.8, 9.9)]),
    ),
    (
        "prefork-flock",
        "serv03",
        Some([(0.8, 7.8), (0.4, 5.5), (0.6, 10.9)]),
    ),
    ("prefork-mutex", "serv04", None),
    (
        "prefork-fdpass",
        "serv05",
        Some([(0.9, 6.4), (0.8, 6.2), (0.9, 11.9)]),
    ),
    ("thread", "serv06", None),
    (
        "prethread-mutex",
        "serv07",
        Some([(0.8, 7.1), (0.9, 5.0), (1.0, 10.5)]),
    ),
    (
        "prethread-handoff",
        "serv08",
        Some([(1.0, 5.5), (1.0, 5.5), (1.2, 11.0)]),
    ),
    (
        "prethread-accept",
        "serv09",
        Some([(0.7, 7.3), (0.6, 4.8), (0.5, 9.8)]),
    ),
];

/// Seed 003 (`003_f4727d314ff665bb.txt`), "Performance evaluation", client sending to
/// csslab9 (20000 iterations): type (1 many writes, 2 writev, 3 single write), nbufs,
/// bufsize, time (s), #reads, throughput (Gbps).
pub const S003_RUNS: [(&str, u32, u32, f64, u32, f64); 9] = [
    ("write", 15, 100, 0.312501, 22978, 0.715255),
    ("write", 30, 50, 0.590449, 24501, 0.378555),
    ("write", 60, 25, 1.174245, 29018, 0.190350),
    ("writev", 15, 100, 0.054032, 20142, 4.136785),
    ("writev", 30, 50, 0.068898, 20264, 3.244190),
    ("writev", 60, 25, 0.121559, 22076, 1.838762),
    ("single", 15, 100, 0.054405, 20121, 4.108379),
    ("single", 30, 50, 0.059285, 20137, 3.770195),
    ("single", 60, 25, 0.030117, 20024, 7.421532),
];

/// Seed 004 (`004_5d4f7b56683b4305.txt`), sections 2.1.3, 2.2.1, 2.3.1, 2.4.1 and 2.5.1: the
/// total download time in seconds "on average", as the text gives it ("around"): condition,
/// TCP, UDP (timeout 0.13 s), UDP Optimal (`None` where the seed did not run it).
pub const S004_TIMES: [(&str, f64, f64, Option<f64>); 10] = [
    // 2.1.3 benchmark (UDP Optimal with its 0.01 s timeout; 2.2.1's "loss %0" row gives
    // TCP 0.4, UDP 7, UDP Optimal 5.5 with the 0.10 s timeout).
    ("no rule", 0.4, 7.0, Some(0.8)),
    ("loss 5%", 5.0, 21.0, Some(16.0)),
    ("loss 10%", 32.0, 31.0, Some(24.0)),
    ("loss 15%", 245.0, 41.0, Some(32.5)),
    // 2.3.1: "for all duplication percentages … UDP 7s, TCP 0.3s, UDP Optimal 0.8s".
    ("duplicate 5%", 0.3, 7.0, Some(0.8)),
    ("duplicate 10%", 0.3, 7.0, Some(0.8)),
    ("corrupt 5%", 4.0, 21.0, Some(16.0)),
    ("corrupt 10%", 23.5, 29.0, Some(22.5)),
    // 2.5.1: "UDP takes around 72s on average and TCP takes around 10s" for both.
    ("delay 100ms uniform", 10.0, 72.0, None),
    ("delay 100ms normal", 10.0, 72.0, None),
];

/// Seed 004, 2.2.1: the TCP and UDP Optimal times at loss 0% (the loss section's own row).
pub const S004_LOSS0: (f64, f64, f64) = (0.4, 7.0, 5.5);
