//! Store benchmarks, each beside plain redb in the same run.
//!
//! Records: 16-byte keys, 100-byte values, loaded in batches of 10,000.
//! 100,000 records by default; `FRAGHASH_BENCH_FULL=1` for 1,000,000
//! (or `FRAGHASH_BENCH_RECORDS=n`).
//!
//! - `get/*`: all sides are built, then warmed with one get of every key;
//!   10,000 gets of random present keys per iteration, one read
//!   transaction per get and the value copied out (as `Table::get` returns
//!   it) on both sides: the table with 1, 8 and 50 fragments, and one plain
//!   redb table.
//! - `put/*`: two writer threads, each committing one batch of 10,000 new
//!   records per iteration: the table with 8 fragments, and one plain redb
//!   table.
//! - `migrate/*`: a 50-fragment `slots` table gets its 51st fragment (timed),
//!   then loses it again (not timed); beside it, plain redb moves the same
//!   number of records from one file to another in batches (commit on the
//!   target, delete on the source). Throughput is records moved.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fraghash_store::{Table, TableOptions, WriteBatch};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

const PLAIN: TableDefinition<&[u8], &[u8]> = TableDefinition::new("records");
const BATCH: usize = 10_000;

fn records() -> usize {
    if let Some(n) = std::env::var("FRAGHASH_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    if std::env::var_os("FRAGHASH_BENCH_FULL").is_some() {
        1_000_000
    } else {
        100_000
    }
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

const VALUE: [u8; 100] = [b'v'; 100];

fn table(dir: &std::path::Path, scheme: &str, fragments: u32, n: usize) -> Table {
    let t = Table::create(
        dir,
        &TableOptions {
            scheme: scheme.into(),
            fragments,
            dirs: vec![],
        },
    )
    .unwrap();
    let mut b = WriteBatch::new();
    for i in 0..n as u64 {
        b.put(key(i), VALUE);
        if b.len() == BATCH {
            t.write_batch(&b).unwrap();
            b.clear();
        }
    }
    t.write_batch(&b).unwrap();
    t
}

fn plain(path: &std::path::Path, n: usize) -> Database {
    let db = Database::create(path).unwrap();
    for chunk in (0..n as u64).collect::<Vec<_>>().chunks(BATCH) {
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(PLAIN).unwrap();
            for &i in chunk {
                t.insert(key(i).as_slice(), VALUE.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    db
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn gets(c: &mut Criterion) {
    let n = records();
    let d = tempfile::tempdir().unwrap();
    // Build everything first, then warm each side with one get of every
    // key, so that no side is measured while its caches are cold.
    let db = plain(&d.path().join("plain.redb"), n);
    let tables: Vec<(u32, Table)> = [1u32, 8, 50]
        .into_iter()
        .map(|f| (f, table(&d.path().join(format!("t{f}")), "slots", f, n)))
        .collect();
    let plain_get = |k: &[u8]| {
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(PLAIN).unwrap();
        t.get(k).unwrap().unwrap().value().to_vec()
    };
    for i in 0..n as u64 {
        black_box(plain_get(&key(i)));
        for (_, t) in &tables {
            black_box(t.get(&key(i)).unwrap().unwrap());
        }
    }
    let mut g = c.benchmark_group("get");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    let mut rng = Rng(1);
    let mut plain_bench = |g: &mut criterion::BenchmarkGroup<'_, _>, name: &str| {
        g.bench_function(BenchmarkId::new(name, n), |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    black_box(plain_get(&key(rng.below(n as u64))));
                }
            })
        });
    };
    plain_bench(&mut g, "plain-redb");
    let mut rng = Rng(2);
    for (frags, t) in &tables {
        g.bench_function(
            BenchmarkId::new(format!("table-{frags}-fragments"), n),
            |b| {
                b.iter(|| {
                    for _ in 0..BATCH {
                        let k = key(rng.below(n as u64));
                        black_box(t.get(&k).unwrap().unwrap());
                    }
                })
            },
        );
    }
    // Plain redb once more, last: the machine is shared, so the spread
    // between the two plain runs shows how much of a gap is noise.
    plain_bench(&mut g, "plain-redb-again");
    g.finish();
}

fn puts(c: &mut Criterion) {
    let n = records();
    let mut g = c.benchmark_group("put");
    g.throughput(Throughput::Elements(2 * BATCH as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    let d = tempfile::tempdir().unwrap();
    let db = Arc::new(plain(&d.path().join("plain.redb"), n));
    let next = Arc::new(std::sync::atomic::AtomicU64::new(n as u64));
    let take = |next: &std::sync::atomic::AtomicU64| {
        next.fetch_add(BATCH as u64, std::sync::atomic::Ordering::Relaxed)
    };
    g.bench_function(BenchmarkId::new("plain-redb-2-threads", n), |b| {
        b.iter(|| {
            std::thread::scope(|s| {
                for _ in 0..2 {
                    let (db, next) = (db.clone(), next.clone());
                    s.spawn(move || {
                        let first = take(&next);
                        let txn = db.begin_write().unwrap();
                        {
                            let mut t = txn.open_table(PLAIN).unwrap();
                            for i in first..first + BATCH as u64 {
                                t.insert(key(i).as_slice(), VALUE.as_slice()).unwrap();
                            }
                        }
                        txn.commit().unwrap();
                    });
                }
            })
        })
    });
    drop(db);
    let t = table(&d.path().join("t8"), "slots", 8, n);
    g.bench_function(BenchmarkId::new("table-8-fragments-2-threads", n), |b| {
        b.iter(|| {
            std::thread::scope(|s| {
                for _ in 0..2 {
                    let (t, next) = (t.clone(), next.clone());
                    s.spawn(move || {
                        let first = take(&next);
                        let mut wb = WriteBatch::new();
                        for i in first..first + BATCH as u64 {
                            wb.put(key(i), VALUE);
                        }
                        t.write_batch(&wb).unwrap();
                    });
                }
            })
        })
    });
    g.finish();
}

fn migrate(c: &mut Criterion) {
    let n = records();
    let moved = (n / 51) as u64;
    let mut g = c.benchmark_group("migrate");
    g.throughput(Throughput::Elements(moved));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    let d = tempfile::tempdir().unwrap();
    // Plain redb: move `moved` records from one file to another and back.
    let src = plain(&d.path().join("src.redb"), n);
    let dst = Database::create(d.path().join("dst.redb")).unwrap();
    let shift = |from: &Database, to: &Database, count: u64| {
        let mut left = count;
        while left > 0 {
            let keys: Vec<(Vec<u8>, Vec<u8>)> = {
                let txn = from.begin_read().unwrap();
                let t = txn.open_table(PLAIN).unwrap();
                t.iter()
                    .unwrap()
                    .take(left.min(4096) as usize)
                    .map(|r| {
                        let (k, v) = r.unwrap();
                        (k.value().to_vec(), v.value().to_vec())
                    })
                    .collect()
            };
            let txn = to.begin_write().unwrap();
            {
                let mut t = txn.open_table(PLAIN).unwrap();
                for (k, v) in &keys {
                    t.insert(k.as_slice(), v.as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
            let txn = from.begin_write().unwrap();
            {
                let mut t = txn.open_table(PLAIN).unwrap();
                for (k, _) in &keys {
                    t.remove(k.as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
            left -= keys.len() as u64;
        }
    };
    g.bench_function(BenchmarkId::new("plain-redb-move", n), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                shift(&src, &dst, moved);
                total += t0.elapsed();
                shift(&dst, &src, moved);
            }
            total
        })
    });
    let t = table(&d.path().join("t50"), "slots", 50, n);
    let mut ratio = (0, 0);
    g.bench_function(BenchmarkId::new("table-50-to-51-fragments", n), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                let r = t.add_fragment().unwrap();
                total += t0.elapsed();
                ratio = (r.keys_examined, r.keys_moved);
                t.remove_fragment(50).unwrap();
            }
            total
        })
    });
    eprintln!(
        "migrate: 50 -> 51 fragments, {n} records: keys examined {} / keys moved {} = {:.4}",
        ratio.0,
        ratio.1,
        ratio.0 as f64 / ratio.1.max(1) as f64
    );
    g.finish();
}

criterion_group!(benches, gets, puts, migrate);
criterion_main!(benches);
