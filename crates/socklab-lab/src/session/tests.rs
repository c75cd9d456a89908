//! The session's text: statistics, results queries, notes; a printer that keeps what it gets.

use super::*;
use crate::flags::PlanFlags;
use crate::model::params::Params;
use crate::runner::Sample;
use crate::testkit::{lab, reps};

/// A [`Printer`] that keeps what it is given.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    pub out: String,
    pub err: String,
}

impl Printer for Kept {
    fn out(&mut self, text: &str) -> std::io::Result<()> {
        self.out.push_str(text);
        Ok(())
    }
    fn err(&mut self, text: &str) {
        self.err.push_str(text);
    }
    fn note(&mut self, line: &str) {
        self.err.push_str(line);
        self.err.push('\n');
    }
}

#[test]
fn arguments_with_white_space_are_quoted() {
    let args = ["socklab", "bulk", "--link", "loss 5%"].map(String::from);
    assert_eq!(quoted(args.into_iter()), "socklab bulk --link 'loss 5%'");
}

#[test]
fn statistics_print_as_json_csv_or_a_table() {
    let l = lab(
        "bulk",
        Params::new(),
        "strategy",
        &["write", "writev"],
        &[reps("gbps", &[1.0, 1.1]), reps("gbps", &[2.0, 2.2])],
    );
    let json = |one_line| {
        let f = StatsFormat {
            json: true,
            ..StatsFormat::default()
        };
        stats_text(&l.store, l.id, f, one_line).unwrap()
    };
    assert_eq!(json(true).lines().count(), 1);
    assert!(json(false).lines().count() > 1);
    serde_json::from_str::<serde_json::Value>(&json(true)).unwrap();
    let csv = StatsFormat {
        csv: true,
        ..StatsFormat::default()
    };
    let text = stats_text(&l.store, l.id, csv, false).unwrap();
    assert_eq!(
        text,
        output::summary_csv(&experiment_stats_with(&l.store, l.id, false).unwrap())
    );
    let human = stats_text(&l.store, l.id, StatsFormat::default(), false).unwrap();
    assert!(human.contains("writev"), "{human}");
}

#[test]
fn results_queries_read_the_newest_experiment_by_default() {
    let l = lab(
        "bulk",
        Params::new(),
        "strategy",
        &["write"],
        &[reps("gbps", &[1.0, 1.2])],
    );
    let list = Query::List.text(&l.store, None).unwrap().unwrap();
    assert!(list.contains("made up"), "{list}");
    let csv = Query::Export("csv".into())
        .text(&l.store, None)
        .unwrap()
        .unwrap();
    assert_eq!(csv, output::samples_csv(&l.store, &[l.id]).unwrap());
    let e = Query::Export("xml".into())
        .text(&l.store, Some(l.id))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "`format` 'xml': choose csv, json or prometheus"
    );
    let e = Query::Series("prometheus".into())
        .text(&l.store, Some(l.id))
        .unwrap_err();
    assert_eq!(e.to_string(), "`format` 'prometheus': choose csv or json");
    // Every experiment: the CSV of them all, the JSON rows of them all in one array.
    let all = Query::ExportAll("csv".into()).text(&l.store, None).unwrap();
    assert_eq!(all.unwrap(), csv);
    let all = Query::ExportAll("json".into())
        .text(&l.store, None)
        .unwrap();
    let rows: serde_json::Value = serde_json::from_str(&all.unwrap()).unwrap();
    assert_eq!(rows, output::samples_json(&l.store, l.id).unwrap());
    assert_eq!(export_format("xml", true, false), "csv");
    assert_eq!(export_format("xml", false, true), "json");
    assert_eq!(
        Query::List.dry_text(Path::new("x.db")),
        "socklab results would list the experiments from 'x.db'"
    );

    let dir = tempfile::tempdir().unwrap();
    let empty = Store::open(&dir.path().join("empty.db")).unwrap();
    assert_eq!(
        Query::Show(StatsFormat::default())
            .text(&empty, None)
            .unwrap(),
        None
    );
    let missing = dir.path().join("missing.db");
    let e = open_existing(&missing).unwrap_err().to_string();
    assert!(
        e.ends_with("does not exist: run an experiment first, or name the file with `db` PATH"),
        "{e}"
    );
}

#[test]
fn a_noisy_cell_is_named_with_the_command_that_adds_repetitions() {
    let l = lab(
        "bulk",
        Params::new(),
        "strategy",
        &["write", "writev"],
        &[
            reps("gbps", &[1.0, 3.0, 1.0]),
            reps("gbps", &[2.0, 2.0, 2.01]),
        ],
    );
    let run = FileRun {
        file: "x.toml".into(),
        quick: true,
        reps: None,
        warmup: None,
        resume: false,
        noise_cv: 0.10,
        format: StatsFormat::default(),
        db: "lab.db".into(),
        trust_ssh_config: false,
    };
    assert_eq!(
        run.resume_command(),
        "socklab run x.toml `quick` `resume` `db` lab.db"
    );
    let note = run
        .noise_note(&l.store, l.id)
        .unwrap()
        .expect("one noisy cell");
    assert!(
        note.starts_with("noisy: 1 cell(s) vary by more than 10%"),
        "{note}"
    );
    assert!(note.ends_with("`resume` `db` lab.db `reps` 6"), "{note}");
    let calm = FileRun {
        noise_cv: 5.0,
        ..run
    };
    assert_eq!(calm.noise_note(&l.store, l.id).unwrap(), None);
}

#[test]
fn an_experiment_file_that_cannot_be_read_or_a_bad_noise_bound_is_a_usage_error() {
    let mut run = FileRun {
        file: "/nonexistent/x.toml".into(),
        quick: false,
        reps: None,
        warmup: None,
        resume: true,
        noise_cv: 0.10,
        format: StatsFormat::default(),
        db: "lab.db".into(),
        trust_ssh_config: false,
    };
    let e = run.read().unwrap_err();
    assert!(matches!(e, LabError::Plan(_)), "{e}");
    assert!(e
        .to_string()
        .starts_with("cannot read experiment file '/nonexistent/x.toml'"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.toml");
    std::fs::write(
        &file,
        "name = \"x\"\nworkload = \"pipe\"\n[fixed]\nbytes = \"1M\"\n",
    )
    .unwrap();
    run.file = file;
    run.noise_cv = 0.0;
    let file = run.read().unwrap();
    let e = run
        .plan(&file, &HostPlan::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "`noise_cv` 0: give a positive fraction, e.g. 0.10 for 10%"
    );
    run.noise_cv = 0.1;
    let (plan, _) = run.plan(&file, &HostPlan::default()).unwrap();
    assert!(run
        .dry_text(&plan, &HostPlan::default())
        .contains("  `resume`: only the repetitions missing"));
}

#[test]
fn the_suites_are_listed_and_their_dry_run_counts_every_run() {
    let list = suites_text();
    for s in crate::suites::SUITES {
        assert!(list.contains(s.name), "{list}");
    }
    let lab = LabRun {
        quick: true,
        suites: vec![crate::suites::SUITES[0].name.to_string()],
        out: "rep".into(),
        title: "t".into(),
        keep_invalid: true,
        resume: false,
        db: "lab.db".into(),
        stream: false,
    };
    let plans = lab.plans(&lab.suites().unwrap()).unwrap();
    assert!(plans.iter().all(|p| !p.retry_invalid));
    let text = lab.dry_text(&plans);
    let runs: usize = plans.iter().map(|p| crate::dryrun::estimate(p).runs).sum();
    assert!(
        text.ends_with(&format!("{runs} runs in all; then a report in 'rep'\n")),
        "{text}"
    );
    let bad = LabRun {
        suites: vec!["nope".into()],
        ..lab
    };
    assert!(bad.suites().is_err());
}

#[test]
fn bulk_pairs_its_lists_and_adds_reference_rows_at_its_sizes() {
    use crate::flags::Given;
    use crate::workload::bulk::KEYS;
    let key = |n: &str| *KEYS.iter().find(|k| k.name == n).unwrap();
    let given = vec![
        Given::new(key("nbufs"), ["15", "30"]),
        Given::new(key("bufsize"), ["100", "50"]),
    ];
    let head = PlanFlags {
        name: "b".into(),
        reps: 2,
        warmup: 0,
        order: "sequential".into(),
        seed: 1,
        command: "socklab bulk".into(),
    };
    let paired = bulk_plan(bulk_group(&given, &[], false).unwrap(), &head, false).unwrap();
    assert_eq!(paired.cells.len(), 2);
    let crossed = bulk_plan(bulk_group(&given, &[], true).unwrap(), &head, false).unwrap();
    assert_eq!(crossed.cells.len(), 4);
    // 15 x 100 = 30 x 50 = 1500 bytes: one size, a pipe and a memcpy row.
    let with_ref = bulk_plan(bulk_group(&given, &[], false).unwrap(), &head, true).unwrap();
    assert_eq!(with_ref.cells.len(), 4);
    let bad = PlanFlags {
        order: "sideways".into(),
        ..head
    };
    assert!(bad.plan(&[]).is_err());
    assert_eq!(order_seed(None).unwrap(), 1);
    assert_eq!(order_seed(Some("7")).unwrap(), 7);
    let e = order_seed(Some("x")).unwrap_err().to_string();
    assert_eq!(e, "`seed` 'x': give a whole number, e.g. `seed` 1");
}

#[test]
fn cpus_outside_this_process_are_refused_by_key() {
    assert!(check_local_cpus("affinity", None).is_ok());
    let e = check_local_cpus("affinity", Some("100000"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("`affinity` "), "{e}");
    let e = check_local_cpus("affinity", Some("x"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("`affinity` "), "{e}");
}

#[test]
fn stdout_errors_come_back_as_they_are() {
    let mut kept = Kept::default();
    print(&mut kept, "a table\n").unwrap();
    kept.note("`timeout` 0s");
    assert_eq!(
        (kept.out.as_str(), kept.err.as_str()),
        ("a table\n", "`timeout` 0s\n")
    );

    struct Closed;
    impl Printer for Closed {
        fn out(&mut self, _: &str) -> std::io::Result<()> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn err(&mut self, _: &str) {}
        fn note(&mut self, _: &str) {}
    }
    match print(&mut Closed, "x") {
        Err(LabError::Io { context, source }) => {
            assert_eq!(context, IO_AS_IS);
            assert_eq!(source.kind(), std::io::ErrorKind::BrokenPipe);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_sample_in_a_few_words() {
    let s = |m: &[(&'static str, f64)]| Sample {
        metrics: m.iter().map(|(k, v)| ((*k).into(), *v)).collect(),
        extra: serde_json::Value::Null,
        histograms: Vec::new(),
        intervals: Vec::new(),
    };
    assert!(describe_sample(&s(&[("gbps", 9.5)])).ends_with(" Gbit/s"));
    // Issue 28 part 2: below 1 Gbit/s in Mbit/s; over a link with its latency.
    let link = [
        ("gbps", 0.0193),
        ("rtt_us", 119_400.0),
        ("link_fwd_qdelay_mean_us", 64_150.0),
    ];
    assert_eq!(
        describe_sample(&s(&link)),
        "19.30 Mbit/s, rtt 119.4 ms, qdelay 64.15 ms"
    );
    assert_eq!(
        describe_sample(&s(&[("added_p50_ms", 3.25)])),
        "added p50 3.250 ms"
    );
    let rtt = describe_sample(&s(&[("total_us", 100.0), ("rtt_p50_us", 20.0)]));
    assert!(rtt.contains(" us, p50 "), "{rtt}");
    assert_eq!(describe_sample(&s(&[("failed", 1.0)])), "failed");
    assert_eq!(describe_sample(&s(&[("rebind_ok", 0.0)])), "rebind failed");
    assert_eq!(describe_sample(&s(&[])), "");
}

/// Issue 26 item 5: a file's `[hosts] ssh_config` runs nothing untrusted. The run refuses
/// before it opens the store or starts ssh; a dry run shows the ssh commands, the file they
/// read and the refusal; `trust_ssh_config`, or the command line's own file, lets it run.
#[test]
fn a_files_ssh_config_is_refused_before_anything_runs_unless_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("evil_config");
    std::fs::write(&cfg, "Host *\n  ProxyCommand touch /nonexistent/marker\n").unwrap();
    let file = dir.path().join("x.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"x\"\nworkload = \"bulk\"\n[fixed]\niterations = 10\n[hosts]\nserver = \"lab2\"\nssh_config = \"{}\"\n",
            cfg.display()
        ),
    )
    .unwrap();
    let db = dir.path().join("r.db");
    let mut run = FileRun {
        file: file.clone(),
        quick: false,
        reps: None,
        warmup: None,
        resume: false,
        noise_cv: 0.10,
        format: StatsFormat::default(),
        db: db.clone(),
        trust_ssh_config: false,
    };
    let parsed = run.read().unwrap();
    let (plan, hosts) = run.plan(&parsed, &HostPlan::default()).unwrap();
    let why = hosts.untrusted.clone().expect("untrusted");
    assert!(
        why.starts_with(&format!(
            "{}: [hosts] ssh_config = '{}' makes ssh read options this file chose",
            file.display(),
            cfg.display()
        )),
        "{why}"
    );
    let dry = run.dry_text(&plan, &hosts);
    assert!(
        dry.contains(&format!("  ssh reads {} only", cfg.display())),
        "{dry}"
    );
    assert!(
        dry.contains(&format!("ssh -F {} -o BatchMode=yes", cfg.display())),
        "{dry}"
    );
    assert!(
        dry.ends_with(&format!("  the run refuses: {why}\n")),
        "{dry}"
    );
    let mut kept = Kept::default();
    let e = run
        .run(&plan, hosts, &mut crate::runner::Silent, &mut kept)
        .unwrap_err();
    assert!(matches!(&e, LabError::Plan(m) if *m == why), "{e}");
    assert!(!db.exists(), "nothing stored");
    assert_eq!((kept.out.as_str(), kept.err.as_str()), ("", ""));

    run.trust_ssh_config = true;
    let (plan, hosts) = run.plan(&parsed, &HostPlan::default()).unwrap();
    assert_eq!(hosts.untrusted, None);
    assert_eq!(hosts.ssh.config.as_deref(), Some(cfg.as_path()));
    assert!(!run.dry_text(&plan, &hosts).contains("refuses"));
    // Trusted, the file's config must exist (checked before anything is stored).
    std::fs::remove_file(&cfg).unwrap();
    let e = run.plan(&parsed, &HostPlan::default()).unwrap_err();
    assert!(e.to_string().contains("no such file"), "{e}");
    // The command line's own config replaces the file's: nothing of the file's is used.
    run.trust_ssh_config = false;
    let mine = dir.path().join("mine");
    std::fs::write(&mine, "").unwrap();
    let mut cli = HostPlan::default();
    cli.ssh.config = Some(mine.clone());
    let (_, hosts) = run.plan(&parsed, &cli).unwrap();
    assert_eq!((hosts.untrusted, hosts.ssh.config), (None, Some(mine)));
}
