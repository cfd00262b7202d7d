//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use fraghash_store::{Table, TableOptions};

/// A table with `n` records `k{i}` -> `v{i}`.
pub fn filled(dir: &Path, scheme: &str, fragments: u32, n: usize) -> Table {
    let t = Table::create(
        dir,
        &TableOptions {
            scheme: scheme.into(),
            fragments,
            dirs: vec![],
        },
    )
    .unwrap();
    let mut b = fraghash_store::WriteBatch::new();
    for i in 0..n {
        b.put(format!("k{i}"), format!("v{i}"));
    }
    t.write_batch(&b).unwrap();
    t
}

/// Every record of the table, by scan, checking no key appears twice.
pub fn contents(t: &Table) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for r in t.scan().unwrap() {
        let (k, v) = r.unwrap();
        assert!(m.insert(k.clone(), v).is_none(), "key {k:?} twice");
    }
    m
}

/// Asserts verify is clean.
pub fn assert_sound(t: &Table) {
    let r = t.verify().unwrap();
    assert!(r.is_ok(), "verify: {:?}", r.problems);
}

/// How many fragment files (`*.redb`) a table directory holds.
pub fn redb_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "redb")
        })
        .count()
}
