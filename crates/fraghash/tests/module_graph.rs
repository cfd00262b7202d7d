//! No crate of the workspace has a circle among its modules: for every
//! pair of sibling modules, at most one names the other. A module names
//! another by a `crate::` or `super::` path in its code (comments and the
//! `#[cfg(test)] mod tests` block at a file's end are not read); the edge
//! is taken between the two sibling modules under their common parent, so
//! `db::memtable` naming `db::read::x` is `memtable -> read`. The graph is
//! read from the source files of every crate under `crates/`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

#[test]
fn no_crate_has_a_module_circle() {
    // Cargo sets the variable for the test's run too: read it then, so that
    // a binary built in another checkout reads this one.
    let manifest = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let crates = Path::new(&manifest).join("..");
    let mut circles = Vec::new();
    let mut read = 0;
    for entry in fs::read_dir(&crates).expect("crates/ is readable") {
        let src = entry.expect("a crate directory").path().join("src");
        if src.is_dir() {
            let graph = graph(&src);
            read += 1;
            circles.extend(cycles(&graph).into_iter().map(|c| (src.clone(), c)));
        }
    }
    assert!(
        read >= 5,
        "found only {read} crates under {}",
        crates.display()
    );
    assert!(circles.is_empty(), "module circles: {circles:?}");
}

#[test]
fn a_circle_is_found() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let mut g = Graph::new();
    g.entry(m("db::memtable"))
        .or_default()
        .insert(m("db::read"));
    g.entry(m("db::read"))
        .or_default()
        .insert(m("db::memtable"));
    g.entry(m("term")).or_default().insert(m("db"));
    assert_eq!(cycles(&g).len(), 1);
    g.get_mut(&m("db::read")).unwrap().clear();
    assert!(cycles(&g).is_empty());
}

/// The module path of a source file under `src`, `None` for the crate root
/// and binaries.
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().map(String::as_str) == Some("mod") {
        parts.pop();
    }
    match parts.first().map(String::as_str) {
        None | Some("bin") => None,
        Some("lib" | "main") if parts.len() == 1 => None,
        _ => Some(parts),
    }
}

fn is_module(src: &Path, parts: &[String]) -> bool {
    let p: PathBuf = parts.iter().fold(src.to_path_buf(), |p, s| p.join(s));
    p.with_extension("rs").is_file() || p.join("mod.rs").is_file()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("a source directory is readable") {
        let p = entry.expect("a directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// A file's code: comments removed, and the test module at its end.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each `crate::a::b` or `super::a::b` path in `code`, as its kind and
/// segments.
fn paths(code: &str) -> Vec<(&'static str, Vec<String>)> {
    let mut found = Vec::new();
    for kind in ["crate", "super"] {
        let needle = format!("{kind}::");
        let mut at = 0;
        while let Some(i) = code[at..].find(&needle) {
            let start = at + i;
            at = start + needle.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &code[at..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let segs = rest[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect::<Vec<_>>();
            found.push((kind, segs));
        }
    }
    found
}

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g = Graph::new();
    for file in files {
        let Some(me) = module_of(src, &file) else {
            continue;
        };
        let text = fs::read_to_string(&file).expect("a source file is readable");
        for (kind, segs) in paths(&code(&text)) {
            let base = if kind == "crate" {
                vec![]
            } else {
                me[..me.len() - 1].to_vec()
            };
            let full: Vec<String> = base.into_iter().chain(segs).collect();
            let Some(k) = (1..=full.len()).rev().find(|&k| is_module(src, &full[..k])) else {
                continue;
            };
            let target = &full[..k];
            let common = me.iter().zip(target).take_while(|(a, b)| a == b).count();
            if common < me.len() && common < target.len() {
                g.entry(me[..=common].to_vec())
                    .or_default()
                    .insert(target[..=common].to_vec());
            }
        }
    }
    g
}

fn cycles(g: &Graph) -> Vec<Vec<Vec<String>>> {
    fn visit(
        g: &Graph,
        u: &Vec<String>,
        state: &mut BTreeMap<Vec<String>, bool>,
        stack: &mut Vec<Vec<String>>,
        found: &mut Vec<Vec<Vec<String>>>,
    ) {
        state.insert(u.clone(), true);
        stack.push(u.clone());
        for v in g.get(u).into_iter().flatten() {
            match state.get(v) {
                Some(true) => {
                    let from = stack.iter().position(|x| x == v).unwrap_or(0);
                    found.push(stack[from..].to_vec());
                }
                Some(false) => {}
                None => visit(g, v, state, stack, found),
            }
        }
        stack.pop();
        state.insert(u.clone(), false);
    }
    let mut state = BTreeMap::new();
    let mut found = Vec::new();
    for u in g.keys() {
        if !state.contains_key(u) {
            visit(g, u, &mut state, &mut Vec::new(), &mut found);
        }
    }
    found
}
