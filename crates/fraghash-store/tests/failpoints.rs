//! A crash (abort) at every failpoint of the migration state machine, for
//! every kind of migration, then reopen: the migration is finished (or never
//! started), every record is there exactly once, `verify` is clean, and no
//! stray file is left.

mod common;

use std::process::Command;

use common::{assert_sound, contents, filled, redb_files};
use fraghash_store::failpoint::POINTS;
use fraghash_store::Table;

const BIN: &str = env!("CARGO_BIN_EXE_fraghash-store-torture");

/// (scheme, fragments, op, arg, fragments after)
const OPS: &[(&str, u32, &str, &str, u32)] = &[
    ("slots", 3, "add", "", 4),
    ("slots", 3, "remove", "0", 2),
    ("slots", 3, "split", "1", 4),
    ("slots", 3, "rebalance", "", 3),
    ("ring", 3, "add", "", 4),
    ("ring", 3, "remove", "1", 2),
    ("linear", 3, "add", "", 4),
    ("linear", 3, "remove", "2", 2),
    ("jump", 3, "add", "", 4),
    ("jump", 3, "remove", "2", 2),
];

#[test]
fn crash_at_every_failpoint() {
    let mut crashes = 0;
    for &(scheme, n, op, arg, after) in OPS {
        // The batch-level points also fire at a later batch (the 3rd).
        let mut points: Vec<String> = POINTS.iter().map(|p| p.to_string()).collect();
        points.push("move.after-target-commit:3".into());
        points.push("move.after-source-delete:3".into());
        for point in points {
            let d = tempfile::tempdir().unwrap();
            let t = filled(d.path(), scheme, n, 1500);
            let before = contents(&t);
            drop(t);
            let mut c = Command::new(BIN);
            c.args(["op", d.path().to_str().unwrap(), op]);
            if !arg.is_empty() {
                c.arg(arg);
            }
            let out = c.env("FRAGHASH_STORE_FAILPOINT", &point).output().unwrap();
            let crashed = out.status.code().is_none();
            if !crashed {
                // The point is not on this operation's path (a remove
                // creates no file; a rebalance of an even table moves nothing).
                assert!(out.status.success(), "{scheme} {op} {point}: {out:?}");
            } else {
                crashes += 1;
            }
            let t = Table::open(d.path())
                .unwrap_or_else(|e| panic!("{scheme} {op} at {point}: reopen: {e}"));
            // A crash before the journal is durable (after the new file, or
            // with the journal's manifest only in its temporary file) leaves
            // the old shape; from the rename of the journal on, the reopen
            // finishes the migration.
            let before_journal =
                point == "start.after-new-file" || point == "manifest.after-tmp-write";
            let want = if crashed && before_journal { n } else { after };
            assert_eq!(t.fragments(), want, "{scheme} {op} {point}");
            // The reopen finished the migration if the crash left its
            // journal: from the rename of the journal to the final manifest.
            let finished_on_open = crashed && !before_journal && point != "finish.after-manifest";
            match t.recovered_migration() {
                Some(r) => {
                    assert!(finished_on_open, "{scheme} {op} {point}: {r:?}");
                    assert_eq!(
                        (r.fragments_before, r.fragments_after),
                        (n, after),
                        "{scheme} {op} {point}"
                    );
                }
                None => assert!(!finished_on_open, "{scheme} {op} {point}: not reported"),
            }
            assert_sound(&t);
            assert_eq!(contents(&t), before, "{scheme} {op} at {point}");
            assert_eq!(
                redb_files(d.path()) as u32,
                t.fragments(),
                "{scheme} {op} {point}: stray files"
            );
            // And the table works on.
            t.put(b"after", b"crash").unwrap();
            t.add_fragment().unwrap();
            assert_sound(&t);
        }
    }
    eprintln!("{crashes} crashes at failpoints, all recovered");
    assert!(crashes >= 60, "only {crashes} failpoints fired");
}
