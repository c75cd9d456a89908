//! Seed 000: TCP throughput over the buffer size, the pipe and memcpy references, and the
//! socket states (TIME_WAIT, SO_REUSEADDR).

use super::published::{S000_MEMCPY, S000_PIPE, S000_TCP_SAME};
use super::*;

const SOURCE: &str = "Seed 000 (000_1941eb21f7014b83.txt), \"Measurements\": the table \"TCP BETWEEN PROGRAMS ON SAME COMPUTER\" (its size column is headed KB but lists bytes, 1024 to 524288), the pipe sentence after the LAN table, and the memory copy table; findings from its \"Some observations\".";

fn mbps(mean: f64, sd: f64) -> String {
    format!("{mean} ± {sd}")
}

/// The bufsize experiment (TCP and pipe) beside seed 000.
pub fn bufsize(st: &ExperimentStats) -> Comparison {
    let mut table = Table::new(&[
        "cell",
        "seed: Mbit/s (mean ± sd)",
        "ours: Gbit/s (mean, 95% CI, n)",
    ]);
    let tcp = |size: &str| find(st, "bulk", &[("bufsize", size)]);
    for (size, mean, sd) in S000_TCP_SAME {
        table.row(vec![
            format!("TCP bufsize={size}"),
            mbps(mean, sd),
            ours(st, tcp(size), "gbps"),
        ]);
    }
    let best_pipe = st.top("gbps", "pipe");
    let best_tcp = st.top("gbps", "bulk");
    let pipe_label = best_pipe.map_or_else(
        || "pipe".to_string(),
        |i| format!("fastest pipe by mean ({})", st.cells[i].cell.label),
    );
    table.row(vec![
        format!("{pipe_label}; the seed gives no size"),
        mbps(S000_PIPE.0, S000_PIPE.1),
        ours(st, best_pipe, "gbps"),
    ]);
    let label = |i: Option<usize>, what: &str| {
        i.map_or_else(|| what.to_string(), |i| st.cells[i].cell.label.clone())
    };
    let d = |a: &str, b: &str| {
        Diff::cells(
            st,
            "gbps",
            (&format!("TCP {a}"), tcp(a)),
            (&format!("TCP {b}"), tcp(b)),
        )
    };
    let findings = vec![
        judge(
            "throughput rises with the buffer size: 1 KiB buffers are far slower than 32 KiB ones (seed: 0.046 vs 69.078 Mbps)",
            vec![d("1K", "32K")],
            Expect::Less,
        ),
        judge(
            "past 32 KiB, larger buffers bring no further gain (seed: 65.0 to 71.6 Mbps from 64 KiB to 512 KiB, 69.1 at 32 KiB)",
            ["64K", "128K", "256K", "512K"].iter().map(|b| d(b, "32K")).collect(),
            Expect::NotGreater,
        ),
        judge(
            "a pipe moves data faster than TCP on the same machine (seed: 324.4 vs at best 71.621 Mbps, 4.5x; best cell of each here)",
            vec![Diff::cells(
                st,
                "gbps",
                (&label(best_pipe, "pipe"), best_pipe),
                (&label(best_tcp, "TCP"), best_tcp),
            )],
            Expect::Greater,
        ),
    ];
    Comparison {
        seed: "000",
        source: SOURCE,
        note: "The seed measured an old Alpha under Digital Unix; this experiment measures loopback here. Absolute rates are not comparable (ours are in Gbit/s, the seed's in Mbit/s); the shape of the curve and the pipe-vs-TCP order are.".into(),
        table,
        findings,
    }
}

/// The memcpy experiment beside seed 000's memory copy table.
pub fn memcpy(st: &ExperimentStats) -> Comparison {
    let mut table = Table::new(&[
        "transfer size (bytes)",
        "seed: Mbit/s (mean ± sd)",
        "ours: Gbit/s (mean, 95% CI, n)",
    ]);
    let cell = |size: &str| find(st, "memcpy", &[("size", size)]);
    for (size, mean, sd) in S000_MEMCPY {
        table.row(vec![
            size.to_string(),
            mbps(mean, sd),
            ours(st, cell(size), "gbps"),
        ]);
    }
    let d = |a: &str, b: &str| {
        Diff::cells(
            st,
            "gbps",
            (&format!("memcpy size={a}"), cell(a)),
            (&format!("memcpy size={b}"), cell(b)),
        )
    };
    let findings = vec![
        judge(
            "the copy rate rises with the transfer size: 4-byte copies are far slower than 1 KiB copies (seed: 68.327 vs 545.021 Mbps)",
            vec![d("4", "1K")],
            Expect::Less,
        ),
        judge(
            &format!(
                "by 256 bytes the copy rate has levelled off, within 10% of the 1 KiB rate (seed: 531.316 vs 545.021 Mbps, {:+.1}%; the seed gives no repetition count)",
                (S000_MEMCPY[6].1 - S000_MEMCPY[8].1) / S000_MEMCPY[8].1 * 100.0
            ),
            vec![d("256", "1K")],
            Expect::Same,
        ),
        Finding::new(
            "memory copy beats a pipe, which beats TCP (seed: 545.021 > 324.4 > 71.621 Mbps)",
            Verdict::NotComparable,
            "the pipe and TCP cells are in the bufsize experiment, not in this one; set this section's rates beside that section's",
        ),
    ];
    Comparison {
        seed: "000",
        source: SOURCE,
        note: "The seed copied on an old Alpha; absolute rates are not comparable (ours in Gbit/s, the seed's in Mbit/s), the shape over the transfer size is.".into(),
        table,
        findings,
    }
}

/// The states experiment beside seed 000's "Socket States" and SO_REUSEADDR text.
pub fn states(st: &ExperimentStats) -> Comparison {
    let mut table = Table::new(&[
        "cell",
        "seed (text, no figures)",
        "ours: TIME_WAIT server",
        "ours: TIME_WAIT client",
        "ours: rebind ok",
    ]);
    let cell =
        |closer: &str, reuse: &str| find(st, "states", &[("closer", closer), ("reuseaddr", reuse)]);
    for (closer, reuse, seed) in [
        (
            "server",
            "false",
            "the closing side goes through TIME_WAIT; the port stays in use \"for a few seconds\"",
        ),
        (
            "server",
            "true",
            "\"a new bind … will be accepted immediately\"",
        ),
        (
            "client",
            "false",
            "the client, closing first, holds TIME_WAIT",
        ),
        ("client", "true", "-"),
    ] {
        let i = cell(closer, reuse);
        table.row(vec![
            format!("closer={closer} reuseaddr={reuse}"),
            seed.to_string(),
            ours(st, i, "tw_server"),
            ours(st, i, "tw_client"),
            ours(st, i, "rebind_ok"),
        ]);
    }
    let within = |closer: &str, first: &str, second: &str| -> Result<Diff, String> {
        let i = cell(closer, "false").ok_or_else(|| {
            format!("this experiment has no cell closer={closer} reuseaddr=false")
        })?;
        Ok(Diff::new(
            &format!("{first} (closer={closer})"),
            values(st, i, first),
            &format!("{second} (closer={closer})"),
            values(st, i, second),
        ))
    };
    let findings = vec![
        judge(
            "TIME_WAIT lands on the side that closes first (the active close)",
            vec![
                within("server", "tw_server", "tw_client"),
                within("client", "tw_client", "tw_server"),
            ],
            Expect::Greater,
        ),
        judge(
            "with SO_REUSEADDR the server's port can be bound again at once; without it, not while its connections linger",
            vec![Diff::cells(
                st,
                "rebind_ok",
                ("rebind_ok with SO_REUSEADDR", cell("server", "true")),
                ("without", cell("server", "false")),
            )],
            Expect::Greater,
        ),
    ];
    Comparison {
        seed: "000",
        source: "Seed 000 (000_1941eb21f7014b83.txt), \"Socket States\" and the SO_REUSEADDR paragraph of \"Socket Functions\" (a netstat listing and text, no figures).",
        note: "The seed describes kernel behaviour, which carries across machines; only its direction is judged.".into(),
        table,
        findings,
    }
}
