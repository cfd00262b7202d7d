//! Failpoints as errors in-process: a migration that fails half-way leaves a
//! table that still reads every record, refuses only writes of moving keys,
//! and finishes the migration on the next reshape (or reopen).

mod common;

use common::{assert_sound, contents, filled};
use fraghash_store::{failpoint, Error, Table};

#[test]
fn a_failed_batch_is_finished_later() {
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
