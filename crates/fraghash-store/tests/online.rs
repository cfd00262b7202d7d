//! Reads and writes from other threads during adds, removes, splits and
//! rebalances: a present key is never "not found" and a get always returns
//! at least the latest acknowledged value.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{assert_sound, contents};
use fraghash_store::{Table, TableOptions, WriteBatch};

const KEYS: usize = 600;

fn online(scheme: &str) {
    let d = tempfile::tempdir().unwrap();
    let t = Table::create(
        d.path(),
        &TableOptions {
            scheme: scheme.into(),
            fragments: 2,
            dirs: vec![],
        },
    )
    .unwrap();
    t.set_batch_size(20);
    // Key i holds "i:version"; acked[i] is the latest acknowledged version.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS * 2).map(|_| AtomicU64::new(0)).collect());
    let mut b = WriteBatch::new();
    for i in 0..KEYS * 2 {
        b.put(format!("key{i}"), format!("{i}:1"));
        acked[i].store(1, Ordering::SeqCst);
    }
    t.write_batch(&b).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for w in 0..2usize {
        let (t, acked, stop) = (t.clone(), acked.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut n = 0u64;
            let mut x = w as u64 + 1;
            while !stop.load(Ordering::Relaxed) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let i = w * KEYS + (x >> 33) as usize % KEYS;
                let v = acked[i].load(Ordering::SeqCst) + 1;
                t.put(format!("key{i}").as_bytes(), format!("{i}:{v}").as_bytes())
                    .unwrap();
                acked[i].store(v, Ordering::SeqCst);
                n += 1;
            }
            n
        }));
    }
    for r in 0..2u64 {
        let (t, acked, stop) = (t.clone(), acked.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut n = 0u64;
            let mut x = r + 99;
            while !stop.load(Ordering::Relaxed) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let i = (x >> 33) as usize % (2 * KEYS);
                let want = acked[i].load(Ordering::SeqCst);
                let got = t.get(format!("key{i}").as_bytes()).unwrap();
                let got = got.unwrap_or_else(|| panic!("key{i} not found during a migration"));
                let s = String::from_utf8(got).unwrap();
                let ver: u64 = s.split(':').nth(1).unwrap().parse().unwrap();
                assert!(
                    ver >= want,
                    "key{i}: read version {ver}, acknowledged {want}"
                );
                n += 1;
            }
            n
        }));
    }
    let any = scheme == "slots" || scheme == "ring";
    let mut migrations = 0;
    for round in 0..3u32 {
        t.add_fragment().unwrap();
        t.add_fragment().unwrap();
        migrations += 2;
        if scheme == "slots" {
            t.split_fragment(round % t.fragments()).unwrap();
            t.rebalance().unwrap();
            migrations += 2;
        }
        let n = t.fragments();
        let which = if any { round % n } else { n - 1 };
        t.remove_fragment(which).unwrap();
        t.remove_fragment(if any { 0 } else { n - 2 }).unwrap();
        migrations += 2;
    }
    stop.store(true, Ordering::Relaxed);
    let counts: Vec<u64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    eprintln!(
        "{scheme}: {migrations} migrations, writes {:?}, reads {:?}",
        &counts[..2],
        &counts[2..]
    );
    assert_sound(&t);
    let all = contents(&t);
    assert_eq!(all.len(), 2 * KEYS);
    for i in 0..2 * KEYS {
        let want = format!("{i}:{}", acked[i].load(Ordering::SeqCst));
        assert_eq!(all[format!("key{i}").as_bytes()], want.as_bytes());
    }
}

#[test]
fn online_slots() {
    online("slots");
}

#[test]
fn online_ring() {
    online("ring");
}

#[test]
fn online_linear() {
    online("linear");
}

#[test]
fn online_jump() {
    online("jump");
}
