//! Failpoints as errors in-process: a migration that fails half-way leaves a
//! table that still reads every record, refuses only writes of moving keys,
//! and finishes the migration on the next reshape (or reopen).

mod common;

use std::sync::{Mutex, MutexGuard};

use common::{assert_sound, contents, filled};
use fraghash_store::{failpoint, Error, PlanKind, Table};

/// Failpoints set in-process are global: the tests of this binary that arm
/// them take turns.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_failed_batch_is_finished_later() {
    let _turn = one_at_a_time();
    for point in [
        "move.after-target-commit",
        "move.after-source-delete",
        "finish.before-manifest",
    ] {
        let d = tempfile::tempdir().unwrap();
        let t = filled(d.path(), "slots", 3, 2000);
        t.set_batch_size(50);
        let before = contents(&t);
        failpoint::set(Some(point));
        let e = t.add_fragment().unwrap_err();
        assert!(matches!(e, Error::Failpoint(_)), "{e}");
        failpoint::set(None);
        assert!(t.stats().migrating);
        for (k, v) in &before {
            assert_eq!(t.get(k).unwrap().as_ref(), Some(v), "{point}");
        }
        // Writes of keys that do not move go on; moving keys may be refused.
        let mut refused = 0;
        for i in 0..200 {
            match t.put(format!("new{i}").as_bytes(), b"x") {
                Ok(()) => {}
                Err(Error::MigrationInterrupted { .. }) => refused += 1,
                Err(e) => panic!("{e}"),
            }
        }
        eprintln!("{point}: {refused} of 200 writes refused while interrupted");
        let r = t.remove_fragment(0).unwrap();
        assert_eq!(r.fragments_before, 4, "{point}: the add was finished first");
        assert_sound(&t);
        drop(t);
        let t = Table::open(d.path()).unwrap();
        assert_sound(&t);
        for (k, v) in &before {
            assert_eq!(t.get(k).unwrap().as_ref(), Some(v));
        }
    }
}

/// The open that finishes an interrupted migration says what it finished;
/// a create, and an open with nothing to finish, say nothing.
#[test]
fn the_open_that_finishes_a_migration_reports_it() {
    let _turn = one_at_a_time();
    let d = tempfile::tempdir().unwrap();
    let t = filled(d.path(), "slots", 3, 2000);
    assert!(t.recovered_migration().is_none());
    let before = contents(&t);
    t.set_batch_size(50);
    // Stopped once the first batch is deleted from its source: that batch
    // has moved for good, the rest moves on the reopen.
    failpoint::set(Some("move.after-source-delete"));
    let stopped = t.add_fragment();
    failpoint::set(None);
    assert!(matches!(stopped, Err(Error::Failpoint(_))), "{stopped:?}");
    drop(t);

    let t = Table::open(d.path()).unwrap();
    let r = t
        .recovered_migration()
        .expect("the open finished the interrupted add");
    assert_eq!(r.kind, PlanKind::Add { fragment: 3 });
    assert_eq!((r.fragments_before, r.fragments_after), (3, 4));
    assert!(r.range_plan);
    assert!(r.keys_moved > 0 && r.keys_moved <= r.keys_examined, "{r:?}");
    // A clone shares the report.
    assert_eq!(t.clone().recovered_migration(), Some(r));
    assert_eq!(t.fragments(), 4);
    assert_sound(&t);
    assert_eq!(contents(&t), before);
    let moved_on_open = r.keys_moved;
    drop(t);

    let t = Table::open(d.path()).unwrap();
    assert!(t.recovered_migration().is_none());
    // Everything the new fragment holds: what the batches before the
    // failure moved, and what the reopen moved.
    let in_new = t.stats().fragments[3].records;
    assert!(moved_on_open < in_new, "{moved_on_open} of {in_new}");
}
