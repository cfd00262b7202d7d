//! `fraghash table` on a damaged fragment, as a user runs it: `verify`
//! exits 1 with problem lines naming the file, every other command exits 2
//! with one line naming it (or does its work, when the damage does not
//! touch what it reads), and nothing panics or prints a backtrace.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const PAGE: usize = 4096;

/// Runs `fraghash table ARGS`, with a backtrace asked for should anything
/// panic; returns (exit code, stdout, stderr).
fn table(args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
    let out = Command::cargo_bin("fraghash")
        .unwrap()
        .arg("table")
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .write_stdin(stdin.to_string())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A 3-fragment table of 4,000 records in `dir`; returns fragment 1's
/// file name and some keys it holds.
fn made(dir: &Path) -> (String, Vec<String>) {
    let lines: String = (0..4000).map(|i| format!("key{i}\tvalue{i}\n")).collect();
    assert_eq!(
        table(&["create", path(dir), "--fragments", "3", "-q"], "").0,
        Some(0)
    );
    assert_eq!(table(&["load", path(dir), "-q"], &lines).0, Some(0));
    let (_, stats, _) = table(&["stats", path(dir), "--json"], "");
    let stats: Value = serde_json::from_str(&stats).unwrap();
    let frags = stats["fragments"].as_array().unwrap();
    let count = |i: usize| frags[i]["records"].as_u64().unwrap() as usize;
    let file = PathBuf::from(frags[1]["path"].as_str().unwrap());
    // A scan goes fragment by fragment: fragment 1's records follow 0's.
    let (_, scan, _) = table(&["scan", path(dir)], "");
    let keys = scan
        .lines()
        .skip(count(0))
        .take(count(1))
        .step_by(250)
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .collect();
    (file.file_name().unwrap().to_str().unwrap().to_owned(), keys)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// What was wrong with one command's answer, if anything.
fn judge(what: &str, (code, out, err): &(Option<i32>, String, String), file: &str) -> Vec<String> {
    let mut bad = Vec::new();
    if err.contains("panicked") || err.contains("backtrace") {
        bad.push(format!("{what}: a panic on stderr: {err}"));
    }
    match code {
        Some(0) => {}
        Some(1) if what == "verify" => {
            if !out.lines().all(|l| l.starts_with("problem: ")) || !out.contains(file) {
                bad.push(format!("{what}: problems that do not name {file}: {out}"));
            }
        }
        Some(1) if what == "get" => {} // a damaged key is not found
        Some(2) if what != "verify" => {
            if err.lines().count() != 1 || !err.starts_with("fraghash table: ") {
                bad.push(format!("{what}: not one line: {err}"));
            } else if !err.contains(file) {
                bad.push(format!("{what}: does not name {file}: {err}"));
            }
        }
        other => bad.push(format!("{what}: exit {other:?}: {out} {err}")),
    }
    bad
}

#[test]
fn help_gives_the_exit_codes() {
    let (code, out, _) = table(&["--help"], "");
    assert_eq!(code, Some(0));
    assert!(
        out.contains("Exit codes: 0 done; 1 a key not found (get) or a problem found (verify"),
        "{out}"
    );
    let (_, out, _) = table(&["verify", "--help"], "");
    assert!(out.contains("a damaged file among them"), "{out}");
}

#[test]
fn a_damaged_fragment_is_exit_1_for_verify_and_2_for_the_rest_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let pristine = root.path().join("pristine");
    let (name, keys) = made(&pristine);
    let bytes = std::fs::read(pristine.join(&name)).unwrap();
    // Every whole page of the file, then the header's fields and both
    // commit slots one byte at a time.
    let mut cases: Vec<(usize, usize)> = (0..bytes.len() / PAGE)
        .map(|p| (p * PAGE, (p + 1) * PAGE))
        .collect();
    cases.extend([9, 16, 64, 100, 192, 250].map(|at| (at, at + 1)));

    let (mut bad, mut verify_found, mut refused) = (Vec::new(), 0, 0);
    for (i, &(from, to)) in cases.iter().enumerate() {
        let dir = root.path().join(format!("case{i}"));
        copy_dir(&pristine, &dir);
        let file = dir.join(&name);
        let mut damaged = bytes.clone();
        damaged[from..to].iter_mut().for_each(|b| *b ^= 0xFF);
        std::fs::write(&file, damaged).unwrap();
        let file = path(&file);
        let d = path(&dir);

        let verify = table(&["verify", d], "");
        verify_found += usize::from(verify.0 == Some(1));
        bad.extend(judge("verify", &verify, file));
        let mut runs = vec![("scan", table(&["scan", d], ""))];
        runs.extend(keys.iter().map(|k| ("get", table(&["get", d, k], ""))));
        runs.push(("stats", table(&["stats", d], "")));
        runs.push(("add-fragment", table(&["add-fragment", d, "-q"], "")));
        refused += usize::from(runs.iter().any(|(_, r)| r.0 == Some(2)));
        for (what, r) in &runs {
            bad.extend(
                judge(what, r, file)
                    .into_iter()
                    .map(|b| format!("bytes {from}..{to}: {b}")),
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    eprintln!(
        "{} cases: verify found a problem in {verify_found}, another command exited 2 in {refused}",
        cases.len()
    );
    // Not a vacuous pass: damage must have been seen both ways.
    assert!(
        verify_found >= 5 && refused >= 5,
        "{verify_found} {refused}"
    );
}
