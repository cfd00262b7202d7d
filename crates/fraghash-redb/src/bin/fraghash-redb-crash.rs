//! The child of the database's kill -9 test (`tests/crash.rs`): writes
//! batches to one table of a database until it is killed, and tells what it
//! wrote in an acknowledgement file.
//!
//! `fraghash-redb-crash PATH ACKS SEED MEMTABLE_BYTES`
//!
//! Before each batch it appends `I key value` (value `-` for a delete) for
//! every op, and once [`Db::write`] has returned, one `A` line; each line is
//! one `write(2)`, so what a kill leaves in the file is what the child had
//! done. Most batches are [`Durability::Logged`]; a few are `Immediate`,
//! and now and then the child syncs; a thread of its own flushes the
//! memtable every few milliseconds, so kills fall into every path.

use std::fs::OpenOptions as FileOptions;
use std::io::Write;

use fraghash_redb::db::{Db, Durability, Op, OpenOptions};

const KEYS: u64 = 400;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, acks, seed, memtable] = &args[..] else {
        eprintln!("usage: fraghash-redb-crash PATH ACKS SEED MEMTABLE_BYTES");
        std::process::exit(2);
    };
    let (Ok(seed), Ok(memtable_bytes)) = (seed.parse::<u64>(), memtable.parse::<usize>()) else {
        eprintln!("fraghash-redb-crash: SEED and MEMTABLE_BYTES are integers");
        std::process::exit(2);
    };
    let options = OpenOptions {
        memtable_bytes,
        ..OpenOptions::default()
    };
    let db = Db::open(path, &options).unwrap_or_else(|e| {
        eprintln!("fraghash-redb-crash: {e}");
        std::process::exit(1)
    });
    if !db.tables().unwrap().iter().any(|(n, _)| n == "t") {
        db.create_table("t", b"").unwrap();
    }
    let mut acks = FileOptions::new()
        .create(true)
        .append(true)
        .open(acks)
        .unwrap();
    println!("ready");
    std::thread::scope(|s| {
        s.spawn(|| loop {
            db.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(seed % 7));
        });
        write_until_killed(&db, &mut acks, seed);
    });
}

fn write_until_killed(db: &Db, acks: &mut std::fs::File, seed: u64) {
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for n in 0u64.. {
        let size = 1 + next() % 4;
        let mut batch: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for _ in 0..size {
            let key = (next() % KEYS).to_string().into_bytes();
            if batch.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let value = (next() % 6 != 0).then(|| {
                let pad = "x".repeat((next() % 300) as usize);
                format!("{seed}.{n}.{pad}").into_bytes()
            });
            batch.push((key, value));
        }
        let mut text = String::new();
        for (k, v) in &batch {
            let v = v.as_deref().map_or("-".into(), String::from_utf8_lossy);
            text.push_str(&format!("I {} {v}\n", String::from_utf8_lossy(k)));
        }
        acks.write_all(text.as_bytes()).unwrap();
        let ops: Vec<Op> = batch
            .iter()
            .map(|(key, v)| match v {
                Some(value) => Op::Put {
                    table: "t",
                    key,
                    value,
                },
                None => Op::Delete { table: "t", key },
            })
            .collect();
        let durability = if next() % 20 == 0 {
            Durability::Immediate
        } else {
            Durability::Logged
        };
        db.write(&ops, durability).unwrap();
        acks.write_all(b"A\n").unwrap();
        if next() % 50 == 0 {
            db.sync().unwrap();
        }
    }
}
