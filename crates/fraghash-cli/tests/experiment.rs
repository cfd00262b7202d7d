//! `fraghash experiment` end to end, on small inputs: the JSON figures
//! against the core's own stats and plans, the plots, and the error cases.

use std::path::Path;

use assert_cmd::Command;
use fraghash::keys::{seq_key, ShortKeys};
use fraghash::{key_hash, AnyScheme, FragmentScheme, HashRange, SchemeSpec, Stats};
use predicates::prelude::*;
use serde_json::Value;

const SCHEMES: &str = "linear,ring,ring:10,jump,slots";

fn fraghash() -> Command {
    Command::cargo_bin("fraghash").unwrap()
}

fn json_of(args: &[&str]) -> Value {
    let out = fraghash()
        .arg("experiment")
        .args(args)
        .args(["--json", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

fn short_hashes(seed: u64, m: usize) -> Vec<u64> {
    let mut g = ShortKeys::new(seed);
    let mut buf = Vec::new();
    let mut v: Vec<u64> = (0..m)
        .map(|_| {
            g.next_into(&mut buf);
            key_hash(&buf)
        })
        .collect();
    v.sort_unstable();
    v
}

fn counts(s: &AnyScheme, hashes: &[u64]) -> Vec<u64> {
    let mut c = vec![0u64; s.fragments() as usize];
    for &h in hashes {
        c[s.locate(h) as usize] += 1;
    }
    c
}

fn as_u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap();
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} != {b}");
}

/// Checks one add or remove object against the core's plan, key by key.
fn check_change(
    j: &Value,
    before: &AnyScheme,
    after: &AnyScheme,
    plan: &fraghash::MigrationPlan,
    hashes: &[u64],
    ideal: f64,
) {
    let old_counts = counts(before, hashes);
    let mut moved = 0u64;
    // Fragments that lose or gain keys (old numbering): the plan's sources,
    // its range destinations, and wherever a key actually went.
    let mut touched: std::collections::BTreeSet<u32> = plan.sources().into_iter().collect();
    for m in &plan.moves {
        if let fraghash::Move::Ranges { to, .. } = m {
            touched.insert(*to);
        }
    }
    for &h in hashes {
        let f = before.locate(h);
        let g = plan.new_to_old(after.locate(h));
        if f != g {
            moved += 1;
            touched.insert(g);
            assert!(plan.covers(h, f), "plan misses a moved key");
        }
    }
    let range_keys = |r: &HashRange| hashes.iter().filter(|&&h| r.contains(h)).count() as u64;
    let scanned = plan.keys_scanned(|f| old_counts[f as usize], range_keys);
    assert_eq!(j["moved"].as_u64().unwrap(), moved);
    close(&j["ideal"], ideal);
    close(&j["moved_over_ideal"], moved as f64 / ideal);
    assert_eq!(j["scanned"].as_u64().unwrap(), scanned);
    assert_eq!(j["sources"].as_u64().unwrap(), plan.sources().len() as u64);
    assert_eq!(
        j["fragments_touched"].as_u64().unwrap(),
        touched.len() as u64
    );
    assert_eq!(j["ranges"].as_u64().unwrap(), plan.range_count() as u64);
    assert_eq!(j["plan_exact"], Value::Bool(true));
    assert_eq!(as_u64s(&j["counts_after"]), counts(after, hashes));
    assert_eq!(
        j["plan"].as_str().unwrap(),
        if plan.is_range_plan() {
            "ranges"
        } else {
            "filter"
        }
    );
}

#[test]
fn json_figures_match_the_core() {
    let (m, n) = (20_000usize, 7u32);
    let doc = json_of(&[
        "--keys",
        "20000",
        "--fragments",
        "7",
        "--seed",
        "3",
        "--schemes",
        SCHEMES,
    ]);
    let hashes = short_hashes(3, m);
    assert_eq!(doc["keys"].as_u64().unwrap(), m as u64);
    assert_eq!(doc["fragments"].as_u64().unwrap(), u64::from(n));
    assert_eq!(doc["key_source"]["kind"], "short");
    assert!(doc["growth"].is_null());
    let schemes = doc["schemes"].as_array().unwrap();
    assert_eq!(schemes.len(), 5);
    for (j, spec) in schemes.iter().zip(SCHEMES.split(',')) {
        assert_eq!(j["scheme"].as_str().unwrap(), spec);
        let before = AnyScheme::new(spec, n).unwrap();
        let c = counts(&before, &hashes);
        assert_eq!(as_u64s(&j["counts"]), c, "{spec}");
        let s = Stats::from_counts(&c);
        assert_eq!(j["keys"].as_u64().unwrap(), m as u64);
        assert_eq!(j["fragments"].as_u64().unwrap(), u64::from(n));
        close(&j["mean"], s.mean);
        close(&j["stddev"], s.stddev);
        close(&j["floor"], s.floor);
        close(&j["max_over_mean"], s.max_over_mean);
        assert_eq!(j["min"].as_u64().unwrap(), s.min);
        assert_eq!(j["max"].as_u64().unwrap(), s.max);

        let mut added = before.clone();
        let plan = added.add_fragment().unwrap();
        check_change(
            &j["add"],
            &before,
            &added,
            &plan,
            &hashes,
            m as f64 / f64::from(n + 1),
        );
        assert_eq!(j["add"]["fragment"].as_u64().unwrap(), u64::from(n));

        let parsed: SchemeSpec = spec.parse().unwrap();
        let which = if parsed.removes_any() { n / 2 } else { n - 1 };
        assert_eq!(j["remove"]["fragment"].as_u64().unwrap(), u64::from(which));
        let mut removed = before.clone();
        let plan = removed.remove_fragment(which).unwrap();
        check_change(
            &j["remove"],
            &before,
            &removed,
            &plan,
            &hashes,
            m as f64 / f64::from(n),
        );
    }
}

#[test]
fn key_file_stdin_and_seq_pattern_agree() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.txt");
    let mut text = Vec::new();
    let mut buf = Vec::new();
    for i in 0..3000 {
        seq_key(i, &mut buf);
        text.extend_from_slice(&buf);
        text.push(b'\n');
    }
    std::fs::write(&file, &text).unwrap();
    let common = ["--fragments", "5", "--schemes", "slots,linear"];
    let seq = json_of(&[&["--key-pattern", "seq", "--keys", "3000"][..], &common[..]].concat());
    let from_file = json_of(&[&["--keys-from", file.to_str().unwrap()][..], &common[..]].concat());
    assert_eq!(seq["schemes"], from_file["schemes"]);
    assert_eq!(from_file["key_source"]["kind"], "file");

    let out = fraghash()
        .args(["experiment", "--keys-from", "-", "--json"])
        .args(common)
        .write_stdin(text)
        .output()
        .unwrap();
    assert!(out.status.success());
    // No --quiet, but stderr is not a terminal: no progress bars, nothing.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdin: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stdin["schemes"], seq["schemes"]);
}

#[test]
fn growth_curves_match_direct_counts() {
    let doc = json_of(&[
        "--keys",
        "5000",
        "--fragments",
        "9",
        "--seed",
        "4",
        "--schemes",
        "linear,ring:10,jump,slots",
        "--growth",
        "24",
    ]);
    let hashes = short_hashes(4, 5000);
    let g = &doc["growth"];
    assert_eq!(g["max"].as_u64().unwrap(), 24);
    for c in g["curves"].as_array().unwrap() {
        let spec = c["scheme"].as_str().unwrap();
        assert!(c["method"].as_str().unwrap().starts_with("exact"));
        assert_eq!(c["fragments"].as_array().unwrap().len(), 24);
        // Linear, ring and jump place keys by N alone; slots grown by adds
        // may own different slots than slots created at N.
        if spec == "slots" {
            continue;
        }
        for n in [1u32, 2, 9, 16, 17, 24] {
            let s = Stats::from_counts(&counts(&AnyScheme::new(spec, n).unwrap(), &hashes));
            close(&c["max_over_mean"][n as usize - 1], s.max_over_mean);
            close(&c["stddev"][n as usize - 1], s.stddev);
        }
    }
}

fn check_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{path:?}: not a PNG"
    );
    let img = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png).unwrap();
    assert!(img.width() >= 400 && img.height() >= 300);
}

fn check_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.trim_start().starts_with("<svg"), "{path:?}");
    assert!(text.trim_end().ends_with("</svg>"), "{path:?}");
    assert!(text.contains("<text"), "{path:?}: no text");
    // Balanced tags, a rough well-formedness check.
    let opens = text.matches("<text").count();
    assert_eq!(opens, text.matches("</text>").count());
}

#[test]
fn out_dir_holds_plots_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    fraghash()
        .args([
            "experiment",
            "--keys",
            "4000",
            "--fragments",
            "6",
            "--quiet",
        ])
        .args(["--schemes", SCHEMES, "--growth", "12", "--out"])
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("Distribution over 6 fragments"))
        .stdout(predicate::str::contains("ring:10"));
    for f in ["distribution.png", "growth.png"] {
        check_png(&out.join(f));
    }
    for f in ["distribution.svg", "growth.svg"] {
        check_svg(&out.join(f));
    }
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["schemes"].as_array().unwrap().len(), 5);
    assert_eq!(report["growth"]["max"].as_u64().unwrap(), 12);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| scheme |") && md.contains("distribution.png"));
    // Nothing but the output directory in the parent: the staging dir is gone.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1);

    // A second run into the existing directory replaces the files; without
    // --growth, --out still grows to the default 400 (here: linear, the cheapest
    // to grow in a debug build).
    fraghash()
        .args([
            "experiment",
            "--keys",
            "2000",
            "--fragments",
            "4",
            "--quiet",
        ])
        .args(["--schemes", "linear", "--out"])
        .arg(&out)
        .assert()
        .success();
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["schemes"].as_array().unwrap().len(), 1);
    assert_eq!(report["growth"]["max"].as_u64().unwrap(), 400);
    check_png(&out.join("growth.png"));
}

/// Runs a failing experiment: exit 2, one line on stderr containing `what`.
fn fails(args: &[&str], stdin: Option<&[u8]>, what: &str) {
    let mut cmd = fraghash();
    cmd.arg("experiment").args(args).arg("--quiet");
    if let Some(input) = stdin {
        cmd.write_stdin(input.to_vec());
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(out.stdout.is_empty(), "{args:?}: wrote to stdout");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(what), "{args:?}: {err:?} lacks {what:?}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    fails(
        &["--schemes", "linear,rings"],
        None,
        "unknown scheme spec \"rings\"",
    );
    fails(&["--schemes", "ring:0"], None, "unknown scheme spec");
    fails(&["--schemes", "ring,ring:100"], None, "given twice");
    fails(&["--schemes", "slots,"], None, "empty scheme spec");
    fails(&["--fragments", "0"], None, "--fragments 0");
    fails(
        &["--fragments", "262144", "--schemes", "slots"],
        None,
        "at most 262144",
    );
    fails(&["--keys", "0"], None, "--keys 0");
    fails(&["--growth", "5000"], None, "--growth 5000");
    fails(
        &["--keys-from", "/nonexistent/keys.txt"],
        None,
        "No such file",
    );

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };
    let empty = write("empty.txt", b"");
    fails(&["--keys-from", &empty], None, "has no keys");
    let crlf = write("crlf.txt", b"a\r\nb\r\n");
    fails(&["--keys-from", &crlf], None, "line 1: carriage return");
    let nul = write("nul.txt", b"a\nb\0c\n");
    fails(&["--keys-from", &nul], None, "line 2: NUL byte");
    let blank = write("blank.txt", b"a\n\nb\n");
    fails(&["--keys-from", &blank], None, "line 2: empty line");
    fails(
        &["--keys-from", "-"],
        Some(b""),
        "standard input has no keys",
    );

    // A failed run leaves --out untouched: no directory, no staging leftovers.
    let out = dir.path().join("out");
    fails(
        &["--keys-from", &nul, "--out", out.to_str().unwrap()],
        None,
        "NUL byte",
    );
    assert!(!out.exists());
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    fails(
        &["--keys", "10", "--out", "/nonexistent/dir/out"],
        None,
        "does not exist",
    );
}

/// Names starting with a dot in `dir`: staging directories left behind.
fn dot_entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

#[test]
fn a_stopped_run_removes_its_staging_dir() {
    for (signal, code) in [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        // Keys from a pipe that stays open: the run waits, staging dir made.
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fraghash"))
            .args(["experiment", "--quiet", "--keys-from", "-", "--out"])
            .arg(&out)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let staging = dir.path().join(format!(".out.tmp-{}", child.id()));
        let mut waited = 0;
        while !staging.exists() {
            assert!(waited < 3000, "no staging dir after 30 s");
            std::thread::sleep(std::time::Duration::from_millis(10));
            waited += 1;
        }
        // Held open through the wait (Child::wait closes a stdin it still owns,
        // and the run would see the end of its keys before the signal).
        let stdin = child.stdin.take();
        // SAFETY: sends a signal to our own child.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let status = child.wait().unwrap();
        drop(stdin);
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(code), "signal {signal}: {err}");
        assert!(
            err.contains(&format!("stopped by signal {signal}")),
            "{err}"
        );
        assert!(dot_entries(dir.path()).is_empty(), "signal {signal}");
        assert!(!out.exists());
    }
}

#[test]
fn the_next_run_removes_staging_dirs_of_killed_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // PIDs above the kernel's largest pid_max (2^22): no such process.
    for pid in [4_194_305u32, 999_999_999] {
        let stale = dir.path().join(format!(".out.tmp-{pid}"));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("report.json"), "{}").unwrap();
    }
    // Another DIR's staging dir, and a live process's: both left alone.
    let other = dir.path().join(".other.tmp-999999999");
    std::fs::create_dir(&other).unwrap();
    let live = dir.path().join(format!(".out.tmp-{}", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    fraghash()
        .args([
            "experiment",
            "--quiet",
            "--keys",
            "1000",
            "--fragments",
            "3",
        ])
        .args(["--schemes", "linear", "--growth", "4", "--out"])
        .arg(&out)
        .assert()
        .success();
    let mut left = dot_entries(dir.path());
    left.sort();
    let mut want = vec![
        ".other.tmp-999999999".to_string(),
        format!(".out.tmp-{}", std::process::id()),
    ];
    want.sort();
    assert_eq!(left, want);
    assert!(out.join("report.json").exists());
}

#[test]
fn one_key_is_singular() {
    let out = fraghash()
        .args(["experiment", "--quiet", "--keys", "1", "--fragments", "2"])
        .args(["--schemes", "linear"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("1 key into 2 fragments"), "{text}");
    assert!(!text.contains("1 keys"), "{text}");
}
