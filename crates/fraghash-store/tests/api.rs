//! The record API and every migration, for every scheme.

mod common;

use common::{assert_sound, contents, filled, redb_files};
use fraghash_store::{Error, Table, TableOptions, WriteBatch, MAX_KEY_LEN};

#[test]
fn put_get_delete_contains_len() {
    let d = tempfile::tempdir().unwrap();
    let t = Table::create(d.path(), &TableOptions::default()).unwrap();
    assert!(t.is_empty());
    t.put(b"a", b"1").unwrap();
    t.put(b"", b"empty key").unwrap();
    t.put(b"a", b"2").unwrap();
    assert_eq!(t.get(b"a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(t.get(b"").unwrap(), Some(b"empty key".to_vec()));
    assert!(t.contains(b"a").unwrap());
    assert!(!t.contains(b"b").unwrap());
    assert_eq!(t.len(), 2);
    assert_eq!(t.stats().bytes, 1 + 1 + 9);
    assert!(t.delete(b"a").unwrap());
    assert!(!t.delete(b"a").unwrap());
    assert_eq!(t.len(), 1);
    let mut b = WriteBatch::new();
    b.put("x", "1").put("y", "2").delete("x");
    t.write_batch(&b).unwrap();
    assert_eq!(t.get(b"x").unwrap(), None);
    assert_eq!(t.get(b"y").unwrap(), Some(b"2".to_vec()));
    assert_sound(&t);
}

#[test]
fn limits_are_typed_errors() {
    let d = tempfile::tempdir().unwrap();
    let t = Table::create(d.path(), &TableOptions::default()).unwrap();
    let long = vec![0u8; MAX_KEY_LEN + 1];
    assert!(matches!(t.put(&long, b"v"), Err(Error::KeyTooLong { .. })));
    assert!(matches!(t.get(&long), Err(Error::KeyTooLong { .. })));
    t.put(&long[..MAX_KEY_LEN], b"v").unwrap();
    let e = Table::create(
        d.path().join("x"),
        &TableOptions {
            scheme: "nope".into(),
            ..TableOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::Scheme(_)), "{e}");
}

fn reshape(scheme: &str) {
    let d = tempfile::tempdir().unwrap();
    let t = filled(d.path(), scheme, 3, 3000);
    t.set_batch_size(100);
    let before = contents(&t);
    let r = t.add_fragment().unwrap();
    assert_eq!((r.fragments_before, r.fragments_after), (3, 4));
    assert!(r.keys_moved > 0);
    if r.range_plan {
        assert_eq!(
            r.keys_examined, r.keys_moved,
            "{scheme}: range plans read only what moves"
        );
    }
    assert_sound(&t);
    assert_eq!(contents(&t), before);
    if scheme == "slots" {
        let r = t.split_fragment(1).unwrap();
        assert_eq!(r.keys_examined, r.keys_moved);
        assert_eq!(t.fragments(), 5);
        assert_sound(&t);
        t.rebalance().unwrap();
        assert_sound(&t);
    } else {
        assert!(matches!(t.split_fragment(1), Err(Error::Scheme(_))));
        assert!(matches!(t.rebalance(), Err(Error::Scheme(_))));
    }
    let n = t.fragments();
    let which = if r.range_plan { 0 } else { n - 1 };
    let r = t.remove_fragment(which).unwrap();
    assert_eq!(r.fragments_after, n - 1);
    assert_sound(&t);
    assert_eq!(contents(&t), before);
    drop(t);
    let t = Table::open(d.path()).unwrap();
    assert_eq!(t.fragments(), n - 1);
    assert_eq!(contents(&t), before);
    assert_eq!(t.len(), 3000);
    assert_sound(&t);
    // Files: manifest, lock, one per fragment.
    assert_eq!(redb_files(d.path()) as u32, n - 1);
}

#[test]
fn reshape_slots() {
    reshape("slots");
}

#[test]
fn reshape_ring() {
    reshape("ring");
}

#[test]
fn reshape_linear() {
    reshape("linear");
}

#[test]
fn reshape_jump() {
    reshape("jump");
}

#[test]
fn only_last_for_filter_schemes() {
    let d = tempfile::tempdir().unwrap();
    let t = filled(d.path(), "jump", 3, 10);
    assert!(matches!(t.remove_fragment(0), Err(Error::Scheme(_))));
    assert!(matches!(t.remove_fragment(9), Err(Error::Scheme(_))));
    assert_sound(&t);
}

#[test]
fn placement_dirs() {
    let d = tempfile::tempdir().unwrap();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let t = Table::create(
        d.path().join("t"),
        &TableOptions {
            scheme: "slots".into(),
            fragments: 4,
            dirs: vec![a.path().into(), b.path().into()],
        },
    )
    .unwrap();
    for i in 0..500 {
        t.put(format!("k{i}").as_bytes(), b"v")
            .unwrap_or_else(|e| panic!("{e}"));
    }
    t.add_fragment().unwrap();
    t.remove_fragment(1).unwrap();
    let count = |p: &std::path::Path| std::fs::read_dir(p).unwrap().count();
    assert_eq!(count(a.path()) + count(b.path()), 4);
    assert!(count(a.path()) >= 1 && count(b.path()) >= 1);
    drop(t);
    let t = Table::open(d.path().join("t")).unwrap();
    assert_eq!(t.len(), 500);
    assert_sound(&t);
}

#[test]
fn compact_and_stats() {
    let d = tempfile::tempdir().unwrap();
    let t = filled(d.path(), "slots", 4, 2000);
    let s = t.stats();
    assert_eq!(s.records, 2000);
    assert_eq!(s.fragments.len(), 4);
    assert!(s.fragments.iter().all(|f| f.records > 300));
    let mut b = WriteBatch::new();
    for i in 0..1500 {
        b.delete(format!("k{i}"));
    }
    t.write_batch(&b).unwrap();
    let scan = t.scan().unwrap();
    assert!(matches!(t.compact(), Err(Error::Busy(_))));
    drop(scan);
    let c = t.compact().unwrap();
    assert!(c.bytes_after <= c.bytes_before);
    assert_eq!(t.len(), 500);
    assert_sound(&t);
}
