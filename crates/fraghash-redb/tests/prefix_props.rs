//! `Db::prefix_chunk` against a filter of every key: a scan of a prefix's
//! range, chunk after chunk, gives exactly the stored keys that start
//! with the prefix, in order, and says `more` only while some are left.

use fraghash_redb::db::{Db, Durability, Op, OpenOptions, Start};
use proptest::prelude::*;

/// Keys over the bytes that make prefix ranges hard: 0x00, 0xFF (whose
/// prefixes have no simple successor) and two between.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0x00u8, 0x01, 0xFE, 0xFF]), 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn a_prefix_scan_reads_exactly_the_keys_with_the_prefix(
        keys in prop::collection::btree_set(key(), 0..40),
        prefix in key(),
        max in 0usize..6,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("p.redb"), &OpenOptions::default()).unwrap();
        db.create_table("t", b"").unwrap();
        let ops: Vec<Op> = keys
            .iter()
            .map(|k| Op::Put { table: "t", key: k, value: b"v" })
            .collect();
        db.write(&ops, Durability::Deferred).unwrap();
        let want: Vec<Vec<u8>> = keys.iter().filter(|k| k.starts_with(&prefix)).cloned().collect();
        let mut got = Vec::new();
        let mut last: Option<Vec<u8>> = None;
        loop {
            let start = match &last {
                None => Start::Edge,
                Some(k) => Start::After(k),
            };
            let c = db.prefix_chunk("t", &prefix, start, max).unwrap();
            prop_assert!(c.items.len() <= max.max(1));
            got.extend(c.items.iter().map(|(k, _)| k.clone()));
            last = c.items.last().map(|(k, _)| k.clone());
            if !c.more {
                break;
            }
            // `more` promises a key left in the range.
            prop_assert!(got.len() < want.len(), "more said with nothing left");
        }
        prop_assert_eq!(got, want);
    }
}
