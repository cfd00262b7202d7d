//! Kill -9 of a process writing to a database: a child
//! (`fraghash-redb-crash`) writes batches, mostly
//! [`Durability::Logged`], until it is killed at a random moment; the
//! database is reopened (replaying its log) and checked against what the
//! child acknowledged: every key holds the value of its last acknowledged
//! write, except the keys of the one batch in flight at the kill, which
//! hold all of that batch or none of it; no other key changed.
//!
//! The child flushes its memtable from a thread of its own, as the Mnesia
//! backend does, so that kills fall into flushes that run beside the
//! writes; some runs give the memtable a small size (4 KiB, against
//! 1 MiB), so that batches also wait for flushes or flush themselves. The
//! reopen itself replays the log, and a later kill often falls into it
//! too.
//!
//! Kills: 20 by default, 100 with `FRAGHASH_SLOW_TESTS=1`,
//! `FRAGHASH_REDB_KILLS=n` for any other count.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use fraghash_redb::db::{Db, Direction, OpenOptions, Start};

const BIN: &str = env!("CARGO_BIN_EXE_fraghash-redb-crash");

type Val = Option<Vec<u8>>;

fn contents(db: &Db) -> HashMap<Vec<u8>, Vec<u8>> {
    let c = db
        .chunk("t", Start::Edge, Direction::Forward, 1 << 20)
        .unwrap();
    assert!(!c.more);
    c.items.into_iter().collect()
}

/// The acknowledged state (`model` updated with every acknowledged batch)
/// and the batch in flight at the kill.
fn read_acks(acks: &Path, model: &mut HashMap<Vec<u8>, Val>) -> Vec<(Vec<u8>, Val)> {
    let text = std::fs::read_to_string(acks).unwrap_or_default();
    let mut pending = Vec::new();
    for line in text.lines() {
        if line == "A" {
            for (k, v) in pending.drain(..) {
                model.insert(k, v);
            }
            continue;
        }
        let mut p = line.splitn(3, ' ');
        let (Some("I"), Some(k), Some(v)) = (p.next(), p.next(), p.next()) else {
            panic!("acknowledgement line {line:?}");
        };
        let v = (v != "-").then(|| v.as_bytes().to_vec());
        pending.push((k.as_bytes().to_vec(), v));
    }
    // Absent when the kill fell before the first batch.
    let _ = std::fs::remove_file(acks);
    pending
}

fn check(path: &Path, acks: &Path, model: &mut HashMap<Vec<u8>, Val>, kill: u32) -> bool {
    let db = Db::open(path, &OpenOptions::default())
        .unwrap_or_else(|e| panic!("kill {kill}: reopen: {e}"));
    let got = contents(&db);
    let before = model.clone();
    let inflight = read_acks(acks, model);
    let holds = |k: &[u8]| got.get(k).cloned();
    let applied = inflight.iter().all(|(k, v)| holds(k) == *v);
    let not_applied = inflight
        .iter()
        .all(|(k, _)| holds(k) == model.get(k).cloned().flatten());
    assert!(
        applied || not_applied,
        "kill {kill}: the batch in flight {:?} is in part in the database",
        inflight
            .iter()
            .map(|(k, v)| (String::from_utf8_lossy(k), holds(k) == *v))
            .collect::<Vec<_>>()
    );
    if applied {
        for (k, v) in &inflight {
            model.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in model.iter() {
        assert_eq!(
            holds(k),
            *v,
            "kill {kill}: key {} holds another value than its last acknowledged one \
             (it held {:?} before this run)",
            String::from_utf8_lossy(k),
            before.get(k).map(|v| v.as_ref().map(|b| b.len()))
        );
    }
    assert_eq!(
        got.len(),
        model.values().filter(|v| v.is_some()).count(),
        "kill {kill}: keys nobody wrote"
    );
    db.close().unwrap();
    !inflight.is_empty() && applied
}

fn kills() -> u32 {
    if let Some(n) = std::env::var("FRAGHASH_REDB_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    match std::env::var("FRAGHASH_SLOW_TESTS") {
        Ok(v) if v == "1" => 100,
        _ => 20,
    }
}

#[test]
fn every_acknowledged_batch_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.redb");
    let acks = dir.path().join("acks");
    let mut model = HashMap::new();
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let kills = kills();
    let mut acked_batches = 0;
    for kill in 0..kills {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let memtable = if rng % 3 == 0 { 4096 } else { 1 << 20 };
        let mut child = Command::new(BIN)
            .arg(&path)
            .arg(&acks)
            .arg((rng % 1_000_000).to_string())
            .arg(memtable.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // Every other kill falls at a random moment of the child's start
        // (the reopen's replay); the others once it writes.
        if kill % 2 == 0 {
            out.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "ready", "kill {kill}: the child did not start");
        }
        std::thread::sleep(Duration::from_micros(rng % 60_000));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(
            status.code().is_none(),
            "kill {kill}: the child exited: {status}"
        );
        let text = std::fs::read_to_string(&acks).unwrap_or_default();
        acked_batches += text.lines().filter(|l| *l == "A").count();
        check(&path, &acks, &mut model, kill);
    }
    // The kills fell among writes, not only before the first one.
    assert!(
        acked_batches > kills as usize,
        "only {acked_batches} batches acknowledged"
    );
    eprintln!("{kills} kills, {acked_batches} acknowledged batches checked");
}
