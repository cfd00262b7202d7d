//! `fraghash table` as a user runs it: what stdout and stderr hold, and exit
//! codes (the in-process tests in src/table/tests.rs cover the rest).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use assert_cmd::Command;
use serde_json::Value;

fn fraghash() -> Command {
    Command::cargo_bin("fraghash").unwrap()
}

/// Runs `fraghash table ARGS` with `stdin`; returns (exit code, stdout, stderr).
fn table(args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = fraghash()
        .arg("table")
        .args(args)
        .write_stdin(stdin.to_string())
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(args: &[&str], stdin: &str) -> String {
    let (code, out, err) = table(args, stdin);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_closed_pipe_ends_scan_normally() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    ok(&["create", path(&t), "-q"], "");
    // Far more than a pipe buffer (64 KiB): scan is still writing when the
    // reader goes away.
    let lines: String = (0..20_000).map(|i| format!("key{i}\tvalue{i}\n")).collect();
    ok(&["load", path(&t), "-q"], &lines);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fraghash"))
        .args(["table", "scan", path(&t)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("key"), "{first}");
    // The reader (our end of the pipe) is dropped here, like `head -1` exiting.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn migration_json_is_structured() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    ok(&["create", path(&t), "--fragments", "4", "-q"], "");
    ok(&["load", path(&t), "-q"], "a\t1\nb\t2\nc\t3\n");
    let doc: Value = serde_json::from_str(&ok(&["add-fragment", path(&t), "--json"], "")).unwrap();
    assert_eq!(doc["kind"], "add");
    assert_eq!(doc["fragment"], 4);
    assert_eq!(doc["fragments_before"], 4);
    assert_eq!(doc["fragments_after"], 5);
    let doc: Value =
        serde_json::from_str(&ok(&["split-fragment", path(&t), "1", "--json"], "")).unwrap();
    assert_eq!(
        (&doc["kind"], &doc["source"], &doc["fragment"]),
        (&"split".into(), &1.into(), &5.into())
    );
    let doc: Value =
        serde_json::from_str(&ok(&["remove-fragment", path(&t), "0", "--json"], "")).unwrap();
    assert_eq!(
        (&doc["kind"], &doc["fragment"]),
        (&"remove".into(), &0.into())
    );
    let doc: Value = serde_json::from_str(&ok(&["rebalance", path(&t), "--json"], "")).unwrap();
    assert_eq!(doc["kind"], "rebalance");
    // -q does not silence what was asked for.
    let doc: Value =
        serde_json::from_str(&ok(&["add-fragment", path(&t), "--json", "-q"], "")).unwrap();
    assert_eq!(doc["kind"], "add");
}

#[test]
fn counts_of_one_are_singular() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    let out = ok(&["create", path(&t), "--fragments", "1"], "");
    assert!(out.ends_with(" with 1 fragment (slots)\n"), "{out}");
    let out = ok(&["add-fragment", path(&t)], "");
    // Nothing moved: no ratio of examined to moved.
    assert!(out.contains("moved 0 records, examined 0, "), "{out}");
    assert!(!out.contains("per moved"), "{out}");
    let out = ok(&["load", path(&t)], "only\tone\n");
    assert_eq!(out, "loaded 1 record; the table holds 1 record\n");
    let out = ok(&["verify", path(&t)], "");
    assert_eq!(
        out,
        "ok: 1 record in 2 fragments, each where the scheme places it\n"
    );
    let out = ok(&["stats", path(&t)], "");
    assert!(
        out.starts_with("scheme slots, 2 fragments, 1 record, 7 bytes\n"),
        "{out}"
    );
}

/// A crash in the middle of an add (a failpoint aborts the process after
/// the first batch has moved) leaves the table to the next command, which
/// finishes the add on open and says so on stderr, once.
#[test]
fn the_command_that_finishes_an_interrupted_migration_says_so() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    ok(&["create", path(&t), "--fragments", "4", "-q"], "");
    let lines: String = (0..2000).map(|i| format!("key{i}\tvalue{i}\n")).collect();
    ok(&["load", path(&t), "-q"], &lines);
    let crashed = fraghash()
        .args(["table", "add-fragment", path(&t), "--batch", "50", "-q"])
        .env("FRAGHASH_STORE_FAILPOINT", "move.after-source-delete")
        .output()
        .unwrap();
    assert_eq!(crashed.status.code(), None, "{crashed:?}");

    let (code, out, err) = table(&["verify", path(&t), "-q"], "");
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let notice = "fraghash table: finished an interrupted migration: added fragment 4 \
                  (4 -> 5 fragments), moved ";
    assert!(
        err.starts_with(notice) && err.ends_with(" records\n") && err.lines().count() == 1,
        "{err}"
    );
    // Nothing is left to finish: the next command is silent.
    let (code, out, err) = table(&["verify", path(&t)], "");
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            0,
            "ok: 2000 records in 5 fragments, each where the scheme places it\n",
            ""
        )
    );
}

#[test]
fn quiet_keeps_data_and_drops_summaries() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    assert_eq!(ok(&["-q", "create", path(&t)], ""), "");
    assert_eq!(ok(&["load", path(&t), "--quiet"], "k\tv\n"), "");
    assert_eq!(ok(&["add-fragment", path(&t), "-q"], ""), "");
    assert_eq!(ok(&["verify", path(&t), "-q"], ""), "");
    assert_eq!(ok(&["compact", path(&t), "-q"], ""), "");
    assert_eq!(ok(&["get", path(&t), "k", "-q"], ""), "v\n");
    assert_eq!(ok(&["scan", path(&t), "-q"], ""), "k\tv\n");
    assert!(ok(&["stats", path(&t), "-q"], "").starts_with("scheme slots"));
}

#[test]
fn refused_input_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    ok(&["create", path(&t), "-q"], "");
    let (code, out, err) = table(&["load", path(&t)], "a\t1\r\n");
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        "fraghash table: standard input, line 1: carriage return (\\r); lines must end in \\n \
         alone, convert CRLF files first (dos2unix, or tr -d '\\r') (0 records loaded before it)\n"
    );
    let (code, _, err) = table(&["load", path(&t), "--batch", "0"], "");
    assert_eq!(code, 2);
    assert!(err.contains("must be at least 1 record"), "{err}");
}

#[test]
fn help_lists_every_subcommand_and_option() {
    let out = ok(&["--help"], "");
    for sub in [
        "create",
        "put",
        "get",
        "delete",
        "load",
        "scan",
        "add-fragment",
        "split-fragment",
        "remove-fragment",
        "rebalance",
        "stats",
        "verify",
        "compact",
    ] {
        assert!(out.contains(&format!("  {sub} ")), "--help lacks {sub}");
        let help = ok(&[sub, "--help"], "");
        assert!(help.contains("-q, --quiet"), "{sub} --help lacks -q");
    }
    let help = ok(&["load", "--help"], "");
    assert!(help.contains("carriage return"), "{help}");
    for sub in [
        "add-fragment",
        "remove-fragment",
        "split-fragment",
        "rebalance",
    ] {
        let help = ok(&[sub, "--help"], "");
        assert!(
            help.contains("--batch") && help.contains("--json"),
            "{sub}: {help}"
        );
    }
}

/// `scan | load` copies a table whose keys and values hold the bytes that
/// separate fields and lines, and backslashes: `scan` escapes them and
/// `load` reads the escapes back.
#[test]
fn scan_output_loads_back_as_the_same_records() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    ok(&["create", path(&a), "-q"], "");
    ok(&["create", path(&b), "-q"], "");
    let records = [
        ("tab\tkey", "value\twith tab"),
        ("new\nline", "two\nlines\n"),
        ("back\\slash", "\\t is not a tab"),
        ("cr\rkey", "\\"),
        ("plain", ""),
    ];
    for (k, v) in records {
        ok(&["put", path(&a), k, v], "");
    }
    let dump = ok(&["scan", path(&a), "-q"], "");
    assert_eq!(dump.lines().count(), records.len(), "{dump:?}");
    assert!(!dump.contains('\r'), "{dump:?}");
    ok(&["load", path(&b), "-q"], &dump);
    for (k, v) in records {
        assert_eq!(
            ok(&["get", path(&b), k, "-q"], ""),
            format!("{v}\n"),
            "{k:?}"
        );
    }
    assert_eq!(ok(&["scan", path(&b), "-q"], ""), dump);
    // A backslash that starts no escape is refused with its line.
    let (code, _, err) = table(&["load", path(&b)], "ok\t1\nbad\\x\t2\n");
    assert_eq!(code, 2);
    assert!(err.contains("line 2: key: unknown escape \\x"), "{err}");
}
