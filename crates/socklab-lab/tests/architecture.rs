//! Guards of the workspace's shape (docs/architecture.md, issue 25): no non-test source file
//! over 800 lines, no `"--flag"` literal in the libraries outside the one module that builds
//! command lines, and a binary that depends on `socklab-lab` alone. Each failure names the
//! offenders and the fix.

use std::path::{Path, PathBuf};

/// The most lines a non-test source file may hold (lines before its first `#[cfg(test)]`).
const MAX_LINES: usize = 800;

/// The one library module that may spell a flag: it builds the command lines of the roles.
const ARGV_MODULE: &str = "crates/socklab-lab/src/roles/argv.rs";

/// The binary crate, which may name flags (it is the CLI).
const BINARY: &str = "crates/socklab";
/// Most non-test lines the binary may hold, all files together: main, clap, printing and
/// progress; everything else lives in socklab-lab.
const BINARY_MAX_LINES: usize = 2500;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// Every crate directory under `crates/`, sorted.
fn crates(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .map(|e| e.expect("a crates/ entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    v.sort();
    v
}

/// The `.rs` files under `dir`, recursively, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.map(|e| e.expect("a directory entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Whether `p` (a path inside a crate) is a test file by its name: `tests.rs`, `*_tests.rs`,
/// or under a `tests/` folder.
fn is_test_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || p.components().any(|c| c.as_os_str() == "tests")
}

/// The non-test source files of a crate: `src/`, less the test files.
fn sources(krate: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    rust_files(&krate.join("src"), &mut v);
    v.retain(|p| !is_test_file(p.strip_prefix(krate).unwrap_or(p)));
    v
}

/// The part of a source before its first `#[cfg(test)]` line.
fn non_test_part(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
        .collect()
}

/// The code a flag scan reads: [`non_test_part`], except that a `#[cfg(test)]` over a
/// `mod NAME;` declaration (its tests in a file of their own) does not end it; the pair reads
/// as blank lines, so line numbers stay those of the file.
fn code_part(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with("#[cfg(test)]") {
            let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
            if !(next.starts_with("mod ") && next.ends_with(';')) {
                break;
            }
            out.extend(["", ""]);
            i += 2;
            continue;
        }
        out.push(lines[i]);
        i += 1;
    }
    out
}

fn relative(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// The string literals of Rust source `text` with the line each starts on; comments, char
/// literals and lifetimes are skipped.
fn string_literals(text: &str) -> Vec<(usize, String)> {
    let c: Vec<char> = text.chars().collect();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    while i < c.len() {
        match c[i] {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                i += 2;
                while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
                i += 2;
            }
            '\'' => {
                // A char literal ('x', '\n', '"'), or a lifetime ('a) left as it is.
                if c.get(i + 1) == Some(&'\\') {
                    i += 2;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if c.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            'r' if !c
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
                && matches!(c.get(i + 1), Some('"') | Some('#')) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while c.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if c.get(j) != Some(&'"') {
                    i += 1;
                    continue;
                }
                let start = line;
                let mut s = String::new();
                j += 1;
                while j < c.len() {
                    if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                        break;
                    }
                    line += usize::from(c[j] == '\n');
                    s.push(c[j]);
                    j += 1;
                }
                out.push((start, s));
                i = j + 1 + hashes;
            }
            '"' => {
                let start = line;
                let mut s = String::new();
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        s.push(c[i]);
                        i += 1;
                    }
                    if let Some(&ch) = c.get(i) {
                        line += usize::from(ch == '\n');
                        s.push(ch);
                    }
                    i += 1;
                }
                out.push((start, s));
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The flags a string names: `--word` at the start or after a character that is not part of
/// a word (so `a--b` and `---` are not flags).
fn flags_in(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut v = Vec::new();
    let mut i = 0;
    while i + 2 < b.len() {
        let before_ok = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if before_ok && b[i] == b'-' && b[i + 1] == b'-' && b[i + 2].is_ascii_lowercase() {
            let end = (i + 2..b.len())
                .find(|&k| !(b[k].is_ascii_alphanumeric() || b[k] == b'-'))
                .unwrap_or(b.len());
            v.push(s[i..end].to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    v
}

#[test]
fn no_non_test_source_file_is_over_800_lines() {
    let root = workspace();
    let mut over = Vec::new();
    for krate in crates(&root) {
        for f in sources(&krate) {
            let text = std::fs::read_to_string(&f).expect("a readable source");
            let n = code_part(&text).len();
            if n > MAX_LINES {
                over.push(format!("{} ({n} lines)", relative(&root, &f)));
            }
        }
    }
    assert!(
        over.is_empty(),
        "non-test source over {MAX_LINES} lines (counted before the first #[cfg(test)]): {}; split each along a seam into files of one job (its unit tests move with the code)",
        over.join(", ")
    );
}

#[test]
fn no_library_names_a_flag_outside_the_argv_module() {
    let root = workspace();
    let mut found = Vec::new();
    for krate in crates(&root) {
        if relative(&root, &krate) == BINARY {
            continue;
        }
        for f in sources(&krate) {
            let rel = relative(&root, &f);
            if rel == ARGV_MODULE {
                continue;
            }
            let text = std::fs::read_to_string(&f).expect("a readable source");
            let code = code_part(&text).join("\n");
            for (line, lit) in string_literals(&code) {
                for flag in flags_in(&lit) {
                    found.push(format!("{rel}:{line} {flag}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} \"--flag\" literal(s) in library code: {}; a message names the key in backticks (`timeout`, the binary prints its flag), and a command line is built by RoleArgs in {ARGV_MODULE}",
        found.len(),
        found.join(", ")
    );
}

#[test]
fn the_binary_depends_on_the_lab_alone() {
    let root = workspace();
    let manifest = root.join(BINARY).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("the binary's Cargo.toml");
    let table: toml::Table = toml::from_str(&text).expect("a Cargo.toml that parses");
    let workspace_crates: Vec<String> = crates(&root)
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
        .collect();
    let mut extra: Vec<String> = table
        .get("dependencies")
        .and_then(|d| d.as_table())
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default();
    extra.retain(|d| workspace_crates.contains(d) && d != "socklab-lab" && d != "socklab");
    assert!(
        extra.is_empty(),
        "{BINARY}/Cargo.toml [dependencies] names {}: the binary depends on socklab-lab alone; reach what it needs through socklab-lab (re-exported or moved there) and drop the dependency",
        extra.join(", ")
    );
}

#[test]
fn the_binary_is_thin() {
    let root = workspace();
    let mut files: Vec<(usize, String)> = sources(&root.join(BINARY))
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).expect("a readable source");
            (code_part(&text).len(), relative(&root, f))
        })
        .collect();
    let total: usize = files.iter().map(|(n, _)| n).sum();
    files.sort_unstable_by(|a, b| b.cmp(a));
    assert!(
        total <= BINARY_MAX_LINES,
        "{BINARY} holds {total} non-test lines, more than {BINARY_MAX_LINES}: the binary keeps main, clap, printing and progress; move checks, plans and text into socklab-lab (largest: {})",
        files
            .iter()
            .take(5)
            .map(|(n, f)| format!("{f} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[test]
fn the_guards_read_sources_as_they_mean_to() {
    let src = "// \"--in-comment\"\nlet a = \"--one\"; let c = '\"'; let l: &'a str = r#\"x --two\"#;\n/* \"--block\" */ let b = \"a--b ---c \\\"--three\\\"\";\n#[cfg(test)]\nlet t = \"--test\";";
    let lits = string_literals(&non_test_part(src).join("\n"));
    let flags: Vec<(usize, String)> = lits
        .iter()
        .flat_map(|(l, s)| flags_in(s).into_iter().map(move |f| (*l, f)))
        .collect();
    assert_eq!(
        flags,
        [
            (2, "--one".to_string()),
            (2, "--two".to_string()),
            (3, "--three".to_string())
        ]
    );
    assert!(is_test_file(Path::new("src/a/tests.rs")));
    assert!(is_test_file(Path::new("src/noise_tests.rs")));
    assert!(is_test_file(Path::new("src/tests/common.rs")));
    assert!(!is_test_file(Path::new("src/testsuite.rs")));
    assert_eq!(non_test_part("a\nb\n#[cfg(test)]\nc\n").len(), 2);
}

#[test]
fn a_test_module_declared_on_top_does_not_hide_the_code_below_it() {
    let src = "use a;\n#[cfg(test)]\nmod tests;\nlet x = \"--hidden\";\n#[cfg(test)]\nmod inline {\nlet t = \"--test\";\n}";
    let lits = string_literals(&code_part(src).join("\n"));
    let flags: Vec<(usize, String)> = lits
        .iter()
        .flat_map(|(l, s)| flags_in(s).into_iter().map(move |f| (*l, f)))
        .collect();
    assert_eq!(flags, [(4, "--hidden".to_string())]);
}
