//! The table commands, run in-process through their clap parser.

use clap::Parser;

use fraghash_store::{MigrationReport, PlanKind};

use super::{cmd, TableArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    table: TableArgs,
}

fn run(args: &[&str]) -> Result<u8, String> {
    let cli = Cli::try_parse_from(std::iter::once("table").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    cmd::dispatch(cli.table.command, cli.table.quiet).map_err(|e| e.to_string())
}

#[test]
fn every_command() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    let t = t.to_str().unwrap();
    assert_eq!(run(&["create", t, "--fragments", "3"]), Ok(0));
    let input = d.path().join("in.tsv");
    let lines: String = (0..3000).map(|i| format!("key{i}\tvalue{i}\n")).collect();
    std::fs::write(&input, lines).unwrap();
    assert_eq!(
        run(&["load", t, input.to_str().unwrap(), "--batch", "500"]),
        Ok(0)
    );
    assert_eq!(run(&["put", t, "k", "v"]), Ok(0));
    assert_eq!(run(&["get", t, "k"]), Ok(0));
    assert_eq!(run(&["get", t, "absent"]), Ok(1));
    assert_eq!(run(&["delete", t, "k"]), Ok(0));
    assert_eq!(run(&["add-fragment", t, "--quiet"]), Ok(0));
    assert_eq!(run(&["split-fragment", t, "0", "--quiet", "--json"]), Ok(0));
    assert_eq!(
        run(&["remove-fragment", t, "1", "--quiet", "--batch", "7"]),
        Ok(0)
    );
    assert_eq!(run(&["rebalance", t, "--quiet"]), Ok(0));
    assert_eq!(run(&["stats", t, "--json"]), Ok(0));
    assert_eq!(run(&["stats", t]), Ok(0));
    assert_eq!(run(&["verify", t, "--json"]), Ok(0));
    assert_eq!(run(&["scan", t, "--limit", "2"]), Ok(0));
    assert_eq!(run(&["compact", t]), Ok(0));
    let table = fraghash_store::Table::open(t).unwrap();
    assert_eq!(table.len(), 3000);
    assert_eq!(table.fragments(), 4);
}

#[test]
fn bad_input_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    let t = t.to_str().unwrap();
    let bad = d.path().join("bad.tsv");
    std::fs::write(&bad, "a\tb\nno tab here\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["create", t, "--scheme", "rings"],
            "unknown scheme spec",
        ),
        (
            vec!["create", t, "--fragments", "0"],
            "at least one fragment",
        ),
        (vec!["get", t, "k"], "no table in"),
    ];
    for (args, want) in cases {
        let e = run(&args).unwrap_err();
        assert!(e.contains(want) && !e.contains('\n'), "{args:?}: {e}");
    }
    assert_eq!(
        run(&["create", t, "--scheme", "jump", "--fragments", "2"]),
        Ok(0)
    );
    let long = "k".repeat(5000);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["create", t], "already exists"),
        (vec!["put", t, &long, "v"], "over the limit of 4096 bytes"),
        (vec!["load", t, bad.to_str().unwrap()], "line 2: no TAB"),
        (
            vec!["remove-fragment", t, "0", "--quiet"],
            "can only remove its last",
        ),
        (
            vec!["remove-fragment", t, "5", "--quiet"],
            "fragment 5 does not exist: there are 2 fragments (ids 0..=1)",
        ),
        (
            vec!["rebalance", t, "--quiet"],
            "does not support rebalance",
        ),
        (
            vec!["split-fragment", t, "0", "--quiet"],
            "does not support split",
        ),
    ];
    for (args, want) in cases {
        let e = run(&args).unwrap_err();
        assert!(e.contains(want) && !e.contains('\n'), "{args:?}: {e}");
    }
}

#[test]
fn batch_zero_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    let t = t.to_str().unwrap();
    assert_eq!(run(&["create", t, "-q"]), Ok(0));
    for args in [
        vec!["load", t, "-", "--batch", "0"],
        vec!["add-fragment", t, "--batch", "0"],
        vec!["split-fragment", t, "0", "--batch", "0"],
        vec!["remove-fragment", t, "0", "--batch", "0"],
        vec!["rebalance", t, "--batch", "0"],
    ] {
        let e = run(&args).unwrap_err();
        assert!(e.contains("must be at least 1 record"), "{args:?}: {e}");
    }
    assert_eq!(fraghash_store::Table::open(t).unwrap().fragments(), 4);
}

#[test]
fn create_refuses_a_directory_of_other_files_and_leaves_nothing_on_failure() {
    let d = tempfile::tempdir().unwrap();
    let mine = d.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("photo.jpg"), "x").unwrap();
    let e = run(&["create", mine.to_str().unwrap()]).unwrap_err();
    assert!(e.contains("is not empty and holds no table"), "{e}");
    assert_eq!(std::fs::read_dir(&mine).unwrap().count(), 1);

    let missing = d.path().join("missing");
    let t = d.path().join("t");
    let e = run(&[
        "create",
        t.to_str().unwrap(),
        "--place",
        missing.to_str().unwrap(),
    ])
    .unwrap_err();
    assert!(
        e.contains("placement directory") && e.contains("does not exist"),
        "{e}"
    );
    assert!(!t.exists(), "a failed create left {}", t.display());
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    run(&[
        "create",
        empty.to_str().unwrap(),
        "--place",
        missing.to_str().unwrap(),
    ])
    .unwrap_err();
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "LOCK left");
}

#[test]
fn load_refuses_carriage_returns_like_experiment() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    let t = t.to_str().unwrap();
    assert_eq!(run(&["create", t, "-q"]), Ok(0));
    for (name, text) in [
        ("crlf.tsv", &b"a\t1\r\nb\t2\r\n"[..]),
        ("mid.tsv", b"a\t1\nb\r\t2\n"),
    ] {
        let f = d.path().join(name);
        std::fs::write(&f, text).unwrap();
        let e = run(&["load", t, f.to_str().unwrap(), "--batch", "1"]).unwrap_err();
        let line = if name == "crlf.tsv" { 1 } else { 2 };
        let want = format!("{name}, line {line}: carriage return");
        assert!(e.contains(&want) && !e.contains('\n'), "{e}");
    }
    // The first file's error comes before any record; the second's after one.
    let table = fraghash_store::Table::open(t).unwrap();
    assert_eq!(table.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(table.len(), 1);
}

#[test]
fn quiet_is_taken_by_every_subcommand() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    let t = t.to_str().unwrap();
    assert_eq!(run(&["-q", "create", t, "--fragments", "2"]), Ok(0));
    let input = d.path().join("in.tsv");
    std::fs::write(&input, "k\tv\n").unwrap();
    let input = input.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["put", t, "a", "b"],
        vec!["get", t, "a"],
        vec!["delete", t, "a"],
        vec!["load", t, input],
        vec!["scan", t],
        vec!["add-fragment", t],
        vec!["split-fragment", t, "0"],
        vec!["remove-fragment", t, "3"],
        vec!["rebalance", t],
        vec!["stats", t],
        vec!["verify", t],
        vec!["compact", t],
    ];
    for args in cases {
        for flag in ["-q", "--quiet"] {
            let mut with = args.clone();
            with.push(flag);
            assert_eq!(run(&with), Ok(0), "{with:?}");
        }
    }
}

fn report(kind: PlanKind, moved: u64, examined: u64, ranges: usize) -> MigrationReport {
    MigrationReport {
        kind,
        fragments_before: 1,
        fragments_after: 2,
        moves: 1,
        ranges,
        range_plan: ranges > 0,
        keys_examined: examined,
        keys_moved: moved,
        seconds: 0.5,
    }
}

#[test]
fn migration_json_gives_the_kind_as_fields() {
    let cases = [
        (
            PlanKind::Add { fragment: 4 },
            r#"{"kind":"add","fragment":4}"#,
        ),
        (
            PlanKind::Remove { fragment: 1 },
            r#"{"kind":"remove","fragment":1}"#,
        ),
        (
            PlanKind::Split {
                source: 0,
                fragment: 5,
            },
            r#"{"kind":"split","source":0,"fragment":5}"#,
        ),
        (PlanKind::Rebalance, r#"{"kind":"rebalance"}"#),
    ];
    for (kind, want) in cases {
        let doc = cmd::migration_json(&report(kind, 3, 3, 2));
        let want: serde_json::Value = serde_json::from_str(want).unwrap();
        for (k, v) in want.as_object().unwrap() {
            assert_eq!(&doc[k], v, "{kind:?}: {doc}");
        }
        assert_eq!(doc["keys_moved"], 3);
        assert_eq!(doc["fragments_after"], 2);
        assert!(doc["kind"].is_string(), "{doc}");
    }
}

#[test]
fn migration_summary_counts_in_words() {
    let one = cmd::migration_summary(&report(PlanKind::Add { fragment: 1 }, 1, 1, 1));
    assert_eq!(
        one,
        "added fragment 1: 1 -> 2 fragments; moved 1 record, examined 1 \
         (1.000 examined per moved), 1 hash range, 0.50 s"
    );
    let none = cmd::migration_summary(&report(PlanKind::Add { fragment: 1 }, 0, 0, 3));
    assert_eq!(
        none,
        "added fragment 1: 1 -> 2 fragments; moved 0 records, examined 0, 3 hash ranges, 0.50 s"
    );
    let filter = cmd::migration_summary(&report(PlanKind::Remove { fragment: 1 }, 2, 4, 0));
    assert!(
        filter.contains(
            "moved 2 records, examined 4 (2.000 examined per moved), whole fragments scanned"
        ),
        "{filter}"
    );
}

#[test]
fn recovery_notice_names_what_was_finished() {
    let add = cmd::recovery_notice(&report(PlanKind::Add { fragment: 1 }, 1, 1, 1));
    assert_eq!(
        add,
        "finished an interrupted migration: added fragment 1 (1 -> 2 fragments), moved 1 record"
    );
    let mut even = report(PlanKind::Rebalance, 7, 9, 2);
    even.fragments_before = 2;
    assert_eq!(
        cmd::recovery_notice(&even),
        "finished an interrupted migration: rebalanced (2 fragments), moved 7 records"
    );
}
