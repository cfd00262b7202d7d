//! A full disc under logged writes: the log's reserve takes the batches
//! under way, [`Db::has_room`] says the disc is full before any batch
//! fails; a flush that fails for want of room leaves redb refusing
//! everything until [`Db::reopen`], which loses nothing.
//!
//! It needs a real full file system: a small tmpfs mounted in a mount
//! namespace of a child's own (`unshare -rm`; nothing outside it sees the
//! mount). Where that cannot be had the test fails, unless
//! `FRAGHASH_SKIP_ENOSPC=1` says to leave it out.

use std::io::Write;
use std::path::Path;

mod tmpfs;

use fraghash_redb::db::{Db, DbError, Durability, Op, OpenOptions};

const RESERVE: u64 = 1 << 20;
const VALUE: usize = 4096;

fn options() -> OpenOptions {
    OpenOptions {
        log_reserve_bytes: RESERVE,
        memtable_bytes: 64 << 20,
        ..OpenOptions::default()
    }
}

fn kind(e: &DbError) -> &'static str {
    match e {
        DbError::DiskFull { .. } => "DiskFull",
        DbError::Poisoned { .. } => "Poisoned",
        _ => "other",
    }
}

fn put(db: &Db, i: u32) -> Result<(), DbError> {
    let key = i.to_be_bytes();
    let value = vec![(i % 251) as u8; VALUE];
    let op = Op::Put {
        table: "t",
        key: &key,
        value: &value,
    };
    db.write(&[op], Durability::Logged)
}

/// Fills the file system of `dir` with a file, returned open.
fn fill_disc(dir: &Path) -> std::fs::File {
    let mut filler = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![0u8; 64 << 10];
    while filler
        .write_all(&chunk)
        .and_then(|()| filler.sync_all())
        .is_ok()
    {}
    filler
}

fn free_disc(dir: &Path, filler: std::fs::File) {
    drop(filler);
    std::fs::remove_file(dir.join("filler")).unwrap();
}

/// How many of keys `0..n` the database in `path` holds, opened afresh.
fn held(path: &Path, n: u32) -> String {
    let db = Db::open(path, &options()).unwrap();
    let held = (0..n).filter(|k| matches!(db.get("t", &k.to_be_bytes()), Ok(Some(_))));
    format!("{} of {n}", held.count())
}

/// In `dir` (a small file system), two databases in turn; prints what it
/// saw, one `name: value` a line.
///
/// The log sees the disc full: writes while the database has room and a
/// few hundred KiB more (less than half the reserve), a flush held back,
/// then room made and flushed.
///
/// redb sees it first: the log's reserve is whole, so a flush commits and
/// fails for want of room; once room is made a flush goes through, or, if
/// the failure left redb refusing everything, the database is opened
/// again ([`Db::reopen`]).
fn run(dir: &Path) {
    let path = dir.join("log.redb");
    let db = Db::open(&path, &options()).unwrap();
    db.create_table("t", b"").unwrap();
    let filler = fill_disc(dir);
    println!("room after filling: {}", db.has_room());
    let mut i = 0u32;
    let mut failed = None;
    while db.has_room() && i < 100_000 {
        if let Err(e) = put(&db, i) {
            failed = Some(e);
            break;
        }
        i += 1;
    }
    println!("taken while room: {i}");
    let past = (RESERVE / 2) as u32 / (VALUE as u32 + 64) - 8;
    for _ in 0..past {
        if failed.is_none() {
            failed = put(&db, i).err();
            i += 1;
        }
    }
    println!("failed: {failed:?}");
    println!("room when full: {}", db.has_room());
    println!("flush when full: {:?}", db.flush().map_err(|e| kind(&e)));
    free_disc(dir, filler);
    println!("flush when freed: {:?}", db.flush());
    println!("room when freed: {}", db.has_room());
    drop(db);
    println!("held: {}", held(&path, i));

    let path = dir.join("redb.redb");
    let db = Db::open(&path, &options()).unwrap();
    db.create_table("t", b"").unwrap();
    let filler = fill_disc(dir);
    let n = 64;
    let failed = (0..n).find_map(|i| put(&db, i).err());
    println!("redb first, failed: {failed:?}");
    println!(
        "redb first, flush when full: {:?}",
        db.flush().map_err(|e| kind(&e))
    );
    println!("redb first, room when full: {}", db.has_room());
    free_disc(dir, filler);
    // redb may have taken the failure in its stride, or refuse everything
    // until the database is opened again.
    let db = match db.flush() {
        Ok(_) => db,
        Err(DbError::Poisoned { .. }) => db.reopen().unwrap(),
        Err(e) => panic!("flush when freed: {e}"),
    };
    println!("redb first, room when freed: {}", db.has_room());
    drop(db);
    println!("redb first, held: {}", held(&path, n));
}

/// The child's half of `a_full_disc_is_seen_before_a_logged_write_fails`,
/// run by it in its mount namespace; does nothing elsewhere.
#[test]
#[ignore = "run by a_full_disc_is_seen_before_a_logged_write_fails"]
fn fill_a_small_file_system() {
    if let Some(dir) = std::env::var_os("FRAGHASH_REDB_ROOM_DIR") {
        run(Path::new(&dir));
    }
}

#[test]
fn a_full_disc_is_seen_before_a_logged_write_fails() {
    let Some(out) =
        tmpfs::run_in_small_tmpfs("12m", "FRAGHASH_REDB_ROOM_DIR", "fill_a_small_file_system")
    else {
        return;
    };
    let line = |name: &str| {
        out.lines()
            // libtest prints the test's name before the first line.
            .find_map(|l| {
                let (before, value) = l.split_once(&format!("{name}: "))?;
                // "held" is also the end of "redb first, held".
                (!before.ends_with(", ")).then_some(value)
            })
            .unwrap_or_else(|| panic!("no {name:?} in {out}"))
            .to_owned()
    };
    assert_eq!(line("room after filling"), "true", "{out}");
    assert!(
        line("taken while room").parse::<u32>().unwrap() > 0,
        "{out}"
    );
    assert_eq!(line("failed"), "None", "{out}");
    assert_eq!(line("room when full"), "false", "{out}");
    assert_eq!(line("flush when full"), "Err(\"DiskFull\")", "{out}");
    assert_eq!(line("flush when freed"), "Ok(true)", "{out}");
    assert_eq!(line("room when freed"), "true", "{out}");
    let all_held = |name: &str| {
        let held = line(name);
        let (got, of) = held.split_once(" of ").unwrap();
        assert_eq!(got, of, "{name}: {out}");
    };
    all_held("held");
    assert_eq!(line("redb first, failed"), "None", "{out}");
    assert_eq!(
        line("redb first, flush when full"),
        "Err(\"DiskFull\")",
        "{out}"
    );
    assert_eq!(line("redb first, room when full"), "false", "{out}");
    assert_eq!(line("redb first, room when freed"), "true", "{out}");
    all_held("redb first, held");
}

#[test]
fn reopen_keeps_every_batch_that_returned() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("r.redb"), &options()).unwrap();
    db.create_table("t", b"").unwrap();
    (0..100).for_each(|i| put(&db, i).unwrap());
    let db = db.reopen().unwrap();
    let held = (0..100u32).filter(|k| matches!(db.get("t", &k.to_be_bytes()), Ok(Some(_))));
    assert_eq!(held.count(), 100);
    assert!(db.has_room());
}
