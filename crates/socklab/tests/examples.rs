//! Every example a user would copy (README.md, docs/*.md, every `--help`) runs as written: it
//! names only programs a fresh Debian machine has (or socklab itself), each socklab command in
//! it passes `--dry-run` (arguments and plan checked, nothing measured), a plan that runs long
//! says how long in the example, and no help example is wrapped mid-command at 80 columns.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The terminal width the help is checked at (clap wraps at the terminal's width, at most 100).
const COLUMNS: usize = 80;

/// Programs an example may run besides socklab: on every Debian machine (bash, coreutils), the
/// toolchain the README requires, and the repository's own scripts.
const PROGRAMS: &[&str] = &["cargo", "export", "dd", "cat", "cd", "mkdir", "ls", "rm"];
const SCRIPTS: &[&str] = &["scripts/", "bench/"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_socklab"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// One example: where it is, and its text (continuation lines joined with their `\`).
#[derive(Debug, Clone)]
struct Example {
    origin: String,
    text: String,
}

/// `socklab ARGS --help` at [`COLUMNS`] columns.
fn help(args: &[&str]) -> String {
    let o = Command::new(bin())
        .args(args)
        .arg("--help")
        .env("COLUMNS", COLUMNS.to_string())
        .output()
        .unwrap();
    assert!(o.status.success(), "socklab {args:?} --help failed");
    String::from_utf8(o.stdout).unwrap()
}

/// The subcommands a help text lists under "Commands:" (not `help`).
fn subcommands(text: &str) -> Vec<String> {
    let mut subs = Vec::new();
    let mut inside = false;
    for l in text.lines() {
        if l == "Commands:" {
            inside = true;
        } else if inside && l.starts_with("  ") && !l.starts_with("   ") {
            let name = l.split_whitespace().next().unwrap_or("");
            if name != "help" && !name.is_empty() {
                subs.push(name.to_string());
            }
        } else if inside && !l.starts_with(' ') {
            inside = false;
        }
    }
    subs
}

/// Every help text, by command path: the top level and every subcommand, recursively.
fn all_help() -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        for s in subcommands(&text) {
            let mut p = path.clone();
            p.push(s);
            todo.push(p);
        }
        out.push((path, text));
    }
    out
}

/// The examples of a help text: the lines of its "Examples:" block. A line that is not a
/// command (a `socklab ...` line, or the indented continuation of one ending in `\`) is an
/// example wrapped mid-command: that is an error, returned.
fn help_examples(origin: &str, text: &str) -> Result<Vec<Example>, String> {
    let mut out: Vec<Example> = Vec::new();
    let mut inside = false;
    let mut continued = false;
    for l in text.lines() {
        if l == "Examples:" || l == "Example:" {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if l.trim().is_empty() {
            inside = false;
            continue;
        }
        if l.chars().count() > COLUMNS {
            return Err(format!(
                "{origin}: example line longer than {COLUMNS} columns: {l:?}"
            ));
        }
        if continued {
            if !l.starts_with("    ") {
                return Err(format!("{origin}: continuation not indented: {l:?}"));
            }
            let last = out.last_mut().unwrap();
            last.text.push('\n');
            last.text.push_str(l);
        } else if l.starts_with("  socklab ") {
            out.push(Example {
                origin: origin.to_string(),
                text: l.trim().to_string(),
            });
        } else {
            return Err(format!(
                "{origin}: example line that is not a command (wrapped mid-command?): {l:?}"
            ));
        }
        continued = l.trim_end().ends_with('\\');
    }
    Ok(out)
}

/// The commands in the Markdown file's code blocks: in `sh`/`bash` blocks every line that is
/// not a comment; in untagged blocks the lines that start with `socklab ` or `$ `.
fn doc_examples(path: &Path) -> Vec<Example> {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let text = std::fs::read_to_string(path).unwrap();
    let mut out: Vec<Example> = Vec::new();
    let mut fence: Option<String> = None;
    let mut continued = false;
    for (i, l) in text.lines().enumerate() {
        if let Some(tag) = l.strip_prefix("```") {
            fence = match fence {
                None => Some(tag.trim().to_string()),
                Some(_) => None,
            };
            continued = false;
            continue;
        }
        let Some(tag) = &fence else { continue };
        if continued {
            let last: &mut Example = out.last_mut().unwrap();
            last.text.push('\n');
            last.text.push_str(l);
        } else {
            let t = l.trim_start();
            let t = t.strip_prefix("$ ").unwrap_or(t);
            let command = match tag.as_str() {
                "sh" | "bash" | "console" | "shell" => !t.is_empty() && !t.starts_with('#'),
                "" => l.trim_start().starts_with("$ "),
                _ => false,
            };
            if !command {
                continue;
            }
            out.push(Example {
                origin: format!("{name}:{}", i + 1),
                text: t.to_string(),
            });
        }
        continued = l.trim_end().ends_with('\\');
    }
    out
}

/// The README and every doc's examples.
fn all_doc_examples() -> Vec<Example> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files.iter().flat_map(|f| doc_examples(f)).collect()
}

/// The example's text without comments, one line.
fn code(e: &Example) -> String {
    e.text
        .lines()
        .map(|l| {
            let l = match l.find(" #") {
                Some(i) => &l[..i],
                None => l,
            };
            l.trim().trim_end_matches('\\').trim()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The programs an example runs: the first word of each command (after `;`, `&&`, `|`, `&`,
/// environment assignments) and the command `socklab netem ... --` and `netem exec` run.
fn programs(e: &Example) -> Vec<String> {
    let c = code(e);
    let mut progs = Vec::new();
    for part in c.split(['&', ';', '|']) {
        let mut words = part.split_whitespace().skip_while(|w| w.contains('='));
        if let Some(w) = words.next() {
            progs.push(w.to_string());
        }
        if part.trim_start().starts_with("socklab netem") {
            if let Some((_, inner)) = part.split_once(" -- ") {
                if let Some(w) = inner.split_whitespace().next() {
                    progs.push(w.to_string());
                }
            }
        }
    }
    progs
}

/// True when the example runs only socklab (so its dry run is safe to run here).
fn only_socklab(e: &Example) -> bool {
    programs(e).iter().all(|p| p == "socklab")
}

/// An example's text says how long it runs ("about 5 minutes", "11.5 min", "2 h").
fn states_a_time(text: &str) -> bool {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "(),;:".contains(c))
        .collect();
    words.windows(2).any(|w| {
        w[0].trim_start_matches('~').parse::<f64>().is_ok()
            && ["min", "minutes", "h", "hours", "hour"].contains(&w[1])
    })
}

/// A directory to run examples in: the experiment files, and the files examples name.
fn workdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo().join("experiments"), d.path().join("experiments")).unwrap();
    for f in ["a.bin", "b.bin", "FILE..."] {
        std::fs::write(d.path().join(f), b"example").unwrap();
    }
    d
}

/// Runs the example with every socklab command in it as `socklab --dry-run ...`, in `dir`,
/// with socklab on PATH as the README sets it up; returns (exit code, stdout + stderr).
fn dry_run(e: &Example, dir: &Path) -> (i32, String) {
    // `cargo run --release -- ARGS` is `socklab ARGS`.
    let text = e.text.replace("cargo run --release -- ", "socklab ");
    let script = format!(
        "set -e\nsocklab() {{ case \" $* \" in *\" --dry-run \"*) command socklab \"$@\";; *) command socklab --dry-run \"$@\";; esac; }}\n{text}\n[ -z \"$!\" ] || wait $!\n"
    );
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out_file = dir.join(".example-output");
    let f = std::fs::File::create(&out_file).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code().unwrap_or(-1);
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break -2;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (code, std::fs::read_to_string(&out_file).unwrap_or_default())
}

/// Checks each example; returns one line per problem.
fn check(examples: &[Example]) -> Vec<String> {
    let dir = workdir();
    let root = is_root();
    let mut problems = Vec::new();
    for e in examples {
        for p in programs(e) {
            let ok = p == "socklab"
                || PROGRAMS.contains(&p.as_str())
                || (SCRIPTS.iter().any(|s| p.starts_with(s)) && repo().join(&p).is_file());
            if !ok {
                problems.push(format!(
                    "{}: runs '{p}', which a fresh Debian machine does not have: {}",
                    e.origin, e.text
                ));
            }
        }
        if !only_socklab(e) {
            continue;
        }
        if !root && e.text.contains("root") {
            socklab_sys::skip::skip(
                &format!("examples: {}", e.origin),
                socklab_sys::skip::NOT_ROOT,
                &format!("needs root: {}", e.text),
            );
            continue;
        }
        let (code, output) = dry_run(e, dir.path());
        if code != 0 {
            problems.push(format!(
                "{}: exit {code} for: {}\n    {}",
                e.origin,
                e.text,
                output.trim().replace('\n', "\n    ")
            ));
        } else if output.contains("is a long plan")
            && !states_a_time(&e.text)
            && !e.text.contains("--dry-run")
        {
            problems.push(format!(
                "{}: runs long but does not say how long: {}\n    {}",
                e.origin,
                e.text,
                output
                    .lines()
                    .find(|l| l.contains("long plan"))
                    .unwrap_or("")
            ));
        }
    }
    problems
}

#[test]
fn every_help_example_is_a_whole_command_that_runs_as_written() {
    let mut examples = Vec::new();
    let mut problems = Vec::new();
    let all = all_help();
    assert!(all.len() >= 20, "the help tree: {} texts", all.len());
    for (path, text) in &all {
        let origin = format!("socklab {} --help", path.join(" "));
        match help_examples(&origin, text) {
            Ok(ex) => examples.extend(ex),
            Err(p) => problems.push(p),
        }
    }
    problems.extend(check(&examples));
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    assert!(
        examples.len() >= 40,
        "only {} help examples",
        examples.len()
    );
}

#[test]
fn every_readme_and_docs_example_runs_as_written() {
    let examples = all_doc_examples();
    // The README's first two commands: the main job, and the tests.
    let readme: Vec<&Example> = examples
        .iter()
        .filter(|e| e.origin.starts_with("README.md"))
        .collect();
    assert!(readme[0]
        .text
        .starts_with("cargo run --release -- lab --quick"));
    assert!(readme[1].text.starts_with("scripts/test"));
    let problems = check(&examples);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    let n = examples.iter().filter(|e| only_socklab(e)).count();
    assert!(n >= 50, "only {n} socklab examples found");
}

#[test]
fn the_extractors_see_wrapped_lines_continuations_and_programs() {
    let wrapped = "Examples:\n  socklab transfer --proto tcp --reps\n  30      (as root)\n\nMore.";
    let e = help_examples("t", wrapped).unwrap_err();
    assert!(e.contains("not a command"), "{e}");
    let long = format!("Examples:\n  socklab bulk {}\n", "x".repeat(80));
    assert!(help_examples("t", &long).unwrap_err().contains("longer"));
    let ok = "Examples:\n  socklab bulk \\\n      --reps 3   # three\n  socklab sink\n\nText";
    let ex = help_examples("t", ok).unwrap();
    assert_eq!(ex.len(), 2);
    assert_eq!(code(&ex[0]), "socklab bulk --reps 3");

    let e = |t: &str| Example {
        origin: "t".into(),
        text: t.into(),
    };
    assert_eq!(
        programs(&e(
            "socklab netem --link \"loss 1%\" -- ping -c 3 server   # x"
        )),
        ["socklab", "ping"]
    );
    assert_eq!(
        programs(&e(
            "dd if=/dev/zero bs=1M count=1000 | nc -q0 127.0.0.1 5001"
        )),
        ["dd", "nc"]
    );
    assert_eq!(
        programs(&e("socklab echo --port 7000 &   # a server")),
        ["socklab"]
    );
    assert_eq!(programs(&e("NGINX_WORKERS=2 bench/x 5")), ["bench/x"]);
    assert!(states_a_time("# as root; about 30 minutes"));
    assert!(states_a_time("(about 4 min)"));
    assert!(!states_a_time("--duration 10s # as root"));
}

/// Runs `socklab ARGS` in `dir`; returns (exit code, stdout, stderr).
fn socklab_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn dry_run_prints_the_plan_and_its_time_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The lossy example as it was: 93 transfers of up to 60 s each.
    let (code, out, err) = socklab_in(
        dir.path(),
        &[
            "--dry-run",
            "transfer",
            "--proto",
            "tcp,rudp",
            "--tcp-cc",
            "cubic,bbr",
            "--link",
            "rate 100mbit limit 2000 delay 50ms loss 10%",
            "--link-back",
            "delay 50ms",
            "--reps",
            "30",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("3 cells x (30 repetitions + 1 warm-up) = 93 runs"),
        "{out}"
    );
    // 93 runs, and up to 30 re-runs per cell of repetitions marked invalid.
    assert!(out.contains("at most 3.1 h"), "{out}");
    assert!(out.contains("up to 90 more"), "{out}");
    assert!(out.contains("is a long plan"), "{out}");
    assert!(
        !dir.path().join("socklab.db").exists(),
        "a dry run stores nothing"
    );

    // A server's dry run checks its arguments and does not listen (it returns at once).
    let (code, out, _) = socklab_in(dir.path(), &["sink", "--port", "0", "--dry-run"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("dry run: socklab sink would listen on"),
        "{out}"
    );

    // Bad input fails the dry run as it fails the run: one line, exit 2.
    let (code, _, err) = socklab_in(dir.path(), &["--dry-run", "bulk", "--bufsize", "0"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("bufsize = '0'"), "{err}");
}

#[test]
fn netem_refuses_a_command_that_is_not_installed_before_building_a_link() {
    let dir = tempfile::tempdir().unwrap();
    for dry in [true, false] {
        let mut args = vec!["netem", "--link", "loss 1%", "--", "sl-no-such-program"];
        if dry {
            args.insert(0, "--dry-run");
        }
        let (code, _, err) = socklab_in(dir.path(), &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("'sl-no-such-program' is not installed")
                && err.contains("socklab pingpong"),
            "{err}"
        );
    }
}

#[test]
fn a_long_plan_says_so_before_its_first_run() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    // 2 runs of 100 s: at least 3 minutes. The notice comes first; then the run is interrupted.
    let mut child = Command::new(bin())
        .args(["bulk", "--duration", "100s", "--reps", "1", "--warmup", "1"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill (Debian's procps; scripts/test installs it)");
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let _ = child.wait();
    assert!(
        first.contains("'bulk' is a long plan: 1 cell, 2 runs; time: at least 3 min"),
        "{first}"
    );
}
