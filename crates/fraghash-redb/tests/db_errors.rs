//! Every way opening a database fails gives its own error, never a panic.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod tmpfs;

use fraghash_redb::db::{Db, DbError, Durability, Op, OpenOptions};

fn open(path: &Path) -> Result<Db, DbError> {
    Db::open(path, &OpenOptions::default())
}

/// A database with some records, closed.
fn made(dir: &Path) -> PathBuf {
    let path = dir.join("made.redb");
    let db = open(&path).unwrap();
    db.create_table("t", b"").unwrap();
    let value = vec![0x5A; 300];
    let keys: Vec<[u8; 4]> = (0..2000u32).map(|i| i.to_be_bytes()).collect();
    let ops: Vec<Op> = keys
        .iter()
        .map(|k| Op::Put {
            table: "t",
            key: k,
            value: &value,
        })
        .collect();
    db.write(&ops, Durability::Immediate).unwrap();
    db.close().unwrap();
    path
}

#[test]
fn a_second_open_in_this_process_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.redb");
    let first = open(&path).unwrap();
    assert!(matches!(open(&path), Err(DbError::Locked { .. })));
    drop(first);
    assert!(open(&path).is_ok());
}

/// Run as a child process by `an_open_in_another_process_is_locked`: holds
/// the database named by the environment until its stdin closes.
#[test]
#[ignore = "run by an_open_in_another_process_is_locked"]
fn hold_database_for_another_test() {
    let Some(path) = std::env::var_os("FRAGHASH_REDB_HOLD") else {
        return;
    };
    let _db = open(Path::new(&path)).unwrap();
    println!("held");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

#[test]
fn an_open_in_another_process_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.redb");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "--ignored",
            "hold_database_for_another_test",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FRAGHASH_REDB_HOLD", &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("held") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the holder exited");
    }
    let result = open(&path);
    drop(child.stdin.take());
    child.wait().unwrap();
    assert!(matches!(result, Err(DbError::Locked { .. })), "{result:?}");
    assert!(open(&path).is_ok());
}

#[test]
fn a_file_that_is_not_redb_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("text.redb");
    std::fs::write(&path, "this is a text file, not a database\n".repeat(200)).unwrap();
    let r = open(&path);
    assert!(matches!(r, Err(DbError::Foreign { .. })), "{r:?}");
    // And it is left as it was.
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .starts_with("this is"));
}

#[test]
fn a_redb_file_of_another_program_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.redb");
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let def: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("theirs");
        txn.open_table(def).unwrap().insert(1, 2).unwrap();
        txn.commit().unwrap();
    }
    let r = open(&path);
    assert!(matches!(r, Err(DbError::Foreign { .. })), "{r:?}");
}

#[test]
fn an_empty_file_becomes_a_database_but_only_when_creating() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.redb");
    std::fs::write(&path, b"").unwrap();
    let no_create = OpenOptions {
        create: false,
        ..OpenOptions::default()
    };
    assert!(Db::open(&path, &no_create).is_err());
    open(&path).unwrap().close().unwrap();
    assert!(Db::open(&path, &no_create).is_ok());
    let missing = dir.path().join("missing.redb");
    let r = Db::open(&missing, &no_create);
    assert!(matches!(r, Err(DbError::NotFound { .. })), "{r:?}");
    assert!(!missing.exists());
}

/// Overwrites `len` bytes at `at` with a pattern.
fn damage(path: &Path, at: usize, len: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    for (i, b) in bytes[at..at + len].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37) ^ 0xA5;
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_damaged_header_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = made(dir.path());
    // Past redb's magic number: the header and both commit slots.
    damage(&path, 16, 512);
    let r = open(&path);
    assert!(matches!(r, Err(DbError::Corrupt { .. })), "{r:?}");
}

#[test]
fn damaged_pages_are_corrupt_when_verified() {
    let dir = tempfile::tempdir().unwrap();
    let path = made(dir.path());
    let len = std::fs::metadata(&path).unwrap().len() as usize;
    damage(&path, len / 2, 8192);
    let verify = OpenOptions {
        verify: true,
        ..OpenOptions::default()
    };
    let r = Db::open(&path, &verify);
    assert!(matches!(r, Err(DbError::Corrupt { .. })), "{r:?}");
}

/// Fills the database in `dir` (a small file system) until a write fails,
/// then opens a second database there; prints what each gave.
fn fill(dir: &Path) {
    let db = open(&dir.join("fill.redb")).unwrap();
    db.create_table("t", b"").unwrap();
    let value = vec![0x33; 4096];
    let mut failed = None;
    for i in 0..10_000u32 {
        let key = i.to_be_bytes();
        let op = Op::Put {
            table: "t",
            key: &key,
            value: &value,
        };
        if let Err(e) = db.write(&[op], Durability::Immediate) {
            failed = Some(e);
            break;
        }
    }
    println!("write: {failed:?}");
    println!("second open: {:?}", open(&dir.join("second.redb")).err());
}

/// The child's half of `a_full_disc_is_disk_full`, run by it in its mount
/// namespace on a 256 KiB tmpfs; does nothing elsewhere.
#[test]
#[ignore = "run by a_full_disc_is_disk_full"]
fn fill_a_small_file_system_for_another_test() {
    if let Some(dir) = std::env::var_os("FRAGHASH_REDB_FULL_DIR") {
        fill(Path::new(&dir));
    }
}

/// A real full file system: fails where none can be had, unless
/// `FRAGHASH_SKIP_ENOSPC=1` (see `tmpfs`).
#[test]
fn a_full_disc_is_disk_full() {
    let Some(out) = tmpfs::run_in_small_tmpfs(
        "256k",
        "FRAGHASH_REDB_FULL_DIR",
        "fill_a_small_file_system_for_another_test",
    ) else {
        return;
    };
    assert!(out.contains("write: Some(DiskFull"), "{out}");
    assert!(out.contains("second open: Some(DiskFull"), "{out}");
}
