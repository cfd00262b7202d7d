//! The database layer: tables, batches, reads and chunks.

use fraghash_redb::db::{Chunk, Db, DbError, Direction, Durability, Op, OpenOptions, Start};

fn fresh() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("test.redb"), &OpenOptions::default()).unwrap();
    (dir, db)
}

fn put<'a>(table: &'a str, key: &'a [u8], value: &'a [u8]) -> Op<'a> {
    Op::Put { table, key, value }
}

fn keys(c: &Chunk) -> Vec<u8> {
    c.items.iter().map(|(k, _)| k[0]).collect()
}

#[test]
fn tables_are_created_listed_and_deleted() {
    let (_dir, db) = fresh();
    db.create_table("b", b"props of b").unwrap();
    db.create_table("a", b"").unwrap();
    assert!(matches!(
        db.create_table("a", b"again"),
        Err(DbError::TableExists { name }) if name == "a"
    ));
    assert_eq!(
        db.tables().unwrap(),
        vec![("a".into(), vec![]), ("b".into(), b"props of b".to_vec())]
    );
    db.write(&[put("a", b"k", b"v")], Durability::Immediate)
        .unwrap();
    db.delete_table("a").unwrap();
    assert!(matches!(
        db.get("a", b"k"),
        Err(DbError::NoSuchTable { .. })
    ));
    // Nor can a write bring a deleted table back, in any durability.
    for d in [
        Durability::Logged,
        Durability::Deferred,
        Durability::Immediate,
    ] {
        assert!(matches!(
            db.write(&[put("a", b"k", b"v")], d),
            Err(DbError::NoSuchTable { .. })
        ));
    }
    assert!(matches!(
        db.get("a", b"k"),
        Err(DbError::NoSuchTable { .. })
    ));
    assert!(matches!(
        db.delete_table("a"),
        Err(DbError::NoSuchTable { .. })
    ));
    // A new table of the same name starts empty.
    db.create_table("a", b"").unwrap();
    assert_eq!(db.len("a").unwrap(), 0);
    assert!(matches!(
        db.create_table("", b""),
        Err(DbError::BadTableName { .. })
    ));
    assert!(matches!(
        db.create_table(&"x".repeat(2000), b""),
        Err(DbError::BadTableName { .. })
    ));
}

#[test]
fn a_batch_spans_tables_and_is_all_or_nothing() {
    let (_dir, db) = fresh();
    db.create_table("a", b"").unwrap();
    db.create_table("b", b"").unwrap();
    db.write(
        &[
            put("a", b"1", b"one"),
            put("b", b"1", b"uno"),
            put("a", b"2", b"two"),
            Op::Delete {
                table: "a",
                key: b"1",
            },
            put("a", b"3", b"three"),
            put("a", b"3", b"THREE"),
        ],
        Durability::Immediate,
    )
    .unwrap();
    assert_eq!(db.get("a", b"1").unwrap(), None);
    assert_eq!(db.get("a", b"3").unwrap(), Some(b"THREE".to_vec()));
    assert_eq!(db.get("b", b"1").unwrap(), Some(b"uno".to_vec()));
    assert_eq!(db.len("a").unwrap(), 2);
    // A batch naming a missing table changes nothing, even before it.
    let failed = db.write(
        &[put("a", b"4", b"four"), put("nope", b"1", b"x")],
        Durability::Immediate,
    );
    assert!(matches!(failed, Err(DbError::NoSuchTable { name }) if name == "nope"));
    assert_eq!(db.get("a", b"4").unwrap(), None);
    // Clear, then more ops on the same table in the same batch.
    db.write(
        &[
            put("b", b"2", b"dos"),
            Op::Clear { table: "b" },
            put("b", b"9", b"nueve"),
        ],
        Durability::Immediate,
    )
    .unwrap();
    assert_eq!(db.len("b").unwrap(), 1);
    assert_eq!(db.get("b", b"9").unwrap(), Some(b"nueve".to_vec()));
}

#[test]
fn chunks_go_both_ways_from_any_bound() {
    let (_dir, db) = fresh();
    db.create_table("t", b"").unwrap();
    let ks: Vec<[u8; 1]> = (0..10u8).map(|i| [i * 10]).collect();
    let ops: Vec<Op> = ks.iter().map(|k| put("t", k, b"v")).collect();
    db.write(&ops, Durability::Immediate).unwrap();

    let c = db.chunk("t", Start::Edge, Direction::Forward, 4).unwrap();
    assert_eq!((keys(&c), c.more), (vec![0, 10, 20, 30], true));
    let c = db
        .chunk("t", Start::After(&[30]), Direction::Forward, 4)
        .unwrap();
    assert_eq!(keys(&c), vec![40, 50, 60, 70]);
    let c = db
        .chunk("t", Start::At(&[80]), Direction::Forward, 4)
        .unwrap();
    assert_eq!((keys(&c), c.more), (vec![80, 90], false));
    let c = db
        .chunk("t", Start::At(&[81]), Direction::Forward, 2)
        .unwrap();
    assert_eq!((keys(&c), c.more), (vec![90], false));
    // Exactly `max` left: `more` is false.
    let c = db
        .chunk("t", Start::After(&[70]), Direction::Forward, 2)
        .unwrap();
    assert_eq!((keys(&c), c.more), (vec![80, 90], false));

    let c = db.chunk("t", Start::Edge, Direction::Backward, 3).unwrap();
    assert_eq!((keys(&c), c.more), (vec![90, 80, 70], true));
    let c = db
        .chunk("t", Start::After(&[20]), Direction::Backward, 5)
        .unwrap();
    assert_eq!((keys(&c), c.more), (vec![10, 0], false));
    let c = db
        .chunk("t", Start::At(&[20]), Direction::Backward, 2)
        .unwrap();
    assert_eq!((keys(&c), c.more), (vec![20, 10], true));
    // `max` 0 still gives one.
    let c = db.chunk("t", Start::Edge, Direction::Forward, 0).unwrap();
    assert_eq!(keys(&c), vec![0]);

    // Walking the whole table in chunks, both ways.
    for dir in [Direction::Forward, Direction::Backward] {
        let mut seen = Vec::new();
        let mut last: Option<Vec<u8>> = None;
        loop {
            let start = last.as_deref().map_or(Start::Edge, Start::After);
            let c = db.chunk("t", start, dir, 3).unwrap();
            seen.extend(keys(&c));
            last = c.items.last().map(|(k, _)| k.clone());
            if !c.more {
                break;
            }
        }
        let mut want: Vec<u8> = (0..10).map(|i| i * 10).collect();
        if dir == Direction::Backward {
            want.reverse();
        }
        assert_eq!(seen, want);
    }

    let k = |r: Option<(Vec<u8>, Vec<u8>)>| r.map(|(k, _)| k[0]);
    assert_eq!(k(db.first("t").unwrap()), Some(0));
    assert_eq!(k(db.last("t").unwrap()), Some(90));
    assert_eq!(k(db.next("t", &[40]).unwrap()), Some(50));
    assert_eq!(k(db.next("t", &[41]).unwrap()), Some(50));
    assert_eq!(k(db.next("t", &[90]).unwrap()), None);
    assert_eq!(k(db.prev("t", &[40]).unwrap()), Some(30));
    assert_eq!(k(db.prev("t", &[39]).unwrap()), Some(30));
    assert_eq!(k(db.prev("t", &[0]).unwrap()), None);
    db.create_table("empty", b"").unwrap();
    assert_eq!(db.first("empty").unwrap(), None);
    assert_eq!(db.last("empty").unwrap(), None);
}

#[test]
fn data_survives_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.redb");
    let db = Db::open(&path, &OpenOptions::default()).unwrap();
    db.create_table("t", b"p").unwrap();
    db.write(&[put("t", b"a", b"1")], Durability::Deferred)
        .unwrap();
    // A deferred batch is visible at once.
    assert_eq!(db.get("t", b"a").unwrap(), Some(b"1".to_vec()));
    db.sync().unwrap();
    db.close().unwrap();
    let opts = OpenOptions {
        create: false,
        verify: true,
        ..OpenOptions::default()
    };
    let db = Db::open(&path, &opts).unwrap();
    assert_eq!(db.tables().unwrap(), vec![("t".into(), b"p".to_vec())]);
    assert_eq!(db.get("t", b"a").unwrap(), Some(b"1".to_vec()));
    // The reopened database knows its tables for writes too.
    db.write(&[put("t", b"b", b"2")], Durability::Logged)
        .unwrap();
    assert_eq!(db.get("t", b"b").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn logged_batches_fill_the_memtable_and_the_log_until_a_flush_empties_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.redb");
    let opts = OpenOptions {
        memtable_bytes: 400,
        ..OpenOptions::default()
    };
    let db = Db::open(&path, &opts).unwrap();
    db.create_table("t", b"").unwrap();
    assert_eq!(db.log_bytes(), 0);
    assert!(!db.flush().unwrap(), "nothing to flush");
    db.write(&[put("t", b"a", b"1")], Durability::Logged)
        .unwrap();
    let one = db.log_bytes();
    assert!(one > 0);
    assert_eq!(db.get("t", b"a").unwrap(), Some(b"1".to_vec()));
    db.write(&[put("t", b"b", b"2")], Durability::Logged)
        .unwrap();
    assert_eq!(db.log_bytes(), 2 * one);
    assert!(!db.wants_flush());
    // Past the memtable's size, a flush is wanted; it commits the records
    // to redb and empties the log.
    let big = [b'x'; 400];
    db.write(&[put("t", b"c", &big)], Durability::Logged)
        .unwrap();
    assert!(db.wants_flush());
    assert!(db.flush().unwrap());
    assert_eq!(db.log_bytes(), 0);
    assert!(!db.wants_flush());
    assert_eq!(db.get("t", b"c").unwrap(), Some(big.to_vec()));
    assert_eq!(db.len("t").unwrap(), 3);
    // Past four times its size (four changes of 465 bytes here: 64 for
    // the entry, a 1-byte key, a 400-byte value), a batch flushes first.
    for (i, k) in [b"d", b"e", b"f", b"g", b"h"].iter().enumerate() {
        db.write(&[put("t", *k, &big)], Durability::Logged).unwrap();
        assert_eq!(db.len("t").unwrap(), 4 + i as u64);
    }
    assert_eq!(
        db.log_bytes(),
        one - 1 + 400,
        "the fifth batch flushed the four before it"
    );
    db.sync().unwrap();
    assert_eq!(db.log_bytes(), 0);
    db.write(&[put("t", b"i", b"5")], Durability::Logged)
        .unwrap();
    // A logged batch naming a missing table fails and is not logged.
    assert!(matches!(
        db.write(&[put("nope", b"k", b"v")], Durability::Logged),
        Err(DbError::NoSuchTable { .. })
    ));
    assert_eq!(db.log_bytes(), one);
    db.close().unwrap();
    for log in ["l.redb.log", "l.redb.log2"] {
        assert_eq!(
            std::fs::metadata(dir.path().join(log)).unwrap().len(),
            8,
            "close empties {log}"
        );
    }
    let db = Db::open(&path, &opts).unwrap();
    assert_eq!(db.len("t").unwrap(), 9);
}

#[test]
fn a_log_left_beside_a_new_database_is_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.redb");
    std::fs::write(dir.path().join("n.redb.log"), b"anything at all").unwrap();
    let db = Db::open(&path, &OpenOptions::default()).unwrap();
    assert!(db.tables().unwrap().is_empty());
    assert_eq!(db.log_bytes(), 0);
}

/// A synced commit records which log records it holds, so that a log a
/// kill left between that commit and the log's emptying is not replayed
/// over it: neither a logged value a synced write replaced, nor a logged
/// write into a table deleted since.
#[test]
fn a_log_kept_past_a_synced_commit_is_not_replayed() {
    type Synced = fn(&Db);
    let cases: [(&str, Synced); 2] = [
        ("a synced write", |db| {
            db.write(&[put("t", b"k", b"new")], Durability::Immediate)
                .unwrap()
        }),
        ("a table deleted", |db| db.delete_table("t").unwrap()),
    ];
    for (what, synced) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        let log = dir.path().join("s.redb.log");
        let db = Db::open(&path, &OpenOptions::default()).unwrap();
        db.create_table("t", b"").unwrap();
        db.write(&[put("t", b"k", b"old")], Durability::Logged)
            .unwrap();
        let kept = std::fs::read(&log).unwrap();
        synced(&db);
        drop(db);
        // As if the process died after the synced commit, before the log
        // was emptied.
        std::fs::write(&log, &kept).unwrap();
        let db = Db::open(&path, &OpenOptions::default())
            .unwrap_or_else(|e| panic!("{what}: reopening failed: {e}"));
        let want = if what == "a synced write" {
            Some(b"new".to_vec())
        } else {
            None
        };
        assert_eq!(db.get("t", b"k").ok().flatten(), want, "{what}");
    }
}

/// Reads keep the last committed state's tables open between commits; a
/// read in another thread that begins after a write returned must still
/// see that write, whichever durability it had, while other threads read
/// all along (so that the open state is being used when the commit lands).
#[test]
fn a_read_begun_after_a_write_returned_sees_it() {
    let (_dir, db) = fresh();
    db.create_table("t", b"").unwrap();
    let db = std::sync::Arc::new(db);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    db.get("t", b"k").unwrap();
                }
            })
        })
        .collect();
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    let checker = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in rx {
                let seen = db
                    .get("t", b"k")
                    .unwrap()
                    .expect("written before the message");
                assert!(
                    u32::from_le_bytes(seen.try_into().unwrap()) >= i,
                    "write {i} unseen"
                );
            }
        })
    };
    for i in 0..2_000u32 {
        let durability = [Durability::Logged, Durability::Deferred][i as usize % 2];
        db.write(&[put("t", b"k", &i.to_le_bytes())], durability)
            .unwrap();
        tx.send(i).unwrap();
    }
    drop(tx);
    checker.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.into_iter().for_each(|h| h.join().unwrap());
}

#[test]
fn a_close_gives_back_the_room_random_overwrites_left() {
    let (_dir, db) = fresh();
    let path = db.path().to_path_buf();
    db.create_table("t", b"").unwrap();
    let value = vec![7u8; 100];
    let key = |i: u64| i.to_be_bytes();
    // 20,000 records, then each overwritten at random in small flushed
    // batches: redb reuses freed pages but keeps the file's length.
    for chunk in (0..20_000u64).collect::<Vec<_>>().chunks(1000) {
        let ks: Vec<_> = chunk.iter().map(|&i| key(i)).collect();
        let ops: Vec<Op> = ks.iter().map(|k| put("t", k, &value)).collect();
        db.write(&ops, Durability::Immediate).unwrap();
    }
    let mut x = 88172645463325252u64;
    for _ in 0..200 {
        let ks: Vec<_> = (0..100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                key(x % 20_000)
            })
            .collect();
        let ops: Vec<Op> = ks.iter().map(|k| put("t", k, b"other")).collect();
        db.write(&ops, Durability::Immediate).unwrap();
    }
    let before = std::fs::metadata(&path).unwrap().len();
    db.close().unwrap();
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(
        after * 4 <= before * 3,
        "the file kept {after} of {before} bytes"
    );
    let db = Db::open(&path, &OpenOptions::default()).unwrap();
    assert_eq!(db.len("t").unwrap(), 20_000);
    assert_eq!(
        db.get("t", &key(19_999))
            .unwrap()
            .map(|v| v.len() == 100 || v == b"other"),
        Some(true)
    );
    db.close().unwrap();
}

/// The database at `path` opened again after its log files were lost (as
/// an unsynced log may be by a power cut): only what a synced commit holds.
fn reopen_without_log(path: &std::path::Path) -> Db {
    for suffix in ["log", "log2"] {
        let log = path.with_extension(format!("redb.{suffix}"));
        match std::fs::remove_file(&log) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{log:?}: {e}"),
            _ => {}
        }
    }
    let opts = OpenOptions {
        create: false,
        repair_log: true,
        ..OpenOptions::default()
    };
    Db::open(path, &opts).unwrap()
}

#[test]
fn sync_written_makes_earlier_batches_durable_and_leaves_later_ones_logged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let opts = OpenOptions {
        memtable_bytes: 1 << 20,
        ..OpenOptions::default()
    };
    let db = Db::open(&path, &opts).unwrap();
    db.create_table("t", b"").unwrap();
    db.write(&[put("t", b"a", b"1")], Durability::Logged)
        .unwrap();
    db.write(&[put("t", b"b", b"2")], Durability::Deferred)
        .unwrap();
    // A layer frozen by a flush of its own, then more batches.
    assert!(db.flush().unwrap());
    db.write(&[put("t", b"c", b"3")], Durability::Logged)
        .unwrap();
    db.sync_written().unwrap();
    assert_eq!(db.log_bytes(), 0, "every batch so far is committed");
    db.write(&[put("t", b"d", b"4")], Durability::Logged)
        .unwrap();
    assert!(db.log_bytes() > 0, "a later batch stays in the log");
    db.sync_written().unwrap();
    db.sync_written().unwrap();
    assert_eq!(db.log_bytes(), 0);
    db.write(&[put("t", b"e", b"5")], Durability::Logged)
        .unwrap();
    drop(db);
    let db = reopen_without_log(&path);
    let got: Vec<_> = [b"a", b"b", b"c", b"d", b"e"]
        .iter()
        .map(|k| db.get("t", *k).unwrap())
        .collect();
    // `e`, written after the last sync_written, was in the log only.
    assert_eq!(
        got,
        vec![
            Some(b"1".to_vec()),
            Some(b"2".to_vec()),
            Some(b"3".to_vec()),
            Some(b"4".to_vec()),
            None
        ]
    );
}

#[test]
fn bulk_batches_keep_the_memtable_under_twice_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.redb");
    // 300-byte values: about 365 bytes of memtable and 330 of log each.
    let opts = OpenOptions {
        memtable_bytes: 400,
        ..OpenOptions::default()
    };
    let value = [b'v'; 300];
    let keys: Vec<[u8; 2]> = (0..40u8).map(|i| [b'k', i]).collect();
    let most_logged = |bulk: bool| {
        let db = Db::open(&path, &opts).unwrap();
        db.create_table("t", b"").ok();
        let mut most = 0;
        for key in &keys {
            let op = [put("t", key, &value)];
            if bulk {
                db.write_bulk(&op).unwrap();
            } else {
                db.write(&op, Durability::Logged).unwrap();
            }
            most = most.max(db.log_bytes());
        }
        (db, most)
    };
    // A logged batch waits only at four times the memtable's size: the log
    // holds up to four batches.
    let (db, logged) = most_logged(false);
    assert!(logged > 1300, "{logged}");
    db.close().unwrap();
    // A bulk batch starts below twice the size (two batches, 730 bytes):
    // at most three batches' records are in the log.
    let (db, bulk) = most_logged(true);
    assert!(bulk <= 3 * 330, "{bulk}");
    for key in &keys {
        assert_eq!(db.get("t", key).unwrap(), Some(value.to_vec()));
    }
    // Logged: kept through a drop without a sync.
    drop(db);
    let db = Db::open(&path, &opts).unwrap();
    assert_eq!(db.len("t").unwrap(), keys.len() as u64);
}

#[test]
fn batches_written_by_their_callers_say_when_a_flush_is_due_and_never_wait() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.redb");
    let opts = OpenOptions {
        memtable_bytes: 400,
        ..OpenOptions::default()
    };
    let db = Db::open(&path, &opts).unwrap();
    db.create_table("t", b"").unwrap();
    // The first batch into an empty memtable needs a flush armed; the
    // next rides on it; one past the memtable's size needs the flush now.
    assert!(db.write_logged(&[put("t", b"a", b"1")]).unwrap());
    assert_eq!(
        db.try_write_logged(&[put("t", b"b", b"2")]).unwrap(),
        Some(false)
    );
    let big = [b'x'; 400];
    assert_eq!(
        db.try_write_logged(&[put("t", b"c", &big)]).unwrap(),
        Some(true)
    );
    assert!(db.flush().unwrap());
    assert!(db.write_logged(&[put("t", b"d", b"3")]).unwrap());
    // A batch that would wait does not start: a clear (a synced commit),
    // and any batch once the memtable holds four times its size.
    assert_eq!(
        db.try_write_logged(&[Op::Clear { table: "t" }]).unwrap(),
        None
    );
    let keys: Vec<[u8; 2]> = (0..4u8).map(|i| [b'e', i]).collect();
    for key in &keys {
        assert_eq!(
            db.try_write_logged(&[put("t", key, &big)]).unwrap(),
            Some(true)
        );
    }
    assert_eq!(db.try_write_logged(&[put("t", b"f", b"4")]).unwrap(), None);
    assert_eq!(db.get("t", b"f").unwrap(), None, "nothing written");
    assert!(matches!(
        db.try_write_logged(&[put("nope", b"k", b"v")]),
        Ok(None) | Err(DbError::NoSuchTable { .. })
    ));
    assert!(db.flush().unwrap());
    assert_eq!(
        db.try_write_logged(&[put("t", b"f", b"4")]).unwrap(),
        Some(true)
    );
    assert!(matches!(
        db.try_write_logged(&[put("nope", b"k", b"v")]),
        Err(DbError::NoSuchTable { .. })
    ));
    // Logged: kept through a drop without a sync.
    drop(db);
    let db = Db::open(&path, &opts).unwrap();
    assert_eq!(db.len("t").unwrap(), 9);
    assert_eq!(db.get("t", b"f").unwrap(), Some(b"4".to_vec()));
}

#[test]
fn a_table_filled_aside_replaces_another_in_one_synced_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.redb");
    let db = Db::open(&path, &OpenOptions::default()).unwrap();
    db.create_table("t", b"props of t").unwrap();
    db.create_table("t/aside", b"props of the copy").unwrap();
    db.write(
        &[put("t", b"a", b"old"), put("t", b"b", b"old")],
        Durability::Immediate,
    )
    .unwrap();
    // The copy is filled in logged batches, one of them flushed, one not.
    db.write_bulk(&[put("t/aside", b"b", b"new"), put("t/aside", b"c", b"new")])
        .unwrap();
    db.flush().unwrap();
    db.write_bulk(&[put("t/aside", b"d", b"new")]).unwrap();
    // A write to the replaced table still in the memtable goes with it.
    db.write(&[put("t", b"e", b"old")], Durability::Logged)
        .unwrap();
    for (name, from) in [("t", "t"), ("none", "t/aside"), ("t", "none")] {
        assert!(
            db.replace_table(name, from).is_err(),
            "{name} replaced by {from}"
        );
    }
    assert_eq!(db.len("t").unwrap(), 3);
    db.replace_table("t", "t/aside").unwrap();
    let check = |db: &Db| {
        assert_eq!(
            db.tables().unwrap(),
            vec![("t".into(), b"props of t".to_vec())]
        );
        assert_eq!(db.len("t").unwrap(), 3);
        let all = db.chunk("t", Start::Edge, Direction::Forward, 10).unwrap();
        assert_eq!(
            all.items,
            [b"b", b"c", b"d"].map(|k| (k.to_vec(), b"new".to_vec()))
        );
        assert!(matches!(
            db.len("t/aside"),
            Err(DbError::NoSuchTable { .. })
        ));
    };
    check(&db);
    // Synced: there without the log.
    drop(db);
    let db = reopen_without_log(&path);
    check(&db);
    // Writes go on to the table, and the name set aside is free again.
    db.write(&[put("t", b"f", b"later")], Durability::Logged)
        .unwrap();
    db.create_table("t/aside", b"").unwrap();
    assert_eq!(db.len("t").unwrap(), 4);
}
