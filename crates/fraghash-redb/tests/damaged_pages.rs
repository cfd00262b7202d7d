//! Damaged pages of a database file: whatever bytes are damaged, opening,
//! reading (get, chunks both ways, first/next, len), writing (a logged
//! batch, a flush, a synced batch) and dropping never panic, scans end,
//! and every error names the file. Answers that are wrong without an
//! error (damage redb cannot see: it checks no page checksum when it
//! reads) are counted and printed, not failed.
//!
//! Each case damages a fresh copy of one closed database: single bytes at
//! 200 positions spread over the file with a fixed seed (the header and its
//! two commit slots included), and every whole 4 KiB page. Scans and walks
//! are bounded: a damaged page once sent `first`/`next` round for ever.
//! Every call runs under `catch_unwind`, so a panic escaping the crate is
//! counted, and the test lists every case that went wrong at once.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use fraghash_redb::db::{Db, DbError, Direction, Durability, Op, OpenOptions, Start};

const RECORDS: u32 = 3_000;
const PAGE: u64 = 4096;

type Records = BTreeMap<Vec<u8>, Vec<u8>>;

/// What went wrong in one case.
#[derive(Default)]
struct Findings {
    /// Panics that escaped, and errors that do not name the file.
    bad: Vec<String>,
    /// Answers that differ from the stored records without an error.
    wrong: Vec<String>,
    /// Errors returned.
    errors: usize,
}

impl Findings {
    /// Runs `call`; a panic is a finding of `what`.
    fn run<T>(&mut self, what: &str, call: impl FnOnce() -> T) -> Option<T> {
        catch_unwind(AssertUnwindSafe(call))
            .map_err(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.bad.push(format!("{what} panicked: {msg}"));
            })
            .ok()
    }

    /// Checks `r` is `Ok` or an error naming `file`; gives the value.
    fn named<T>(&mut self, what: &str, r: Result<T, DbError>, file: &Path) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.errors += 1;
                let text = e.to_string();
                if !text.contains(&file.display().to_string()) {
                    self.bad.push(format!("{what}: {text}"));
                }
                None
            }
        }
    }
}

fn made(path: &Path) -> Records {
    let db = Db::open(path, &OpenOptions::default()).unwrap();
    db.create_table("t", b"").unwrap();
    let records: Records = (0..RECORDS)
        .map(|i| {
            (
                i.to_be_bytes().to_vec(),
                format!("value {i:>40}").into_bytes(),
            )
        })
        .collect();
    let ops: Vec<Op> = records
        .iter()
        .map(|(k, v)| Op::Put {
            table: "t",
            key: k,
            value: v,
        })
        .collect();
    db.write(&ops, Durability::Immediate).unwrap();
    db.close().unwrap();
    records
}

/// A fixed sequence of `n` offsets below `len` (a 64-bit LCG, seed 39).
fn offsets(n: usize, len: u64) -> Vec<u64> {
    let mut s: u64 = 39;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) % len
        })
        .collect()
}

/// Copies the database `from` to `to` with its log's two files (empty
/// after a clean close, but a database that had them refuses to open
/// without them).
fn copy_with_log(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
    for ext in [".log", ".log2"] {
        let with = |p: &Path| {
            let mut s = p.as_os_str().to_owned();
            s.push(ext);
            std::path::PathBuf::from(s)
        };
        std::fs::copy(with(from), with(to)).unwrap();
    }
}

/// Flips every bit of `bytes[from..to]` in the file.
fn flip(path: &Path, from: u64, to: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let to = to.min(bytes.len() as u64);
    for b in &mut bytes[from as usize..to as usize] {
        *b ^= 0xFF;
    }
    std::fs::write(path, bytes).unwrap();
}

/// Every read of the stored records, checking the answers.
fn reads(f: &mut Findings, db: &Db, file: &Path, records: &Records) {
    for (k, v) in records {
        match f.named("get", db.get("t", k), file) {
            Some(Some(got)) if &got == v => {}
            Some(got) => f.wrong.push(format!("get {k:?}: {got:?}")),
            None => break,
        }
    }
    if let Some(n) = f.named("len", db.len("t"), file) {
        if n != u64::from(RECORDS) {
            f.wrong.push(format!("len {n}"));
        }
    }
    for direction in [Direction::Forward, Direction::Backward] {
        let mut seen = 0usize;
        let mut last: Option<Vec<u8>> = None;
        loop {
            // A damaged tree must not send a scan round for ever.
            if seen > records.len() {
                f.bad
                    .push(format!("chunk {direction:?}: no end after {seen} records"));
                break;
            }
            let start = last.as_deref().map_or(Start::Edge, Start::After);
            let Some(chunk) = f.named("chunk", db.chunk("t", start, direction, 500), file) else {
                break;
            };
            for (k, v) in &chunk.items {
                if records.get(k) != Some(v) {
                    f.wrong.push(format!("chunk {direction:?}: {k:?}"));
                }
            }
            seen += chunk.items.len();
            last = chunk.items.last().map(|(k, _)| k.clone());
            if !chunk.more {
                if seen != records.len() {
                    f.wrong.push(format!("chunk {direction:?}: {seen} records"));
                }
                break;
            }
        }
    }
    let mut at = f.named("first", db.first("t"), file).flatten();
    let mut walked = 0usize;
    while let Some((k, _)) = at {
        walked += 1;
        if walked > records.len() {
            f.bad
                .push(format!("first/next: no end after {walked} records"));
            break;
        }
        at = f.named("next", db.next("t", &k), file).flatten();
    }
    if walked != 0 && walked != records.len() {
        f.wrong.push(format!("first/next: {walked} records"));
    }
}

/// Writes: a logged batch, a flush, a synced batch.
fn writes(f: &mut Findings, db: &Db, file: &Path) {
    let key = 7u32.to_be_bytes();
    let put = [Op::Put {
        table: "t",
        key: &key,
        value: b"rewritten",
    }];
    if f.named("write", db.write(&put, Durability::Logged), file)
        .is_some()
    {
        f.named("flush", db.flush(), file);
    }
    let del = [Op::Delete {
        table: "t",
        key: &key,
    }];
    f.named("write", db.write(&del, Durability::Immediate), file);
}

fn exercise(file: &Path, records: &Records) -> Findings {
    let mut f = Findings::default();
    let opened = f.run("open", || Db::open(file, &OpenOptions::default()));
    let Some(db) = opened.and_then(|r| f.named("open", r, file)) else {
        return f;
    };
    let mut inner = Findings::default();
    f.run("reads", || reads(&mut inner, &db, file, records));
    f.run("writes", || writes(&mut inner, &db, file));
    f.bad.append(&mut inner.bad);
    f.wrong.append(&mut inner.wrong);
    f.errors += inner.errors;
    f.run("drop", move || drop(db));
    f
}

/// Open, gets, drop: a database closed after a failed read with nothing
/// in between (redb commits when it closes a file).
fn gets_then_drop(file: &Path, records: &Records) -> Findings {
    let mut f = Findings::default();
    let opened = f.run("open", || Db::open(file, &OpenOptions::default()));
    if let Some(Ok(db)) = opened {
        let mut inner = Findings::default();
        for k in records.keys() {
            if inner.named("get", db.get("t", k), file).is_none() {
                break;
            }
        }
        f.bad.append(&mut inner.bad);
        f.run("drop after gets", move || drop(db));
    }
    f
}

#[test]
fn damaged_pages_are_refused_with_the_file_named_and_never_panic() {
    let root = tempfile::tempdir().unwrap();
    let pristine = root.path().join("pristine.redb");
    let records = made(&pristine);
    let len = std::fs::metadata(&pristine).unwrap().len();
    let pages = len.div_ceil(PAGE);
    assert!(
        pages > 16,
        "a database of {len} bytes is too small to damage"
    );

    // The header's magic, page size and region fields, both commit slots,
    // then bytes anywhere in the file, then whole pages.
    let mut cases: Vec<(u64, u64)> = [0, 9, 12, 16, 28, 64, 80, 100, 160, 192, 208, 250]
        .into_iter()
        .chain(offsets(200, len))
        .map(|at| (at, at + 1))
        .collect();
    for n in 0..pages {
        cases.push((n * PAGE, (n + 1) * PAGE));
    }

    let (mut report, mut refused, mut silent) = (Vec::new(), 0, 0);
    for (i, &(from, to)) in cases.iter().enumerate() {
        let file = root.path().join(format!("case{i}.redb"));
        copy_with_log(&pristine, &file);
        flip(&file, from, to);
        let mut f = exercise(&file, &records);
        copy_with_log(&pristine, &file);
        flip(&file, from, to);
        f.bad.extend(gets_then_drop(&file, &records).bad);
        refused += usize::from(f.errors > 0);
        report.extend(f.bad.iter().map(|b| format!("bytes {from}..{to}: {b}")));
        if let Some(first) = f.wrong.first() {
            silent += 1;
            eprintln!(
                "bytes {from}..{to}: {} wrong answers without an error (redb checks no \
                 page checksum on reads), the first: {first}",
                f.wrong.len()
            );
        }
    }
    eprintln!(
        "{} cases: {refused} refused with an error, {silent} with wrong answers, {} findings",
        cases.len(),
        report.len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
    // Not a vacuous pass: much of the damage must have been seen.
    assert!(refused >= 5, "only {refused} cases were refused");
}
