//! The instrument for "no circles" (issue 25): reads every crate's `src/` (non-test code),
//! builds the file-level import graph — a file → the module files that its `use crate::…`,
//! `crate::…`, `super::…` and `self::…` paths name — and reports its strongly connected
//! components. A name that a file re-exports (`pub use`) is followed to the file that defines
//! it (the re-exporting file imports it too). A parent's `mod child;` is not an import, nor
//! is a parent reaching into its own children (`child::f()`): a module and its children are one
//! unit seen from outside, while a child reaching up (`super::…`) to a file that reaches back
//! to it through a sibling is a circle. Items under `#[cfg(test)]` and test-only module files are left out.
//!
//! Run `cargo test -p socklab-lab --test module_circles -- --nocapture` to print the circles.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One source file of a crate, parsed.
#[derive(Debug, Default)]
struct FileInfo {
    /// Its module path from the crate root.
    module: Vec<String>,
    /// Child modules it declares outside test code.
    children: BTreeSet<String>,
    /// Child modules it declares under `#[cfg(test)]`.
    test_children: BTreeSet<String>,
    /// Absolute paths that its `use` statements (re-exports too) and its code name.
    uses: Vec<Vec<String>>,
    /// Names it re-exports (`pub use`), each to the absolute path it names (`None`: outside
    /// the crate).
    reexports: BTreeMap<String, Option<Vec<String>>>,
}

/// The source with comments removed and string and char literals blanked.
fn strip_comments_and_strings(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Removes every item under `#[cfg(test)]`, returning the remaining code and the names of
/// the test-only modules it declared (`#[cfg(test)] mod name;`).
fn strip_test_items(code: &str) -> (String, BTreeSet<String>) {
    let b: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut test_mods = BTreeSet::new();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(&marker) {
            let mut j = i + marker.len();
            let start = j;
            let mut depth = 0i32;
            while j < b.len() {
                match b[j] {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            j += 1;
                            break;
                        }
                    }
                    ';' if depth == 0 => {
                        j += 1;
                        break;
                    }
                    _ => {}
                }
                j += 1;
            }
            let item: String = b[start..j.min(b.len())].iter().collect();
            let words: Vec<&str> = item
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .collect();
            if let Some(p) = words.iter().position(|w| *w == "mod") {
                if item.trim_end().ends_with(';') {
                    if let Some(name) = words.get(p + 1) {
                        test_mods.insert(name.to_string());
                    }
                }
            }
            i = j;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    (out, test_mods)
}

/// Expands a use tree (`a::{b, c::{self, d as e}}`) into `(path, local name)` pairs.
fn expand_use_tree(tree: &str) -> Vec<(Vec<String>, String)> {
    fn go(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
        let tree = tree.trim();
        if tree.is_empty() {
            return;
        }
        if let Some(open) = tree.find('{') {
            let head = tree[..open].trim().trim_end_matches("::").trim();
            let mut p = prefix.to_vec();
            p.extend(segments(head));
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut start = 0;
            for (k, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        go(&p, &inner[start..k], out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            go(&p, &inner[start..], out);
            return;
        }
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p.trim(), Some(a.trim().to_string())),
            None => (tree, None),
        };
        let mut p = prefix.to_vec();
        let segs = segments(path);
        if segs == ["self"] {
            let name = alias.unwrap_or_else(|| p.last().cloned().unwrap_or_default());
            out.push((p, name));
            return;
        }
        p.extend(segs);
        let name = alias.unwrap_or_else(|| p.last().cloned().unwrap_or_default());
        out.push((p, name));
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Makes a path written in module `module` of a file that declares `children` absolute
/// (`None`: it names something outside the crate).
fn absolute(
    module: &[String],
    children: &BTreeSet<String>,
    path: &[String],
) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") | Some("$crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
            if rest.first().map(String::as_str) == Some("self") {
                rest = &rest[1..];
            }
        }
        Some(first) if children.contains(first) => {}
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Parses one file (already stripped of comments, strings and test items).
fn parse(module: Vec<String>, code: &str, test_children: BTreeSet<String>) -> FileInfo {
    let mut info = FileInfo {
        module,
        test_children,
        ..FileInfo::default()
    };
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    for w in words.windows(2) {
        if w[0] == "mod" && !w[1].is_empty() {
            info.children.insert(w[1].to_string());
        }
    }
    // `use` statements: imports; `pub` ones re-exports as well.
    let mut rest = code;
    let mut other = String::new();
    while let Some(pos) = find_word(rest, "use") {
        let before = &rest[..pos];
        let stmt_end = rest[pos..].find(';').map_or(rest.len(), |e| pos + e);
        let tree = &rest[pos + 3..stmt_end];
        let head = before.trim_end();
        let is_pub = head.ends_with("pub") || (head.ends_with(')') && head.contains("pub("));
        other.push_str(before);
        for (path, name) in expand_use_tree(tree) {
            let abs = absolute(&info.module, &info.children, &path);
            if is_pub {
                info.reexports.insert(name, abs.clone());
            }
            if let Some(abs) = abs {
                info.uses.push(abs);
            }
        }
        rest = &rest[(stmt_end + 1).min(rest.len())..];
    }
    other.push_str(rest);
    // Paths in the code: `crate::…`, `super::…`, `self::…`, `child::…`.
    let chars: Vec<char> = other.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let is_start = (chars[i].is_alphabetic() || chars[i] == '_' || chars[i] == '$')
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'));
        if !is_start {
            i += 1;
            continue;
        }
        let mut segs = Vec::new();
        let mut j = i;
        loop {
            let s = j;
            while j < chars.len()
                && (chars[j].is_alphanumeric() || chars[j] == '_' || chars[j] == '$')
            {
                j += 1;
            }
            segs.push(chars[s..j].iter().collect::<String>());
            let mut k = j;
            while k < chars.len() && chars[k].is_whitespace() {
                k += 1;
            }
            if chars.get(k) == Some(&':') && chars.get(k + 1) == Some(&':') {
                k += 2;
                while k < chars.len() && chars[k].is_whitespace() {
                    k += 1;
                }
                if k < chars.len() && (chars[k].is_alphabetic() || chars[k] == '_') {
                    j = k;
                    continue;
                }
            }
            break;
        }
        if segs.len() > 1 {
            if let Some(abs) = absolute(&info.module, &info.children, &segs) {
                info.uses.push(abs);
            }
        }
        i = j.max(i + 1);
    }
    info
}

/// The byte offset of the next `word` standing alone as an identifier.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = s[from..].find(word) {
        let at = from + p;
        let before = s[..at].chars().next_back();
        let after = s[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !ident(before) && !ident(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// A crate's parsed files, keyed by their path relative to `src/`.
fn read_crate(src: &Path) -> BTreeMap<String, FileInfo> {
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut infos = BTreeMap::new();
    for path in files {
        let rel = path
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let mut module: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        let src_text = fs::read_to_string(&path).unwrap();
        let (code, test_children) = strip_test_items(&strip_comments_and_strings(&src_text));
        infos.insert(rel, parse(module, &code, test_children));
    }
    // Leave out test-only module files and everything under them.
    let test_modules: Vec<Vec<String>> = infos
        .values()
        .flat_map(|f| {
            f.test_children.iter().map(|c| {
                let mut m = f.module.clone();
                m.push(c.clone());
                m
            })
        })
        .collect();
    infos.retain(|_, f| !test_modules.iter().any(|t| f.module.starts_with(t)));
    infos
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The file-level import graph: file → the files it imports.
fn import_graph(infos: &BTreeMap<String, FileInfo>) -> BTreeMap<String, BTreeSet<String>> {
    let by_module: BTreeMap<&[String], &str> = infos
        .iter()
        .map(|(rel, f)| (f.module.as_slice(), rel.as_str()))
        .collect();
    let resolve = |path: &[String]| -> Option<String> {
        let mut path = path.to_vec();
        for _ in 0..16 {
            let k = (0..=path.len())
                .rev()
                .find(|k| by_module.contains_key(&path[..*k]))?;
            let file = by_module[&path[..k]];
            let Some(name) = path.get(k) else {
                return Some(file.to_string());
            };
            match infos[file].reexports.get(name) {
                Some(Some(target)) if target.as_slice() != &path[..=k] => {
                    let mut next = target.clone();
                    next.extend(path[k + 1..].iter().cloned());
                    path = next;
                }
                _ => return Some(file.to_string()),
            }
        }
        None
    };
    infos
        .iter()
        .map(|(rel, f)| {
            let targets = f
                .uses
                .iter()
                .filter_map(|p| resolve(p))
                .filter(|t| {
                    // A module and its own children are one unit: a parent reaching into its
                    // children is not an import (a child reaching up is).
                    let m = &infos[t.as_str()].module;
                    t != rel && !(m.len() > f.module.len() && m.starts_with(&f.module))
                })
                .collect();
            (rel.clone(), targets)
        })
        .collect()
}

/// Strongly connected components with more than one file (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.graph.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    comp.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn all_crates() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = fs::read_dir(crates_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                p.join("src"),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn no_crate_has_module_circles() {
    let mut offenders = Vec::new();
    for (name, src) in all_crates() {
        let graph = import_graph(&read_crate(&src));
        let found = circles(&graph);
        let files: usize = found.iter().map(Vec::len).sum();
        println!("{name}: {} circle(s), {files} file(s)", found.len());
        for c in &found {
            println!("  {}", c.join(" ↔ "));
            for from in c {
                let inside: Vec<&str> = graph[from]
                    .iter()
                    .filter(|t| c.contains(t))
                    .map(String::as_str)
                    .collect();
                println!("    {from} → {}", inside.join(", "));
            }
        }
        if !found.is_empty() {
            offenders.push(format!(
                "{name}: {}",
                found
                    .iter()
                    .map(|c| c.join(" ↔ "))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    assert!(
        offenders.is_empty(),
        "files that import each other (break the circle: move the shared type down): {}",
        offenders.join(" | ")
    );
}

#[test]
fn the_labs_model_is_at_the_bottom() {
    let graph = import_graph(&read_crate(&crates_dir().join("socklab-lab/src")));
    let up: Vec<String> = graph
        .iter()
        .filter(|(from, _)| from.starts_with("model/"))
        .flat_map(|(from, to)| {
            to.iter()
                .filter(|t| !t.starts_with("model/") && *t != "error.rs")
                .map(move |t| format!("{from} → {t}"))
        })
        .collect();
    assert!(
        up.is_empty(),
        "model/ imports only model/ and the crate's error type: {}",
        up.join(", ")
    );
}

/// A tiny crate written to a temporary directory.
fn fake_crate(files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "socklab-circles-{}-{}",
        std::process::id(),
        files.iter().map(|(p, _)| p.len()).sum::<usize>() + files.len() * 1000
    ));
    let _ = fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    dir
}

#[test]
fn two_siblings_that_import_each_other_are_a_circle() {
    let dir = fake_crate(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "use crate::{a::A, c};\npub struct B;\n"),
        ("c.rs", "pub fn f() {}\n"),
        ("d.rs", "pub fn f() { let _ = super::a::A; }\n"),
    ]);
    let found = circles(&import_graph(&read_crate(&dir)));
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(found, vec![vec!["a.rs".to_string(), "b.rs".to_string()]]);
}

#[test]
fn a_parent_reaching_into_its_children_is_not_a_circle() {
    let dir = fake_crate(&[
        ("lib.rs", "pub mod q;\n"),
        (
            "q/mod.rs",
            "mod fifo;\npub struct Packet;\npub fn new() { fifo::Fifo::new(); }\n",
        ),
        ("q/fifo.rs", "use super::Packet;\npub struct Fifo;\n"),
    ]);
    let graph = import_graph(&read_crate(&dir));
    let _ = fs::remove_dir_all(&dir);
    assert!(graph["q/mod.rs"].is_empty(), "{:?}", graph["q/mod.rs"]);
    assert_eq!(graph["q/fifo.rs"], BTreeSet::from(["q/mod.rs".to_string()]));
    assert!(circles(&graph).is_empty());
}

#[test]
fn declarations_comments_and_test_code_are_not_imports_and_re_exports_are_followed() {
    let dir = fake_crate(&[
        (
            "lib.rs",
            "pub mod model;\npub mod store;\npub use model::params;\npub use error::E;\nmod error;\n",
        ),
        ("error.rs", "pub struct E;\n"),
        ("model/mod.rs", "pub mod params;\n"),
        ("model/params.rs", "use crate::E;\npub struct Key;\n"),
        (
            "store.rs",
            "use crate::params::Key;\n// crate::store::x and \"crate::x\" are no paths\n\
             #[cfg(test)]\nmod tests { use crate::store; }\n",
        ),
    ]);
    let graph = import_graph(&read_crate(&dir));
    let found = circles(&graph);
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(
        graph["store.rs"],
        BTreeSet::from(["model/params.rs".to_string()])
    );
    assert_eq!(
        graph["model/params.rs"],
        BTreeSet::from(["error.rs".to_string()])
    );
    assert!(graph["lib.rs"].is_empty(), "{:?}", graph["lib.rs"]);
    assert!(found.is_empty(), "{found:?}");
}
