//! Issue 28 part 2: the human tables show what the experiment is about: a cell over an
//! emulated link shows its latency beside its throughput, units scale down a column,
//! `--columns` picks the columns, and labels keep the whole link spec.

mod common;

use common::{root_or_skip, run};

/// The human table at the start of `out` (its header line starts with `config`), as rows of
/// cells: columns are apart by two spaces or more, words inside a cell by one.
fn table(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .skip_while(|l| !l.starts_with("config "))
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('±'))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        })
        .collect()
}

/// The value of column `h` in row `row` of `t` (the header row is row 0).
fn cell<'a>(t: &'a [Vec<String>], row: usize, h: &str) -> &'a str {
    let i = t[0]
        .iter()
        .position(|x| x == h)
        .unwrap_or_else(|| panic!("no column {h} in {:?}", t[0]));
    &t[row][i]
}

/// The bufferbloat pair of the issue: a 1000-packet FIFO and fq_codel at 20 Mbit/s. Both cells
/// move about 19 Mbit/s; the table prints it in Mbit/s, labels both cells with their whole spec
/// (`limit 1000` included) and shows the latency that tells them apart.
#[test]
fn the_bufferbloat_pair_shows_its_latency_and_whole_labels() {
    if !root_or_skip("the_bufferbloat_pair_shows_its_latency_and_whole_labels") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let db = db.to_str().unwrap();
    let fifo = "rate 20mbit limit 1000";
    let codel = "rate 20mbit limit 1000 aqm fq_codel";
    let links = format!("{fifo},{codel}");
    let (code, out, err) = run(&[
        "bulk",
        "--link",
        &links,
        "--duration",
        "2s",
        "--reps",
        "2",
        "--warmup",
        "0",
        // A repetition the emulator marks invalid on a busy machine is kept, not re-run.
        "--keep-invalid",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let t = table(&out);
    assert_eq!(t.len(), 3, "{out}");
    // The labels differ in their limit and aqm words, and both keep `limit 1000`.
    assert_eq!(t[1][0], format!("link={fifo}"), "{out}");
    assert_eq!(t[2][0], format!("link={codel}"), "{out}");
    // 20 Mbit/s is printed in Mbit/s.
    assert_eq!(t[0][2], "Mbit/s", "{out}");
    // The latency columns, beside throughput. A 1000-packet FIFO at 20 Mbit/s holds up to
    // 0.6 s of packets and cubic fills it; fq_codel keeps each queue near CoDel's 5 ms target.
    // So the FIFO's queueing delay (decided on the emulator's model clock) and the RTT it puts
    // on TCP are many times fq_codel's: the two cells are compared with each other by a wide
    // factor (3×), never against a time threshold.
    for h in ["rtt ms", "qdelay ms"] {
        let v = |row: usize| -> f64 {
            let c = cell(&t, row, h);
            c.parse().unwrap_or_else(|_| panic!("{h} '{c}' in {out}"))
        };
        assert!(
            v(1) > 3.0 * v(2),
            "{h}: FIFO {} vs fq_codel {}\n{out}",
            v(1),
            v(2)
        );
    }
    // results show prints the same table, and --columns picks from it.
    let (code, shown, err) = run(&[
        "results",
        "show",
        "--columns",
        "link_fwd_qdelay_mean_us,gbps",
        "--keep-invalid",
        "--db",
        db,
    ]);
    assert_eq!(code, 0, "{err}");
    let s = table(&shown);
    assert_eq!(
        &s[0][..4],
        ["config", "n", "qdelay ms", "Mbit/s"],
        "{shown}"
    );
    assert_eq!(s[1][2], cell(&t, 1, "qdelay ms"), "{shown}\n{out}");
    // The export keeps its own unit and the canonical configuration.
    let (_, json, _) = run(&["results", "show", "--json", "--db", db]);
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(j["cells"][0]["metrics"]["gbps"]["unit"], "Gbit/s");
    assert!(j["cells"][0]["metrics"]["gbps"]["mean"].as_f64().unwrap() < 1.0);
}

/// `--columns` picks the human table's columns on a measuring command and on `results show`;
/// a name no metric table holds is a one-line error naming the ones there are, before anything
/// runs; with --json it is refused (exports keep every metric).
#[test]
fn columns_pick_the_table_and_an_unknown_name_lists_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let db = db.to_str().unwrap();
    let quick = ["--duration", "0.3s", "--reps", "3", "--warmup", "0"];
    let mut args = vec!["bulk", "--columns", "gbps,nope", "--db", db];
    args.extend(quick);
    let (code, out, err) = run(&args);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("--columns: no metric 'nope' here; choose from gbps, "),
        "{err}"
    );
    assert!(err.contains("rtt_us") && err.contains("writes"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("[1/"), "nothing ran: {err}");
    let mut args = vec!["bulk", "--columns", "writes,gbps", "--db", db];
    args.extend(quick);
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let t = table(&out);
    assert_eq!(&t[0][..4], ["config", "n", "writes", "Gbit/s"], "{out}");
    assert!(!out.contains("reads"), "{out}");
    let (code, shown, err) = run(&["results", "show", "--columns", "reads", "--db", db]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(table(&shown)[0], ["config", "n", "reads"], "{shown}");
    let (code, _, err) = run(&["results", "show", "--columns", "rtt", "--db", db]);
    assert_ne!(code, 0);
    assert!(err.contains("no metric 'rtt' here"), "{err}");
    let (code, _, err) = run(&["results", "show", "--columns", "gbps", "--json", "--db", db]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--columns") && err.contains("--json"), "{err}");
    let (code, _, err) = run(&["results", "show", "--columns", "gbps,,reads", "--db", db]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("separated by commas"), "{err}");
}

/// rrul's terminal tables print latency in ms and say so in every latency header (before
/// issue 28 the headers named no unit); throughput scales with its column.
#[test]
fn rrul_tables_print_latency_in_ms() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let (code, out, err) = run(&[
        "rrul",
        "--idle",
        "300ms",
        "--duration",
        "0.5s",
        "--probe-timeout",
        "60s",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let summary = table(&out);
    for h in [
        "added p50 ms",
        "idle p50 ms",
        "loaded p50 ms",
        "added p99 ms",
    ] {
        let v = cell(&summary, 1, h);
        assert!(v.parse::<f64>().is_ok(), "{h} '{v}' in {out}");
    }
    let (_, under_load) = out
        .split_once("latency under load")
        .unwrap_or_else(|| panic!("{out}"));
    let t = table(under_load);
    for h in [
        "tcp idle p50 ms",
        "tcp loaded p50 ms",
        "udp idle p50 ms",
        "udp added p50 ms",
    ] {
        cell(&t, 1, h);
    }
    assert!(
        t[0].iter().any(|h| h == "up Gbit/s" || h == "up Mbit/s"),
        "{out}"
    );
}
