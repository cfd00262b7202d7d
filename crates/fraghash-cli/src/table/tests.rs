//! The table commands, run in-process through their clap parser.

use clap::Parser;

use super::{cmd, TableArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    table: TableArgs,
}

fn run(args: &[&str]) -> Result<u8, String> {
    let cli = Cli::try_parse_from(std::iter::once("table").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    cmd::dispatch(cli.table.command).map_err(|e| e.to_string())
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
