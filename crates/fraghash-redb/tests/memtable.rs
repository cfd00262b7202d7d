//! The memtable against a model: every read (`get`, `len`, chunks either
//! way from any start) must answer as a `BTreeMap` holding every batch
//! written so far, whatever mix of logged, deferred and synced batches,
//! clears, flushes and syncs came before, and while a flush runs beside
//! the writes on a thread of its own.

use std::collections::BTreeMap;

use fraghash_redb::db::{Db, Direction, Durability, Op, OpenOptions, Start};
use proptest::prelude::*;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Step {
    Put(u8, u8, Durability),
    Delete(u8, Durability),
    Clear,
    Flush,
    Sync,
}

fn key(k: u8) -> Vec<u8> {
    // Keys of one to three bytes, so that some are prefixes of others.
    vec![b'k'; 1 + (k % 3) as usize]
        .into_iter()
        .chain([k / 3])
        .collect()
}

fn step() -> impl Strategy<Value = Step> {
    let durability = prop_oneof![
        6 => Just(Durability::Logged),
        2 => Just(Durability::Deferred),
        1 => Just(Durability::Immediate),
    ];
    prop_oneof![
        10 => (0u8..60, any::<u8>(), durability.clone()).prop_map(|(k, v, d)| Step::Put(k, v, d)),
        5 => (0u8..60, durability).prop_map(|(k, d)| Step::Delete(k, d)),
        1 => Just(Step::Clear),
        3 => Just(Step::Flush),
        1 => Just(Step::Sync),
    ]
}

fn apply(db: &Db, model: &mut Model, step: &Step) {
    match *step {
        Step::Put(k, v, d) => {
            let (k, v) = (key(k), vec![v; 1 + v as usize % 5]);
            db.write(
                &[Op::Put {
                    table: "t",
                    key: &k,
                    value: &v,
                }],
                d,
            )
            .unwrap();
            model.insert(k, v);
        }
        Step::Delete(k, d) => {
            let k = key(k);
            db.write(
                &[Op::Delete {
                    table: "t",
                    key: &k,
                }],
                d,
            )
            .unwrap();
            model.remove(&k);
        }
        Step::Clear => {
            db.write(&[Op::Clear { table: "t" }], Durability::Logged)
                .unwrap();
            model.clear();
        }
        Step::Flush => {
            db.flush().unwrap();
        }
        Step::Sync => db.sync().unwrap(),
    }
}

/// Every read of table `t` against `model`.
fn check(db: &Db, model: &Model) {
    assert_eq!(db.len("t").unwrap(), model.len() as u64, "len");
    for k in 0..60 {
        let k = key(k);
        assert_eq!(
            db.get("t", &k).unwrap(),
            model.get(&k).cloned(),
            "get {k:?}"
        );
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for dir in [Direction::Forward, Direction::Backward] {
        // Walked in chunks of 3 from the edge.
        let mut got = Vec::new();
        let mut start: Option<Vec<u8>> = None;
        loop {
            let s = start.as_deref().map_or(Start::Edge, Start::After);
            let c = db.chunk("t", s, dir, 3).unwrap();
            got.extend(c.items.iter().cloned());
            if !c.more {
                break;
            }
            start = c.items.last().map(|(k, _)| k.clone());
        }
        let mut want = all.clone();
        if dir == Direction::Backward {
            want.reverse();
        }
        assert_eq!(got, want, "{dir:?} walk");
    }
    // Every key's neighbours.
    for k in 0..60 {
        let k = key(k);
        let next = model
            .range::<[u8], _>((
                std::ops::Bound::Excluded(k.as_slice()),
                std::ops::Bound::Unbounded,
            ))
            .next();
        assert_eq!(
            db.next("t", &k).unwrap(),
            next.map(|(a, b)| (a.clone(), b.clone())),
            "next {k:?}"
        );
        let prev = model
            .range::<[u8], _>((
                std::ops::Bound::Unbounded,
                std::ops::Bound::Excluded(k.as_slice()),
            ))
            .next_back();
        assert_eq!(
            db.prev("t", &k).unwrap(),
            prev.map(|(a, b)| (a.clone(), b.clone())),
            "prev {k:?}"
        );
    }
    let prefix = [b'k', b'k'];
    let c = db.prefix_chunk("t", &prefix, Start::Edge, 1000).unwrap();
    let want: Vec<_> = all
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .cloned()
        .collect();
    assert_eq!(c.items, want, "prefix");
}

fn open(dir: &tempfile::TempDir, memtable_bytes: usize) -> Db {
    let opts = OpenOptions {
        memtable_bytes,
        ..OpenOptions::default()
    };
    let db = Db::open(dir.path().join("m.redb"), &opts).unwrap();
    if db.tables().unwrap().is_empty() {
        db.create_table("t", b"").unwrap();
    }
    db
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Reads answer as the model after every step; a reopen without a
    /// close (the log replayed) keeps every batch but the deferred ones
    /// since the last synced commit, so it is checked after a sync only.
    #[test]
    fn reads_follow_the_model(steps in prop::collection::vec(step(), 1..120), small in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir, if small { 300 } else { 1 << 20 });
        let mut model = Model::new();
        for s in &steps {
            apply(&db, &mut model, s);
            check(&db, &model);
        }
        db.sync().unwrap();
        drop(db);
        let db = open(&dir, 1 << 20);
        check(&db, &model);
    }
}

/// A flush running beside the writes: reads stay right through every
/// switch from the layers to redb.
#[test]
fn reads_follow_the_model_while_a_thread_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 2048);
    let mut model = Model::new();
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Stops the flusher however the writes end (a failed check included,
    /// which would otherwise wait for it forever).
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let flushes = std::thread::scope(|s| {
        let flusher = s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if db.flush().unwrap() {
                    n += 1;
                }
            }
            n
        });
        let stopper = Stop(&stop);
        for i in 0..3000u32 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let k = (rng % 60) as u8;
            let step = match rng % 40 {
                0 => Step::Sync,
                1..=12 => Step::Delete(k, Durability::Logged),
                _ => Step::Put(k, (rng >> 8) as u8, Durability::Logged),
            };
            apply(&db, &mut model, &step);
            if i % 7 == 0 {
                check(&db, &model);
            }
        }
        drop(stopper);
        flusher.join().unwrap()
    });
    assert!(flushes > 10, "only {flushes} flushes ran beside the writes");
    check(&db, &model);
}
