//! SIGKILL crash harness: a child writes while it adds, removes, splits and
//! rebalances; it is killed at random moments; the table is reopened and
//! checked: every acknowledged write is there with its latest value, no key
//! twice, `verify` clean.
//!
//! How many kills, over the four schemes:
//! - by default (the fast tier of a plain `cargo test`), 12: 3 per scheme;
//! - with `FRAGHASH_SLOW_TESTS=1`, 100, split by weight (slots, which has
//!   the most kinds of migration, gets twice the share of each other
//!   scheme: 40, 20, 20, 20);
//! - with `FRAGHASH_KILLS=n` (which wins over both), `n` split by weight:
//!   `FRAGHASH_KILLS=1000` for a long run.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{assert_sound, contents};
use fraghash_store::Table;

const BIN: &str = env!("CARGO_BIN_EXE_fraghash-store-torture");

/// What a key may hold: `None` = absent.
type Val = Option<String>;

/// Reads the ack log of one run and checks the table against the model.
fn check(dir: &Path, acks: &Path, model: &mut HashMap<String, Val>) -> Table {
    let t = Table::open(dir).unwrap_or_else(|e| panic!("reopen: {e}"));
    assert_sound(&t);
    let actual = contents(&t);
    let text = std::fs::read_to_string(acks).unwrap_or_default();
    // Per key: the latest acknowledged value, and an in-flight write after it.
    let mut last: HashMap<String, (Val, Option<Val>)> = HashMap::new();
    for line in text.lines() {
        let mut p = line.splitn(3, ' ');
        let (Some(tag), Some(k), Some(v)) = (p.next(), p.next(), p.next()) else {
            continue; // a line cut by the kill
        };
        let v: Val = (v != "-").then(|| v.to_string());
        let e = last
            .entry(k.to_string())
            .or_insert_with(|| (model.get(k).cloned().flatten(), None));
        match tag {
            "I" => e.1 = Some(v),
            "A" => *e = (v, None),
            _ => {}
        }
    }
    for (k, (acked, inflight)) in &last {
        let got: Val = actual
            .get(k.as_bytes())
            .map(|v| String::from_utf8(v.clone()).unwrap());
        let ok = got == *acked || inflight.as_ref().is_some_and(|i| *i == got);
        assert!(
            ok,
            "key {k}: table has {got:?}, acknowledged {acked:?}, in flight {inflight:?}"
        );
        model.insert(k.clone(), got);
    }
    for (k, v) in model.iter() {
        let got = actual
            .get(k.as_bytes())
            .map(|v| String::from_utf8(v.clone()).unwrap());
        assert_eq!(&got, v, "key {k} changed without a write");
    }
    assert_eq!(actual.len(), model.values().filter(|v| v.is_some()).count());
    std::fs::remove_file(acks).ok();
    t
}

fn run(scheme: &str, kills: u32, seed0: u64) -> (u32, u32) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t");
    let acks = d.path().join("acks");
    let mut model: HashMap<String, Val> = HashMap::new();
    let mut rng = seed0 | 1;
    let mut during_migration = 0;
    for i in 0..kills {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut child = Command::new(BIN)
            .args(["work", dir.to_str().unwrap(), acks.to_str().unwrap()])
            .arg((seed0 * 100_000 + u64::from(i)).to_string())
            .arg(scheme)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "child did not start (kill {i})");
        std::thread::sleep(Duration::from_millis(5 + rng % 150));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let status = child.wait().unwrap();
        assert!(status.code().is_none(), "child exited on its own: {status}");
        let manifest = std::fs::read(dir.join("MANIFEST")).unwrap();
        let t = check(&dir, &acks, &mut model);
        let journal = fraghash_store::__journal_present(&manifest);
        // The reopen reports what it finished exactly when there was a journal.
        assert_eq!(
            t.recovered_migration().is_some(),
            journal,
            "kill {i}: {:?}",
            t.recovered_migration()
        );
        if journal {
            during_migration += 1;
        }
        drop(t);
    }
    (kills, during_migration)
}

/// Kills per scheme in the fast tier.
const FAST_KILLS_EACH: u32 = 3;
/// Kills in all in the slow tier (`FRAGHASH_SLOW_TESTS=1`).
const SLOW_KILLS: u32 = 100;

/// The schemes and their weights in a split of a total.
const SCHEMES: [(&str, u32); 4] = [("slots", 4), ("ring", 2), ("linear", 2), ("jump", 2)];

/// Kills per scheme, as the module docs say.
fn kills_per_scheme() -> Vec<(&'static str, u32)> {
    let asked: Option<u32> = std::env::var("FRAGHASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok());
    let slow = std::env::var("FRAGHASH_SLOW_TESTS").is_ok_and(|v| v == "1");
    let total = match (asked, slow) {
        (Some(n), _) => n,
        (None, true) => SLOW_KILLS,
        (None, false) => return SCHEMES.iter().map(|s| (s.0, FAST_KILLS_EACH)).collect(),
    };
    let weight: u32 = SCHEMES.iter().map(|s| s.1).sum();
    SCHEMES
        .iter()
        .map(|&(s, w)| (s, (total * w).div_ceil(weight)))
        .collect()
}

#[test]
fn sigkill_during_writes_and_migrations() {
    let mut done = 0;
    let mut mid = 0;
    for (i, (s, n)) in kills_per_scheme().into_iter().enumerate() {
        let (k, m) = run(s, n, 7 + i as u64);
        eprintln!("{s}: {k} kills, {m} with a migration in progress, all recovered");
        done += k;
        mid += m;
    }
    eprintln!("total: {done} SIGKILLs, {mid} during a migration, every one recovered");
    assert!(mid > 0, "no kill landed during a migration");
}
