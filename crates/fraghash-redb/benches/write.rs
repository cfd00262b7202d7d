//! What one [`Db::write`] of one record costs, by durability, on a table of
//! 100,000 records of 100-byte values (the Mnesia backend's commonest
//! call: Mnesia hands it a committed transaction one record at a time).
//!
//! `cargo bench -p fraghash-redb --bench write`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use fraghash_redb::db::{Db, Durability, Op, OpenOptions};

const RECORDS: u64 = 100_000;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn put<'a>(key: &'a [u8], value: &'a [u8]) -> Op<'a> {
    Op::Put {
        table: "t",
        key,
        value,
    }
}

fn loaded() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path().join("bench.redb"), &OpenOptions::default()).expect("open");
    db.create_table("t", b"").expect("create");
    let value = [7u8; 100];
    for start in (0..RECORDS).step_by(1000) {
        let keys: Vec<[u8; 8]> = (start..start + 1000).map(key).collect();
        let ops: Vec<Op> = keys.iter().map(|k| put(k, &value)).collect();
        db.write(&ops, Durability::Deferred).expect("load");
    }
    db.sync().expect("sync");
    (dir, db)
}

fn one_record(c: &mut Criterion) {
    let (_dir, db) = loaded();
    let value = [9u8; 100];
    let mut group = c.benchmark_group("write one record");
    for (name, durability) in [
        ("logged", Durability::Logged),
        ("deferred", Durability::Deferred),
    ] {
        let mut i = 0u64;
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    // A pseudo-random key of the table (a multiplicative
                    // walk: every key once per 100,000 writes).
                    i = (i + 1) % RECORDS;
                    key(i * 48_271 % RECORDS)
                },
                |k| db.write(&[put(&k, &value)], durability).expect("write"),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = one_record
}
criterion_main!(benches);
