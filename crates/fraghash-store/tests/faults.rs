//! Bad input and faults: each a typed error with a one-line message.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{assert_sound, contents, filled};
use fraghash_store::{Error, LockHolder, Table, TableOptions};

const BIN: &str = env!("CARGO_BIN_EXE_fraghash-store-torture");

fn one_line(e: &Error) -> String {
    let s = e.to_string();
    assert!(!s.contains('\n'), "message is not one line: {s}");
    eprintln!("{s}");
    s
}

#[test]
fn second_open_is_table_locked() {
    let d = tempfile::tempdir().unwrap();
    let t = filled(d.path(), "slots", 2, 10);
    let e = Table::open(d.path()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::TableLocked {
                holder: LockHolder::ThisProcess,
                ..
            }
        ),
        "{e}"
    );
    assert!(!one_line(&e).contains("another process"), "{e}");
    drop(t);
    // Another process.
    let mut child = Command::new(BIN)
        .args(["hold", d.path().to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "open");
    let e = Table::open(d.path()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::TableLocked {
                holder: LockHolder::OtherProcess,
                ..
            }
        ),
        "{e}"
    );
    let e2 = Table::create(d.path(), &TableOptions::default()).unwrap_err();
    assert!(matches!(e2, Error::TableLocked { .. }), "{e2}");
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Table::open(d.path()).unwrap();
    assert_eq!(t.len(), 10);
}

#[test]
fn create_over_a_table_and_open_nothing() {
    let d = tempfile::tempdir().unwrap();
    drop(filled(d.path(), "slots", 2, 1));
    let e = Table::create(d.path(), &TableOptions::default()).unwrap_err();
    assert!(matches!(e, Error::TableExists { .. }), "{e}");
    one_line(&e);
    let e = Table::open(d.path().join("nowhere")).unwrap_err();
    assert!(matches!(e, Error::NotATable { .. }), "{e}");
    one_line(&e);
    let empty = tempfile::tempdir().unwrap();
    let e = Table::open(empty.path()).unwrap_err();
    assert!(matches!(e, Error::NotATable { .. }), "{e}");
}

#[test]
fn create_needs_a_new_or_empty_dir_and_leaves_nothing_when_it_fails() {
    let d = tempfile::tempdir().unwrap();
    // A directory holding someone's files is refused, and untouched.
    let mine = d.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    let e = Table::create(&mine, &TableOptions::default()).unwrap_err();
    assert!(matches!(e, Error::DirNotEmpty { .. }), "{e}");
    one_line(&e);
    let names: Vec<_> = std::fs::read_dir(&mine)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("notes.txt")]);

    // A missing placement directory: nothing is created at all.
    let bad = TableOptions {
        dirs: vec![d.path().join("missing")],
        ..TableOptions::default()
    };
    let fresh = d.path().join("fresh");
    let e = Table::create(&fresh, &bad).unwrap_err();
    assert!(matches!(e, Error::InvalidOption(_)), "{e}");
    assert!(!fresh.exists());
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    Table::create(&empty, &bad).unwrap_err();
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "LOCK left");

    // An empty directory with a LOCK left by such a failure is accepted.
    std::fs::write(empty.join("LOCK"), "").unwrap();
    let t = Table::create(&empty, &TableOptions::default()).unwrap();
    assert_eq!(t.len(), 0);
}

#[test]
fn damaged_manifests_name_the_file() {
    let d = tempfile::tempdir().unwrap();
    drop(filled(d.path(), "slots", 2, 5));
    let m = d.path().join("MANIFEST");
    let good = std::fs::read(&m).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("foreign", b"{\"this\": \"is json\"}".to_vec()),
        ("empty", Vec::new()),
        ("truncated", good[..good.len() - 3].to_vec()),
        ("bit flip", {
            let mut b = good.clone();
            let i = b.len() / 2;
            b[i] ^= 0x10;
            b
        }),
        ("future version", {
            let mut b = good.clone();
            b[18] = 9;
            b
        }),
    ];
    for (what, bytes) in cases {
        std::fs::write(&m, &bytes).unwrap();
        let e = Table::open(d.path()).unwrap_err();
        let s = one_line(&e);
        assert!(s.contains("MANIFEST"), "{what}: {s}");
        assert!(
            matches!(
                e,
                Error::ForeignManifest { .. }
                    | Error::CorruptManifest { .. }
                    | Error::UnsupportedFormat { .. }
            ),
            "{what}: {e}"
        );
    }
    std::fs::write(&m, &good).unwrap();
    assert_eq!(Table::open(d.path()).unwrap().len(), 5);
}

#[test]
fn missing_or_foreign_fragment_files() {
    let d = tempfile::tempdir().unwrap();
    let t = filled(d.path(), "slots", 3, 50);
    let path = t.stats().fragments[1].path.clone();
    drop(t);
    let saved = d.path().join("saved");
    std::fs::rename(&path, &saved).unwrap();
    let e = Table::open(d.path()).unwrap_err();
    assert!(
        matches!(e, Error::MissingFragment { fragment: 1, .. }),
        "{e}"
    );
    one_line(&e);
    assert!(!path.exists(), "a missing fragment must not be re-created");
    // Another table's fragment file in its place.
    let other = tempfile::tempdir().unwrap();
    let o = filled(other.path(), "slots", 2, 5);
    let op = o.stats().fragments[0].path.clone();
    drop(o);
    std::fs::copy(&op, &path).unwrap();
    let e = Table::open(d.path()).unwrap_err();
    assert!(
        matches!(e, Error::ForeignFragment { fragment: 1, .. }),
        "{e}"
    );
    one_line(&e);
    // Garbage in its place.
    std::fs::write(&path, vec![7u8; 10_000]).unwrap();
    let e = Table::open(d.path()).unwrap_err();
    one_line(&e);
    assert!(
        matches!(e, Error::ForeignFragment { .. } | Error::Storage { .. }),
        "{e}"
    );
    std::fs::rename(&saved, &path).unwrap();
    let t = Table::open(d.path()).unwrap();
    assert_eq!(t.len(), 50);
    assert_sound(&t);
}

#[test]
fn full_disk_fails_the_write_and_the_table_recovers() {
    let d = tempfile::tempdir().unwrap();
    let t = filled(d.path(), "slots", 2, 100);
    let before = contents(&t);
    let biggest = t
        .stats()
        .fragments
        .iter()
        .map(|f| f.file_bytes)
        .max()
        .unwrap();
    drop(t);
    let limit = biggest + 256 * 1024;
    let out = Command::new(BIN)
        .args(["fill", d.path().to_str().unwrap(), &limit.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let acked: u64 = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("acked "))
        .map_or(0, |n| n.parse().unwrap());
    let err = stdout.lines().find(|l| l.starts_with("error: ")).unwrap();
    let add = stdout.lines().find(|l| l.starts_with("add: ")).unwrap();
    eprintln!("fill: {acked} acked, then {err}; {add}");
    assert!(stdout.contains("disk_full: true"), "{stdout}");
    assert!(acked > 0);
    // Space returns: every acknowledged write is there; the table works.
    let t = Table::open(d.path()).unwrap();
    assert_sound(&t);
    let all = contents(&t);
    for (k, v) in &before {
        assert_eq!(all.get(k), Some(v));
    }
    for i in 0..acked {
        assert!(
            all.contains_key(format!("fill-{i}").as_bytes()),
            "fill-{i} lost"
        );
    }
    t.put(b"more", b"space").unwrap();
    t.add_fragment().unwrap();
    assert_sound(&t);
    assert_eq!(t.len(), all.len() as u64 + 1);
}

#[test]
fn verify_finds_misplaced_records_and_bad_statistics() {
    let d = tempfile::tempdir().unwrap();
    let t = filled(d.path(), "slots", 2, 100);
    let path0 = t.stats().fragments[0].path.clone();
    // A key the scheme places in fragment 1, and a record with a wrong hash.
    let stray = (0..)
        .map(|i| format!("stray{i}"))
        .find(|k| fraghash::key_hash(k.as_bytes()) >> 63 == 1)
        .unwrap();
    drop(t);
    {
        let db = redb::Database::open(&path0).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let records: redb::TableDefinition<&[u8], &[u8]> =
                redb::TableDefinition::new("records");
            let mut r = txn.open_table(records).unwrap();
            let mut k = fraghash::key_hash(stray.as_bytes()).to_be_bytes().to_vec();
            k.extend_from_slice(stray.as_bytes());
            r.insert(k.as_slice(), b"x".as_slice()).unwrap();
            let mut bad = 5u64.to_be_bytes().to_vec();
            bad.extend_from_slice(b"wrong hash");
            r.insert(bad.as_slice(), b"y".as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let t = Table::open(d.path()).unwrap();
    let r = t.verify().unwrap();
    for p in &r.problems {
        eprintln!("verify: {p}");
    }
    assert!(!r.is_ok());
    let all = r.problems.join("\n");
    assert!(
        all.contains("1 records that the scheme places in another fragment"),
        "{all}"
    );
    assert!(
        all.contains("1 records whose stored hash is wrong"),
        "{all}"
    );
    assert!(all.contains("bucket statistics"), "{all}");
}
